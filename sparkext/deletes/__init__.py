"""Executor-side work of rewrite_equality_deletes: positions from keys, delete-file writers."""
