"""The tests of ``transitions``' hierarchical suite that pass on the library and are expected
to fail on Orion's machine, each with the section of docs/statecharts.md that documents the
difference. Empty: built with the library's arguments, the machine keeps the library's rules,
and Orion's own (docs/statecharts.md, "On `transitions`") apply to compiled charts."""

from __future__ import annotations

#: test id (``module.Class::test``) -> the heading of docs/statecharts.md that explains it.
EXPECTED_FAILURES: dict[str, str] = {}
