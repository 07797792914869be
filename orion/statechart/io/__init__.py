"""Charts in and out: the built-in files (:mod:`.builtin`), reading and checking a YAML file
(:mod:`.source`), overlays (:mod:`.overlay`), the catalog of the charts a workspace runs
(:mod:`.catalog`), diagrams (:mod:`.diagrams`) and the JSON Schema (:mod:`.jsonschema`)."""
