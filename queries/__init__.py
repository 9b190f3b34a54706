"""Packaged SQL: the store schema and one file per hypothesis."""
