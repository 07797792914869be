"""Plan mode: one canonical Markdown plan per workspace, with revisions, driven by the
``plan_mode`` statechart and persisted in ``plans.db``."""
