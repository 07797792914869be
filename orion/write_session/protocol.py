"""The DONE protocol: find the end of streamed content, chunk by chunk, as it arrives.

The model streams the content of a write as plain assistant text and ends it with a line
``DONE`` (``DONE <short session id>`` in strict mode). :class:`EndMarker` sits on the hot path:
every streamed chunk goes through :meth:`EndMarker.feed`, which returns at once the part of the
chunk that is certainly content. Only a trailing partial line that could still turn out to be
the terminator line is held back (``"  DO"`` is held, ``"Hello"`` is not).

Rules (see the tests in ``tests/test_end_marker.py``):

- **Terminator line.** A line that starts with the terminator at its first character and
  has only spaces and tabs (and a trailing ``"\\r"``) after it. An indented ``"    DONE"`` is
  content: the last member of an enum, a line of an indented code block or a docstring are
  real (the seeds' terminator is ``DONE`` alone on its line from its first character).
  Whitespace *inside* a strict terminator must match exactly (``"DONE  1a2b"`` is not
  ``"DONE 1a2b"``).
- **Fenced code blocks** (CommonMark, top level only): an opening fence is up to 3 spaces of
  indentation, then at least 3 backticks or at least 3 tildes; a backtick fence's info string
  may not contain a backtick (such a line is not a fence at all). The closing fence uses the
  same character, at least as many of it, up to 3 spaces of indentation and only whitespace
  after. A tab before the fence characters is 4 columns of indentation, so it is not a fence.
  A terminator line inside a fenced block is content: documents about this very protocol are
  real. An unclosed fence lasts until the end of the content. Fences inside block quotes or
  list items indented by 4 or more spaces are not recognized.
- **Markdown blocks nest.** Models wrap a Markdown file in ```` ```markdown ```` and keep its
  code blocks inside with fences of the same length, which CommonMark would read as closing
  the outer block early. In a top-level block whose info string starts with ``markdown``,
  ``md`` or ``mdx`` (any case), fences nest as ``unwrap_fence`` reads them: a fence line with
  an info string, or with the other fence character, opens an inner block, which only a bare
  fence of its own character, at least as long, closes; a bare fence of the outer block's
  character, at least as long as the outer fence, closes the outer block; a shorter one is
  content.
- **What is content.** The terminator line and its newline are not content; the newline before
  it is (``"a\\nb\\nDONE\\n"`` gives ``"a\\nb\\n"``). Everything after the terminator line is
  :attr:`EndMarker.commentary`, never content (the write session sets it aside).
- **Message boundaries are line boundaries.** :meth:`EndMarker.end_message` resolves the held
  partial line: a message that ends with ``DONE`` and no newline is done; any other partial
  line is content, and the next message starts a new line for detection. This is what lets a
  bare ``DONE`` reply after the idle prompt end a session whose content did not end with a
  newline. The fence state carries over: a continuation continues the same content.

For any split of one message into chunks, the concatenated content, :attr:`done` and
:attr:`commentary` are exactly those of feeding the message whole (a property test checks it).

Streams that arrive as bytes go through :class:`Utf8StreamDecoder` first, which never splits
a multi-byte character.
"""

from __future__ import annotations

import codecs
import re

__all__ = ["EndMarker", "Utf8StreamDecoder", "MARKDOWN_INFO"]

#: Info strings (their first word, any case) of a fenced block that holds a Markdown document,
#: in which fenced blocks nest.
MARKDOWN_INFO = frozenset({"markdown", "md", "mdx"})
#: How much of a fence line's info string is kept to read its first word.
_INFO_KEPT = 64

# Phases of the terminator matcher for the current line: ``_FAIL``, ``_LEAD`` (nothing of the
# line so far) or ``k >= 0``: the first k characters of the terminator matched from the line's
# first character (``k == len(terminator)``: matched in full, only trailing whitespace since).
_FAIL = -2
_LEAD = -1

# Phases of the fence matcher for the current line.
_F_NO = 0      # not a fence (or not a fence that matters here)
_F_INDENT = 1  # only spaces so far (at most 3)
_F_RUN = 2     # inside the run of fence characters
_F_AFTER = 3   # after a run long enough; still a fence so far

_TRAILING_WS = " \t\r"


class EndMarker:
    """Incremental detection of the terminator line in streamed content.

    ``feed`` returns content as early as possible; ``end_message`` resolves what is held at
    the end of each model message. ``done``, ``in_fence`` and ``commentary`` report the state.
    """

    __slots__ = ("_t", "_tlen", "_t0", "_done", "_commentary", "_fence_char", "_fence_len",
                 "_nest", "_plain", "_tphase", "_fphase", "_findent", "_fchar", "_frun",
                 "_finfo", "_ffilled", "_held", "_special")

    def __init__(self, terminator: str = "DONE"):
        term = terminator.strip(" \t")
        if not term or "\n" in term or "\r" in term:
            raise ValueError(f"the terminator must be one non-empty line, not {terminator!r}")
        self._t = term
        self._tlen = len(term)
        self._t0 = term[0]
        # A line that starts (after blanks) with a fence character, the terminator, or a start
        # of it that the chunk cuts off: the only lines the scanner must look at. Any other
        # line is content ("Data" cannot become "DONE"; "DO" at the end of a chunk can).
        cut = "|".join(re.escape(term[:k]) + r"\Z" for k in range(1, len(term)))
        self._special = re.compile("\n[ \t]*(?:[`~]|" + re.escape(term)
                                   + ("|" + cut if cut else "") + ")")
        self._done = False
        self._commentary: list[str] = []
        self._fence_char = ""  # "" when not inside a fenced block, else "`" or "~"
        self._fence_len = 0
        # Inside a Markdown block: the inner blocks open in it, innermost last; else None.
        self._nest: list[tuple[str, int]] | None = None
        self._finfo = ""  # the current fence line's info string (its start)
        self._ffilled = False  # whether that info string is more than whitespace
        self._held: list[str] = []
        self._start_line()

    # -- state -------------------------------------------------------------------------------

    @property
    def terminator(self) -> str:
        return self._t

    @property
    def done(self) -> bool:
        """True once the terminator line was seen (outside any fenced block)."""
        return self._done

    @done.setter
    def done(self, value: bool) -> None:
        """A controller that recognised the end itself (e.g. a reply that is only ``DONE``,
        which it never fed) may set ``done = True``; call :meth:`end_message` first, since a
        held partial line is dropped. A finished marker cannot be reopened."""
        if not value:
            if self._done:
                raise ValueError("a finished EndMarker cannot be reopened")
            return
        self._done = True
        self._plain = False
        self._held = []

    @property
    def in_fence(self) -> bool:
        """True while the content is inside a fenced code block."""
        return bool(self._fence_char)

    @property
    def pending(self) -> str:
        """The partial line held back (it may still become the terminator line): not returned
        as content yet."""
        return "".join(self._held)

    @property
    def commentary(self) -> str:
        """Text after the terminator line, in this message (and any fed after it)."""
        return "".join(self._commentary)

    # -- streaming ---------------------------------------------------------------------------

    def feed(self, text: str) -> str:
        """Take the next chunk of a model message; return the part that is certainly content."""
        if not self._plain:
            if self._done or not text or self._fphase != _F_INDENT or self._findent:
                return self._feed_slowly(text)
            first = text[0]
            if first in " \t`~" or first == self._t0:
                return self._feed_slowly(text)
            # Nothing of the current line yet, and its first character rules it out: a chunk
            # that starts a line (the previous one ended with its line break) stays on the
            # hot path.
            self._plain = True
        # Hot path: the current line is already known to be ordinary content. When no line
        # starts in the chunk, or none that starts in it starts with a fence character, the
        # terminator or a start of it, none can be a fence or the terminator; only a
        # whitespace-only tail could still become the terminator line.
        nl = text.rfind("\n")
        if nl < 0:
            return text
        if self._special.search(text) is not None:
            return self._feed_slowly(text)
        if nl == len(text) - 1:
            self._start_line()
            return text
        if text[-1] not in " \t":  # the tail has a character that rules it out
            return text
        tail = text[nl + 1:]
        if tail.strip(" \t"):
            return text
        self._start_line()
        return text[:nl + 1] + self._partial(tail)

    def _feed_slowly(self, text: str) -> str:
        if self._done:
            if text:
                self._commentary.append(text)
            return ""
        return self._feed_lines(text)

    def end_message(self, *, cut: bool = False) -> str:
        """The model message ended: resolve the held partial line and return what is content.

        A partial line that is the terminator (``"DONE"`` without a newline) ends the content:
        ``done`` becomes True and ``""`` is returned, unless the message was ``cut`` off: then
        the line is unfinished (``DONE not alone`` may follow) and is content like any other
        held text. The next message starts a new line for detection; the fence state carries
        over.
        """
        if self._done:
            return ""
        if self._tphase == self._tlen and not cut:
            self._done = True
            self._plain = False
            self._held = []
            return ""
        held = "".join(self._held) if self._held else ""
        self._held = []
        self._close_fence_line()
        self._start_line()
        return held

    def new_message(self) -> None:
        """A new model message starts: clear the commentary of the previous one."""
        self._commentary = []

    def save(self) -> tuple:
        """The scanner's whole state, to :meth:`restore` it: a message that turns out not to be
        content (text beside a tool call, a reply that is not content) is taken back."""
        return tuple(list(v) if isinstance(v, list) else v
                     for v in (getattr(self, name) for name in self.__slots__))

    def restore(self, saved: tuple) -> None:
        for name, value in zip(self.__slots__, saved):
            setattr(self, name, list(value) if isinstance(value, list) else value)

    def reopen(self, saved: tuple) -> None:
        """Go on with the line an earlier message stopped in the middle of, from ``saved``
        (:meth:`save` just before that message's :meth:`end_message`): the next message sent
        the line again, and only what follows the part already content is fed. What the line
        held back went out as content at that end, so nothing is held now."""
        self.restore(saved)
        self._held = []
        self._commentary = []

    # -- line handling -----------------------------------------------------------------------

    def _start_line(self) -> None:
        self._tphase = _FAIL if self._fence_char else _LEAD
        self._fphase = _F_INDENT
        self._findent = 0
        self._fchar = ""
        self._frun = 0
        self._plain = False

    def _feed_lines(self, text: str) -> str:
        out: list[str] = []
        start = 0
        special = self._special.search
        while True:
            nl = text.find("\n", start)
            if nl < 0:
                if start < len(text):
                    out.append(self._partial(text[start:] if start else text))
                return "".join(out)
            if self._plain:
                out.append(text[start:nl + 1])
            else:
                line = self._complete(text[start:nl])
                if line is None:  # the terminator line
                    rest = text[nl + 1:]
                    if rest:
                        self._commentary.append(rest)
                    return "".join(out)
                out.append(line)
            self._start_line()
            start = nl + 1
            # The whole lines up to the next one that can matter are content as they are: one
            # search instead of a pass through the matchers for each of them.
            found = special(text, nl)
            end = text.rfind("\n", start, found.start() + 1 if found else len(text))
            if end >= start:
                out.append(text[start:end + 1])
                start = end + 1

    def _fresh_plain(self, seg: str) -> bool:
        """At the start of a line, does its first character rule out fence and terminator?"""
        c = seg[0]
        return c not in " \t`~" and c != self._t0

    def _partial(self, seg: str) -> str:
        """Advance the current line by ``seg`` (no newline); return what is content."""
        if self._plain:
            return seg
        if self._fphase == _F_INDENT and self._findent == 0 and self._fresh_plain(seg):
            # Nothing of this line yet (any character moves one of the matchers on).
            self._plain = True
            return seg
        out = seg
        if self._tphase != _FAIL:
            if self._advance_terminator(seg):
                self._held.append(seg)
                out = ""
            elif self._held:
                out = "".join(self._held) + seg
                self._held = []
        if self._fphase != _F_NO:
            self._advance_fence(seg)
        if self._tphase == _FAIL and self._fphase == _F_NO:
            self._plain = True
        return out

    def _complete(self, seg: str) -> str | None:
        """The current line ends with ``seg`` and a newline: its content, or None if it is the
        terminator line."""
        if seg:
            if self._fphase == _F_INDENT and self._findent == 0 and self._fresh_plain(seg):
                return seg + "\n"
            if self._tphase != _FAIL:
                self._advance_terminator(seg)
            if self._fphase != _F_NO:
                self._advance_fence(seg)
        if self._tphase == self._tlen:
            self._done = True
            self._plain = False
            self._held = []
            return None
        if self._held:
            line = "".join(self._held) + seg + "\n"
            self._held = []
        else:
            line = seg + "\n"
        self._close_fence_line()
        return line

    def _advance_terminator(self, seg: str) -> bool:
        """Advance the terminator matcher by ``seg``; return whether the line can still be it."""
        k = self._tphase
        s = seg
        if k == _LEAD:
            # The terminator starts at the line's first character: an indented DONE is content.
            k = 0
        t = self._t
        if k < self._tlen:
            if len(s) <= self._tlen - k:
                if t.startswith(s, k):
                    self._tphase = k + len(s)
                    return True
                self._tphase = _FAIL
                return False
            if not s.startswith(t[k:]):
                self._tphase = _FAIL
                return False
            s = s[self._tlen - k:]
        if s.strip(_TRAILING_WS):
            self._tphase = _FAIL
            return False
        self._tphase = self._tlen
        return True

    def _fence_rule(self) -> tuple[str, int, bool]:
        """What a fence line must be where the content is: its character (``""``: either),
        its shortest run, and whether it may have an info string (that is, open a block)."""
        nest = self._nest
        if nest:
            char, run = nest[-1]
            return char, run, False
        if not self._fence_char or nest is not None:
            return "", 3, True
        return self._fence_char, self._fence_len, False

    # A scanner that reads one character at a time: one branch per case reads better than a
    # table (as the other scanners exempt in pyproject.toml).
    def _advance_fence(self, seg: str) -> None:  # noqa: C901
        """Advance the fence matcher by ``seg`` (the current line's next characters)."""
        phase = self._fphase
        s = seg
        if phase == _F_INDENT:
            r = s.lstrip(" ")
            self._findent += len(s) - len(r)
            if self._findent > 3:
                self._fphase = _F_NO
                return
            if not r:
                return
            c = r[0]
            char = self._fence_rule()[0]
            if c != "`" and c != "~" or (char and c != char):
                self._fphase = _F_NO
                return
            self._fchar = c
            self._finfo = ""
            self._ffilled = False
            phase = _F_RUN
            s = r
        if phase == _F_RUN:
            r = s.lstrip(self._fchar)
            self._frun += len(s) - len(r)
            if not r:
                self._fphase = _F_RUN
                return
            if self._frun < self._fence_rule()[1]:
                self._fphase = _F_NO
                return
            s = r
        # After the run: an info string (opening) or only whitespace (closing).
        if s.strip(_TRAILING_WS):
            if not self._fence_rule()[2] or (self._fchar == "`" and "`" in s):
                self._fphase = _F_NO
                return
            self._ffilled = True
        if len(self._finfo) < _INFO_KEPT:
            self._finfo += s
        self._fphase = _F_AFTER

    def _close_fence_line(self) -> None:
        """The current line is complete: open or close a fenced block if it is a fence."""
        phase = self._fphase
        if phase == _F_RUN:
            if self._frun < self._fence_rule()[1]:
                return
        elif phase != _F_AFTER:
            return
        # A fence line the rule here allows.
        nest = self._nest
        if nest:
            nest.pop()  # the inner block's closing fence
            return
        if not self._fence_char:
            self._fence_char = self._fchar
            self._fence_len = self._frun
            word = self._finfo[:_INFO_KEPT].split(maxsplit=1)
            self._nest = [] if word and word[0].lower() in MARKDOWN_INFO else None
            return
        if nest is not None:  # directly inside a Markdown block
            if self._ffilled or self._fchar != self._fence_char:
                nest.append((self._fchar, self._frun))
                return
            if self._frun < self._fence_len:
                return  # a shorter bare fence of the block's character is content
        self._fence_char = ""
        self._fence_len = 0
        self._nest = None


class Utf8StreamDecoder:
    """Decode a byte stream chunk by chunk without ever splitting a multi-byte character.

    Invalid bytes are decoded with ``errors="surrogateescape"`` (each one becomes a lone
    surrogate U+DC80..U+DCFF) rather than U+FFFD: the journal encodes them back to the very
    same bytes, so the validator sees and reports exactly what the model sent. A multi-byte
    character cut at the end of a chunk is held until the next chunk completes it; an
    incomplete sequence at the very end comes out of :meth:`final` as escaped bytes.
    """

    __slots__ = ("_decode",)

    def __init__(self) -> None:
        self._decode = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape").decode

    def feed(self, data: bytes) -> str:
        return self._decode(data, False)

    def final(self) -> str:
        return self._decode(b"", True)
