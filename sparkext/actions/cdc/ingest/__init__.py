"""ingest_cdc's driver side: Debezium change events into an Iceberg merge-on-read table, one
atomic commit per micro-batch.

Floor: actions (driver side of ingest_cdc). The stages, each a module:

* :mod:`.pipeline`: :class:`Ingestor`, the long-lived object a stream hands its micro-batches;
  runs each through the stages below with a per-batch :class:`~.state.BatchState`;
* :mod:`.guess`: typing a batch with its table's last batch's facts, checked against its own;
* :mod:`.decide`: which key's last change applies, is late or a duplicate;
* :mod:`.write`: data, equality-delete, key-cache and event-log files; rejects and late events;
* :mod:`.commit`: the batch's one Iceberg commit and its policy;
* :mod:`.toast`: values Debezium does not have (unchanged TOASTed columns);
* :mod:`.columns`: system columns and the column expressions the stages share;
* :mod:`.figures`: what the jobs observe on the way, as typed figures;
* :mod:`.state`, :mod:`.table`: what the stages pass each other; the target table.
"""

from __future__ import annotations

from sparkext.actions.cdc.ingest.columns import (
    EVENT_TIME,
    OP,
    POSITION,
    SYSTEM_COLUMNS,
    SYSTEM_NAMES,
    TABLE_PROPERTIES,
)
from sparkext.actions.cdc.ingest.commit import KeysChanged
from sparkext.actions.cdc.ingest.guess import GuessCache
from sparkext.actions.cdc.ingest.pipeline import BATCH_SQL_CONF, Ingestor, tune_batch_session
from sparkext.actions.cdc.ingest.state import NO_HOOKS, Hooks

__all__ = [
    "BATCH_SQL_CONF",
    "EVENT_TIME",
    "NO_HOOKS",
    "OP",
    "POSITION",
    "SYSTEM_COLUMNS",
    "SYSTEM_NAMES",
    "TABLE_PROPERTIES",
    "GuessCache",
    "Hooks",
    "Ingestor",
    "KeysChanged",
    "tune_batch_session",
]
