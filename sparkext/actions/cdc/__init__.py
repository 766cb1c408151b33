"""CDC ingestion: Debezium change events into Iceberg merge-on-read tables (equality deletes).

Floor: actions (the work, typed results).
"""
