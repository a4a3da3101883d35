"""Streaming inputs from outside files: ``postgres_table`` reads a PostgreSQL table as a stream
of its changed rows (docs/sources.md), e.g. rules that an admin edits, as a broadcast side."""

from sparkcast.sources.postgres import postgres_table, version_trigger_sql

__all__ = ["postgres_table", "version_trigger_sql"]
