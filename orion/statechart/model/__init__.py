"""The chart as data: the file format (:mod:`.schema`), its states as a tree of ``.`` paths
(:mod:`.tree`), and the tags and contracts that code relies on (:mod:`.contract`)."""
