"""Snapshot-summary keys that ingest_cdc writes and other procedures read (one definition).

Floor: planning (pure: no pyspark, no py4j).
"""

CHECKPOINT_ID = "sparkext.cdc.checkpoint-id"
BATCH_ID = "sparkext.cdc.batch-id"
MAX_POSITION = "sparkext.cdc.max-position"  # source high-water mark over every batch so far
TRUNCATE_POSITION = "sparkext.cdc.truncate-position"  # newest truncate applied so far
SOURCE_PROGRESS = "sparkext.cdc.source-progress"  # JSON: source partition -> max position
EVENTS_LOCATION = "sparkext.cdc.events-location"  # the batch's event log (all events, Parquet)
EVENT_TIME_MIN = "sparkext.event-time.min"  # epoch ms, over every event of the batch
EVENT_TIME_MAX = "sparkext.event-time.max"
EVENT_TIME_MAX_SO_FAR = "sparkext.event-time.max-so-far"  # over this and every earlier batch

# Table property: JSON {checkpoint id: event-log root} of every checkpoint that wrote the table,
# so each writer finds the others' deletes (tombstones) after rewrite_equality_deletes.
EVENT_LOGS = "sparkext.cdc.event-logs"
