"""The statechart file format, as pydantic models.

These models are the format's single definition: `orion schema` prints their JSON Schema and
`orion check` validates files against them before the semantic checks run. Unknown fields are
errors (``extra="forbid"``) so a typo never silently changes a lifecycle.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

STATE_NAME = r"^[A-Za-z][A-Za-z0-9_-]*$"
STATE_PATH = r"^[A-Za-z][A-Za-z0-9_-]*(\.[A-Za-z][A-Za-z0-9_-]*)*$"
IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
#: A transition's trigger is one or more SCXML event descriptors, separated by spaces: each is
#: dot-separated tokens, which answer that event and every event they prefix (``done`` answers
#: ``done.state.job``); ``name.*`` means the same as ``name``; ``*`` answers every event.
#: Completion events are ``done.state.<path>``.
DESCRIPTOR = r"(\*|[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_][A-Za-z0-9_-]*)*(\.\*)?)"
TRIGGER = rf"^{DESCRIPTOR}( +{DESCRIPTOR})*$"
PLUGIN_NAME = r"^[A-Za-z_][A-Za-z0-9_.:-]*$"
WILDCARD = "*"


def _listify(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


def _names_schema(pattern: str, what: str) -> WithJsonSchema:
    item = {"type": "string", "pattern": pattern}
    return WithJsonSchema({"anyOf": [item, {"type": "array", "items": item}],
                           "description": f"one {what} name or a list of them"})


# Lists of names that may also be written as one bare name. Each is spelled out as an
# ``Annotated`` alias (not built by a function) so that type checkers see ``list[str]``.
SOURCE_NAME = r"^(\*|[A-Za-z][A-Za-z0-9_-]*(\.[A-Za-z][A-Za-z0-9_-]*)*)$"
Names = Annotated[list[Annotated[str, Field(pattern=PLUGIN_NAME)]], BeforeValidator(_listify),
                  _names_schema(PLUGIN_NAME, "guard or action")]
Tags = Annotated[list[Annotated[str, Field(pattern=IDENTIFIER)]], BeforeValidator(_listify),
                 _names_schema(IDENTIFIER, "tag")]
Identifiers = Annotated[list[Annotated[str, Field(pattern=IDENTIFIER)]],
                        BeforeValidator(_listify), _names_schema(IDENTIFIER, "trigger")]
SourceNames = Annotated[list[Annotated[str, Field(pattern=SOURCE_NAME)]], Field(min_length=1),
                        BeforeValidator(_listify), _names_schema(SOURCE_NAME, "state path (or '*')")]


Milliseconds = Annotated[int, Field(ge=0, strict=True)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SettingSpec(_Strict):
    """A typed value that code reads from the lifecycle and users may override."""

    type: Literal["int", "float", "bool", "str"]
    default: int | float | bool | str
    description: str = ""
    env: str | None = Field(default=None, pattern=r"^[A-Z][A-Z0-9_]*$",
                            description="an extra environment variable that overrides it")
    min: float | None = None
    max: float | None = None


class _Edge(_Strict):
    """What every transition has besides its trigger: where it goes and what it checks and does."""

    dest: str | None = Field(default=None, pattern=STATE_PATH,
                             description="absolute state path; omit for a targetless transition "
                                         "(actions only, nothing exited or entered)")
    type: Literal["external", "internal"] = Field(
        default="external",
        description="as in SCXML: an internal transition from a compound state into one of its "
                    "descendants does not exit and re-enter its source")
    guards: Names = Field(default_factory=list)
    unless: Names = Field(default_factory=list)
    actions: Names = Field(default_factory=list)
    description: str = ""


class DelayedTransition(_Edge):
    """A transition taken when the state has been active for ``ms`` milliseconds (XState's
    ``after``). The timer is armed on entry and cancelled on exit."""

    # Strict: YAML reads ``ms: yes`` as true, which must not become a 1 ms timer.
    ms: Milliseconds | Annotated[str, Field(pattern=IDENTIFIER)] = Field(
        description="milliseconds, or the name of an int setting that holds them")
    trigger: str = Field(default="timeout", pattern=IDENTIFIER,
                         description="the event the timer raises; it can also be sent by code")


class StateSpec(_Strict):
    """A state. A state with ``states`` is compound and needs an ``initial`` child."""

    description: str = ""
    initial: str | None = Field(default=None, pattern=STATE_NAME)
    final: bool = Field(default=False, strict=True)
    tags: Tags = Field(default_factory=list,
                       description="what code asks about (has_tag) instead of the state's name; "
                                   "a state has its own tags and those of its ancestors")
    entry: Names = Field(default_factory=list)
    exit: Names = Field(default_factory=list)
    after: list[DelayedTransition] = Field(default_factory=list)
    states: dict[Annotated[str, Field(pattern=STATE_NAME)], StateSpec] = Field(default_factory=dict)


class TransitionSpec(_Edge):
    """A transition. Sources and destinations are absolute ``.`` paths; a transition from a
    compound state applies in all of its descendants."""

    id: str | None = Field(default=None, pattern=IDENTIFIER,
                           description="how an overlay names this transition (default: its "
                                       "trigger, when no other transition has that trigger)")
    trigger: str = Field(pattern=TRIGGER,
                         description="the events it answers, one or more descriptors "
                                     "separated by spaces: a name, which also answers the "
                                     "dot-separated events it prefixes (done answers "
                                     "done.state.review), name.* (the same), or * (every "
                                     "event); a final child of p raises done.state.p")
    source: SourceNames


class ContractChange(_Strict):
    """What one version of a contract added to the one before it."""

    version: int = Field(ge=2, strict=True)
    release: str = Field(default="", description="the release that brought it, for messages")
    triggers: Identifiers = Field(default_factory=list)
    tags: Tags = Field(default_factory=list)
    settings: Identifiers = Field(default_factory=list)


class ContractSpec(_Strict):
    """What the code that drives a lifecycle relies on. A chart that replaces or extends this
    one must keep it: ``orion check`` reports a trigger no transition handles or a tag no state
    carries."""

    version: int | None = Field(
        default=None, ge=1, strict=True,
        description="the version of the contract of the chart this one replaces or extends "
                    "that it was written for (a chart that others replace: its own); without "
                    "it, 1, the first. `orion migrate` brings a chart to the current one")
    triggers: Identifiers = Field(default_factory=list,
                                  description="the triggers the runtime sends")
    tags: Tags = Field(default_factory=list, description="the state tags the runtime asks about")
    settings: Identifiers = Field(default_factory=list,
                                  description="the settings the runtime reads")
    history: list[ContractChange] = Field(
        default_factory=list,
        description="what each version of this chart's contract added: `orion check` names "
                    "what a chart written for an older version lacks, `orion migrate` adds it")


class StatechartSpec(_Strict):
    """One lifecycle, as a team edits it."""

    statechart: str = Field(pattern=IDENTIFIER, description="the lifecycle's name")
    version: int = 1
    description: str = ""
    contract: ContractSpec = Field(default_factory=ContractSpec)
    settings: dict[Annotated[str, Field(pattern=IDENTIFIER)], SettingSpec] = Field(default_factory=dict)
    context: dict[str, Any] = Field(default_factory=dict,
                                    description="initial values of the per-instance context")
    initial: str = Field(pattern=STATE_NAME)
    states: dict[Annotated[str, Field(pattern=STATE_NAME)], StateSpec]
    transitions: list[TransitionSpec] = Field(default_factory=list)
    model_methods: bool = Field(default=False, strict=True,
                                description="give each lifecycle transitions' model methods "
                                            "(is_<state>, <trigger>, may_<trigger>, to_<state>)")


# -- overlays -----------------------------------------------------------------------------------
# An overlay names the chart it ``extends`` and gives only what changes. One rule everywhere: a
# field it gives replaces the base's, a field it omits is kept; ``states`` merge by name, and
# transitions are edited by id like the pipeline's systems by name (remove, replace, insert).


class SettingPatch(_Strict):
    """A setting of the base chart with some fields changed (a new setting gives them all)."""

    type: Literal["int", "float", "bool", "str"] | None = None
    default: int | float | bool | str | None = None
    description: str | None = None
    env: str | None = Field(default=None, pattern=r"^[A-Z][A-Z0-9_]*$")
    min: float | None = None
    max: float | None = None


class StatePatch(_Strict):
    """A state of the base chart with some fields changed, or a new state."""

    description: str | None = None
    initial: str | None = Field(default=None, pattern=STATE_NAME)
    final: bool | None = Field(default=None, strict=True)
    tags: Tags | None = None
    entry: Names | None = None
    exit: Names | None = None
    after: list[DelayedTransition] | None = None
    states: dict[Annotated[str, Field(pattern=STATE_NAME)], StatePatch] = Field(default_factory=dict)


class TransitionPatch(_Strict):
    """What replaces a transition of the base chart: the fields given; the others are kept."""

    id: str | None = Field(default=None, pattern=IDENTIFIER)
    trigger: str | None = Field(default=None, pattern=TRIGGER)
    source: SourceNames | None = None
    dest: str | None = Field(default=None, pattern=STATE_PATH)
    guards: Names | None = None
    unless: Names | None = None
    actions: Names | None = None
    description: str | None = None


class TransitionInsert(TransitionSpec):
    """A new transition, placed ``before`` or ``after`` a transition of the base chart (by id),
    or after all of them. Order matters between transitions of one trigger: the first whose
    guards pass is taken."""

    before: str | None = Field(default=None, pattern=IDENTIFIER)
    after: str | None = Field(default=None, pattern=IDENTIFIER)


class TransitionEdits(_Strict):
    """Applied in the pipeline's order: ``remove``, then ``replace``, then ``insert``."""

    remove: list[Annotated[str, Field(pattern=IDENTIFIER)]] = Field(default_factory=list)
    replace: dict[Annotated[str, Field(pattern=IDENTIFIER)], TransitionPatch] = Field(
        default_factory=dict)
    insert: list[TransitionInsert] = Field(default_factory=list)


class OverlaySpec(_Strict):
    """A lifecycle written as the changes to another one."""

    extends: str = Field(pattern=IDENTIFIER, description="the name of the chart this one changes")
    statechart: str | None = Field(default=None, pattern=IDENTIFIER,
                                   description="the lifecycle's name (default: the one it extends, "
                                               "which it then replaces)")
    version: int | None = None
    description: str | None = None
    contract: ContractSpec = Field(default_factory=ContractSpec,
                                   description="added to the base chart's contract")
    settings: dict[Annotated[str, Field(pattern=IDENTIFIER)], SettingPatch] = Field(
        default_factory=dict)
    context: dict[str, Any] = Field(default_factory=dict)
    initial: str | None = Field(default=None, pattern=STATE_NAME)
    states: dict[Annotated[str, Field(pattern=STATE_NAME)], StatePatch] = Field(default_factory=dict)
    transitions: TransitionEdits = Field(default_factory=TransitionEdits)
    model_methods: bool | None = Field(default=None, strict=True,
                                       description="replaces the base chart's model_methods")
