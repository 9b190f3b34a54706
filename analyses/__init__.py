"""Turn loaded tables into typed verdicts."""
