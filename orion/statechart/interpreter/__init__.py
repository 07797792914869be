"""Running a chart: a compiled :mod:`.definition` (a ``transitions`` machine extended with
Orion's SCXML rules, :mod:`.semantics`), its instances (:mod:`.lifecycle`) and its typed
:mod:`.settings`."""
