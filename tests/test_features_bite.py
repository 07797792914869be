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
        self._set_everywhere(target, original, new)

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

    def mutate(self, target: str, *edits: tuple[str, str]) -> None:
        """Replace ``target`` by a copy of its own source with each ``(old, new)`` edit made:
        one line dropped, a ``<`` for a ``<=``, two statements swapped, an exception narrowed.
        Each ``old`` must occur exactly once in the source (else :class:`LookupError`, naming
        the edit: the code changed and the variant must follow it). The copy is compiled in
        the function's own module, so it sees the same names."""
        import __future__
        import inspect
        import textwrap

        owner, name, original = self._resolve(target)
        function = original.fget if isinstance(original, property) else original
        if isinstance(function, (staticmethod, classmethod)):
            function = function.__func__
        function = inspect.unwrap(function)
        free = function.__code__.co_freevars
        if free not in ((), ("__class__",)):
            raise LookupError(f"cannot mutate {target}: it is a closure (uses {', '.join(free)})")
        lines, first = inspect.getsourcelines(function)
        source = textwrap.dedent("".join(lines))
        for old, new in edits:
            found = source.count(old)
            if found != 1:
                raise LookupError(f"cannot mutate {target}: {old!r} occurs {found} times in its "
                                  "source, not once; update the variant to the code")
            source = source.replace(old, new)
        if free:  # zero-argument super(): compiled in a class, its __class__ set to the owner
            source = "class _Holder:\n" + textwrap.indent(source, "    ")
            first -= 1
        code = compile("\n" * (first - 1) + source, inspect.getsourcefile(function) or target,
                       "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)
        namespace: dict[str, Any] = {}
        exec(code, function.__globals__, namespace)
        mutant = namespace["_Holder"].__dict__[function.__name__] if free \
            else namespace[function.__name__]
        if free:
            raw = mutant.fget if isinstance(mutant, property) else \
                getattr(mutant, "__func__", mutant)
            raw.__closure__[raw.__code__.co_freevars.index("__class__")].cell_contents = owner
        if isinstance(original, (property, staticmethod, classmethod)) and \
                not isinstance(mutant, type(original)):
            mutant = type(original)(mutant)
        self._set_everywhere(target, original, mutant)

    def _set_everywhere(self, target: str, original: Any, new: Any) -> None:
        """Set ``target`` to ``new``; a module function in every module that imported it too
        (``from x import f`` copies)."""
        owner, name, _ = self._resolve(target)
        self._set(owner, name, new)
        if not isinstance(owner, type):
            for module in list(sys.modules.values()):
                namespace = getattr(module, "__dict__", None)
                if module is owner or not isinstance(namespace, dict):
                    continue
                for key, value in list(namespace.items()):
                    if value is original:
                        self._set(module, key, new)

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
    #: The scenarios run: those that carry this tag (default: the rule id).
    select: str = ""
    #: Text their test names hold (default: any).
    keyword: str = ""
    #: Whether it breaks the rule partly, as a plausible bug would (one case, one branch, an
    #: order, a bound), rather than replacing what keeps the rule as a whole.
    partial: bool = False


VARIANTS: list[Variant] = []


def variant(rule: str, breaks: str, does: str, *, select: str = "", keyword: str = "",
            partial: bool = False) -> \
        Callable[[Callable[[Patcher], None]], Callable[[Patcher], None]]:
    def register(apply: Callable[[Patcher], None]) -> Callable[[Patcher], None]:
        VARIANTS.append(Variant(apply.__name__, rule, breaks, does, apply, select or rule,
                                keyword, partial))
        return apply
    return register


def mutant(name: str, rule: str, target: str, does: str, *edits: tuple[str, str],
           select: str = "", keyword: str = "") -> None:
    """A partial variant: ``target`` with the source ``edits`` made (:meth:`Patcher.mutate`)."""
    VARIANTS.append(Variant(name, rule, target, does, lambda p: p.mutate(target, *edits),
                            select or rule, keyword, partial=True))


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


@variant("WP-12", "orion.workspace.confined:Parent.replace",
         "the target is written in place (truncated, then written), not atomically")
def write_in_place(p: Patcher) -> None:
    def replace(self, data, *, mode=None):
        fd = os.open(self.name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=self.fd)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        return []  # nothing it could not keep, it says
    p.replace("orion.workspace.confined:Parent.replace", replace)


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
        target = Path(context.host.workspace) / args.target_file
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(target, args.content.encode())
        return f"wrote {args.target_file}"
    p.replace("orion_plugins.write_sessions:execute_small", execute_small)


# Partial breaks of the write plan's rules, the way a plausible bug would break them.

mutant("markers_checked_only_at_the_write", "WP-1", "orion.write_session.plan:_check_edit",
       "the markers of a plan are not checked at begin, only when the file is written",
       ("    if OPERATION_FIELDS[plan.operation]:\n"
        "        match_plan(plan, split_bom(data)[1], relative)\n",
        ""),
       keyword="more_than_once")

mutant("create_makes_one_missing_directory", "WP-2", "orion.write_session.plan:_check_create",
       "create accepts one missing parent directory, not several ('if' for 'while')",
       ("    while not parent.exists():\n", "    if not parent.exists():\n"))

mutant("one_line_file_appended_on_its_line", "WP-3", APPLY,
       "append adds the missing line break only to a file of several lines",
       ('gap = eol if body and not body.endswith(b"\\n") else b""',
        'gap = eol if b"\\n" in body and not body.endswith(b"\\n") else b""'))

mutant("overwrite_keeps_the_old_tail", "WP-4", APPLY,
       "overwrite writes over the old content without truncating it: a shorter content "
       "leaves the old file's tail behind",
       ("        return bom + content\n",
        "        return bom + content + body[len(content):]\n"))

mutant("insert_before_splices_mid_line", "WP-5", APPLY,
       "insert before puts the content where the marker starts, not at the start of its line",
       ("            start = _line_start(body, at)\n", "            start = at\n"))

mutant("block_starts_after_the_marker_text", "WP-6", APPLY,
       "replace_block starts the block right after the start marker's text, not after its line",
       ("first = _line_end(body, opening.positions[0] + len(opening.needle) - 1)",
        "first = opening.positions[0] + len(opening.needle)"))

mutant("markers_on_one_line_accepted", "WP-6", "orion.write_session.plan:match_plan",
       "an end marker on the start marker's own line is accepted (< for <=)",
       ("if end_line <= start_line:", "if end_line < start_line:"),
       keyword="on_one_line")

mutant("missing_search_text_accepted", "WP-7", "orion.write_session.plan:match_plan",
       "a search text that does not occur is accepted (only markers are counted)",
       ("if (marker and count != 1) or count == 0:", "if marker and count != 1:"))

mutant("overwrite_of_a_missing_file_passes", "WP-8", CHECK_PLAN,
       "overwrite of a missing file is not refused as missing at begin",
       ("    if info is None:\n        raise PlanRejected(f\"{shown} does not exist;",
        "    if info is None and plan.operation is not Operation.OVERWRITE:\n"
        "        raise PlanRejected(f\"{shown} does not exist;"))


@variant("WP-9", "orion.write_session.plan:FIELD_OPERATION",
         "an optional field (marker_regex) is left out of the table of which operation a field "
         "belongs to, so another operation's plan takes it silently", keyword="marker_regex",
         partial=True)
def optional_fields_belong_nowhere(p: Patcher) -> None:
    from orion.write_session.plan import OPERATION_FIELDS

    p.replace_in(("orion.write_session.plan",), "FIELD_OPERATION", {
        name: op for op, names in OPERATION_FIELDS.items() for name in names})


mutant("nested_git_directory_writable", "WP-10", "orion.write_session.plan:_target_of",
       "only the workspace's top .git directory is refused, not a nested one",
       ('if ".git" in target.relative_to(root).parts:',
        'if target.relative_to(root).parts[:1] == (".git",):'),
       keyword="vendor")

mutant("plan_not_checked_again", "WP-11", "orion.write_session.operations:execute",
       "the plan is not checked again at the write (only the file's bytes are compared)",
       ("    checked = recheck(checked)\n", ""))

mutant("temp_file_kept_after_a_full_disk", "WP-12", "orion.workspace.confined:Parent.replace",
       "the temp file is removed only when the write was refused, not on a full disk",
       ("    except BaseException:\n        try:\n            os.unlink(temp",
        "    except PermissionError:\n        try:\n            os.unlink(temp"))

mutant("append_report_counts_the_file", "WP-13", "orion.write_session.operations:describe",
       "the report of an append counts the lines of the whole file, not those appended",
       ('text = f"Appended {_lines(count_lines(content))} to {relative}"',
        'text = f"Appended {_lines(count_lines(after))} to {relative}"'))


@variant("WP-14", "orion.trace.content:SUFFIXES",
         "an intent is taken for a short label and traced as it is, not by length and sha256",
         partial=True)
def intent_traced_as_a_label(p: Patcher) -> None:
    from orion.trace.content import LABEL, shape_of

    p.set_item("orion.trace.content:SUFFIXES", "intent", LABEL)
    shape_of.cache_clear()
    p._undo.append(shape_of.cache_clear)  # runs after the table is put back


mutant("small_edit_not_validated", "WP-15", "orion_plugins.write_sessions:execute_small",
       "a small edit is written without the validators (it is small)",
       ("    issues = validate_write(runtime.plugins, checked, content)\n",
        "    issues = []\n"),
       keyword="same_validation")


mutant("small_edit_limit_in_characters", "WP-15", "orion_plugins.write_sessions:execute_small",
       "the limit of a small edit is counted in characters, not bytes",
       ("    if len(content) > EXECUTE_MAX_CONTENT:\n",
        "    if len(args.content) > EXECUTE_MAX_CONTENT:\n"),
       keyword="in_bytes")


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


@variant("WS-7", "orion.statechart.interpreter.settings:resolve",
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
    p.wrap("orion.statechart.interpreter.settings:resolve", make)


@variant("WS-8", "orion.statechart.interpreter.settings:env_names",
         "WRITE_SESSION_IDLE_MS is not read")
def idle_env_ignored(p: Patcher) -> None:
    def make(original):
        def env_names(spec, name):
            return [n for n in original(spec, name) if n != "WRITE_SESSION_IDLE_MS"]
        return env_names
    p.wrap("orion.statechart.interpreter.settings:env_names", make)


@variant("WS-9", "orion.write_session.session:WriteSession._trigger",
         "the end of a message without DONE is not sent to the statechart")
def message_end_lost(p: Patcher) -> None:
    def make(original):
        def _trigger(self, trigger, **payload):
            if trigger != "message_end":
                original(self, trigger, **payload)
        return _trigger
    p.wrap("orion.write_session.session:WriteSession._trigger", make)


@variant("WS-10", "orion.write_session.finalize:validate_write",
         "the content is written without validation")
def no_validation(p: Patcher) -> None:
    p.replace("orion.write_session.finalize:validate_write", lambda *args, **kw: [])


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


# Partial breaks of the write session controller's rules.

mutant("begin_takes_the_small_edit_arguments", "WS-1", REGISTER_TOOLS,
       "WritePlanTool_begin is registered with the arguments of WritePlanTool_execute "
       "(content included)",
       ('ToolSpec("WritePlanTool_begin", BEGIN_DESCRIPTION, BeginArgs, begin,',
        'ToolSpec("WritePlanTool_begin", BEGIN_DESCRIPTION, ExecuteArgs, begin,'))

mutant("empty_arguments_read_as_none", "WS-2", "orion.tools.arguments:parse_arguments",
       "an empty arguments string is read as {} (as for a tool without arguments)",
       ("        if not _required(spec.args_model):\n",
        '        if raw == "" or not _required(spec.args_model):\n'),
       keyword="empty_toolcall")

mutant("instruction_names_a_bare_done", "WS-3", "orion.write_session.manager:instruction",
       "begin tells the model to end with DONE even when strict mode asks for DONE <id>",
       ('f"{terminator}. Everything you write', '"DONE. Everything you write'),
       keyword="strict_mode")

mutant("tool_calls_counted_only_beside_text", "WS-4",
       "orion_plugins.write_sessions:WriteSessionSystem.run",
       "a message with only tool calls is taken for an empty message (a pause of the session): "
       "its tool calls count only when it has text too",
       ("tool_calls=bool(turn.tool_calls),",
        "tool_calls=bool(turn.tool_calls and message is not None and message.content),"),
       keyword="only_tool_calls")

mutant("three_backticks_not_a_fence", "WS-6",
       "orion.write_session.protocol:EndMarker._advance_fence",
       "a fence needs more than three backticks (off by one): DONE in a ``` block ends it",
       ("        if self._frun < self._fence_rule()[1]:\n",
        "        if self._frun <= self._fence_rule()[1]:\n"))

mutant("tilde_fences_ignored", "WS-6",
       "orion.write_session.protocol:EndMarker._advance_fence",
       "only backtick fences are tracked: a DONE line in a ~~~ block ends the content",
       ('if c != "`" and c != "~" or (char and c != char):',
        'if c != "`" or (char and c != char):'),
       keyword="tildes")

mutant("asked_flag_kept_after_the_reply", "WS-7",
       "orion.write_session.session:WriteSession._end_message",
       "the end of a message does not clear 'asked' (set by a prompt): a later pause gets no "
       "idle prompt",
       ('    self.context.asked = False  # the reply to a prompt (if any) has ended\n', ""),
       keyword="every_pause")

mutant("yaml_hides_the_environment", "WS-8", "orion.statechart.interpreter.settings:resolve",
       "a value in orion.yaml hides WRITE_SESSION_IDLE_MS (the environment is read only "
       "when orion.yaml says nothing)",
       ("            if env is not None and var in env:\n",
        "            if env is not None and var in env and name not in overrides:\n"),
       keyword="wins_over")

mutant("finalized_before_done_is_sent", "WS-9",
       "orion.write_session.session:WriteSession._next_step",
       "DONE finalizes the content before the statechart is told (wrong order)",
       ('        self._trigger("done")\n        self.finalize()\n',
        '        self.finalize()\n        self._trigger("done")\n'))

mutant("edits_not_validated", "WS-10", "orion.write_session.edit_validation:validate_write",
       "an edit (append, insert, ...) is written without validation; only create and "
       "overwrite are checked",
       ("    target = checked.target\n", "    return []\n"),
       keyword="an_edit_is_checked")

mutant("one_correction_round_too_many", "WS-11",
       "orion_plugins.write_session_protocol:corrections_left",
       "a fourth correction round is asked for (<= for <)",
       ('< lifecycle.settings["max_corrections"]', '<= lifecycle.settings["max_corrections"]'),
       keyword="after_3_correction_rounds")

mutant("blocking_issues_read_after_the_replacement", "WS-11",
       "orion.write_session.finalize:Finalizer.decide",
       "after the last round the blocking issues are looked for among those the safe "
       "replacement left (none yet), so a broken rule is written anyway",
       ("blocking = [issue for issue in self.issues if issue.blocking]",
        "blocking = [issue for issue in self.remaining if issue.blocking]"),
       keyword="blocks_the_write_and_is_still_broken")

mutant("infinity_stored_raw", "WS-12", "orion.trace.encoding:_float",
       "the float check catches NaN only: infinities are stored raw",
       ("    if v - v == 0.0:\n", "    if v == v:\n"),
       keyword="values_json_cannot_hold")

mutant("continuing_notice_quotes_the_last_line", "WS-13",
       "orion.write_session.session:WriteSession.continue_after_cut",
       "the notice of a continuation quotes the last line received",
       ('({lines} lines), "', '({lines} lines, the last: {said.quote(self.journal).lines[-1:]}), "'))

mutant("strict_marker_built_for_a_bare_done", "WS-14",
       "orion.write_session.intake:Intake.__init__",
       "the end marker is built for a bare DONE, whatever strict mode says",
       ("    self.marker = EndMarker(terminator)\n",
        '    self.marker = EndMarker("DONE")\n'))

mutant("strict_idle_prompt_asks_for_a_bare_done", "WS-14",
       "orion_plugins.write_session_protocol:prompt_for_done",
       "in strict mode the idle prompt still asks for a bare DONE, which is content there",
       ('    if lifecycle.settings.get("strict_done"):\n'
        '        text = text.replace("with DONE", f"with {line}")\n', ""))


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


@variant("SR-6", "orion.write_session.orphans:resolve_id",
         "an unknown session id is answered with a generic error")
def unknown_session_vague(p: Patcher) -> None:
    from orion.write_session.orphans import RecoveryError

    def make(original):
        def resolve_id(state_dir, session_id, **kw):
            try:
                return original(state_dir, session_id, **kw)
            except RecoveryError:
                raise RecoveryError("recovery failed") from None
        return resolve_id
    p.wrap("orion.write_session.orphans:resolve_id", make)


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

mutant("keep_tool_always_advertised", "SR-1", "orion_plugins.write_sessions:gate_tools",
       "WritePlanTool_keep is advertised with no session open (the gate checks only for a "
       "runtime)",
       ("if runtime is None or manager_for(runtime).active is None:", "if runtime is None:"),
       keyword="only_write_tools")

mutant("begin_names_the_parent_directory", "SR-2",
       "orion.write_session.manager:SessionManager.begin",
       "begin's result names the directory that holds the sessions, not the session's own",
       ('"session_dir": str(journal.directory)', '"session_dir": str(journal.directory.parent)'),
       keyword="valid_begin_returns")

mutant("abandoned_journal_kept", "SR-3", "orion.write_session.session:WriteSession._end",
       "an abandoned session's journal is closed instead of removed",
       ("self.journal.remove()", "self.journal.close()"), keyword="no_content")

mutant("flush_lines_off_by_one", "SR-4", "orion.write_session.journal:Journal.append",
       "the journal reaches the disk after 51 lines, not 50",
       ("self.lines_to_flush <= 0", "self.lines_to_flush < 0"),
       keyword="every_50_lines")

mutant("flush_interval_off_by_one", "SR-4", "orion.write_session.journal:Journal.flush_wait_ms",
       "the journal reaches the disk only after more than 5 seconds (its timer is 1 ms late)",
       ("min(self._last_flush_ms + self._interval - self._now_ms(),",
        "min(self._last_flush_ms + self._interval + 1 - self._now_ms(),"),
       keyword="after_5_seconds")

mutant("flush_writes_content_with_state_only", "SR-5", "orion.write_session.journal:Journal._flush",
       "an automatic save resets its counters but writes the content only when the state is due",
       ("    if self._fd is None:\n        return\n",
        "    if self._fd is None or not (with_state or now - self._last_state_ms >= "
        "self._interval):\n        return\n"),
       keyword="loses_at_most")

mutant("unknown_id_taken_for_ambiguous", "SR-6", "orion.write_session.orphans:pick",
       "an id no session starts with is reported as ambiguous, without saying it is unknown",
       ("if len(matches) > 1:", "if len(matches) != 1:"), keyword="unknown_session")

mutant("orphan_expires_at_the_hour", "SR-8", "orion.write_session.startup:_startup_one",
       "a session saved exactly an hour ago is already taken for expired",
       ("orphan.age_ms > ttl", "orphan.age_ms >= ttl"), keyword="an_hour_ago_or_less")

mutant("finished_recovery_called_unfinished", "SR-9",
       "orion.write_session.recover:recover_finalize",
       "recover --finalize warns of an unfinished content only when the model had finished",
       ("if not orphan.complete:", "if orphan.complete:"), keyword="writes_what_was_saved")

mutant("discard_of_a_live_session", "SR-10", "orion.write_session.orphan_commands:discard",
       "orion sessions discard does not check whether the session's process is running",
       ("if orphan.live:", "if False:"), keyword="never_touched")

mutant("empty_session_replaced", "SR-11", "orion.write_session.manager:SessionManager.begin",
       "a second begin is refused only once the open session has content",
       ("if active is not None:", "if active is not None and active.journal.lines:"))

# Partial breaks of the session protocol's and recovery's rules.

mutant("keep_offered_without_a_session", "SR-1", "orion_plugins.write_sessions:gate_tools",
       "WritePlanTool_keep is advertised whether or not a session is open",
       ("    if runtime is None or manager_for(runtime).active is None:\n",
        "    if runtime is None:\n"),
       keyword="only_write_tools")

mutant("session_dir_names_the_content_file", "SR-2",
       "orion.write_session.manager:SessionManager.begin",
       "begin's result names the content file as the session's directory",
       ('"session_dir": str(journal.directory)', '"session_dir": str(journal.content_path)'),
       keyword="valid_begin_returns")

mutant("abandoned_directory_left_behind", "SR-3", "orion.write_session.session:WriteSession._end",
       "an abandoned session's directory is left behind (only a written one is removed)",
       ("        self.journal.remove()\n", "        pass\n"), keyword="abandoned_sessions_journal")

mutant("flush_one_line_late", "SR-4", "orion.write_session.journal:Journal._flush",
       "after each flush the journal counts one line more before the next (the 100th line "
       "reaches the disk with the 101st)",
       ("self.lines_to_flush = self._flush_lines", "self.lines_to_flush = self._flush_lines + 1"),
       keyword="every_50_lines")

mutant("takeover_saves_the_content_again", "SR-5", "orion.write_session.journal:Journal.open",
       "a session taken over after a crash counts nothing as saved: its next save appends "
       "the whole content again",
       ("journal._size = journal._flushed = len(data)", "journal._size = len(data)"),
       keyword="continued_after_a_crash")

mutant("summary_counts_a_line_too_many", "SR-6", "orion.write_session.operations:count_lines",
       "the report counts a line more when the content ends with a line break",
       ("return breaks + 1 if data and not data.endswith(b\"\\n\") else breaks",
        "return breaks + 1 if data else breaks"),
       keyword="reports_a_summary")

mutant("session_an_hour_old_expired", "SR-8", "orion.write_session.startup:_startup_one",
       "an orphan saved exactly an hour ago is expired, not offered (>= for >)",
       ("orphan.age_ms is not None and orphan.age_ms > ttl:",
        "orphan.age_ms is not None and orphan.age_ms >= ttl:"),
       keyword="an_hour_ago_or_less")

mutant("clean_keeps_the_old_ones", "SR-9", "orion.write_session.orphan_commands:clean",
       "orion sessions clean removes the young sessions and keeps the old (comparison flipped)",
       ("orphan.age_ms <= older_than_ms:", "orphan.age_ms >= older_than_ms:"),
       keyword="saved_more_than_an_hour_ago_and_keeps")

mutant("live_start_time_read_as_reused", "SR-10",
       "orion.write_session.journal:Journal.is_live",
       "the lock's start time is compared the wrong way: a running owner is taken for a pid "
       "reused by another process",
       ("if started is not None and started != parts[1]:",
        "if started is not None and started == parts[1]:"))

mutant("fresh_session_replaced", "SR-11", "orion.write_session.manager:SessionManager.begin",
       "a second begin is refused only once the open session has content: one still "
       "awaiting content is replaced",
       ("    if active is not None:\n",
        '    if active is not None and active.state != "awaiting_content":\n'))


# AC: auto-continue ------------------------------------------------------------------------

@variant("AC-1", "orion.models.events:Finish.truncated",
         "only finish reason length counts as cut off")
def length_only(p: Patcher) -> None:
    p.wrap("orion.models.events:Finish.truncated",
           lambda original: (lambda self: self.reason == "length"))


@variant("AC-2", "orion.write_session.intake:Intake._take_start",
         "the first half of what a reply to Orion's prompt starts with is lost")
def continuation_start_dropped(p: Patcher) -> None:
    def make(original):
        def _take_start(self, start, held):
            rest = held[start.repeat:]
            return original(self, start, held[:start.repeat] + rest[len(rest) // 2:])
        return _take_start
    p.wrap("orion.write_session.intake:Intake._take_start", make)


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


@variant("AC-8", "orion.write_session.session:WriteSession.continue_after_cut",
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
    p.wrap("orion.write_session.session:WriteSession.continue_after_cut", make)


@variant("AC-9", "orion.write_session.session:WriteSession._failed",
         "a failed write removes the journal")
def failure_drops_content(p: Patcher) -> None:
    def make(original):
        def _failed(self, cause):
            original(self, cause)
            self.journal.remove()
        return _failed
    p.wrap("orion.write_session.session:WriteSession._failed", make)

mutant("no_finish_reason_is_a_stop", "AC-1", "orion.models.events:normalize_finish",
       "a stream that ends without a finish reason is taken for a clean stop",
       ("if raw in CLEAN_FINISH:", "if raw in CLEAN_FINISH or raw is None:"),
       keyword="without_a_finish_reason")

mutant("continuation_first_character_lost", "AC-2", "orion.write_session.intake:Intake._take_start",
       "the first character of a continuation is dropped",
       ("rest = held[start.resent + start.repeat:]",
        "rest = held[start.resent + start.repeat + 1:]"),
       keyword="appended_to_the_same_file")

mutant("continuation_names_the_last_line", "AC-3",
       "orion_plugins.write_session_protocol:request_continuation",
       "the request asks to continue with the last saved line instead of the next one",
       ("with line {saved + 1}:", "with line {saved}:"))

mutant("one_continuation_too_many", "AC-4",
       "orion_plugins.write_session_protocol:continuations_left",
       "a fourth continuation is asked for",
       ('< lifecycle.settings["max_continuations"]', '<= lifecycle.settings["max_continuations"]'),
       keyword="fourth")

mutant("white_space_continued", "AC-5", "orion_plugins.write_session_protocol:has_content",
       "a cut-off message of only white space is continued like content",
       ('    if payload.get("blank"):\n        return False\n', ""), keyword="white_space")

mutant("restart_check_flipped", "AC-6", "orion.write_session.decision:read_start",
       "a restart is looked for only after a line that was cut in the middle",
       ("if at_line_start and head_complete", "if not at_line_start and head_complete"))

mutant("continuation_count_lags", "AC-8", "orion.write_session.session:WriteSession.continue_after_cut",
       "each continuation is reported with the count before it",
       ('f"continuing {n}/{limit}"', 'f"continuing {before}/{limit}"'))

mutant("failed_write_removes_journal", "AC-9", "orion.write_session.session:WriteSession._failed",
       "a failed write removes the journal instead of closing it",
       ("    self._end(ending)\n", "    self.journal.remove()\n    self._end(ending)\n"),
       keyword="write_that_fails")

# Partial breaks of auto-continue's rules.

mutant("continuation_loses_its_first_character", "AC-2",
       "orion.write_session.intake:Intake._take_start",
       "the continuation is taken in one character after its start (off by one)",
       ("    rest = held[start.resent + start.repeat:]\n",
        "    rest = held[start.resent + start.repeat + 1:]\n"),
       keyword="appended_to_the_same_file")

mutant("continuation_names_the_last_saved_line", "AC-3",
       "orion_plugins.write_session_protocol:request_continuation",
       "the request asks to go on with the last saved line rather than the next (off by one)",
       ('with line {saved + 1}:', 'with line {saved}:'))

mutant("a_fourth_continuation", "AC-4",
       "orion_plugins.write_session_protocol:continuations_left",
       "a fourth continuation is asked for (<= for <)",
       ('< lifecycle.settings["max_continuations"]', '<= lifecycle.settings["max_continuations"]'),
       keyword="fourth_cutoff")

mutant("white_space_counts_as_content", "AC-5",
       "orion_plugins.write_session_protocol:has_content",
       "a cut-off message of only white space is continued (the blank flag is not read)",
       ('    if payload.get("blank"):\n        return False\n', ""),
       keyword="white_space")

mutant("restart_judged_on_the_first_chunk", "AC-6", "orion.write_session.decision:read_start",
       "whether a reply starts the file over is decided on its first chunk, before three "
       "lines have arrived",
       ("        if len(probe) < len(wanted) and wanted.startswith(probe) and not ended:\n"
        "            return None\n", ""),
       keyword="however_the_reply_is_split")

mutant("continuation_counted_before_it_is_reported", "AC-8",
       "orion.write_session.session:WriteSession.continue_after_cut",
       "the part number is read after the continuation was counted: part 2 is reported first",
       ('    before = self.context.continuations\n', ""),
       ('    self._trigger("truncated", bytes=size, lines=lines, blank=blank)\n',
        '    self._trigger("truncated", bytes=size, lines=lines, blank=blank)\n'
        '    before = self.context.continuations\n'))

mutant("empty_reply_taken_for_a_cut_off", "AC-9", "orion.write_session.decision:decide_end",
       "an empty answer to the request to continue is taken for another cut-off, not a pause",
       ("    if facts.cut is not Cut.CLEAN:\n",
        "    if facts.cut is not Cut.CLEAN or not facts.grew:\n"),
       keyword="empty_answer")


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


mutant("get_tool_offered_outside_plan_work", "PM-1", "orion_plugins.plan_mode:gate_tools",
       "outside plan work only plan_set_content is withheld; plan_get is still offered",
       ("return None if active else list(PLAN_TOOLS)",
        "return None if active else list(PLAN_TOOLS[:1])"))

mutant("authorized_as_the_request_saw_it", "PM-2", "orion_plugins.plan_mode:authorize_tool_call",
       "a plan tool call is authorized by the plan as its request saw it, not as it is now",
       ("plan = service.active_plan  # now, not as the request saw it",
        "plan = service.plan_for_request()"),
       keyword="offered_before")

mutant("get_revision_one_behind", "PM-3", "orion_plugins.plan_mode:get",
       "plan_get returns the revision before the one it returns the Markdown of",
       ('"revision": plan.revision,', '"revision": plan.revision - 1,'),
       keyword="exactly")

mutant("no_block_before_the_first_draft", "PM-4", "orion_plugins.plan_mode:build_context",
       "a plan without a draft yet (COLLECTING) gets no plan block in the requests",
       ("    if plan is None:\n", "    if plan is None or not plan.markdown:\n"))

mutant("plan_on_replaces_a_plan_without_draft", "PM-5", "orion.plan.service:PlanService.on",
       "/plan on while the active plan has no draft yet starts plan work again",
       ("if plan is not None:", "if plan is not None and plan.markdown:"))

mutant("revision_during_execution_stays_approved", "PM-6", "orion.plan.store:PlanStore.set_content",
       "a draft stored during execution becomes a new revision that is EXECUTING already",
       ("(new_id, new_title, markdown, Status.READY.value,",
        "(new_id, new_title, markdown, Status.EXECUTING.value,"),
       keyword="during_execution")

mutant("reset_completes_an_executing_plan", "PM-7", "orion.plan.store:PlanStore.end",
       "/reset completes an executing plan instead of cancelling it",
       ("plan.status is Status.EXECUTING and not cancel", "plan.status is Status.EXECUTING"),
       keyword="reset_ends")

mutant("plan_work_withholds_write_tools", "PM-8", "orion_plugins.plan_mode:gate_tools",
       "plan work withholds the tools that write files (the plan comes before any change)",
       ("return None if active else list(PLAN_TOOLS)",
        "return [t.name for t in tools if 'write' in t.name.lower()] if active "
        "else list(PLAN_TOOLS)"),
       keyword="restricts_no_other")

mutant("size_counted_in_characters", "PM-9", "orion.plan.service:size_problem",
       "a draft's size is counted in characters, not in bytes",
       ('len(markdown.encode("utf-8", "surrogatepass"))', "len(markdown)"),
       keyword="size_limit")


@variant("WS-15", "orion.write_session.session:WriteSession._beside_a_tool_call",
         "the text beside a tool call stays in the content")
def narration_kept(p: Patcher) -> None:
    def make(original):
        def _beside_a_tool_call(self, message, end):
            self.checkpoint()
        return _beside_a_tool_call
    p.wrap("orion.write_session.session:WriteSession._beside_a_tool_call", make)


@variant("WS-15", "orion.write_session.session:WriteSession._tell_now",
         "the text beside a tool call is set aside without a word to the model",
         partial=True)
def narration_untold(p: Patcher) -> None:
    p.wrap("orion.write_session.session:WriteSession._tell_now",
           lambda original: lambda self, text: None)


@variant("WS-16", "orion.write_session.intake:Intake._take_start",
         "a reply to the idle prompt without DONE, shorter than 1024 characters, is taken "
         "for an answer and dropped")
def short_replies_dropped(p: Patcher) -> None:
    def make(original):
        def _take_start(self, start, held):
            if len(held) < 1024 and "DONE" not in held and self.lifecycle.has_tag("paused"):
                from orion.write_session.intake import Mode
                self.mode = Mode.IGNORE
                return None
            return original(self, start, held)
        return _take_start
    p.wrap("orion.write_session.intake:Intake._take_start", make)


@variant("WS-17", "orion.write_session.session:WriteSession.hold",
         "a message the user types during a session goes to the model at once")
def user_message_not_held(p: Patcher) -> None:
    p.wrap("orion.write_session.session:WriteSession.hold",
           lambda original: lambda self, line: False)


@variant("WS-17", "orion.write_session.session:WriteSession._journal_state",
         "held messages live in memory only: leaving or a crash loses them",
         partial=True)
def held_messages_unsaved(p: Patcher) -> None:
    def make(original):
        def _journal_state(self, **kw):
            state = original(self, **kw)
            state.pop("held", None)
            return state
        return _journal_state
    p.wrap("orion.write_session.session:WriteSession._journal_state", make)


@variant("WS-18", "orion.write_session.asides:Asides.after_done",
         "what follows DONE is dropped without a word")
def after_done_silent(p: Patcher) -> None:
    p.wrap("orion.write_session.asides:Asides.after_done",
           lambda original: lambda self: None)


@variant("WS-18", "orion.write_session.intake:Intake.text_lines",
         "a repeated DONE line after the first is kept as text",
         partial=True)
def repeated_done_kept(p: Patcher) -> None:
    p.wrap("orion.write_session.intake:Intake.text_lines",
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
    from orion.write_session.decision import End, Next

    def make(original):
        def decide_end(facts):
            end = original(facts)
            return End(Next.CONTINUE) if end.next is Next.ASK_UNFINISHED else end
        return decide_end
    p.wrap("orion.write_session.decision:decide_end", make)


@variant("WS-20", "orion.statechart.interpreter.settings:resolve",
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


@variant("WS-22", "orion.write_session.finalize:set_aside_report",
         "the write report says nothing of the text set aside")
def set_aside_unreported(p: Patcher) -> None:
    p.wrap("orion.write_session.finalize:set_aside_report",
           lambda original: lambda aside, session_id, relative: "")


mutant("aside_count_of_last_part", "WS-22", "orion.write_session.finalize:set_aside_report",
       "the report counts the lines of the last part set aside only",
       ("lines = sum(part.lines for part in pending)", "lines = pending[-1].lines"))

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


@variant("FS-2", "orion.workspace.confined:open_temp",
         "the temp file is created with the umask's mode and keeps no owner")
def temp_file_as_umask_gives(p: Patcher) -> None:
    import os

    def open_temp(name, *, dir_fd=None, like=None, mode=None):
        return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666, dir_fd=dir_fd)
    p.replace("orion.workspace.confined:open_temp", open_temp)


@variant("FS-3", "orion.config.sourcefile:_check",
         "a file of any size is read", keyword="oversized")
def no_size_cap(p: Patcher) -> None:
    from orion.config.sourcefile import NotReadable, kind_of

    def check(info, limit):
        kind = kind_of(info.st_mode)
        if kind is not None:
            raise NotReadable(f"is not a regular file ({kind})")
    p.replace("orion.config.sourcefile:_check", check)


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


@variant("FS-7", "orion.runtime.stop_signals:StopSignals.__enter__",
         "a signal ends the command where it stands (the default action)")
def signals_unhandled(p: Patcher) -> None:
    def install_nothing(self):
        return self
    p.replace("orion.runtime.stop_signals:StopSignals.__enter__", install_nothing)


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


@variant("FS-12", "orion_plugins.tracing:runtime_started",
         "a runtime starts without applying trace.keep_days")
def traces_kept_for_ever(p: Patcher) -> None:
    p.replace("orion_plugins.tracing:runtime_started", lambda host: None)


@variant("FS-14", "orion.write_session.recover:_keep_set_aside",
         "recover --finalize removes the journal with the text set aside in it")
def recovery_drops_set_aside(p: Patcher) -> None:
    p.replace("orion.write_session.recover:_keep_set_aside",
              lambda aside, state_dir, orphan, relative: "")


@variant("FS-15", "orion.write_session.set_aside:part_problem",
         "an index entry of the parts set aside is taken as it is")
def part_entries_unchecked(p: Patcher) -> None:
    p.replace("orion.write_session.set_aside:part_problem", lambda item: None)


mutant("recovery_reports_only_parts_put_back", "FS-14",
       "orion.write_session.recover:_keep_set_aside",
       "the recovery's report counts the parts put back, not those still set aside",
       ("    pending = aside.pending\n", "    pending = [p for p in aside.parts if p.kept]\n"))

mutant("part_fields_only_present", "FS-15", "orion.write_session.set_aside:part_problem",
       "an index entry's fields are checked to be there, not to be numbers",
       ("if not isinstance(value, types) or wrong_bool:", "if value is None:"))

mutant("state_entries_checked_against_the_workspace", "FS-1",
       "orion.workspace:_check_confined",
       "an entry of .orion that links elsewhere in the workspace is followed (entries are "
       "checked against the workspace, not the state directory)",
       ("if not target.is_relative_to(real):", "if not target.is_relative_to(root):"),
       keyword="elsewhere_in_the_workspace")

mutant("temp_file_mode_before_owner", "FS-2", "orion.workspace.confined:open_temp",
       "the temp file gets its mode before its owner (the change of owner clears set-group-ID)",
       ("        if like is not None:\n            _give_owner(fd, like)\n"
        "        os.fchmod(fd, final)\n",
        "        os.fchmod(fd, final)\n"
        "        if like is not None:\n            _give_owner(fd, like)\n"),
       keyword="another_user_keeps")

mutant("root_keeps_the_group_it_is_not_in", "FS-2", "orion.workspace.confined:_give_owner",
       "root gives a replaced file its group only when root is in that group",
       ("if os.geteuid() == 0 or like.st_gid in _groups()", "if like.st_gid in _groups()"),
       keyword="another_user_keeps")

mutant("retention_counts_from_the_clock", "FS-12", "orion.trace.store:TraceStore.retain",
       "retention counts back from the wall clock, so a clock stepped ahead ages every event",
       ("min(newest, now_ms) - keep_ms", "now_ms - keep_ms"), keyword="wall_clock_far")

mutant("retention_removes_in_silence", "FS-12", "orion_plugins.tracing:runtime_started",
       "traces are removed without a word",
       ("    if removed:\n", "    if removed and False:\n"), keyword="says_how_many")

mutant("size_cap_read_as_kib", "FS-3", "orion.config.sourcefile:_check",
       "the size cap is taken for KiB: a file 1024 times larger than the cap is read",
       ("info.st_size > limit:", "info.st_size > limit * 1024:"), keyword="oversized")

mutant("empty_pipeline_passes", "FS-4", "orion.runtime.pipeline:check_replies",
       "an empty pipeline is let through (nothing in it to check)",
       ("if any(getattr(system, REPLIES, False) is True for system in chosen):",
        "if not order or any(getattr(system, REPLIES, False) is True for system in chosen):"))

mutant("draft_base_not_compared_in_the_store", "FS-5", "orion.plan.service:PlanService.set_content",
       "the revision a draft is based on is compared before the store's transaction, not in it",
       ("self.replacing = expected_revision if base is None else base[1]",
        "self.replacing = expected_revision"),
       keyword="being_stored")

mutant("plans_db_read_without_text_factory", "FS-6", "orion.plan.store:PlanStore.__init__",
       "plans.db is read with sqlite's own text decoding: one row that is not UTF-8 fails the "
       "whole query",
       ("    self._conn.text_factory = _text\n", ""))


@variant("FS-7", "orion.runtime.runner:RUN_SIGNALS",
         "orion run handles SIGTERM and Ctrl-C but not SIGHUP (a closed terminal)",
         keyword="terminal_closed", partial=True)
def closed_terminal_unhandled(p: Patcher) -> None:
    import signal

    p.replace_in(("orion.runtime.runner",), "RUN_SIGNALS", (signal.SIGTERM, signal.SIGINT))


mutant("age_by_the_larger_figure", "FS-8", "orion.write_session.orphans:_age",
       "an orphan's age is the larger of the wall clock's and the boot clock's figures",
       ("return min(age, max(0.0, elapsed))", "return max(age, max(0.0, elapsed))"),
       keyword="wall_clock")

mutant("session_directory_with_the_umask_mode", "FS-9",
       "orion.write_session.journal:Journal.create",
       "a session's journal directory is created with the umask's mode, not 0700",
       ("journal.directory.mkdir(mode=DIR_MODE, exist_ok=True)",
        "journal.directory.mkdir(exist_ok=True)"))

mutant("state_directory_with_the_umask_mode", "FS-1", "orion.workspace:_create",
       "the state directory Orion creates gets the umask's mode, not 0700",
       ("os.mkdir(state, STATE_DIR_MODE)", "os.mkdir(state)"), keyword="umask")

mutant("new_journal_files_with_the_umask_mode", "FS-9", "orion.write_session.journal:file_mode",
       "the journal of a new file gets the umask's mode (0644 under umask 022), not 0600",
       ("        return FILE_MODE\n", "        return 0o666\n"), keyword="new_file")

mutant("journal_files_with_the_target_mode", "FS-9", "orion.write_session.journal:file_mode",
       "a journal's files take the target's mode: a file everyone may read has a journal "
       "everyone may read",
       ("return FILE_MODE & (target_mode | 0o200)", "return target_mode | 0o600"),
       keyword="everyone_may_read")

mutant("only_the_system_wide_limit_waits", "FS-10",
       "orion.write_session.journal:Journal._state_failed",
       "only the system's open-file limit (ENFILE) lets the state wait; the process's own "
       "(EMFILE) is taken for a disk failure",
       ("exc.errno not in OPEN_LIMITS", "exc.errno != errno.ENFILE"))

mutant("one_state_loop_unseen", "FS-11", "orion.statechart.checks.loops:_completion_loops",
       "a completion that leads back to its own final state is not taken for a loop",
       ("if path in trail:", "if path in trail[1:]:"), keyword="refused_before_anything")

mutant("unfinished_line_questions_uncounted", "FS-20",
       "orion_plugins.write_session_protocol:ask_about_unfinished_line",
       "the unfinished-line question does not count towards max_idle_prompts",
       ('    context.idle_prompts += 1\n', ""), keyword="every_time")

mutant("an_unfinished_line_again_is_progress", "FS-20",
       "orion.write_session.message_end:progressed",
       "a reply that stops in the middle of a line again sets the count of prompts back",
       ("return grew and (asked_at is None or journal.lines > asked_at)",
        "return grew"), keyword="every_time")

mutant("a_search_out_of_time_is_no_match", "FS-21",
       "orion.write_session.marker_regex:search_lines",
       "a line whose search ran out of time is taken for a line without a match",
       ("raise SearchTooLong(number + 1, seconds) from None", "continue"),
       keyword="backtracks_without_end")

mutant("history_tightened_in_silence", "FS-23",
       "orion.runtime.chat_history:HistoryFile._private",
       "a chat history others could read is made private without a word",
       ("if not self._tightened:", "if False:"), keyword="made_private")

mutant("a_fifo_read_as_empty", "FS-22", "orion.write_session.diff:read_regular",
       "a FIFO is read like a file (it gives nothing), so a diff against it is made in silence",
       ("if kind is not None:", "if kind is not None and kind != \"a FIFO\":"))

mutant("durations_without_a_cap", "FS-24", "orion.clock:countable",
       "only an infinite duration is refused: a huge finite one reaches a date no clock shows",
       ("if not math.isfinite(ms) or ms > MAX_DURATION_MS:", "if not math.isfinite(ms):"))


# Partial breaks ------------------------------------------------------------------------------

mutant("done_dot_is_done", "WS-5", "orion.write_session.protocol:EndMarker._advance_terminator",
       "a line 'DONE.' ends the content (a full stop after DONE is taken for white space)",
       ("if s.strip(_TRAILING_WS):", "if s.strip(_TRAILING_WS + '.'):"))


@variant("WS-16", "orion.write_session.intake:Intake._take_start",
         "a reply to the idle prompt that says DONE in a sentence is taken for the answer DONE",
         partial=True)
def done_in_a_sentence_is_the_answer(p: Patcher) -> None:
    import re

    def make(original):
        def _take_start(self, start, held):
            if self.lifecycle.has_tag("paused") and re.search(r"\bDONE\b", held):
                held = "DONE\n"
            return original(self, start, held)
        return _take_start
    p.wrap("orion.write_session.intake:Intake._take_start", make)


mutant("lower_case_reply_continues_the_line", "WS-19",
       "orion.write_session.decision:_repeat_before",
       "a reply that starts in lower case or with punctuation is glued onto the unfinished line",
       ('    unfinished = quoted.unfinished or ""\n',
        '    unfinished = quoted.unfinished or ""\n'
        '    if text[:1].islower() or text[:1] in "(.,;:":\n        return 0\n'))

mutant("idle_count_kept_by_content", "WS-20",
       "orion.write_session.session:WriteSession._next_step",
       "new content does not set the count of idle prompts back to 0",
       ('self.context.idle_prompts = 0', "pass"))

mutant("idle_prompt_not_marked_asked", "WS-20",
       "orion_plugins.write_session_protocol:prompt_for_done",
       "the idle prompt does not mark the model as asked, so the timer asks again meanwhile",
       ('context.asked = True', "pass"))

mutant("resent_line_one_character_too_long", "AC-7", "orion.write_session.decision:_repeat_before",
       "the declared repeat drops one character more than the unfinished line",
       ("return len(unfinished)", "return len(unfinished) + 1"))

mutant("quoted_line_before_the_cut_dropped", "AC-7", "orion.write_session.decision:_repeat_before",
       "the last quoted line sent again in front of the cut line is taken for a repeat too",
       ("    if text.startswith(unfinished):\n",
        '    lead = "".join(line + "\\n" for line in quoted.lines[-1:]) + unfinished\n'
        "    if quoted.lines and text.startswith(lead):\n        return len(lead)\n"
        "    if text.startswith(unfinished):\n"))


mutant("think_after_white_space_is_content", "WS-23", "orion.models.events:LeadingThink.feed",
       "a <think> block after a line break or a space is taken for content",
       ("begun = held.lstrip()", "begun = held"))

mutant("think_close_split_across_chunks", "WS-23", "orion.models.events:LeadingThink.feed",
       "a </think> split between two chunks is not recognised",
       ("keep = _partial_suffix(held, self.CLOSE)", "keep = 0"))

# Partial breaks of the content rules that only their own scenarios catch.

mutant("second_unfinished_line_taken_for_a_pause", "WS-19",
       "orion.write_session.intake:Intake.end",
       "a reply to the unfinished-line question that stops mid-line again is taken for a "
       "pause: the next reply is glued onto the line",
       ("mid_line=grew and", "mid_line=grew and self.quoted_at_start is None and"),
       keyword="stops_in_the_middle_of_a_line_again")

mutant("alike_rows_taken_for_a_restart", "AC-6", "orion.write_session.decision:read_start",
       "rows that are all alike (no header) are taken for a restart of the file",
       (" and tuple(head[:len(tail)]) != tuple(tail):", ":"),
       keyword="all_alike")

mutant("keep_puts_the_part_at_the_end", "WS-22", "orion.write_session.asides:Asides.put_back",
       "a part put back after more content streamed goes to the end, not where it was",
       ("at = min(part.at, self.journal.bytes)", "at = self.journal.bytes"),
       keyword="keep_after_more")

mutant("done_beside_a_tool_call_ignored", "WS-15", "orion.write_session.decision:decide_end",
       "a DONE line in a message that also calls a tool does not end the content",
       ("    if facts.done:\n", "    if facts.done and not facts.tool_calls:\n"),
       keyword="done_beside_a_tool_call")

mutant("resent_lines_written_again", "AC-7", "orion.write_session.intake:Intake._take_start",
       "quoted lines the reply sent again are written a second time, in silence",
       ("    if start.resent:\n        self._resent(held[:start.resent])\n"
        "    rest = held[start.resent + start.repeat:]\n",
        "    rest = held[start.repeat:]\n"),
       keyword="quoted_lines_sent_again")

mutant("think_block_dropped_in_a_write", "WS-23",
       "orion.write_session.session:WriteSession._end_message",
       "a <think> block in a write session is dropped without a word",
       ('    if thought and intake.takes_thought:\n', '    if False:\n'),
       keyword="think_element")

mutant("stalled_stream_waits_for_more_text", "SR-4",
       "orion.write_session.intake:Intake.take_in",
       "the flush timer is not armed: a stream that stalls keeps its lines in memory",
       ("        if not self.flush_timer.armed:\n            self._arm_flush()\n", ""),
       keyword="stalls")

mutant("indented_done_ends_the_content", "WS-5",
       "orion.write_session.protocol:EndMarker._advance_terminator",
       "a DONE indented by spaces or a tab ends the content",
       ("    if k == _LEAD:\n",
        "    if k == _LEAD:\n        s = seg.lstrip(' \\t')\n"
        "        if not s:\n            return True\n"),
       keyword="indented")


# SM: statechart semantics -----------------------------------------------------------------

SEMANTICS = "orion.statechart.interpreter.semantics"

mutant("initial_states_innermost_first", "SM-1", f"{SEMANTICS}:LifecycleMachine.start",
       "a lifecycle's initial states are entered innermost first",
       ("for state in self.initial_states:", "for state in reversed(self.initial_states):"))

mutant("entry_actions_before_the_state_is_active", "SM-1", f"{SEMANTICS}:LifecycleState.enter",
       "a state's entry actions run before the state is made the active one",
       ("    lifecycle._enter(self)\n    try:\n        super().enter(event_data)\n",
        "    try:\n        super().enter(event_data)\n        lifecycle._enter(self)\n"))

mutant("exits_outermost_first", "SM-2", f"{SEMANTICS}:LifecycleMachine.exit_set",
       "the active states are exited outermost first",
       ("s for s in reversed(self.lineages[leaf])", "s for s in self.lineages[leaf]"))

mutant("exit_actions_after_the_state_is_left", "SM-2", f"{SEMANTICS}:LifecycleState.exit",
       "a state is no longer the active one while its exit actions run",
       ("    try:\n        super().exit(event_data)\n    finally:\n"
        "        # Still active while its exit actions run; its timers go with it afterwards.\n"
        "        event_data.model._exit(self)\n",
        "    event_data.model._exit(self)\n    super().exit(event_data)\n"))

mutant("domain_counts_the_source", "SM-3", f"{SEMANTICS}:transition_domain",
       "an external transition into its own compound source keeps the source active",
       ("if internal and nodes[source].compound", "if nodes[source].compound"))

mutant("internal_ignored", "SM-3", f"{SEMANTICS}:transition_domain",
       "type: internal is ignored: the source is exited and entered again",
       ("if internal and nodes[source].compound", "if False and nodes[source].compound"))

mutant("ancestors_first", "SM-4", f"{SEMANTICS}:LifecycleMachine.candidates",
       "the transitions of the outermost active state are tried before the active leaf's",
       ("for s in reversed(self.lineages[leaf])]", "for s in self.lineages[leaf]]"))

mutant("wildcards_first", "SM-4", f"{SEMANTICS}:LifecycleMachine.candidates",
       "the * transitions are tried before every state's own",
       ("tables.append(self._wildcards.get(leaf.split(SEPARATOR, 1)[0]))",
        "tables.insert(0, self._wildcards.get(leaf.split(SEPARATOR, 1)[0]))"))

mutant("guard_errors_count_as_false", "SM-4",
       "orion.statechart.interpreter.definition:_Guard.__call__",
       "a guard that raises counts as false: the next candidate is taken",
       ("        raise GuardError(", "        return False\n        raise GuardError("))

mutant("timers_fire_late", "SM-5", "orion.clock:VirtualClock.advance",
       "a timer due exactly at the new time waits for the next tick",
       ("self._heap[0].deadline <= target", "self._heap[0].deadline < target"))

mutant("compound_timers_survive", "SM-5", "orion.statechart.interpreter.lifecycle:Lifecycle._exit",
       "only a leaf's timers are cancelled when it is exited; a compound state's keep running",
       ("    self._cancel_timers(state.path)\n",
        "    if not state.states:\n        self._cancel_timers(state.path)\n"))

mutant("done_names_the_outer_state", "SM-6", f"{SEMANTICS}:done_event",
       "a nested final state raises the completion event of the top-level state around it",
       ("return DONE_PREFIX + node.parent", "return DONE_PREFIX + node.parent.split('.')[0]"))

mutant("queue_last_in_first_out", "SM-7", "orion.statechart.interpreter.lifecycle:Lifecycle._run",
       "queued events are processed newest first",
       ("            self._queue.popleft()()\n", "            self._queue.pop()()\n"))

mutant("queued_while_idle_only", "SM-7", f"{SEMANTICS}:LifecycleMachine._process",
       "an event an action sends is processed at once, in the middle of the transition",
       ("if lifecycle._busy:", "if lifecycle._busy and not event_data.direct:"))


@variant("SM-8", f"{SEMANTICS}:LifecycleTransition.execute and _change_state",
         "a transition's actions run between the exits and the entries, as SCXML has it",
         partial=True)
def actions_between_exits_and_entries(p: Patcher) -> None:
    from orion.statechart.interpreter.semantics import ActionError

    def execute(original):
        def run(self, event_data):
            event_data.actions, self.before = self.before, []
            try:
                return original(self, event_data)
            finally:
                self.before = event_data.actions
        return run

    def change_state(original):
        def run(self, event_data):
            machine = event_data.machine
            for state in machine.exit_set(event_data.model.state, self.domain):
                try:
                    state.exit(event_data)
                except ActionError as exc:
                    event_data.errors.append(exc)
            machine.callbacks(event_data.actions, event_data)
            for state in self.enter_states:
                try:
                    state.enter(event_data)
                except ActionError as exc:
                    event_data.errors.append(exc)
        return run
    p.wrap(f"{SEMANTICS}:LifecycleTransition.execute", execute)
    p.wrap(f"{SEMANTICS}:LifecycleTransition._change_state", change_state)


mutant("entry_error_stops_the_transition", "SM-9", f"{SEMANTICS}:LifecycleTransition._change_state",
       "a failing entry action stops the transition: the states below it are not entered",
       ("    for state in self.enter_states:\n        try:\n            state.enter(event_data)\n"
        "        except ActionError as exc:\n            event_data.errors.append(exc)\n",
        "    for state in self.enter_states:\n        state.enter(event_data)\n"))

mutant("queue_dropped_silently", "SM-9", "orion.statechart.interpreter.lifecycle:Lifecycle._run",
       "the events queued when an action failed are dropped without a report",
       ("self._discard(name, queued.kwargs, reason)", "pass"))

mutant("descriptor_matches_its_parent_only", "SM-10", "orion.statechart.model.events:matching_descriptors",
       "a descriptor answers an event one token longer, not deeper ones",
       ("for i in range(len(parts))]", "for i in range(len(parts) - 2, len(parts))]"))

mutant("wildcard_suffix_kept", "SM-10", "orion.statechart.model.events:normalize_descriptor",
       "'abort.*' is read as the descriptor 'abort.' (one character too few cut off)",
       ("descriptor[:-2]", "descriptor[:-1]"))


mutant("microstep_limit_off_by_one", "SM-11", "orion.statechart.interpreter.lifecycle:Lifecycle._run",
       "the limit counts one microstep more than it allows",
       ("for _ in range(MAX_MICROSTEPS):", "for _ in range(MAX_MICROSTEPS + 1):"))

mutant("limit_leaves_the_queue_unreported", "SM-11",
       "orion.statechart.interpreter.lifecycle:Lifecycle._run",
       "the events left queued at the microstep limit are dropped without a report",
       ("except (ActionError, GuardError, MacrostepLimit) as exc:",
        "except (ActionError, GuardError) as exc:"))

# CU: contracts and overlays ------------------------------------------------------------------

mutant("replacement_not_held_to_its_base", "CU-1",
       "orion.statechart.io.catalog:Catalog._resolve_document",
       "a chart is held to its own contract only, not to that of the chart it replaces",
       ("for lower in below:", "for lower in below[:0]:"))

mutant("migration_keeps_the_old_version", "CU-1", "orion.statechart.io.migrate:migrate",
       "orion migrate adds what the later versions added but leaves the chart's contract "
       "version as it was",
       ("    editor.set_version(needed.version, expected)\n", ""),
       keyword="older_contract")

mutant("finalizing_by_its_name", "CU-2", "orion.write_session.session:WriteSession.continue_after_cut",
       "the write after the last continuation looks for the state named finalizing, not the tag",
       ('elif self.lifecycle.has_tag("finalizing"):',
        'elif self.lifecycle.state == "session_active.finalizing":'))

mutant("paused_by_its_name", "CU-2", "orion.write_session.intake:Mode.at_start",
       "a reply after a pause is recognised by the state's name, not by its tag",
       ('has_tag("paused")', 'lifecycle.state.endswith("awaiting_done_or_more_content")'))

mutant("unknown_tag_is_no", "CU-3", "orion.statechart.interpreter.lifecycle:Lifecycle.has_tag",
       "a tag no state carries is answered False",
       ("raise UnknownTag(self.name, tag, sorted(self.definition.all_tags))", "return False"))

mutant("not_allowed_lists_every_trigger", "CU-3",
       "orion.statechart.interpreter.lifecycle:Lifecycle._unanswered",
       "a trigger not allowed here is refused with every trigger of the chart as 'allowed'",
       ("self.allowed_triggers() if allowed is None else allowed",
        "sorted(self.definition.triggers) if allowed is None else allowed"))

mutant("replace_drops_unnamed_fields", "CU-4",
       "orion.statechart.io.overlay:_TransitionEdits.replace",
       "a replaced transition keeps only the fields the overlay gives",
       ("node.data = {**node.data, **patch}", "node.data = dict(patch)"))

mutant("setting_replaced_whole", "CU-4", "orion.statechart.io.overlay:_merge_values",
       "an overlay's setting replaces the base's whole (its type and bounds are lost)",
       ('if section == "settings" and isinstance(merged.get(key), dict):', "if False:"))

mutant("missing_attribute_guard_says_no", "CU-5",
       "orion.statechart.interpreter.definition:_Guard.__call__",
       "a guard that reads an attribute that is not there counts as false (the next candidate, "
       "the write, is taken); any other error still holds the event",
       ("    except Exception as exc:\n",
        "    except AttributeError:\n        return False\n    except Exception as exc:\n"))


# WF: faults of a write -----------------------------------------------------------------------

mutant("saved_once_anything_saved", "WF-1", "orion.write_session.endings:keep_content",
       "a journal that saved any of the content is taken for one that holds all of it",
       ("if journal.secure():", "if journal.flushed_bytes or journal.secure():"))

mutant("rescued_only_in_the_state_directory", "WF-2",
       "orion.write_session.endings:keep_content",
       "the content is rescued only into .orion/rescued, not the temp or home directory",
       ("Path(tempfile.gettempdir()),", ""), ("Path.home()]", "]"))

mutant("observers_isolated_narrowly", "WF-3", "orion.hooks.manager:PluginManager._isolated",
       "only an observer's programming errors are isolated; an OSError stops the write",
       ("            return function(*args, **kwargs)\n        except Exception as exc:",
        "            return function(*args, **kwargs)\n"
        "        except (ValueError, TypeError, KeyError, AttributeError, RuntimeError) as exc:"))

mutant("store_warns_every_batch", "WF-4", "orion.trace.store:TraceStore._drop",
       "the trace store warns at every batch it cannot store",
       ("self._warned = True", "pass"))

mutant("store_keeps_only_busy_errors", "WF-4", "orion.trace.store:TraceStore.write_batches",
       "only a locked or busy database is a batch dropped; a damaged one raises",
       ("except DATABASE_ERRORS as exc:", "except sqlite3.OperationalError as exc:"))

mutant("only_appends_compared", "WF-5", "orion.write_session.operations:_execute_locked",
       "only an append compares the file with the bytes the plan was checked against",
       ("if first.exists and first.sha256 is not None:",
        "if first.exists and first.sha256 is not None and "
        "first.plan.operation is Operation.APPEND:"))

mutant("lock_released_at_once", "WF-6", "orion.workspace.confined:Parent.locked",
       "the directory's lock is released as soon as it is taken, before the file is read",
       ("    fcntl.flock(self.fd, fcntl.LOCK_EX)\n",
        "    fcntl.flock(self.fd, fcntl.LOCK_EX)\n    fcntl.flock(self.fd, fcntl.LOCK_UN)\n"))

mutant("swapped_link_followed", "WF-7", "orion.write_session.operations:execute",
       "a target that leads elsewhere since the check (a directory swapped for a link) is "
       "written where it leads now",
       ("if checked.relative != first.relative:", "if False:"))

mutant("live_temp_judged_by_age", "WF-8", "orion.write_session.leftovers:remove_temp_leftovers",
       "a live writer's temp file untouched for 10 minutes is taken for a leftover",
       ("if process_alive(int(match.group(1))):",
        "if process_alive(int(match.group(1))) and time.time() - "
        "entry.stat(follow_symlinks=False).st_mtime < LEGACY_TEMP_AGE_S:"))


@variant("SR-7", "orion.write_session.journal:DEGRADING_ERRNOS",
         "a read-only file system is not among the errors that degrade the journal to memory",
         partial=True)
def read_only_is_fatal(p: Patcher) -> None:
    from orion.write_session.journal import DEGRADING_ERRNOS

    p.replace_in(("orion.write_session.journal",), "DEGRADING_ERRNOS",
                 DEGRADING_ERRNOS - {errno.EROFS})


mutant("connection_cut_escapes", "WS-21", "orion.models.openai_compat:OpenAICompatibleModel._stream",
       "only an error status ends a stream as a cut-off; a connection that breaks escapes",
       ("except (APIError, _ErrorEvent, _NotUtf8, json.JSONDecodeError) as err:",
        "except (APIStatusError, _ErrorEvent, _NotUtf8, json.JSONDecodeError) as err:"))

mutant("any_endpoint_error_ends_chat", "WS-21", "orion.terminal.chat:_guarded",
       "orion chat ends on any model error, not only on a rejected key",
       ("if isinstance(exc, ModelAuthError):", "if isinstance(exc, ModelAuthError.__base__):"))


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


SITECUSTOMIZE = """\
# Applies one variant of tests/test_features_bite.py in every Python process started while
# that variant runs (the orion commands that steps start), as it is applied in the test process.
import sys
sys.path.insert(0, {tests!r})
import test_features_bite
test_features_bite.apply_named({name!r})
"""


def apply_named(name: str) -> None:
    """Apply the variant ``name`` for the rest of this process (a subprocess an ``orion``
    command step started). Only what the variant names is imported first: a module imported
    later takes the replaced function from its module, and one imported before is patched by
    :meth:`Patcher.replace`, so importing all of Orion (a few seconds per command) is not
    needed here."""
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


#: One test module per feature file: the features are collected once per process.
BINDING = """\
from pytest_bdd import scenarios

scenarios({feature!r})
"""


def _bindings(directory: Path) -> list[Path]:
    """A binding module in ``directory`` for each feature file."""
    modules = []
    for feature in sorted(FEATURES.glob("*.feature")):
        module = directory / f"test_bite_{feature.stem}.py"
        module.write_text(BINDING.format(feature=str(feature)), encoding="utf-8")
        modules.append(module)
    return modules


def _selects(chosen: Variant, item: Any) -> bool:
    """Whether ``item`` is a scenario the variant runs: tagged with its rule (or its
    ``select`` tag), and holding ``keyword`` in its name when one is given."""
    tags = {mark.name for mark in item.iter_markers()}
    return chosen.select in tags and chosen.keyword.lower() in item.name.lower()


class _VariantLoop:
    """A pytest plugin that runs the variants in one pytest session: the features are
    collected once, then for each variant in turn it is applied, the scenarios of its rule run
    one after the other until one fails (the first failure is enough), and it is undone. A
    scenario runs as pytest runs it (``runtestprotocol``: fixtures set up and torn down);
    what Orion's pytest plugin keeps on it between runs (``item.stash``) is reset first."""

    def __init__(self, chosen: list[Variant]) -> None:
        self.chosen = chosen
        self.results: list[dict[str, Any]] = []

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: Any) -> bool:
        from _pytest.runner import runtestprotocol

        stashes = {item: dict(item.stash._storage) for item in session.items}
        for chosen in self.chosen:
            items = [item for item in session.items if _selects(chosen, item)]
            self.results.append(self._run(chosen, items, stashes, runtestprotocol))
        return True

    @staticmethod
    def _run(chosen: Variant, items: list[Any], stashes: dict[Any, dict[Any, Any]],
             runtestprotocol: Callable[..., Any]) -> dict[str, Any]:
        result: dict[str, Any] = {"name": chosen.name, "rule": chosen.rule,
                                  "breaks": chosen.breaks, "ran": [], "failed": {},
                                  "skipped": [], "harness": []}
        started = time.perf_counter()
        patcher = Patcher()
        try:
            chosen.apply(patcher)
        except LookupError as exc:
            patcher.undo()
            result.update(error=str(exc), seconds=0.0)
            return result
        try:
            with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), \
                    _in_subprocesses(chosen.name):
                for item in items:
                    item.stash._storage = dict(stashes[item])
                    reports = runtestprotocol(item, log=False, nextitem=None)
                    if _record(result, item.nodeid, reports):
                        break
        finally:
            patcher.undo()
        result["seconds"] = round(time.perf_counter() - started, 2)
        return result


def _record(result: dict[str, Any], nodeid: str, reports: list[Any]) -> bool:
    """Note how one scenario went; True when it failed."""
    if any(r.skipped for r in reports) and not any(r.failed for r in reports):
        result["skipped"].append(nodeid)
        return False
    result["ran"].append(nodeid)
    for report in reports:
        if not report.failed:
            continue
        text = str(report.longrepr or "")
        lines = [line for line in text.splitlines() if line.startswith("E ")] or \
            text.splitlines()[-1:]
        result["failed"][nodeid] = " | ".join(line[1:].strip() for line in lines[:3])
        crash = getattr(report.longrepr, "reprcrash", None)
        if crash is not None and Path(str(crash.path)).name == Path(__file__).name:
            result["harness"].append(f"{nodeid}: {crash.message}")
        return True
    return False


def main(names: list[str]) -> list[dict[str, Any]]:
    import tempfile

    _import_orion()
    chosen = [v for v in VARIANTS if not names or v.name in names or v.rule in names]
    loop = _VariantLoop(chosen)
    with tempfile.TemporaryDirectory(prefix="orion-bite-bindings-") as directory, \
            open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        code = pytest.main(
            [*map(str, _bindings(Path(directory))), "-c", str(ROOT / "pyproject.toml"),
             # Orion's own steps, which tests/conftest.py loads for tests/bdd (the bindings
             # live outside tests/, where that conftest is not read).
             "-p", "fault_steps", "-p", "process_steps",
             "-q", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
             "-W", "ignore::pytest.PytestUnknownMarkWarning", "--no-header", "--tb=short"],
            plugins=[loop])
    if len(loop.results) != len(chosen):
        raise RuntimeError(f"the features could not be collected (pytest exit code {code})")
    return loop.results


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


def test_every_rule_has_a_partial_variant() -> None:
    """Breaking a whole function is easy to catch; each rule also has a break of the kind a
    plausible bug makes (an order, an off-by-one, a narrowed exception, a flag not reset)."""
    partial = {v.rule for v in VARIANTS if v.partial}
    missing = [rule for rule in _design_rules() if rule not in partial]
    assert not missing, f"rules of docs/design/ without a partial-break variant: {missing}"


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
        elif not result["failed"]:
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
            status = "CAUGHT" if r.get("failed") else "ESCAPED"
            print(f"{status:8} {r['rule']:6} {r['name']:40} {r.get('seconds', 0):6}s "
                  f"ran {len(r.get('ran', []))} {r.get('error', '')}")
            for nodeid, why in list(r.get("failed", {}).items())[:1]:
                print(f"         {nodeid.split('::')[-1][:90]}: {why[:200]}")
