"""The features bite: for every rule of docs/design/ there is a rule-breaking variant of Orion,
and with that variant in place the scenarios tagged with the rule's id fail.

Each variant replaces one named function, method or setting of Orion (``module:qualname``)
with a version that breaks the rule, the way a plausible bug would. A replaced function is
replaced everywhere it was imported (every loaded module attribute that is the same object),
so the variant still bites when the function moves between modules or is imported under
another name; it only stops biting when the function is renamed, and then the check fails
with "cannot find", naming it.

How it runs (within the CI budget): two subprocesses (at most one per core) each run their
share of the variants, one after the other, in-process: patch, ``pytest.main`` on the feature
files that hold the rule's scenarios with ``-m <rule id>`` (only those scenarios) and ``-x``
(the first failing scenario is enough), undo. ``orion`` commands that scenarios start get the
variant through a ``sitecustomize``. The unbroken features are checked by ``tests/bdd`` (the
same scenarios, nothing patched).

``python tests/test_features_bite.py [RULE-or-NAME...]`` runs variants by hand and prints
whether each was caught and its first failure; ``--list`` prints the table.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import importlib
import json
import logging
import os
import pkgutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
FEATURES = ROOT / "features"
DESIGN = ROOT / "docs" / "design"
TIMEOUT_S = 600


# -- patching ---------------------------------------------------------------------------------

class Patcher:
    """Replaces attributes and puts them back. ``replace`` and ``wrap`` take a target
    ``"module:Qual.name"``; a module-level function is replaced in every loaded module that
    holds it (``from x import f`` copies included)."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    @staticmethod
    def _resolve(target: str) -> tuple[Any, str, Any]:
        module_name, _, qualname = target.partition(":")
        try:
            owner: Any = importlib.import_module(module_name)
            *path, name = qualname.split(".")
            for part in path:
                owner = getattr(owner, part)
            inspect_owner = owner.__dict__ if isinstance(owner, type) else vars(owner)
            original = inspect_owner[name] if name in inspect_owner else getattr(owner, name)
        except (ImportError, AttributeError, KeyError) as exc:
            raise LookupError(f"cannot find {target} ({exc}): the variant names a function "
                              "that moved or was renamed; update its target") from None
        return owner, name, original

    def _set(self, owner: Any, name: str, value: Any) -> None:
        had = name in vars(owner)
        before = vars(owner).get(name)
        setattr(owner, name, value)
        self._undo.append(lambda: setattr(owner, name, before) if had else delattr(owner, name))

    def replace(self, target: str, new: Any) -> None:
        owner, name, original = self._resolve(target)
        if callable(original) and getattr(new, "__name__", None) == "<lambda>":
            # Orion registers actions and guards by their function's name.
            with contextlib.suppress(AttributeError, TypeError):
                functools.update_wrapper(new, original)
        self._set(owner, name, new)
        if not isinstance(owner, type):  # a module function: every import of it too
            for module in list(sys.modules.values()):
                namespace = getattr(module, "__dict__", None)
                if module is owner or not isinstance(namespace, dict):
                    continue
                for key, value in list(namespace.items()):
                    if value is original:
                        self._set(module, key, new)

    def replace_in(self, modules: tuple[str, ...], name: str, new: Any) -> None:
        """Replace ``name`` only as the given modules see it (e.g. a function as one caller
        imported it)."""
        for module_name in modules:
            try:
                module = importlib.import_module(module_name)
                getattr(module, name)
            except (ImportError, AttributeError) as exc:
                raise LookupError(f"cannot find {module_name}:{name} ({exc}): the variant "
                                  "names a caller that moved; update its target") from None
            self._set(module, name, new)

    def set_item(self, target: str, key: Any, value: Any) -> None:
        """Set ``key`` of the mapping ``target`` (a table of settings or rules)."""
        owner, name, mapping = self._resolve(target)
        had, before = key in mapping, mapping.get(key)
        mapping[key] = value
        self._undo.append(lambda: mapping.__setitem__(key, before) if had
                          else mapping.pop(key, None))

    def wrap(self, target: str, make: Callable[[Any], Any]) -> None:
        """``make(original)`` returns the replacement (its ``__wrapped__`` is the original,
        and a pluggy hook implementation keeps its marker)."""
        _, _, original = self._resolve(target)
        function = original.fget if isinstance(original, property) else original
        if isinstance(function, staticmethod):
            function = function.__func__
        new = make(function)
        if callable(function) and callable(new):
            with contextlib.suppress(AttributeError, TypeError):
                functools.update_wrapper(new, function)
        if isinstance(original, property):
            new = property(new)
        elif isinstance(original, staticmethod):
            new = staticmethod(new)
        self.replace(target, new)

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()


# -- the variants -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Variant:
    name: str
    rule: str
    #: The function, method or setting the variant breaks (``module:qualname``).
    breaks: str
    #: What the broken version does.
    does: str
    apply: Callable[[Patcher], None]
    #: The scenarios run: a pytest -m expression (default: the rule id).
    select: str = ""
    #: A pytest -k expression that narrows them further (default: none).
    keyword: str = ""


VARIANTS: list[Variant] = []


def variant(rule: str, breaks: str, does: str, *, select: str = "", keyword: str = "") -> \
        Callable[[Callable[[Patcher], None]], Callable[[Patcher], None]]:
    def register(apply: Callable[[Patcher], None]) -> Callable[[Patcher], None]:
        VARIANTS.append(Variant(apply.__name__, rule, breaks, does, apply, select or rule,
                                keyword))
        return apply
    return register


def _op(checked: Any) -> str:
    return str(checked.plan.operation)


# WP: the write plan ------------------------------------------------------------------------

CHECK_PLAN = "orion.write_session.plan:check_plan"
APPLY = "orion.write_session.operations:apply_operation"


@variant("WP-1", CHECK_PLAN, "a plan that fails the check is accepted (checked never)")
def unchecked_plans(p: Patcher) -> None:
    from orion.write_session.plan import PlanRejected
    from orion.write_session.interrupted import unchecked_plan

    def make(original):
        def check_plan(plan, *, workspace, state_dir):
            try:
                return original(plan, workspace=workspace, state_dir=state_dir)
            except PlanRejected:
                return unchecked_plan(plan, Path(workspace), Path(state_dir))
        return check_plan
    p.wrap(CHECK_PLAN, make)


@variant("WP-2", CHECK_PLAN, "create refuses a target whose directory does not exist yet")
def create_without_directories(p: Patcher) -> None:
    from orion.write_session.plan import PlanRejected

    def make(original):
        def check_plan(plan, *, workspace, state_dir):
            checked = original(plan, workspace=workspace, state_dir=state_dir)
            if str(plan.operation) == "create" and not checked.target.parent.exists():
                raise PlanRejected("the directory does not exist", field="target_file")
            return checked
        return check_plan
    p.wrap(CHECK_PLAN, make)


@variant("WP-3", APPLY, "append glues the content to a last line without a line break")
def append_without_a_line_break(p: Patcher) -> None:
    def make(original):
        def apply_operation(checked, existing, content):
            if _op(checked) == "append" and existing is not None:
                return existing + content
            return original(checked, existing, content)
        return apply_operation
    p.wrap(APPLY, make)


@variant("WP-4", APPLY, "overwrite keeps the old content and appends the new")
def overwrite_appends(p: Patcher) -> None:
    def make(original):
        def apply_operation(checked, existing, content):
            if _op(checked) == "overwrite" and existing is not None:
                return existing + content
            return original(checked, existing, content)
        return apply_operation
    p.wrap(APPLY, make)


@variant("WP-5", "orion.write_session.plan:_regex_match",
         "a regular-expression marker is matched as plain text")
def regex_marker_as_text(p: Patcher) -> None:
    from orion.write_session.plan import Match, _positions

    def _regex_match(name, pattern, body, relative):
        needle = pattern.encode("utf-8")
        return Match(name, needle, _positions(body, needle, overlapping=True))
    p.replace("orion.write_session.plan:_regex_match", _regex_match)


@variant("WP-5", APPLY, "insert puts the content on the other side of the marker line")
def insert_on_the_wrong_side(p: Patcher) -> None:
    def make(original):
        def apply_operation(checked, existing, content):
            if _op(checked) == "insert":
                flipped = "after" if checked.plan.position == "before" else "before"
                plan = checked.plan.model_copy(update={"position": flipped})
                checked = dataclasses.replace(checked, plan=plan)
            return original(checked, existing, content)
        return apply_operation
    p.wrap(APPLY, make)


@variant("WP-6", APPLY, "replace_block replaces the whole file instead of the block")
def replace_block_replaces_everything(p: Patcher) -> None:
    def make(original):
        def apply_operation(checked, existing, content):
            if _op(checked) == "replace_block":
                return content
            return original(checked, existing, content)
        return apply_operation
    p.wrap(APPLY, make)


@variant("WP-7", APPLY, "replace_all replaces only the first occurrence")
def replace_all_replaces_one(p: Patcher) -> None:
    def make(original):
        def apply_operation(checked, existing, content):
            if _op(checked) == "replace_all" and existing is not None:
                needle = checked.plan.search.encode()
                return existing.replace(needle, content.rstrip(b"\n"), 1)
            return original(checked, existing, content)
        return apply_operation
    p.wrap(APPLY, make)


@variant("WP-8", CHECK_PLAN, "an edit of a missing file is accepted at begin")
def edits_of_missing_files(p: Patcher) -> None:
    from orion.write_session.interrupted import unchecked_plan

    def make(original):
        def check_plan(plan, *, workspace, state_dir):
            target = Path(workspace) / plan.target_file
            if str(plan.operation) != "create" and not target.exists():
                return unchecked_plan(plan, Path(workspace), Path(state_dir))
            return original(plan, workspace=workspace, state_dir=state_dir)
        return check_plan
    p.wrap(CHECK_PLAN, make)


@variant("WP-9", "orion.write_session.plan:OPERATION_FIELDS",
         "insert no longer asks for its location_marker")
def insert_without_its_marker(p: Patcher) -> None:
    from orion.write_session.plan import Operation

    p.set_item("orion.write_session.plan:OPERATION_FIELDS", Operation.INSERT, ("position",))


@variant("WP-10", "orion.workspace:resolve_inside",
         "the target is checked as written, without following symbolic links")
def links_not_followed(p: Patcher) -> None:
    from orion.workspace import PathOutsideWorkspace

    def resolve_inside(workspace, path):
        root = Path(workspace).resolve()
        if not path or "\x00" in path:
            raise PathOutsideWorkspace(f"invalid path {path!r}")
        joined = Path(os.path.normpath(root / path))
        if not joined.is_relative_to(root):
            raise PathOutsideWorkspace(f"{path!r} is outside the workspace ({root})")
        return joined
    p.replace("orion.workspace:resolve_inside", resolve_inside)


@variant("WP-11", "orion.write_session.plan:recheck",
         "the plan is not checked again when the file is written")
def no_recheck(p: Patcher) -> None:
    p.replace("orion.write_session.plan:recheck", lambda checked: checked)

    def make(original):  # nor compared with the bytes it was checked against
        def execute(checked, content, **kw):
            return original(dataclasses.replace(checked, sha256=None), content, **kw)
        return execute
    p.wrap("orion.write_session.operations:execute", make)


@variant("WP-12", "orion.confined:Parent.replace",
         "the target is written in place (truncated, then written), not atomically")
def write_in_place(p: Patcher) -> None:
    def replace(self, data, *, mode=None):
        fd = os.open(self.name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=self.fd)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        return []  # nothing it could not keep, it says
    p.replace("orion.confined:Parent.replace", replace)


@variant("WP-13", "orion.write_session.operations:_store_backup",
         "no backup of the previous content is kept")
def no_backup(p: Patcher) -> None:
    p.replace("orion.write_session.operations:_store_backup", lambda data, info, dest: None)


@variant("WP-14", "orion.write_session.manager:SessionManager.begin",
         "the plan's intent is not recorded")
def intent_not_recorded(p: Patcher) -> None:
    def make(original):
        def begin(self, plan):
            return original(self, plan.model_copy(update={"intent": ""}))
        return begin
    p.wrap("orion.write_session.manager:SessionManager.begin", make)


@variant("WP-15", "orion_plugins.write_sessions:execute_small",
         "a small edit is written without the plan checks")
def small_edits_unchecked(p: Patcher) -> None:
    from orion.write_session.operations import write_atomically

    def execute_small(args, context):
        target = Path(context.runtime.workspace) / args.target_file
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(target, args.content.encode())
        return f"wrote {args.target_file}"
    p.replace("orion_plugins.write_sessions:execute_small", execute_small)


# WS: the write session controller ---------------------------------------------------------

REGISTER_TOOLS = "orion_plugins.write_sessions:register_tools"


def _finalize_tool(p: Patcher) -> None:
    from pydantic import BaseModel

    from orion.tools.spec import ToolSpec

    class FinalizeArgs(BaseModel):
        session_id: str
        raw_content: str

    def make(original):
        def register_tools(register):
            original(register)
            register(ToolSpec("WritePlanTool_finalize", "Finalize a write session with its "
                              "content.", FinalizeArgs, lambda args, context: "finalized"))
        return register_tools
    p.wrap(REGISTER_TOOLS, make)


@variant("WS-1", REGISTER_TOOLS, "a WritePlanTool_finalize tool takes the raw content")
def finalize_tool_with_content(p: Patcher) -> None:
    _finalize_tool(p)


@variant("WS-2", "orion.tools.arguments:parse_arguments",
         "arguments that are not JSON are taken as empty arguments")
def broken_json_as_empty(p: Patcher) -> None:
    def make(original):
        def parse_arguments(raw, spec, **kw):
            try:
                json.loads(raw or "{}")
            except ValueError:
                raw = "{}"
            return original(raw, spec, **kw)
        return parse_arguments
    p.wrap("orion.tools.arguments:parse_arguments", make)


@variant("WS-3", "orion.write_session.manager:instruction",
         "begin does not tell the model how to end the content")
def begin_without_instruction(p: Patcher) -> None:
    p.replace("orion.write_session.manager:instruction",
              lambda target, terminator: f"Now write {target}.")


@variant("WS-4", "orion.write_session.session:WriteSession.end_message",
         "a message with only tool calls ends the session's message like text would")
def tool_calls_touch_the_session(p: Patcher) -> None:
    def make(original):
        def end_message(self, finish, message, *, tool_calls=False):
            return original(self, finish, message, tool_calls=False)
        return end_message
    p.wrap("orion.write_session.session:WriteSession.end_message", make)


@variant("WS-5", "orion.write_session.protocol:EndMarker.__init__",
         "DONE is seen only as the very last text of a message: a DONE line that ends with "
         "a line break is taken as content")
def strict_done_line(p: Patcher) -> None:
    def make(original):
        def __init__(self, terminator="DONE"):
            original(self, terminator)
            self._t0 = "\x00"  # the matcher never starts: DONE is found only by end_message
        return __init__
    p.wrap("orion.write_session.protocol:EndMarker.__init__", make)


@variant("WS-6", "orion.write_session.protocol:EndMarker._advance_fence",
         "fenced code blocks are not tracked: a DONE inside one ends the content")
def fences_ignored(p: Patcher) -> None:
    p.replace("orion.write_session.protocol:EndMarker._advance_fence",
              lambda self, seg: None)


@variant("WS-7", "orion_plugins.write_session_protocol:prompt_for_done",
         "the idle timer fires but the model is never asked to reply DONE")
def no_idle_prompt(p: Patcher) -> None:
    p.replace("orion_plugins.write_session_protocol:prompt_for_done",
              lambda lifecycle, transition: None)


@variant("WS-7", "orion.statechart.settings:resolve",
         "the idle time defaults to 200 ms instead of 2000 ms", select="WS-7")
def idle_200_ms(p: Patcher) -> None:
    _setting_default(p, "write_session", "idle_ms", 200)


def _setting_default(p: Patcher, chart: str, name: str, value: Any) -> None:
    """The setting's default is ``value`` (a value set in orion.yaml or the environment still
    wins, unless it equals the declared default)."""
    from types import MappingProxyType

    def make(original):
        def resolve(spec, overrides=None, env=None, *, origin="overrides"):
            values = dict(original(spec, overrides, env, origin=origin))
            if spec.statechart == chart and values[name] == spec.settings[name].default:
                values[name] = value
            return MappingProxyType(values)
        return resolve
    p.wrap("orion.statechart.settings:resolve", make)


@variant("WS-8", "orion.statechart.settings:env_names",
         "WRITE_SESSION_IDLE_MS is not read")
def idle_env_ignored(p: Patcher) -> None:
    def make(original):
        def env_names(spec, name):
            return [n for n in original(spec, name) if n != "WRITE_SESSION_IDLE_MS"]
        return env_names
    p.wrap("orion.statechart.settings:env_names", make)


@variant("WS-9", "orion.write_session.session:WriteSession._trigger",
         "the end of a message without DONE is not sent to the statechart")
def message_end_lost(p: Patcher) -> None:
    def make(original):
        def _trigger(self, trigger, **payload):
            if trigger != "message_end":
                original(self, trigger, **payload)
        return _trigger
    p.wrap("orion.write_session.session:WriteSession._trigger", make)


@variant("WS-10", "orion.write_session.session:validate_write",
         "the content is written without validation")
def no_validation(p: Patcher) -> None:
    p.replace("orion.write_session.session:validate_write", lambda *args, **kw: [])


@variant("WS-11", "orion_plugins.write_session_protocol:corrections_left",
         "correction rounds never run out")
def endless_corrections(p: Patcher) -> None:
    p.replace("orion_plugins.write_session_protocol:corrections_left",
              lambda lifecycle, transition: True)


@variant("WS-12", "orion.trace.encoding:encode_event and orion.trace.store:_dumps_all",
         "float values (NaN, infinities) are stored as they are, as JSON cannot hold them")
def raw_trace_values(p: Patcher) -> None:
    def make(original):
        def encode_event(event, **kw):
            encoded = original(event, **kw)
            raw = getattr(event, "attributes", None)
            if isinstance(raw, dict):
                floats = {k: v for k, v in raw.items() if isinstance(v, float)}
                return dataclasses.replace(encoded, attributes={**encoded.attributes, **floats})
            return encoded
        return encode_event
    p.wrap("orion.trace.encoding:encode_event", make)
    p.replace("orion.trace.store:_dumps_all",
              lambda values: map(json.dumps, values))


@variant("WS-13", "orion.write_session.session:WriteSession.feed",
         "the streamed content is logged (debug level, orion.write_session)")
def content_logged(p: Patcher) -> None:
    logger = logging.getLogger("orion.write_session")

    def make(original):
        def feed(self, text):
            logger.debug("write session %s received %r", self.id[:8], text)
            return original(self, text)
        return feed
    p.wrap("orion.write_session.session:WriteSession.feed", make)


@variant("WS-13", "orion.write_session.session:WriteSession.feed",
         "the streamed content is echoed to the console (stderr)")
def content_printed(p: Patcher) -> None:
    def make(original):
        def feed(self, text):
            print(text, end="", file=sys.stderr)
            return original(self, text)
        return feed
    p.wrap("orion.write_session.session:WriteSession.feed", make)


@variant("WS-14", "orion.write_session.session:WriteSession.terminator",
         "strict mode is ignored: a bare DONE always ends the content")
def strict_mode_ignored(p: Patcher) -> None:
    p.wrap("orion.write_session.session:WriteSession.terminator",
           lambda original: (lambda self: "DONE"))


# SR: the session protocol and recovery ---------------------------------------------------

@variant("SR-1", REGISTER_TOOLS, "finalizing is also offered as a tool")
def finalize_as_a_tool(p: Patcher) -> None:
    _finalize_tool(p)


@variant("SR-2", "orion.write_session.manager:SessionManager.begin",
         "begin's result lacks the stage")
def begin_without_stage(p: Patcher) -> None:
    def make(original):
        def begin(self, plan):
            result = dict(original(self, plan))
            result.pop("stage", None)
            return result
        return begin
    p.wrap("orion.write_session.manager:SessionManager.begin", make)


@variant("SR-2", "orion.write_session.manager:SessionManager.begin",
         "begin's result names the state directory instead of the session's directory")
def begin_with_the_wrong_directory(p: Patcher) -> None:
    def make(original):
        def begin(self, plan):
            result = dict(original(self, plan))
            result["session_dir"] = str(self.runtime.state_dir)
            return result
        return begin
    p.wrap("orion.write_session.manager:SessionManager.begin", make)


@variant("SR-3", "orion.write_session.journal:Journal.remove",
         "the journal is left behind after the write")
def journal_left_behind(p: Patcher) -> None:
    p.replace("orion.write_session.journal:Journal.remove", lambda self: self.close())


@variant("SR-4", "orion.write_session.journal:Journal.append",
         "every chunk is written to disk at once")
def flush_every_chunk(p: Patcher) -> None:
    def make(original):
        def append(self, text):
            original(self, text)
            self._flush(False)
        return append
    p.wrap("orion.write_session.journal:Journal.append", make)


@variant("SR-5", "orion.write_session.journal:Journal._write_pending",
         "content reaches the disk only when the journal is closed")
def no_saves_while_streaming(p: Patcher) -> None:
    p.replace("orion.write_session.journal:Journal._write_pending", lambda self: None)


@variant("SR-6", "orion.write_session.recovery:resolve_id",
         "an unknown session id is answered with a generic error")
def unknown_session_vague(p: Patcher) -> None:
    from orion.write_session.recovery import RecoveryError

    def make(original):
        def resolve_id(state_dir, session_id, **kw):
            try:
                return original(state_dir, session_id, **kw)
            except RecoveryError:
                raise RecoveryError("recovery failed") from None
        return resolve_id
    p.wrap("orion.write_session.recovery:resolve_id", make)


@variant("SR-7", "orion.write_session.journal:Journal._disk_failed",
         "a permission error of the journal is raised instead of falling back to memory")
def eacces_is_fatal(p: Patcher) -> None:
    def make(original):
        def _disk_failed(self, exc, path=None):
            if exc.errno == errno.EACCES:
                raise exc
            return original(self, exc, path)
        return _disk_failed
    p.wrap("orion.write_session.journal:Journal._disk_failed", make)


@variant("SR-8", "orion_plugins.write_sessions:startup (as runtime_started calls it)",
         "orion run skips the crash recovery at start", keyword="command_line")
def run_skips_recovery(p: Patcher) -> None:
    p.replace_in(("orion_plugins.write_sessions",), "startup", lambda runtime: [])


@variant("SR-8", "orion_plugins.write_sessions:startup (as runtime_started calls it)",
         "orion chat skips the crash recovery at start", keyword="orion_chat")
def chat_skips_recovery(p: Patcher) -> None:
    p.replace_in(("orion_plugins.write_sessions",), "startup", lambda runtime: [])


@variant("SR-9", "orion_plugins.session_commands:sessions_clean",
         "orion sessions clean removes sessions older than 2 hours by default",
         keyword="by_default")
def clean_default_two_hours(p: Patcher) -> None:
    _cli_default(p, "sessions_clean", "older_than", "2h")


def _cli_default(p: Patcher, command: str, option: str, value: str) -> None:
    # The option default lives on the click command object. The orion commands that steps
    # start get the variant through a sitecustomize (see _in_subprocesses).
    import orion_plugins.session_commands as commands

    for param in getattr(commands, command).params:
        if param.name == option:
            before = param.default
            param.default = value
            p._undo.append(lambda param=param, before=before: setattr(param, "default", before))
            return
    raise LookupError(f"cannot find the option {option} of {commands.__name__}:{command}")


@variant("SR-10", "orion.write_session.journal:Journal.is_live",
         "a session of a running process is taken for an orphan")
def live_sessions_taken(p: Patcher) -> None:
    p.replace("orion.write_session.journal:Journal.is_live", staticmethod(lambda directory: False))


@variant("SR-11", "orion.write_session.manager:SessionManager.begin",
         "a second begin while a session is open starts another session")
def two_sessions(p: Patcher) -> None:
    def make(original):
        def begin(self, plan):
            open_ones = list(self.sessions)
            self.sessions[:] = []  # begin does not see the open session
            try:
                return original(self, plan)
            finally:
                self.sessions[:0] = open_ones
        return begin
    p.wrap("orion.write_session.manager:SessionManager.begin", make)


# AC: auto-continue ------------------------------------------------------------------------

@variant("AC-1", "orion.models.events:Finish.truncated",
         "only finish reason length counts as cut off")
def length_only(p: Patcher) -> None:
    p.wrap("orion.models.events:Finish.truncated",
           lambda original: (lambda self: self.reason == "length"))


@variant("AC-2", "orion.write_session.ingest:Ingest._take_start",
         "the first half of what a reply to Orion's prompt starts with is lost")
def continuation_start_dropped(p: Patcher) -> None:
    def make(original):
        def _take_start(self, start, held):
            rest = held[start.repeat:]
            return original(self, start, held[:start.repeat] + rest[len(rest) // 2:])
        return _take_start
    p.wrap("orion.write_session.ingest:Ingest._take_start", make)


@variant("AC-3", "orion_plugins.write_session_protocol:request_continuation",
         "the continuation request neither counts nor quotes the saved lines")
def bare_continuation_request(p: Patcher) -> None:
    def request_continuation(lifecycle, transition):
        lifecycle.prompt("Your output was cut off. Continue, and end with DONE on its own line.")
    p.replace("orion_plugins.write_session_protocol:request_continuation",
              request_continuation)


@variant("AC-4", "orion_plugins.write_session_protocol:continuations_left",
         "continuations never run out")
def endless_continuations(p: Patcher) -> None:
    p.replace("orion_plugins.write_session_protocol:continuations_left",
              lambda lifecycle, transition: True)


@variant("AC-5", "orion_plugins.write_session_protocol:has_content",
         "white space counts as content")
def blank_is_content(p: Patcher) -> None:
    def has_content(lifecycle, transition):
        return int(transition.payload.get("bytes", 0)) > 0
    p.replace("orion_plugins.write_session_protocol:has_content", has_content)


@variant("AC-6", "orion.write_session.decision:read_start",
         "a continuation that starts the file over is added")
def restart_added(p: Patcher) -> None:
    def make(original):
        def read_start(text, **kw):
            start = original(text, **kw)
            return None if start is None else dataclasses.replace(start, circular=False)
        return read_start
    p.wrap("orion.write_session.decision:read_start", make)


@variant("AC-7", "orion.write_session.decision:read_start",
         "a cut line sent again is added again (glued after its old start)")
def overlap_kept(p: Patcher) -> None:
    def make(original):
        def read_start(text, **kw):
            start = original(text, **kw)
            return None if start is None else dataclasses.replace(start, repeat=0)
        return read_start
    p.wrap("orion.write_session.decision:read_start", make)


@variant("AC-7", "orion.write_session.decision:read_start",
         "identical rows after a cut at the end of a line are taken for a repeat")
def identical_rows_dropped(p: Patcher) -> None:
    def make(original):
        def read_start(text, *, quoted=None, **kw):
            start = original(text, quoted=quoted, **kw)
            if start is None or quoted is None or quoted.unfinished is not None:
                return start
            repeat = "".join(line + "\n" for line in quoted.lines[-1:])
            if repeat and text.startswith(repeat):
                return dataclasses.replace(start, repeat=len(repeat))
            return start
        return read_start
    p.wrap("orion.write_session.decision:read_start", make)


@variant("AC-8", "orion.write_session.message_end:MessageEnds._truncated",
         "continuations happen silently")
def silent_continuations(p: Patcher) -> None:
    def make(original):
        def _truncated(self, *args):
            notice = self.runtime.reporter.notice
            self.runtime.reporter.notice = lambda text: None if text.startswith("part ") \
                else notice(text)
            try:
                original(self, *args)
            finally:
                del self.runtime.reporter.notice
        return _truncated
    p.wrap("orion.write_session.message_end:MessageEnds._truncated", make)


@variant("AC-9", "orion.write_session.finalize:Finalizer._failed",
         "a failed write removes the journal")
def failure_drops_content(p: Patcher) -> None:
    def make(original):
        def _failed(self, cause):
            original(self, cause)
            self.journal.remove()
        return _failed
    p.wrap("orion.write_session.finalize:Finalizer._failed", make)


# PM: plan mode -----------------------------------------------------------------------------

@variant("PM-1", "orion_plugins.plan_mode:gate_tools", "plan tools are always offered")
def plan_tools_always_offered(p: Patcher) -> None:
    p.wrap("orion_plugins.plan_mode:gate_tools", lambda original: (lambda tools, request: None))


@variant("PM-2", "orion_plugins.plan_mode:authorize_tool_call",
         "a plan tool call is authorized whether plan work is active or not")
def plan_tools_always_allowed(p: Patcher) -> None:
    p.wrap("orion_plugins.plan_mode:authorize_tool_call",
           lambda original: (lambda call, request: None))


@variant("PM-3", "orion_plugins.plan_mode:get", "plan_get returns the Markdown trimmed")
def plan_get_trims(p: Patcher) -> None:
    def make(original):
        def get(args, context):
            result = original(args, context)
            return {**result, "markdown": result["markdown"].strip()}
        return get
    p.wrap("orion_plugins.plan_mode:get", make)


@variant("PM-4", "orion_plugins.plan_mode:build_context",
         "model requests carry no plan block")
def no_plan_block(p: Patcher) -> None:
    p.wrap("orion_plugins.plan_mode:build_context", lambda original: (lambda request: None))


@variant("PM-5", "orion.plan.service:PlanService.on",
         "/plan on while plan work is active replaces the plan with a new one")
def plan_on_replaces(p: Patcher) -> None:
    def make(original):
        def on(self, title=""):
            if self.active_plan is not None:
                self.done()
            return original(self, title)
        return on
    p.wrap("orion.plan.service:PlanService.on", make)


@variant("PM-6", "orion.plan.store:PlanStore.set_content",
         "a draft stored during execution overwrites the approved plan in place")
def no_revision_during_execution(p: Patcher) -> None:
    from orion.plan.store import Status

    def make(original):
        def set_content(self, plan_id, markdown, title, *, expected_revision=None):
            plan = self.get(plan_id)
            if plan is not None and plan.status is Status.EXECUTING:
                self.set_status(plan_id, Status.READY)
            return original(self, plan_id, markdown, title,
                            expected_revision=expected_revision)
        return set_content
    p.wrap("orion.plan.store:PlanStore.set_content", make)


@variant("PM-7", "orion.plan.service:PlanService.approve",
         "/plan approve answers but does not start the execution")
def approve_does_nothing(p: Patcher) -> None:
    def make(original):
        def approve(self):
            return f"Plan approved: {self.status()}"
        return approve
    p.wrap("orion.plan.service:PlanService.approve", make)


@variant("PM-8", "orion_plugins.plan_mode:gate_tools",
         "plan work withholds the other tools")
def plan_work_restricts(p: Patcher) -> None:
    def make(original):
        def gate_tools(tools, request):
            withheld = original(tools, request)
            if withheld is None:  # plan work is active: offer only the plan tools
                return [getattr(t, "name", t) for t in tools
                        if getattr(t, "name", t) not in ("plan_get", "plan_set_content")]
            return withheld
        return gate_tools
    p.wrap("orion_plugins.plan_mode:gate_tools", make)


@variant("PM-9", "orion_plugins.plan_mode:authorize_tool_call, "
         "orion.plan.store:PlanStore.set_content and orion.plan.service:size_problem",
         "drafts are stored whatever their size or the revision they were based on")
def drafts_unchecked(p: Patcher) -> None:
    def authorize(original):
        def authorize_tool_call(call, request):
            if call.name == "plan_set_content":  # only the plan-work check is left
                call = dataclasses.replace(call, arguments={
                    k: v for k, v in call.arguments.items() if k != "expected_revision"})
            return original(call, request)
        return authorize_tool_call

    def store(original):
        def set_content(self, plan_id, markdown, title, *, expected_revision=None):
            return original(self, plan_id, markdown, title)
        return set_content
    p.wrap("orion_plugins.plan_mode:authorize_tool_call", authorize)
    p.wrap("orion.plan.store:PlanStore.set_content", store)
    p.replace("orion.plan.service:size_problem", lambda markdown, limit: None)


@variant("WS-15", "orion.write_session.message_end:MessageEnds._beside_a_tool_call",
         "the text beside a tool call stays in the content")
def narration_kept(p: Patcher) -> None:
    def make(original):
        def _beside_a_tool_call(self, message, end):
            self.checkpoint()
        return _beside_a_tool_call
    p.wrap("orion.write_session.message_end:MessageEnds._beside_a_tool_call", make)


@variant("WS-15", "orion.write_session.session:WriteSession._tell_now",
         "the text beside a tool call is set aside without a word to the model")
def narration_untold(p: Patcher) -> None:
    p.wrap("orion.write_session.session:WriteSession._tell_now",
           lambda original: lambda self, text: None)


@variant("WS-16", "orion.write_session.ingest:Ingest._take_start",
         "a reply to the idle prompt without DONE, shorter than 1024 characters, is taken "
         "for an answer and dropped")
def short_replies_dropped(p: Patcher) -> None:
    def make(original):
        def _take_start(self, start, held):
            if len(held) < 1024 and "DONE" not in held and self.lifecycle.has_tag("paused"):
                self._mode = "ignore"
                return None
            return original(self, start, held)
        return _take_start
    p.wrap("orion.write_session.ingest:Ingest._take_start", make)


@variant("WS-17", "orion.write_session.session:WriteSession.hold",
         "a message the user types during a session goes to the model at once")
def user_message_not_held(p: Patcher) -> None:
    p.wrap("orion.write_session.session:WriteSession.hold",
           lambda original: lambda self, line: False)


@variant("WS-17", "orion.write_session.session:WriteSession._journal_state",
         "held messages live in memory only: leaving or a crash loses them")
def held_messages_unsaved(p: Patcher) -> None:
    def make(original):
        def _journal_state(self, **kw):
            state = original(self, **kw)
            state.pop("held", None)
            return state
        return _journal_state
    p.wrap("orion.write_session.session:WriteSession._journal_state", make)


@variant("WS-18", "orion.write_session.message_end:MessageEnds._after_done",
         "what follows DONE is dropped without a word")
def after_done_silent(p: Patcher) -> None:
    p.wrap("orion.write_session.message_end:MessageEnds._after_done",
           lambda original: lambda self: None)


@variant("WS-18", "orion.write_session.message_end:MessageEnds._text_lines",
         "a repeated DONE line after the first is kept as text")
def repeated_done_kept(p: Patcher) -> None:
    p.wrap("orion.write_session.message_end:MessageEnds._text_lines",
           lambda original: lambda self, text: "".join(
               line for line in text.splitlines(keepends=True) if line.strip()))


@variant("WS-19", "orion.write_session.decision:read_start",
         "a reply that does not send the unfinished line again is glued onto it")
def glued(p: Patcher) -> None:
    def make(original):
        def read_start(text, **kw):
            start = original(text, **kw)
            if start is not None and start.cut_line == "set_aside":
                return dataclasses.replace(start, cut_line="kept")
            return start
        return read_start
    p.wrap("orion.write_session.decision:read_start", make)


@variant("WS-19", "orion.write_session.decision:decide_end",
         "a message that stops cleanly mid-line is taken as cut off, never asked about")
def mid_line_is_a_cut(p: Patcher) -> None:
    from orion.write_session.decision import End, Step

    def make(original):
        def decide_end(facts):
            end = original(facts)
            return End(Step.CONTINUE) if end.step is Step.ASK_UNFINISHED else end
        return decide_end
    p.wrap("orion.write_session.decision:decide_end", make)


@variant("WS-20", "orion.statechart.settings:resolve",
         "the idle prompt is repeated 100 times before the session gives up")
def idle_prompts_unbounded(p: Patcher) -> None:
    _setting_default(p, "write_session", "max_idle_prompts", 100)


@variant("WS-21", "orion.write_session.message_end:CONNECTION_LOST",
         "a stream the network cut is continued without telling the user why")
def connection_loss_unsaid(p: Patcher) -> None:
    p.replace_in(("orion.write_session.message_end",), "CONNECTION_LOST", "not-a-finish-reason")


@variant("WS-21", "orion.write_session.message_end:STREAM_ERROR",
         "an error event in the stream is continued without naming it")
def stream_error_unsaid(p: Patcher) -> None:
    p.replace_in(("orion.write_session.message_end",), "STREAM_ERROR", "not-a-finish-reason")


@variant("WS-22", "orion.write_session.finalize:Finalizer._set_aside_report",
         "the write report says nothing of the text set aside")
def set_aside_unreported(p: Patcher) -> None:
    p.wrap("orion.write_session.finalize:Finalizer._set_aside_report",
           lambda original: lambda self: "")


@variant("WS-22", "orion.write_session.set_aside:SetAside.archive",
         "the text set aside is gone once the file is written")
def set_aside_not_kept(p: Patcher) -> None:
    def make(original):
        def archive(self, state_dir, session_id, target):
            self.parts = []
            return None
        return archive
    p.wrap("orion.write_session.set_aside:SetAside.archive", make)


@variant("WS-23", "orion.models.events:LeadingThink.feed",
         "a leading <think> block is taken as content")
def think_is_content(p: Patcher) -> None:
    from orion.models.events import TextDelta

    def make(original):
        def feed(self, text):
            self.phase = "text"
            return [TextDelta(text)]
        return feed
    p.wrap("orion.models.events:LeadingThink.feed", make)


# FS: faults of the environment ------------------------------------------------------------


@variant("FS-1", "orion.workspace:state_directory",
         "the state directory is used wherever its links lead")
def state_directory_unchecked(p: Patcher) -> None:
    from orion.workspace import state_dir_path

    p.replace("orion.workspace:state_directory",
              lambda workspace, given=None, *, create=False: state_dir_path(workspace, given))


@variant("FS-2", "orion.confined:open_temp",
         "the temp file is created with the umask's mode and keeps no owner")
def temp_file_as_umask_gives(p: Patcher) -> None:
    import os

    def open_temp(name, *, dir_fd=None, like=None, mode=None):
        return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666, dir_fd=dir_fd)
    p.replace("orion.confined:open_temp", open_temp)


@variant("FS-3", "orion.sourcefile:_check",
         "a file of any size is read", keyword="oversized")
def no_size_cap(p: Patcher) -> None:
    from orion.sourcefile import NotReadable, kind_of

    def check(info, limit):
        kind = kind_of(info.st_mode)
        if kind is not None:
            raise NotReadable(f"is not a regular file ({kind})")
    p.replace("orion.sourcefile:_check", check)


@variant("FS-4", "orion.runtime.pipeline:check_replies",
         "a pipeline in which no system replies is accepted")
def pipeline_without_reply(p: Patcher) -> None:
    p.replace("orion.runtime.pipeline:check_replies", lambda order, chosen, origin: None)


@variant("FS-5", "orion.plan.service:PlanService.set_content",
         "a draft is stored over whatever another conversation stored meanwhile")
def drafts_overwrite_each_other(p: Patcher) -> None:
    def make(original):
        def set_content(self, markdown, title, *, expected_revision=None):
            self.known = None  # what this conversation saw is forgotten
            return original(self, markdown, title, expected_revision=expected_revision)
        return set_content
    p.wrap("orion.plan.service:PlanService.set_content", make)


@variant("FS-6", "orion.plan.store:_text",
         "text that is not UTF-8 fails every query of the plan store")
def damaged_row_spoils_all(p: Patcher) -> None:
    p.replace("orion.plan.store:_text", lambda raw: raw.decode("utf-8"))


@variant("FS-7", "orion.runtime.stop_signals:until_stopped",
         "a signal ends the command where it stands (the default action)")
def signals_unhandled(p: Patcher) -> None:
    async def until_stopped(work, signals=()):
        return await work
    p.replace("orion.runtime.stop_signals:until_stopped", until_stopped)


@variant("FS-8", "orion.write_session.orphans:_age",
         "a session's age is the wall clock's word alone")
def wall_clock_age(p: Patcher) -> None:
    p.replace("orion.write_session.orphans:_age",
              lambda wall, boot, now_ms, now_boot: max(0.0, now_ms - wall))


@variant("FS-8", "orion.write_session.startup:_expire",
         "an orphan past its TTL is deleted with its content")
def expired_sessions_deleted(p: Patcher) -> None:
    from orion.write_session.journal import remove_session
    from orion.write_session.startup import StartupAction

    def _expire(runtime, orphan, ttl, now, now_boot):
        remove_session(orphan.directory)
        return StartupAction(orphan.id, "expired", "removed orphaned write session "
                             f"{orphan.short}: older than 1 h")
    p.replace("orion.write_session.startup:_expire", _expire)


@variant("FS-9", "orion.write_session.journal:open_private",
         "journal files are opened through links, with the umask's mode")
def journal_follows_links(p: Patcher) -> None:
    import os

    p.replace("orion.write_session.journal:open_private",
              lambda path, flags, mode=0o600: os.open(path, flags, 0o666))
    p.replace("orion.write_session.journal:links_in", lambda directory: {})


@variant("FS-10", "orion.write_session.journal:DEGRADING_ERRNOS",
         "too many open files is an error the journal does not expect")
def open_file_limit_unexpected(p: Patcher) -> None:
    import errno

    from orion.write_session import journal

    p.replace("orion.write_session.journal:DEGRADING_ERRNOS",
              journal.DEGRADING_ERRNOS - {errno.EMFILE, errno.ENFILE})
    p.replace("orion.write_session.journal:OPEN_LIMITS", frozenset())


@variant("FS-11", "orion.statechart.checks.loops:_completion_loops",
         "orion check sees no completion loop", keyword="refused_before_anything")
def completion_loops_unseen(p: Patcher) -> None:
    p.replace("orion.statechart.checks.loops:_completion_loops", lambda *args: iter(()))


# -- running the variants ---------------------------------------------------------------------

def _import_orion() -> None:
    """Import every module of Orion before any variant: a module imported later would hold
    the original of a function a variant replaced."""
    for package in ("orion", "orion_plugins"):
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, package + "."):
            if info.name.endswith("__main__"):
                continue
            with contextlib.suppress(ImportError):
                importlib.import_module(info.name)


class _Outcomes:
    """A pytest plugin that records the scenarios run and the ones that failed."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.failed: dict[str, str] = {}
        #: Scenarios that cannot run here (no tmpfs mount without root, say).
        self.skipped: list[str] = []
        #: Failures whose exception was raised in this file: the variant itself is broken.
        self.harness: list[str] = []

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.skipped:
            self.skipped.append(report.nodeid)
            return
        if report.when == "call" or report.failed:
            if report.nodeid not in self.ran:
                self.ran.append(report.nodeid)
        if report.failed and report.nodeid not in self.failed:
            text = str(report.longrepr or "")
            lines = [line for line in text.splitlines() if line.startswith("E ")] or \
                text.splitlines()[-1:]
            self.failed[report.nodeid] = " | ".join(line[1:].strip() for line in lines[:3])
            crash = getattr(report.longrepr, "reprcrash", None)
            if crash is not None and Path(str(crash.path)).name == Path(__file__).name:
                self.harness.append(f"{report.nodeid}: {crash.message}")


SITECUSTOMIZE = """\
# Applies one variant of tests/test_features_bite.py in every Python process started while
# that variant runs (the orion commands that steps start), as it is applied in the test process.
import sys
sys.path.insert(0, {tests!r})
import test_features_bite
test_features_bite.apply_named({name!r})
"""


def apply_named(name: str) -> None:
    """Apply the variant ``name`` for the rest of this process."""
    _import_orion()
    for chosen in VARIANTS:
        if chosen.name == name:
            chosen.apply(Patcher())
            return
    raise LookupError(f"no variant {name!r}")


@contextlib.contextmanager
def _in_subprocesses(name: str) -> Iterator[None]:
    """A ``sitecustomize`` on PYTHONPATH that applies the variant in subprocesses too."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="orion-bite-") as directory:
        Path(directory, "sitecustomize.py").write_text(
            SITECUSTOMIZE.format(tests=str(ROOT / "tests"), name=name), encoding="utf-8")
        before = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [directory, before]))
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = before


#: One test module per feature file, so a variant collects only the features that hold its
#: rule's scenarios (collecting every scenario costs more than running the few selected).
BINDING = """\
from pytest_bdd import scenarios

scenarios({feature!r})
"""


def _bindings(directory: Path) -> dict[Path, str]:
    """A binding module in ``directory`` for each feature file -> that file's text."""
    modules = {}
    for feature in sorted(FEATURES.glob("*.feature")):
        module = directory / f"test_bite_{feature.stem}.py"
        module.write_text(BINDING.format(feature=str(feature)), encoding="utf-8")
        modules[module] = feature.read_text(encoding="utf-8")
    return modules


def _modules_for(chosen: Variant, bindings: dict[Path, str]) -> list[str]:
    import re
    tag = re.compile(rf"@{re.escape(chosen.rule)}(?![\w-])")
    return [str(module) for module, text in bindings.items() if tag.search(text)]


def run_variant(chosen: Variant, bindings: dict[Path, str]) -> dict[str, Any]:
    patcher = Patcher()
    started = time.perf_counter()
    result: dict[str, Any] = {"name": chosen.name, "rule": chosen.rule, "breaks": chosen.breaks}
    try:
        chosen.apply(patcher)
    except LookupError as exc:
        result.update(code=-1, ran=[], failed={}, error=str(exc))
        return result
    outcomes = _Outcomes()
    try:
        with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), \
                _in_subprocesses(chosen.name):
            code = pytest.main(
                [*_modules_for(chosen, bindings), "-c", str(ROOT / "pyproject.toml"),
                 "-m", chosen.select, *(["-k", chosen.keyword] if chosen.keyword
                                                      else []),
                 "-x", "-q", "-p", "no:cacheprovider",
                 "--rootdir", str(ROOT), "-W", "ignore::pytest.PytestUnknownMarkWarning",
                 "--no-header", "--tb=short"], plugins=[outcomes])
    finally:
        patcher.undo()
        for name in [n for n in sys.modules if n.startswith(("tests.", "conftest"))]:
            del sys.modules[name]
    result.update(code=int(code), ran=outcomes.ran, failed=outcomes.failed,
                  harness=outcomes.harness, skipped=outcomes.skipped,
                  seconds=round(time.perf_counter() - started, 2))
    return result


def main(names: list[str]) -> list[dict[str, Any]]:
    import tempfile

    _import_orion()
    chosen = [v for v in VARIANTS if not names or v.name in names or v.rule in names]
    with tempfile.TemporaryDirectory(prefix="orion-bite-bindings-") as directory:
        bindings = _bindings(Path(directory))
        return [run_variant(v, bindings) for v in chosen]


# -- the tests --------------------------------------------------------------------------------

def _design_rules() -> list[str]:
    import re
    ids: list[str] = []
    for page in sorted(DESIGN.glob("*.md")):
        ids += re.findall(r"^\*\*([A-Z]{2}-\d+) — ", page.read_text(encoding="utf-8"), re.M)
    return ids


def test_every_rule_has_a_variant() -> None:
    rules = _design_rules()
    assert rules, "docs/design/ defines no rules"
    missing = [rule for rule in rules if rule not in {v.rule for v in VARIANTS}]
    assert not missing, f"rules of docs/design/ without a rule-breaking variant: {missing}"
    unknown = sorted({v.rule for v in VARIANTS} - set(rules))
    assert not unknown, f"variants for rules docs/design/ does not define: {unknown}"
    names = [v.name for v in VARIANTS]
    assert len(names) == len(set(names)), "two variants share a name"


#: How many subprocesses share the variants (the CI machine has 2 cores).
WORKERS = max(1, min(2, os.cpu_count() or 1))


@pytest.mark.slow
def test_every_variant_fails_the_scenarios_of_its_rule(tmp_path: Path) -> None:
    pytest.importorskip("pytest_bdd")
    names = [v.name for v in VARIANTS]
    shares = [names[i::WORKERS] for i in range(WORKERS)]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "ORION_", "WRITE_SESSION_"))}
    started = time.perf_counter()
    processes = []
    for i, share in enumerate(shares):
        out = tmp_path / f"share{i}.json"
        processes.append((out, subprocess.Popen(
            [sys.executable, str(Path(__file__)), "--json", str(out), *share],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    results: list[dict[str, Any]] = []
    for out, process in processes:
        output, _ = process.communicate(timeout=TIMEOUT_S)
        assert process.returncode == 0 and out.exists(), output[-4000:]
        results += json.loads(out.read_text(encoding="utf-8"))
    elapsed = time.perf_counter() - started
    problems = []
    uncheckable = []
    for result in results:
        where = f"{result['name']} ({result['rule']}, breaks {result['breaks']})"
        if result.get("error"):
            problems.append(f"{where}: {result['error']}")
        elif result.get("harness"):
            problems.append(f"{where}: the variant itself failed: {result['harness']}")
        elif not result["failed"] and result.get("skipped"):
            # The scenario that would catch it needs what this machine lacks (root for a
            # tmpfs, a kernel file that refuses root with EACCES): reported, not failed.
            uncheckable.append(f"{where}: its scenarios cannot run here ({result['skipped']})")
        elif not result["ran"]:
            problems.append(f"{where}: no scenario is tagged @{result['rule']}")
        elif result["code"] != 1 or not result["failed"]:
            problems.append(f"{where}: every scenario passed ({len(result['ran'])} run): the "
                            "features do not catch this break of the rule")
    assert not problems, "\n".join(problems)
    print(f"\n{len(results) - len(uncheckable)} variants, every one caught, in {elapsed:.1f} s "
          f"({WORKERS} processes)" + "".join(f"\n  not checked: {u}" for u in uncheckable))


if __name__ == "__main__":
    args = sys.argv[1:]
    if args == ["--list"]:
        for v in VARIANTS:
            print(f"{v.rule:6} {v.name:34} {v.breaks}: {v.does}")
        sys.exit(0)
    out_path = None
    if args[:1] == ["--json"]:
        out_path, args = Path(args[1]), args[2:]
    results = main(args)
    if out_path is not None:
        out_path.write_text(json.dumps(results, indent=1), encoding="utf-8")
    else:
        for r in results:
            status = "CAUGHT" if r.get("failed") and r.get("code") == 1 else "ESCAPED"
            print(f"{status:8} {r['rule']:6} {r['name']:40} {r.get('seconds', 0):6}s "
                  f"ran {len(r.get('ran', []))} {r.get('error', '')}")
            for nodeid, why in list(r.get("failed", {}).items())[:1]:
                print(f"         {nodeid.split('::')[-1][:90]}: {why[:200]}")
