"""The write session's journal, on real directories: layout, append-only mirroring, flush
thresholds on a virtual clock, byte-exact encoding, reopening, the lock and degradation."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import signal
import subprocess
import sys

import pytest

from orion.clock import VirtualClock
from orion.write_session.journal import STATE_LOG_MAX, Journal, JournalLocked, read_state


@pytest.fixture
def clock():
    return VirtualClock(start_ms=1_000_000)


@pytest.fixture
def session(tmp_path):
    return tmp_path / "write_sessions" / "s1"


def make(session, clock, **kw):
    return Journal.create(session, {"intent": "docs", "target_file": "README.md",
                                    "operation": "create"}, now_ms=clock.now_ms,
                          since_boot=clock.since_boot, **kw)


def on_disk(session) -> bytes:
    return (session / "content.txt").read_bytes()


def state(session) -> dict:
    """The session's saved state as recovery reads it (without its sequence number)."""
    record, problem = read_state(session)
    assert record is not None, problem
    record.pop("seq")
    return record


# -- layout -----------------------------------------------------------------------------------


def test_layout(session, clock):
    j = make(session, clock)
    assert sorted(p.name for p in session.iterdir()) == ["content.txt", "degraded", "lock",
                                                           "metadata.json"]
    assert json.loads((session / "metadata.json").read_text()) == {
        "intent": "docs", "target_file": "README.md", "operation": "create",
        "created_at": 1_000_000}
    assert (session / "lock").read_text().split()[0] == str(os.getpid())
    j.append("# Title\n")
    j.flush({"status": "active", "continuations": 0})
    assert sorted(p.name for p in session.iterdir()) == [
        "content.txt", "degraded", "lock", "metadata.json", "state.json"]
    assert state(session) == {"lines": 1, "bytes": 8, "flushed_bytes": 8,
                              "last_save_ms": 1_000_000, "last_save_boot": ["virtual", 0],
                              "degraded": None, "status": "active", "continuations": 0}
    j.close()
    assert not (session / "lock").exists()
    j.remove()
    assert not session.exists()


def test_create_refuses_an_existing_session(session, clock):
    make(session, clock).close()
    with pytest.raises(FileExistsError):
        make(session, clock)


# -- flushing ---------------------------------------------------------------------------------


def test_nothing_reaches_disk_before_a_threshold(session, clock):
    j = make(session, clock)
    for i in range(49):
        j.append(f"line {i}\n")
        clock.advance(100)  # 4.9 s in all
    j.append("partial line, no newline")
    assert on_disk(session) == b""
    assert j.flushed_bytes == 0 and j.lines == 49
    assert j.content().startswith(b"line 0\nline 1\n")
    assert not (session / "state.json").exists()


def test_flush_every_50_lines(session, clock):
    j = make(session, clock)
    text = "".join(f"line {i}\n" for i in range(120))
    for i in range(0, len(text), 7):  # chunks that cut lines anywhere
        j.append(text[i:i + 7])
        flushed = j.content()[:j.flushed_bytes]
        assert on_disk(session) == flushed
    # Flushes happened on the chunks completing lines 50 and 100 (pending lines >= 50).
    assert on_disk(session).count(b"\n") == 100
    j.flush()
    assert on_disk(session) == text.encode()


def test_automatic_flushes_rewrite_state_at_most_once_per_interval(session, clock):
    j = make(session, clock)
    j.append("x\n" * 50)  # the first automatic flush writes state.json
    assert state(session)["lines"] == 50
    j.append("x\n" * 50)  # the content goes out, the state waits for the interval
    assert j.flushed_bytes == 200 and state(session)["lines"] == 50
    clock.advance(5000)
    j.append("x\n" * 50)
    assert state(session)["lines"] == 150 and state(session)["last_save_ms"] == 1_005_000
    j.append("y\n")
    j.flush({"status": "active"})  # an explicit flush always rewrites it
    assert state(session)["lines"] == 151 and state(session)["status"] == "active"


def test_flush_every_5_seconds(session, clock):
    j = make(session, clock)
    j.append("a long line without end")
    clock.advance(4999)
    j.append(" and more")
    assert on_disk(session) == b""
    clock.advance(1)
    j.append(" then")
    assert on_disk(session) == b"a long line without end and more then"
    assert state(session)["last_save_ms"] == 1_005_000
    clock.advance(4000)
    j.append("!")
    assert j.flushed_bytes == len(b"a long line without end and more then")
    clock.advance(1000)
    j.append("?")
    assert on_disk(session).endswith(b"then!?")


def test_settings_change_the_thresholds(session, clock):
    j = make(session, clock, flush_lines=2, flush_interval_ms=10)
    j.append("a\n")
    assert j.flushed_bytes == 0
    j.append("b\n")
    assert j.flushed_bytes == 4
    j.append("c")
    clock.advance(10)
    j.append("d")
    assert on_disk(session) == b"a\nb\ncd"


def test_disk_appends_are_append_only(session, clock):
    j = make(session, clock, flush_lines=1)
    path = session / "content.txt"
    j.append("first\n")
    before = os.stat(path)
    first = path.read_bytes()
    for i in range(200):
        j.append(f"line {i}\n")
        after = os.stat(path)
        assert after.st_ino == before.st_ino
        data = path.read_bytes()
        assert data.startswith(first)
        assert len(data) == after.st_size == j.flushed_bytes
    # The journal writes through one descriptor opened in append mode: the file is never
    # reopened or truncated, so bytes written by someone else in between would stay too.
    with open(path, "ab") as other:
        other.write(b"<external>")
    j.append("last\n")
    assert path.read_bytes() == first + "".join(
        f"line {i}\n" for i in range(200)).encode() + b"<external>last\n"


def test_state_json_is_replaced_atomically_and_checkpoints_between_are_appended(session,
                                                                              clock):
    j = make(session, clock)
    j.append("x\n")
    j.flush({"status": "active"})  # the first checkpoint writes state.json
    first = os.stat(session / "state.json").st_ino
    clock.advance(10)
    j.append("y")
    j.flush({"status": "finalizing", "continuations": 2, "issues": ["é"]})
    # Within the flush interval a checkpoint is one appended line, not a rename.
    assert os.stat(session / "state.json").st_ino == first
    assert len((session / "state.log").read_bytes().splitlines()) == 1
    assert state(session) == {"lines": 1, "bytes": 3, "flushed_bytes": 3,
                              "last_save_ms": 1_000_010, "last_save_boot": ["virtual", 10],
                              "degraded": None,
                              "status": "finalizing", "continuations": 2, "issues": ["é"]}
    # Once the interval has passed, state.json is replaced (temp file + os.replace, so a
    # reader never sees half of it) and takes the log's place.
    clock.advance(5000)
    j.append("\n" * 50)
    assert os.stat(session / "state.json").st_ino != first
    assert not (session / "state.json.tmp").exists() and not (session / "state.log").exists()
    assert state(session)["status"] == "finalizing" and state(session)["lines"] == 51


def test_a_torn_last_checkpoint_leaves_the_one_before(session, clock):
    j = make(session, clock)
    j.append("a\n")
    j.flush({"status": "active", "n": 1})
    j.append("b\n")
    j.flush({"status": "active", "n": 2})
    j.append("c\n")
    j.flush({"status": "active", "n": 3})
    log = session / "state.log"
    whole = log.read_bytes()
    log.write_bytes(whole[:-9])  # a kill in the middle of the last append
    assert state(session)["n"] == 2 and state(session)["lines"] == 2
    log.write_bytes(whole)
    assert state(session)["n"] == 3


#: A flush interval no test outlasts, however slow the machine: state.json is not rewritten.
HOUR_MS = 3_600_000


def test_checkpoints_go_round_the_ring_in_place(session, clock):
    # A checkpoint is one record written in place: the log never grows past its ring, is never
    # replaced, and state.json is not rewritten within the flush interval.
    j = make(session, clock, flush_interval_ms=HOUR_MS)
    j.append("a\n")
    j.flush({"status": "active", "n": 0})
    first = os.stat(session / "state.json").st_ino
    j.flush({"status": "active", "n": 1})
    log = os.stat(session / "state.log").st_ino
    for n in range(2, 1000):
        j.flush({"status": "active", "n": n, "padding": "x" * (n % 300)})
        if n % 97 == 0:
            assert state(session)["n"] == n
    assert os.stat(session / "state.json").st_ino == first
    assert os.stat(session / "state.log").st_ino == log
    assert os.stat(session / "state.log").st_size <= STATE_LOG_MAX
    assert state(session)["n"] == 999


def test_a_torn_record_anywhere_in_the_ring_leaves_the_one_before(session, clock):
    # A kill can cut a write short anywhere (at a page boundary, say): the bytes of the
    # record being written lie over the oldest records of the ring, never over the newest.
    j = make(session, clock, flush_interval_ms=HOUR_MS)
    j.append("a\n")
    j.flush({"n": 0})
    path = session / "state.log"
    rng = random.Random(7)
    for n in range(1, 600):
        before = path.read_bytes() if path.exists() else b""
        j.flush({"n": n, "status": "active" * (n % 11)})
        after = path.read_bytes()
        if n % 7 and n < 590:
            continue
        changed = [i for i in range(len(after)) if i >= len(before) or before[i] != after[i]]
        start, end = changed[0], changed[-1] + 1
        # Cut before the record's line break (a record that lacks only that is whole).
        for cut in {start, end - 2, *rng.sample(range(start, end - 1), 3)}:
            path.write_bytes(after[:cut] + before[cut:])
            assert state(session)["n"] == n - 1, (n, cut)
        path.write_bytes(after)
        assert state(session)["n"] == n


def test_a_state_too_large_for_the_ring_replaces_state_json(session, clock):
    j = make(session, clock, flush_interval_ms=HOUR_MS)
    j.append("a\n")
    j.flush({"n": 1})
    j.flush({"n": 2})
    large = "é" * STATE_LOG_MAX
    j.flush({"n": 3, "held": [large]})
    assert not (session / "state.log").exists()
    assert state(session) == {**state(session), "n": 3, "held": [large]}
    j.flush({"n": 4})
    assert state(session)["n"] == 4


def test_a_log_appended_by_an_earlier_version_is_read_and_folded(session, clock):
    # Records without a CRC, one appended line each: the last complete one counts.
    j = make(session, clock, flush_interval_ms=HOUR_MS)
    j.append("a\nb\n")
    j.flush({"n": 1})
    j.close()
    (session / "state.log").write_bytes(
        b'{"lines": 2, "bytes": 4, "n": 2, "seq": 5}\n{"lines": 2, "bytes": 4, "n": 3, "seq": 6}\n'
        b'{"lines": 2, "bytes": 4, "n": 4, "se')
    assert state(session)["n"] == 3
    taken = Journal.open(session, now_ms=clock.now_ms)
    assert taken.state == {"n": 3}
    taken.flush({"n": 5})  # folded into state.json, never written over in place
    assert not (session / "state.log").exists()
    assert state(session)["n"] == 5
    taken.flush({"n": 6})
    assert state(session)["n"] == 6


def test_a_dead_process_s_ring_is_folded_before_it_is_written_again(session, clock):
    j = make(session, clock, flush_interval_ms=HOUR_MS)
    j.append("a\n")
    for n in range(300):  # round the ring: its newest record is somewhere inside
        j.flush({"n": n})
    j._release_lock()  # as a killed process leaves it
    taken = Journal.open(session, now_ms=clock.now_ms)
    assert taken.state == {"n": 299}
    taken.flush({"n": 300})
    assert state(session)["n"] == 300 and not (session / "state.log").exists()


def test_checkpoints_survive_sigkill_at_any_moment(tmp_path):
    # A real process checkpointing as fast as it can, killed once its ring has gone round a
    # few times: the newest state on disk is whole, names its own checkpoint, and is at least
    # the last one the process reported having made.
    directory = tmp_path / "killed"
    child = subprocess.Popen([sys.executable, "-c", f"""
import sys
from orion.write_session.journal import Journal
j = Journal.create({str(directory)!r}, {{"target_file": "x.md"}})
j.append("line\\n")
n = 0
while True:
    n += 1
    j.flush({{"n": n, "text": "é" * (n % 97)}})
    if n % 500 == 0:
        print(n, flush=True)
"""], stdout=subprocess.PIPE, text=True)
    try:
        reported = [int(child.stdout.readline()) for _ in range(8)]
    finally:
        child.kill()
        child.wait()
    record, problem = read_state(directory)
    assert record is not None, problem
    assert record["n"] >= reported[-1] and record["text"] == "é" * (record["n"] % 97)
    assert record["lines"] == 1 and "crc" not in record
    taken = Journal.open(directory)
    assert taken.state["n"] == record["n"]
    taken.flush({"n": 0})
    assert read_state(directory)[0]["n"] == 0
    taken.close()


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs RLIMIT_FSIZE")
def test_a_state_record_the_disk_refuses_degrades_the_journal(tmp_path):
    # A real refusal of a checkpoint's write (the file-size limit: EFBIG), in a process of its
    # own: the journal says why and goes on in memory, as for any disk failure; the state on
    # disk is the last whole record.
    directory = tmp_path / "limited"
    done = subprocess.run([sys.executable, "-c", f"""
import resource, signal
from orion.write_session.journal import Journal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000))
j = Journal.create({str(directory)!r}, {{"target_file": "x.md"}}, flush_interval_ms=3_600_000)
j.append("line\\n")
n = 0
while j.degraded is None and n < 100:
    n += 1
    j.flush({{"n": n, "text": "x" * 100}})
print(n, j.degraded)
"""], capture_output=True, text=True, check=True)
    n, reason = done.stdout.split(" ", 1)
    assert reason.startswith("EFBIG"), done.stdout + done.stderr
    record, problem = read_state(directory)
    assert record is not None and record["n"] == int(n) - 1, problem


def test_close_folds_the_checkpoints_into_state_json_and_a_takeover_goes_on(session, clock):
    j = make(session, clock)
    j.append("a\n")
    j.flush({"status": "active", "n": 1})
    j.flush({"status": "active", "n": 2})
    j._release_lock()  # as a killed process leaves it: the log holds the newest checkpoint
    taken = Journal.open(session, now_ms=clock.now_ms)
    assert taken.state == {"status": "active", "n": 2}
    taken.flush({"status": "active", "n": 3})
    assert state(session)["n"] == 3
    taken.close()
    assert not (session / "state.log").exists()
    assert json.loads((session / "state.json").read_text())["n"] == 3


def test_close_flushes_what_is_pending(session, clock):
    j = make(session, clock)
    j.append("pending")
    j.close()
    assert on_disk(session) == b"pending"
    j.close()  # twice is fine


# -- encoding ---------------------------------------------------------------------------------


def test_lone_surrogates_and_escaped_bytes_survive_byte_exactly(session, clock):
    j = make(session, clock)
    raw = b"ok \xff\xfe \xe2\x82 end\n"  # invalid bytes, as the stream decoder escapes them
    j.append(raw.decode("utf-8", "surrogateescape"))
    j.append("lone \ud800 and \udfff\n")  # lone surrogates, e.g. from a JSON \\ud800 escape
    j.append("é€😀\n")
    expected = raw + b"lone \xed\xa0\x80 and \xed\xbf\xbf\n" + "é€😀\n".encode()
    assert j.content() == expected
    j.flush()
    assert on_disk(session) == expected
    assert j.bytes == len(expected) and j.lines == 3


# -- reading and reopening --------------------------------------------------------------------


def test_tail_lines(session, clock):
    j = make(session, clock)
    assert j.tail_lines(3) == []
    j.append("one\r\ntwo\nthree\n")
    assert j.tail_lines(2) == ["two", "three"]
    assert j.tail_lines(10) == ["one", "two", "three"]
    j.append("fou\xff")
    assert j.tail_lines(2) == ["three", "fou\xff"]
    j.append("\udcff")
    assert j.tail_lines(1) == ["fou\xff\ufffd"]
    assert j.tail_lines(0) == []


def test_reopen_counts_lines_and_bytes(session, clock):
    j = make(session, clock)
    j.append("a\nb\nc")
    j.flush({"continuations": 1})
    j.append("never flushed")  # lost with the crash below: only flushed bytes survive
    j._close_fd()  # the process dies: no close(), the lock stays
    again = Journal.open(session, now_ms=clock.now_ms)
    assert again.content() == b"a\nb\nc"
    assert (again.lines, again.bytes, again.flushed_bytes) == (2, 5, 5)
    assert again.metadata["target_file"] == "README.md"
    assert again.state == {"continuations": 1}
    assert again.tail_lines(1) == ["c"]
    again.append("d\n")
    again.flush()
    assert on_disk(session) == b"a\nb\ncd\n"
    assert state(session)["lines"] == 3
    again.close()


def test_content_and_its_sha256_follow_every_append(session, clock):
    """content() hands out one copy until more arrives; sha256() is always the content's."""
    j = make(session, clock, flush_lines=2)
    expected = b""
    for part in ["a\n", "b\nc", "", "\u00e9\n" * 3, "tail without a break", "\udc80\n"]:
        j.append(part)
        expected += part.encode("utf-8", "surrogateescape") if part != "\udc80\n" \
            else b"\x80\n"
        assert j.content() == expected
        assert j.content() is j.content()  # no new copy while nothing arrived
        assert j.sha256() == hashlib.sha256(expected).hexdigest()
    j.flush()
    j._close_fd()
    again = Journal.open(session, now_ms=clock.now_ms)
    assert again.sha256() == hashlib.sha256(expected).hexdigest()
    assert again.read(len(expected) - 2) == b"\x80\n"
    again.close()


def test_reopen_without_state_or_lock(session, clock):
    make(session, clock).close()
    (session / "content.txt").write_bytes(b"x\ny\n")
    j = Journal.open(session, now_ms=clock.now_ms)
    assert (j.lines, j.bytes, j.state) == (2, 4, {})
    assert Journal.is_live(session)
    j.close()


def test_open_a_missing_session(tmp_path):
    with pytest.raises(FileNotFoundError):
        Journal.open(tmp_path / "nothing")


# -- the lock ---------------------------------------------------------------------------------


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_own_pid_is_live(session, clock):
    j = make(session, clock)
    assert Journal.is_live(session)
    j.close()
    assert not Journal.is_live(session)  # no lock file


def test_dead_pid_is_not_live(session, clock):
    make(session, clock).close()
    (session / "lock").write_text(f"{dead_pid()}\n")
    assert not Journal.is_live(session)
    Journal.open(session).close()  # a dead owner's session can be taken over


@pytest.mark.skipif(not hasattr(os, "waitid"), reason="needs os.waitid")
def test_zombie_is_not_live(session, clock):
    make(session, clock).close()
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
        (session / "lock").write_text(f"{proc.pid}\n")
        assert not Journal.is_live(session)
    finally:
        proc.wait()


def test_a_reused_pid_is_not_live(session, clock):
    make(session, clock).close()
    (session / "lock").write_text(f"{os.getpid()}\n1\n")  # right pid, wrong start time
    assert not Journal.is_live(session)


@pytest.mark.parametrize("text", ["", "garbage", "-1", "0", "12abc", "\xff"])
def test_a_garbage_lock_is_not_live(session, clock, text):
    make(session, clock).close()
    (session / "lock").write_text(text, encoding="latin-1")
    assert not Journal.is_live(session)


def test_a_live_owner_keeps_the_session(session, clock):
    make(session, clock).close()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (session / "lock").write_text(f"{proc.pid}\n")
        assert Journal.is_live(session)
        with pytest.raises(JournalLocked, match=str(proc.pid)):
            Journal.open(session)
    finally:
        proc.kill()
        proc.wait()


# -- degradation ------------------------------------------------------------------------------


def test_disk_full_degrades_to_memory_only(session, clock, caplog):
    # /dev/full is a real device whose writes fail with ENOSPC.
    reasons = []
    j = make(session, clock, flush_lines=2, content_path="/dev/full",
             on_degraded=reasons.append)
    with caplog.at_level(logging.WARNING, logger="orion.write_session"):
        j.append("one\n")
        assert j.degraded is None
        j.append("two\n")  # the first flush fails
        for i in range(100):
            j.append(f"more {i}\n")
        j.flush({"status": "finalizing"})
    assert j.degraded is not None and j.degraded.startswith("ENOSPC: ")
    assert "/dev/full" in j.degraded
    assert reasons == [j.degraded]
    warnings = [r for r in caplog.records if r.name == "orion.write_session"]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert str(session) in warnings[0].getMessage()
    assert "ENOSPC" in warnings[0].getMessage()
    expected = "one\ntwo\n" + "".join(f"more {i}\n" for i in range(100))
    assert j.content() == expected.encode() and j.lines == 102
    assert j.flushed_bytes == 0
    # No more disk writes: no state.json either, and the file descriptor is closed.
    assert not (session / "state.json").exists()
    assert j._fd is None
    j.close()
    assert not (session / "lock").exists()


def test_state_write_failure_degrades_too(session, clock, monkeypatch):
    j = make(session, clock)
    j.append("x\n")

    def refuse(path, data):
        raise OSError(30, "Read-only file system", str(path))

    monkeypatch.setattr(Journal, "_replace", staticmethod(refuse))
    j.flush()
    assert j.degraded.startswith("EROFS: Read-only file system")
    assert on_disk(session) == b"x\n"  # the content went out before the state failed
    j.append("y\n")
    j.flush()
    assert on_disk(session) == b"x\n" and j.content() == b"x\ny\n"


def test_other_disk_errors_propagate(session, clock, monkeypatch):
    j = make(session, clock)
    j.append("x")

    def broken(fd, data):
        raise OSError(9, "Bad file descriptor")  # a bug, not the disk: it must show

    monkeypatch.setattr(os, "write", broken)
    with pytest.raises(OSError, match="Bad file descriptor"):
        j.flush()
    assert j.degraded is None


def test_create_where_nothing_can_be_written_degrades(tmp_path, clock, monkeypatch):
    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(type(tmp_path), "mkdir", refuse)
    reasons = []
    j = Journal.create(tmp_path / "s", {"target_file": "x"}, now_ms=clock.now_ms,
                       on_degraded=reasons.append)
    assert reasons == [j.degraded] and j.degraded.startswith("EACCES: Permission denied")
    j.append("still\nworks\n" * 30)
    j.flush()
    assert j.content() == b"still\nworks\n" * 30 and not (tmp_path / "s").exists()
    j.close()


def test_other_errors_at_creation_propagate(tmp_path, clock):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(NotADirectoryError):
        Journal.create(tmp_path / "s", {}, content_path=blocker / "c.txt")
