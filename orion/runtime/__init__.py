"""The runtime: conversation, turn pipeline, compaction and the script runner."""
