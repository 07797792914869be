"""Which file provides each lifecycle, and the lifecycle resolved from it.

Charts come from three layers, weakest first: Orion's built-ins, plugins
(``register_statecharts``) and the workspace (``orion.yaml`` ``statecharts:``). A lifecycle is
found by the name its chart declares; the strongest layer's chart is used. A chart may be an
overlay (``extends:``, see :mod:`orion.statechart.io.overlay`) of the next weaker chart of its
name, or of another lifecycle. Every chart is checked against the contracts of the charts it
replaces (:mod:`orion.statechart.model.contract`).
"""

from __future__ import annotations

import difflib
import hashlib
import os
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orion.errors import ConfigError, Diagnostic, PluginError, StatechartError
from orion.statechart import checks
from orion.statechart.io.builtin import builtin_statecharts
from orion.statechart.checks.contract import (
    CONTRACT_VERSION,
    check_contract,
    check_ids,
    migratable,
)
from orion.statechart.checks.sources import EXTENDS, UNUSED_CHART
from orion.statechart.model.contract import Requirement, requirements, written_for
from orion.statechart.interpreter.definition import Definition, load_definition
from orion.statechart.io.migrate import Migration, MigrationError, Needed, migrate
from orion.statechart.io.overlay import is_overlay, merge
from orion.statechart.model.schema import StatechartSpec
from orion.statechart.interpreter.settings import resolve as resolve_settings
from orion.config.sourcefile import CONFIG_LIMIT, NotReadable, read_regular
from orion.config.yamlsource import SourceDocument, YamlSourceError, load_yaml

if TYPE_CHECKING:
    from orion.config import WorkspaceConfig

BUILTIN, PLUGIN, WORKSPACE = "built-in", "plugin", "workspace"
#: A file given on the command line, checked on its own (it may be a new lifecycle's draft).
FILE = "file"


#: How many catalogs' resolutions a :class:`ChartCache` keeps (least recently used first out).
RESOLUTIONS_KEPT = 32


class ChartCache:
    """What a catalog remembers, and catalogs given the same cache remember between them:

    * parsed files, by path and what ``stat`` says of them (documents are never modified);
    * resolved charts, per catalog fingerprint (files, their stat, the plugin manager), for
      the last :data:`RESOLUTIONS_KEPT` catalogs;
    * compiled overlays, per merged spec, plugin manager and settings.

    A catalog has a cache of its own unless it is given one, so what it cached goes when it
    goes (a runtime's, with the runtime): nothing here is kept for the whole process. Catalogs
    that should share (one per conversation of a long-lived process) are given one cache."""

    def __init__(self) -> None:
        self.documents: dict[str, tuple[tuple[int, int], SourceDocument | YamlSourceError]] = {}
        self.resolutions: OrderedDict[tuple, tuple[Any, Any, dict[Path, Resolved]]] = \
            OrderedDict()
        self.definitions: dict[tuple, tuple[StatechartSpec, Definition]] = {}

    def clear(self) -> None:
        self.documents.clear()
        self.resolutions.clear()
        self.definitions.clear()

    def load(self, path: Path) -> SourceDocument:
        """``path`` parsed, or raises :class:`YamlSourceError` with the reason and a position."""
        try:
            info = path.stat()
            stamp = (info.st_mtime_ns, info.st_size)
        except OSError:
            return load_yaml(path)  # raises with the reason and a position
        cached = self.documents.get(str(path))
        if cached is None or cached[0] != stamp:
            try:
                cached = (stamp, load_yaml(path))
            except YamlSourceError as exc:
                cached = (stamp, exc)
            self.documents[str(path)] = cached
        if isinstance(cached[1], YamlSourceError):
            raise cached[1]
        return cached[1]

    def resolutions_for(self, fingerprint: tuple, plugins: Any) -> dict[Path, Resolved]:
        entry = self.resolutions.get(fingerprint)
        # The manager and registry are kept with the entry, so their ids in the key are not
        # reused.
        if entry is None or entry[0] is not plugins or entry[1] is not plugins.registry:
            entry = (plugins, plugins.registry, {})
            self.resolutions[fingerprint] = entry
        self.resolutions.move_to_end(fingerprint)
        while len(self.resolutions) > RESOLUTIONS_KEPT:
            self.resolutions.popitem(last=False)
        return entry[2]

    def compile(self, resolved: Resolved, plugins: Any, overrides: Mapping[str, Any] | None,
                env: Mapping[str, str] | None, origin: str) -> Definition:
        spec = resolved.spec
        assert spec is not None
        env = os.environ if env is None else env
        settings = resolve_settings(spec, overrides, env, origin=origin)
        digest = hashlib.sha256(spec.model_dump_json().encode()).hexdigest()
        key = (digest, id(plugins), id(plugins.registry), tuple(settings.items()))
        cached = self.definitions.get(key)
        if cached is not None:
            return cached[1]
        definition = Definition(spec, source=str(resolved.source.path), plugins=plugins,
                                settings=settings)
        self.definitions[key] = (spec, definition)
        return definition


def declared_name(path: Path, cache: ChartCache | None = None) -> str | None:
    """The ``statechart:`` name a file declares (an overlay: the one it extends, unless it
    names its own); its file name when it cannot be read: loading it reports the problem."""
    try:
        data = (cache.load(path) if cache is not None else load_yaml(path)).data
    except YamlSourceError:
        return path.stem
    if not isinstance(data, dict):
        return path.stem
    name = data.get("statechart") or (data.get("extends") if is_overlay(data) else None)
    return name if isinstance(name, str) else path.stem


@dataclass(frozen=True)
class ChartSource:
    path: Path
    name: str
    layer: str  # BUILTIN, PLUGIN, WORKSPACE or FILE
    origin: str  # "built-in", "acme-orion 1.0" (a plugin's distribution), or the file
    extends: str | None = None


@dataclass
class Resolved:
    """A chart as it runs: merged with what it extends, checked, with every finding. A chart
    that lacks only what a migration adds runs migrated (``spec`` is the migrated chart), with
    a warning for each thing the migration adds."""

    source: ChartSource
    doc: SourceDocument | None
    spec: StatechartSpec | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    #: What a migration of the file adds (``orion migrate``), when it lacks some of it.
    migration: Needed | None = None

    @property
    def ok(self) -> bool:
        return self.spec is not None and not self.diagnostics


class Catalog:
    """The lifecycles a runtime (or ``orion check``) sees, for one plugin manager and
    workspace configuration."""

    def __init__(self, plugins: Any, config: WorkspaceConfig | None = None, *,
                 cache: ChartCache | None = None):
        self.plugins = plugins
        self.config = config
        #: Parsed files, resolutions and compiled overlays: this catalog's own, or shared with
        #: the catalogs given the same cache.
        self.cache = ChartCache() if cache is None else cache
        self.sources: dict[str, list[ChartSource]] = {}
        for path in builtin_statecharts():
            self._add(ChartSource(path, declared_name(path, self.cache) or path.stem, BUILTIN, "built-in"))
        by_plugin: dict[str, ChartSource] = {}
        for path, plugin in plugins.registry.statecharts:
            source = ChartSource(path, declared_name(path, self.cache) or path.stem, PLUGIN,
                                 self._plugin_origin(plugin))
            other = by_plugin.get(source.name)
            if other is not None and (other.path, other.origin) == (source.path, source.origin):
                continue  # the same file, registered again by the same plugin
            if other is not None:
                raise PluginError(f"statechart {source.name!r} is shipped twice: by "
                                  f"{other.origin} ({other.path}) and by {source.origin} "
                                  f"({source.path}); disable one in orion.yaml "
                                  "(plugins: disable: [...])")
            by_plugin[source.name] = source
            self._add(source)
        if config is not None:
            for path in config.statechart_paths():
                self._add(ChartSource(path, declared_name(path, self.cache) or path.stem, WORKSPACE,
                                      str(path)))
        self._resolved = self.cache.resolutions_for(self._fingerprint(), plugins)

    def _fingerprint(self) -> tuple:
        """What resolving depends on: every file and what ``stat`` says of it, the plugins."""
        files: list[tuple[ChartSource, int | None, int | None]] = []
        for chain in self.sources.values():
            for source in chain:
                try:
                    info = source.path.stat()
                    files.append((source, info.st_mtime_ns, info.st_size))
                except OSError:
                    files.append((source, None, None))
        return (id(self.plugins), id(self.plugins.registry), tuple(files))

    def _plugin_origin(self, plugin: str) -> str:
        origin = self.plugins.origins.get(plugin)
        if origin is not None and origin.distribution:
            return f"{origin.distribution} {origin.version or ''}".strip()
        return f"plugin {plugin}"

    def _add(self, source: ChartSource) -> None:
        extends = None
        try:
            data = self.cache.load(source.path).data
            if is_overlay(data) and isinstance(data["extends"], str):
                extends = data["extends"]
        except YamlSourceError:
            pass
        source = ChartSource(source.path, source.name, source.layer, source.origin, extends)
        self.sources.setdefault(source.name, []).append(source)

    # -- lookups ------------------------------------------------------------------------------

    def names(self) -> list[str]:
        return sorted(self.sources)

    def known(self) -> list[str]:
        """The lifecycles Orion or a plugin provides: the names a workspace may replace."""
        return sorted(n for n, s in self.sources.items()
                      if any(x.layer in (BUILTIN, PLUGIN) for x in s))

    def winner(self, name: str) -> ChartSource:
        if name not in self.sources:
            hint = difflib.get_close_matches(name, self.names(), n=1)
            raise ConfigError(f"no statechart named {name!r} (known: {', '.join(self.names())})"
                              + (f"; did you mean {hint[0]!r}?" if hint else ""))
        return self.sources[name][-1]

    def describe(self, source: ChartSource) -> str:
        """``write_session: from acme-orion 1.0 (overrides built-in)``."""
        chain = self.sources.get(source.name, [])
        below = chain[:chain.index(source)] if source in chain else []
        if not below:
            return f"{source.name}: {source.origin}" if source.layer == BUILTIN \
                else f"{source.name}: from {source.origin}"
        how = "extends" if source.extends == source.name else "overrides"
        return f"{source.name}: from {source.origin} ({how} {below[-1].origin})"

    # -- resolution ---------------------------------------------------------------------------

    def resolve(self, source: ChartSource, _seen: tuple[Path, ...] = ()) -> Resolved:
        cached = self._resolved.get(source.path)
        if cached is not None and cached.source == source:
            return cached
        result = self._resolve(source, (*_seen, source.path))
        self._resolved[source.path] = result
        return result

    def resolve_file(self, path: Path) -> Resolved:
        """A file given on the command line: in the catalog, or on its own (an overlay then
        extends the lifecycle the catalog resolves for its base name)."""
        path = Path(path)
        for chain in self.sources.values():
            for source in chain:
                if source.path.resolve() == path.resolve():
                    return self.resolve(source)
        source = ChartSource(path, declared_name(path, self.cache) or path.stem, FILE, str(path))
        self._add(source)  # for as long as it is resolved: an overlay extends what is below it
        shared, self._resolved = self._resolved, {}
        try:
            return self.resolve(self.sources[source.name][-1])
        finally:
            self._resolved = shared
            self.sources[source.name].pop()
            if not self.sources[source.name]:
                del self.sources[source.name]

    def _resolve(self, source: ChartSource, seen: tuple[Path, ...]) -> Resolved:
        try:
            doc = self.cache.load(source.path)
        except YamlSourceError as exc:
            return Resolved(source, None, None, checks.coded(exc.diagnostics,
                                                             checks.YAML_SOURCE))
        resolved = self._resolve_document(source, doc, seen)
        if resolved.migration is not None and not resolved.diagnostics:
            return self._run_migrated(resolved, doc, seen)
        return resolved

    def _resolve_document(self, source: ChartSource, doc: SourceDocument,
                          seen: tuple[Path, ...]) -> Resolved:
        registry = self.plugins.registry
        names = checks.Names(registry.guards_for(source.name), registry.actions_for(source.name))
        chain = self.sources.get(source.name, [source])
        below = chain[:chain.index(source)] if source in chain else []
        if is_overlay(doc.data):
            merged = self._merged(source, doc, below, seen)
            if isinstance(merged, list):
                return Resolved(source, doc, None, merged)
            doc = merged
        spec, diagnostics = checks.check(doc, names)
        if spec is None:
            return Resolved(source, doc, None, diagnostics)
        diagnostics += list(check_ids(doc, spec))
        if source.layer == WORKSPACE and source.name not in self.known() and not below:
            diagnostics.append(self._unknown(
                doc, ("statechart",) if "statechart" in (doc.data or {}) else ("extends",),
                source.name, f"statechart {source.name!r} is not a lifecycle Orion or a "
                             "plugin runs, so nothing would use this chart", UNUSED_CHART))
        required: list[Requirement] = []
        declaring: dict[str, StatechartSpec] = {}
        for lower in below:
            resolved = self.resolve(lower, seen)
            if resolved.spec is not None:
                declaring[f"{lower.origin} {lower.name}"] = resolved.spec
                required += requirements(resolved.spec, f"{lower.origin} {lower.name}")
        # A chart's own contract asks nothing of it that a migration could add.
        required += [replace(r, since=None)
                     for r in requirements(spec, f"{source.origin} {source.name}")]
        version = written_for(spec)
        found = list(check_contract(doc, spec, required, version))
        diagnostics += [d for d in found if d.severity != "warning"]
        warnings = _by_position([d for d in found if d.severity == "warning"])
        movable = migratable(doc, spec, required, version)
        needed = Needed(tuple(movable), declaring, max(
            (written_for(s) for s in declaring.values()), default=version)) if movable else None
        return Resolved(source, doc, spec, _by_position(diagnostics), warnings, needed)

    def _run_migrated(self, resolved: Resolved, doc: SourceDocument,
                      seen: tuple[Path, ...]) -> Resolved:
        """A chart that lacks only what a migration adds runs migrated, for one release: the
        migration of its file, made in memory, resolved again; the warnings say what it adds
        and which command writes it."""
        migration = self.migration(resolved, doc)
        if isinstance(migration, Diagnostic):
            return Resolved(resolved.source, resolved.doc, resolved.spec, [migration],
                            resolved.warnings, resolved.migration)
        again = self._resolve_document(resolved.source, load_yaml(
            resolved.source.path, text=migration.migrated), seen)
        if again.spec is None or again.diagnostics:  # the migration did not do what it meant
            return Resolved(resolved.source, resolved.doc, resolved.spec, again.diagnostics,
                            resolved.warnings, resolved.migration)
        return Resolved(resolved.source, again.doc, again.spec, [], resolved.warnings,
                        resolved.migration)

    def migration(self, resolved: Resolved,
                  doc: SourceDocument | None = None) -> Migration | Diagnostic:
        """The migration of ``resolved``'s file (what ``orion migrate`` writes), or the
        finding that says why it cannot be made."""
        path = resolved.source.path
        assert resolved.migration is not None
        try:
            doc = doc if doc is not None else self.cache.load(path)
            text = read_regular(path, CONFIG_LIMIT).decode("utf-8")
            return migrate(doc, text, resolved.migration)
        except (MigrationError, NotReadable, OSError, UnicodeDecodeError,
                YamlSourceError) as exc:
            return Diagnostic(str(path), 1, 1, f"cannot migrate this chart: {exc}",
                              CONTRACT_VERSION)

    def _merged(self, source: ChartSource, doc: SourceDocument, below: list[ChartSource],
                seen: tuple[Path, ...]) -> SourceDocument | list[Diagnostic]:
        """The overlay ``doc`` merged into the chart it extends, or the findings that stop
        it."""
        base = self._base(source, doc, below)
        if isinstance(base, Diagnostic):
            return [base]
        if base is not None and base.path in seen:
            return [doc.diagnostic(("extends",), f"'extends' makes a cycle: {source.name} "
                                                 f"extends {base.name}, which extends it back",
                                   code=EXTENDS)]
        if base is None:
            merged, problems = merge(SourceDocument(str(source.path), {}), doc)
        else:
            parent = self.resolve(base, seen)
            if parent.doc is None or parent.spec is None or parent.diagnostics:
                return [doc.diagnostic(("extends",), f"the chart it extends ({base.path}) has "
                                                     "errors; `orion check` lists them",
                                       code=EXTENDS)]
            merged, problems = merge(parent.doc, doc)
        return problems if merged is None else merged

    def _base(self, source: ChartSource, doc: SourceDocument,
              below: list[ChartSource]) -> ChartSource | Diagnostic | None:
        """The chart an overlay extends: the next weaker chart of its own name, or the
        strongest of another; ``None`` when ``extends`` is not a name (its schema check says
        so)."""
        base_name = doc.data.get("extends")
        if not isinstance(base_name, str):
            return None
        if base_name == source.name and below:
            return below[-1]
        if base_name != source.name and base_name in self.sources:
            return self.sources[base_name][-1]
        return self._unknown(doc, ("extends",), base_name, f"'extends' names {base_name!r}, "
                             "which is no statechart of Orion or of a plugin", EXTENDS)

    def _unknown(self, doc: SourceDocument, loc: tuple, name: str, message: str,
                 code: str) -> Diagnostic:
        hint = difflib.get_close_matches(name, self.known() or self.names(), n=1)
        return doc.diagnostic(loc, f"{message} (known: {', '.join(self.known())})"
                                   + (f"; did you mean {hint[0]!r}?" if hint else ""), code=code)

    # -- compiled lifecycles ------------------------------------------------------------------

    def definition(self, name: str, *, overrides: Mapping[str, Any] | None = None,
                   env: Mapping[str, str] | None = None,
                   overrides_origin: str = "orion.yaml") -> Definition:
        """The compiled lifecycle ``name`` with its settings resolved. Raises
        :class:`StatechartError` with every finding (a contract the chart breaks included)."""
        source = self.winner(name)
        resolved = self.resolve(source)
        if not resolved.ok:
            raise StatechartError(resolved.diagnostics)
        if source.extends is None and len(self.sources[name]) == 1:
            # A chart that replaces nothing: the plain file, with load_definition's caches.
            return load_definition(source.path, plugins=self.plugins, overrides=overrides,
                                   env=env, overrides_origin=overrides_origin)
        return self.cache.compile(resolved, self.plugins, overrides, env, overrides_origin)


def _by_position(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(diagnostics, key=lambda d: (d.path, d.line, d.column))
