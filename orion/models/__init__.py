"""Model adapters: one normalized stream of events from any OpenAI-compatible endpoint or a script."""
