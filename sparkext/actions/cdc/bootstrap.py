"""bootstrap_cdc: copy a large source table into a new Iceberg CDC table at one consistent point,
in ONE commit whose snapshot summary records that point the way ingest_cdc records its progress,
so that a following ingest_cdc applies exactly the changes after it.

PostgreSQL over JDBC (:func:`bootstrap_postgres`):

1. the driver checks the source (``wal_level``, the primary key, the slot, the publication) and
   reads the WAL position ``X`` (``pg_current_wal_lsn()``);
2. it creates the logical replication slot on a replication connection, exporting its snapshot
   (``CREATE_REPLICATION_SLOT ... (SNAPSHOT 'export')``), and keeps that connection open;
3. it samples the key, cuts it into ranges at the sample's quantiles (the source's own order);
4. Spark's JDBC reader reads one range per task on the executors, each on its own connection
   whose ``sessionInitStatement`` imports the exported snapshot (``SET TRANSACTION SNAPSHOT``) in
   the REPEATABLE READ transaction pgjdbc opens for a cursor; a guard in every range's query
   fails it if it is not read in that snapshot; the tasks write the Iceberg data files;
5. the driver commits them as ONE append whose summary holds the point ``p:<X>:0`` as the
   table's high-water mark, and the source's clock just before the slot as the time the table
   is complete through (cdc_lag); the slot is closed (and dropped again if anything failed).

MySQL and MariaDB over JDBC (:func:`bootstrap_mysql`), with the connector already streaming:
the binlog position ``P`` read under ``LOCK TABLES ... READ`` (every change below it is then in
the table), the ranges read after it in UTC sessions, the same commit with ``P`` as the point.
The copy is not one snapshot; the connector re-sends every change after ``P`` with the whole
row, so applying them over the copy ends at the source's rows.

A dump taken by another tool (:func:`bootstrap_dump`): a Spark-readable table or Parquet path,
and the position the tool recorded; the same commit.

Every copied row carries the point as its version (``_cdc_position``), and the point is also the
table's truncate mark: ingest_cdc's per-key check then calls every change at or before the point
late (or a duplicate) whether or not the key was copied, and applies every later one. For the
slot, every change it sends lies above ``p:<X>:0``: creating a slot waits until the
transactions running when it started have ended (they end before its consistent point, so the
copy holds them); every transaction it sends got its first write after ``X``.

Floor: actions (the procedure :mod:`sparkext.procedures.bootstrap_cdc` calls :func:`bootstrap`
and gets a typed :class:`Result` back; this module declares the options).

Over 600 lines on purpose: the consistent point, the per-family source reads and the one
commit holding the point are one action; the pure parts are already
:mod:`sparkext.planning.bootstrap`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkext.actions.cdc.connection import CONNECTION_OPTIONS, connection, is_database
from sparkext.actions.cdc.ingest import (
    EVENT_TIME,
    OP,
    SYSTEM_COLUMNS,
    TABLE_PROPERTIES,
)
from sparkext.actions.cdc.ingest import (
    POSITION as POSITION_COLUMN,
)
from sparkext.actions.cdc.types import ntz_from_micros
from sparkext.declarations import Option, parse_count, parse_names
from sparkext.errors import ProcedureArgumentError, SourceDatabaseError
from sparkext.iceberg.cdc_table import CdcTable, create_table
from sparkext.iceberg.jdbc import Pool, create_exported_slot, dialect_of
from sparkext.planning import bootstrap as plan
from sparkext.planning.reconcile import identifier
from sparkext.planning.summary import (
    BATCH_ID,
    CHECKPOINT_ID,
    EVENT_TIME_MAX,
    EVENT_TIME_MAX_SO_FAR,
    MAX_POSITION,
    SOURCE_PROGRESS,
    TRUNCATE_POSITION,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

CHECKPOINT = "bootstrap_cdc"  # the summary's checkpoint id: ingest_cdc reads its marks
BOOTSTRAP_POINT = "sparkext.cdc.bootstrap-point"  # the source's own text of the point
INTEGER_TYPES = ("smallint", "integer", "bigint")


def parse_key(text: str) -> list[str]:
    """Comma-separated key columns, or none.

    >>> parse_key("id, region"), parse_key("")
    (['id', 'region'], [])
    """
    return parse_names(text) if text.strip() else []


SOURCE_TABLE = "source-table"
SEGMENTS = "segments"
SLOT = "slot"
PUBLICATION = "publication"
FETCH_SIZE = "fetch-size"
POSITION = "position"
PRIMARY_KEY = "primary-key"
BIGINT_UNSIGNED_HANDLING = "bigint-unsigned-handling"

OPTIONS = (
    Option(
        SOURCE_TABLE,
        "",
        "the source table: schema.table (PostgreSQL), database.table (MySQL)",
    ),
    *CONNECTION_OPTIONS,
    Option(SEGMENTS, "16", "key ranges read in parallel (Spark tasks)", parse_count),
    Option(SLOT, "debezium", "the replication slot to create (Debezium's slot.name)"),
    Option(
        PUBLICATION,
        "dbz_publication",
        "the publication Debezium reads (publication.name); created for the table if missing",
    ),
    Option(FETCH_SIZE, "10000", "rows per JDBC fetch", parse_count),
    Option(
        POSITION,
        "",
        "a dump's point: a PostgreSQL LSN ('0/1D420E8') or MySQL 'binlog-file:pos'",
    ),
    Option(PRIMARY_KEY, "", "a dump's key column(s), comma-separated", parse_key),
    Option(
        BIGINT_UNSIGNED_HANDLING,
        "long",
        "MySQL: the connector's bigint.unsigned.handling.mode (long or precise), so the "
        "copy types bigint unsigned as its events do",
    ),
)


@dataclass(frozen=True)
class Settings:
    table: str
    source_table: str = ""
    segments: int = 16
    slot: str = "debezium"
    publication: str = "dbz_publication"
    fetch_size: int = 10000
    primary_key: tuple[str, ...] = ()
    position: str = ""
    unsigned_bigint: str = "long"  # MySQL: the connector's bigint.unsigned.handling.mode


@dataclass(frozen=True)
class Result:
    rows: int
    segments: int
    source_position: str  # the recorded position string (sparkext.planning.positions)
    consistent_point: str  # the source's own text: the slot's LSN, or the stated position
    snapshot_id: int | None
    slot: str | None
    publication: str | None
    seconds: float
    rows_per_second: float

    def row(self) -> tuple[Any, ...]:
        """The procedure's output row (its declared columns, in order)."""
        return (
            self.rows, self.segments, self.source_position, self.consistent_point,
            self.snapshot_id, self.slot, self.publication, round(self.seconds, 3),
            round(self.rows_per_second, 1),
        )  # fmt: skip


def bootstrap(
    spark: SparkSession,
    table: str,
    source: str,
    options: Mapping[str, Any],
    progress: Callable[[str], None] = lambda m: None,
) -> Result:
    """Copy ``source`` (a JDBC URL, a named connection, or a dump) into ``table``;
    ``options`` are the resolved :data:`OPTIONS`."""
    settings = Settings(
        table=table,
        source_table=options[SOURCE_TABLE],
        segments=max(1, options[SEGMENTS]),
        slot=options[SLOT],
        publication=options[PUBLICATION],
        fetch_size=max(1, options[FETCH_SIZE]),
        primary_key=tuple(options[PRIMARY_KEY]),
        position=options[POSITION],
        unsigned_bigint=options[BIGINT_UNSIGNED_HANDLING].strip().lower(),
    )
    if not is_database(spark, source):
        return bootstrap_dump(spark, settings, source, progress)
    url, properties = connection(spark, source, options)
    if settings.position:
        raise ProcedureArgumentError(
            "position => is the point of a dump; a database source is copied at a point "
            "bootstrap_cdc takes itself: leave the position option out."
        )
    copy = bootstrap_postgres if dialect_of(url) == "postgres" else bootstrap_mysql
    pool = Pool(spark, url, properties, 2)
    try:
        return copy(spark, settings, url, properties, pool, progress)
    finally:
        pool.close()


def check_target(spark: SparkSession, table: str) -> None:
    """Refuse a lake table that already holds rows (a bootstrap starts a table)."""
    if spark.catalog.tableExists(table) and spark.table(table).limit(1).count() > 0:
        raise ProcedureArgumentError(
            f"{table} already holds rows; bootstrap_cdc starts a table: drop it, or bootstrap "
            "into a new name."
        )


def bootstrap_postgres(
    spark: SparkSession,
    settings: Settings,
    url: str,
    properties: Mapping[str, str],
    pool: Pool,
    progress: Callable[[str], None] = lambda m: None,
    on_point: Callable[[], None] | None = None,
) -> Result:
    """Copy a PostgreSQL table at the exported snapshot of a new slot (see the module)."""

    started = time.monotonic()
    check_target(spark, settings.table)
    if not settings.source_table:
        raise ProcedureArgumentError(
            "bootstrap_cdc needs the source table: add options => map('source-table', "
            "'schema.table')."
        )
    source = (
        settings.source_table
        if "." in settings.source_table
        else (f"public.{settings.source_table}")
    )
    _check_wal_level(pool)
    columns, key = _source_columns(pool, source)
    _check_slot(pool, settings.slot)
    _ensure_publication(pool, settings.publication, source)
    version = int(pool.query("SHOW server_version_num")[0][0] or 0)
    start_lsn = plan.lsn_number(str(pool.query("SELECT pg_current_wal_lsn()::text")[0][0]))
    position = plan.pg_point(start_lsn or 0)
    (clock,) = pool.query("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint")[0]
    progress(f"creating replication slot {settings.slot}")
    slot = create_exported_slot(spark, url, properties, settings.slot, server_version=version)
    committed = False
    try:
        if on_point is not None:
            on_point()
        guard = pool.query_in_snapshot(slot.snapshot, "SELECT txid_current_snapshot()::text")
        edges = _edges(pool, source, key[0], settings.segments)
        guarded = plan.snapshot_guard(str(guard[0][0]))  # not in the schema query Spark runs
        predicates = [
            f"{p} AND {guarded}"
            for p in plan.range_predicates(
                key[0], edges, _type_of(columns, key[0]) in INTEGER_TYPES
            )
        ]
        progress(f"copying {source} in {len(predicates)} key ranges at {slot.consistent_point}")
        init = (
            "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; "
            f"SET TRANSACTION SNAPSHOT '{slot.snapshot}'"
        )
        frame = spark.read.jdbc(
            url,
            plan.select_sql(source, columns),
            predicates=predicates,
            properties={
                **properties,
                "driver": "org.postgresql.Driver",
                # > 0: PostgreSQL's dialect turns autocommit off, so pgjdbc opens the
                # transaction the init statement's snapshot import needs (and reads by cursor)
                "fetchsize": str(max(1, settings.fetch_size)),
                "sessionInitStatement": init,
            },
        )
        snapshot_id, rows = _land(
            spark, settings, _converted(frame, columns), key, position, source,
            slot.consistent_point, progress, None, int(str(clock)),
        )  # fmt: skip
        committed = True
    finally:
        slot.close()
        if not committed:
            _drop_slot(pool, settings.slot)
    seconds = time.monotonic() - started
    return Result(
        rows, len(predicates), position, slot.consistent_point, snapshot_id, settings.slot,
        settings.publication, seconds, rows / seconds if seconds > 0 else 0.0,
    )  # fmt: skip


def bootstrap_mysql(
    spark: SparkSession,
    settings: Settings,
    url: str,
    properties: Mapping[str, str],
    pool: Pool,
    progress: Callable[[str], None] = lambda m: None,
    on_point: Callable[[], None] | None = None,
) -> Result:
    """Copy a MySQL/MariaDB table from the binlog position read under a table read lock (see
    the module): the connector, started before, applies every change after that point again,
    and full row images make that converge on the source's rows."""
    started = time.monotonic()
    check_target(spark, settings.table)
    if not settings.source_table:
        raise ProcedureArgumentError(
            "bootstrap_cdc needs the source table: add options => map('source-table', "
            "'database.table')."
        )
    if url.lower().startswith("jdbc:mariadb:"):
        raise ProcedureArgumentError(
            "bootstrap_cdc reads MySQL and MariaDB through Spark's MySQL dialect, which only "
            "jdbc:mysql:// URLs get; write the URL as jdbc:mysql://... (MariaDB's driver takes "
            "it with permitMysqlScheme)."
        )
    if settings.unsigned_bigint not in ("long", "precise"):
        raise ProcedureArgumentError(
            f"bigint-unsigned-handling => '{settings.unsigned_bigint}' is not one of the "
            "connector's modes this copy follows; write 'long' (its default) or 'precise'."
        )
    source = settings.source_table
    _check_binlog(pool)
    columns, key = _mysql_columns(pool, source, settings.unsigned_bigint)
    (clock,) = pool.query("SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)")[0]
    progress(f"reading the binlog position under a read lock on {source}")
    file, offset = _mysql_point(pool, source)
    position = plan.mysql_point(file, offset)
    point_text = f"{file}:{offset}"
    if on_point is not None:
        on_point()
    edges = _mysql_edges(pool, source, key[0], settings.segments)
    numeric = next(c for c in columns if c.name == key[0]).spark_type in ("int", "bigint")
    predicates = plan.range_predicates(key[0], edges, numeric, "mysql")
    progress(f"copying {source} in {len(predicates)} key ranges from {point_text}")
    options = {
        "useCursorFetch": "true",  # Connector/J: stream each range instead of holding it
        **properties,
        "fetchsize": str(max(1, settings.fetch_size)),
        # a timestamp column's instant and a datetime's wall-clock time, whatever the zone
        "sessionInitStatement": "SET time_zone = '+00:00'",
    }
    frame = spark.read.jdbc(
        url, plan.select_sql(source, columns, "mysql"), predicates=predicates, properties=options
    )
    snapshot_id, rows = _land(
        spark, settings, _converted(frame, columns), key, position, source, point_text,
        progress, None, int(str(clock)),
    )  # fmt: skip
    seconds = time.monotonic() - started
    return Result(
        rows, len(predicates), position, point_text, snapshot_id, None, None, seconds,
        rows / seconds if seconds > 0 else 0.0,
    )  # fmt: skip


def _check_binlog(pool: Pool) -> None:
    """Debezium's MySQL connector needs the binary log on, in ROW format with FULL images;
    the copy's convergence needs the full images too."""
    log_bin, row_format, image = pool.query(
        "SELECT @@log_bin, @@binlog_format, @@binlog_row_image"
    )[0]
    if str(log_bin) not in ("1", "ON"):
        raise SourceDatabaseError(
            "The source's binary log is off, so no change after the copy can be streamed; "
            "start the server with log_bin (and binlog_format = ROW) and restart it."
        )
    if str(row_format).upper() != "ROW" or str(image).upper() != "FULL":
        raise SourceDatabaseError(
            f"The source's binlog_format is {row_format} and binlog_row_image {image}; Debezium "
            "and a bootstrap need ROW and FULL: SET GLOBAL binlog_format = 'ROW', "
            "binlog_row_image = 'FULL'."
        )


def _mysql_columns(
    pool: Pool, source: str, unsigned_bigint: str
) -> tuple[list[plan.Column], list[str]]:
    schema, _, name = source.rpartition(".")
    where = (
        f"table_schema = {plan.text_literal(schema) if schema else 'DATABASE()'} "
        f"AND table_name = {plan.text_literal(name)}"
    )
    rows = pool.query(
        "SELECT column_name, data_type, column_type FROM information_schema.columns "
        f"WHERE {where} ORDER BY ordinal_position"
    )
    if not rows:
        raise SourceDatabaseError(
            f"The source has no table {source} (or this user cannot see it); name it as "
            "database.table in the source-table option."
        )
    key = [
        str(r[0])
        for r in pool.query(
            "SELECT column_name FROM information_schema.key_column_usage "
            f"WHERE {where} AND constraint_name = 'PRIMARY' ORDER BY ordinal_position"
        )
    ]
    if not key:
        raise SourceDatabaseError(
            f"The source table {source} has no primary key, and a CDC table is upserted key "
            f"by key; add one (ALTER TABLE {source} ADD PRIMARY KEY (...)) before bootstrapping."
        )
    columns = [plan.mysql_column_plan(str(n), str(t), str(d), unsigned_bigint) for n, t, d in rows]
    return columns, key


def _mysql_point(pool: Pool, source: str) -> tuple[str, int]:
    """The binlog file and position, read while a read lock on the table is held: taking it
    waits for every transaction that wrote the table to finish committing, and no new one can
    write until it is released, so every change below the position is in the rows read after
    it."""
    lock = [
        "SET SESSION lock_wait_timeout = 60",
        f"LOCK TABLES {plan.table_sql(source, 'mysql')} READ",
    ]
    rows: list[tuple[str | None, ...]] = []
    for status in ("SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"):  # MySQL 8.4 renamed it
        try:
            rows = pool.query_in_session(lock, status, ["UNLOCK TABLES"])
            break
        except SourceDatabaseError as error:
            if "syntax" not in str(error).lower() or status != "SHOW MASTER STATUS":
                raise
    if not rows or rows[0][0] is None:
        raise SourceDatabaseError(
            "The source's binary log is off (SHOW MASTER STATUS is empty); start the server "
            "with log_bin, as Debezium's MySQL connector needs."
        )
    return str(rows[0][0]), int(str(rows[0][1]))


def _mysql_edges(pool: Pool, source: str, key: str, segments: int) -> list[Any]:
    """Range edges at the quantiles of a key sample sorted by the source (its collation)."""
    if segments <= 1:
        return []
    schema, _, name = source.rpartition(".")
    estimate = pool.query(
        "SELECT table_rows FROM information_schema.tables WHERE table_schema = "
        f"{plan.text_literal(schema) if schema else 'DATABASE()'} "
        f"AND table_name = {plan.text_literal(name)}"
    )
    rows = float(estimate[0][0] or 0) if estimate else 0.0
    fraction = plan.sample_percent(rows, segments) / 100
    column = identifier(key, "mysql")
    sample = f" WHERE RAND() < {fraction}" if fraction < 1 else ""
    keys = [
        r[0]
        for r in pool.query(
            f"SELECT {column} FROM {plan.table_sql(source, 'mysql')}{sample} ORDER BY {column}"
        )
    ]
    return plan.boundaries(keys, segments)


def bootstrap_dump(
    spark: SparkSession,
    settings: Settings,
    dump: str,
    progress: Callable[[str], None] = lambda m: None,
) -> Result:
    """Land a dump (``parquet:<path>`` or a table name) at the position its tool recorded."""
    started = time.monotonic()
    position = plan.parse_position(settings.position) if settings.position else None
    if position is None:
        raise ProcedureArgumentError(
            f"position => '{settings.position}' is not a source position; state the dump's "
            "point as a PostgreSQL LSN ('0/1D420E8') or a MySQL binlog file and position "
            "('mysql-bin.000003:154')."
        )
    if not settings.primary_key:
        raise ProcedureArgumentError(
            "bootstrap_cdc from a dump needs the primary key: add options => map('primary-key', "
            "'id') (comma-separated for several columns)."
        )
    check_target(spark, settings.table)
    frame = (
        spark.read.parquet(dump[len("parquet:") :])
        if dump.startswith("parquet:")
        else (spark.table(dump))
    )
    missing = [k for k in settings.primary_key if k not in frame.columns]
    if missing:
        raise ProcedureArgumentError(
            f"primary-key column(s) {', '.join(missing)} are not in the dump; its columns: "
            f"{', '.join(frame.columns)}."
        )
    snapshot_id, rows = _land(
        spark, settings, frame, list(settings.primary_key), position, dump,
        settings.position.strip(), progress,
    )  # fmt: skip
    seconds = time.monotonic() - started
    return Result(
        rows, frame.rdd.getNumPartitions(), position, settings.position.strip(), snapshot_id,
        None, None, seconds, rows / seconds if seconds > 0 else 0.0,
    )  # fmt: skip


def _land(
    spark: SparkSession,
    settings: Settings,
    frame: DataFrame,
    key: Sequence[str],
    position: str,
    source: str,
    point_text: str,
    progress: Callable[[str], None],
    version: str | None = None,
    source_time_ms: int | None = None,
) -> tuple[int | None, int]:
    """Create the table (if missing) and append ``frame`` in one commit holding the point.

    ``version``: the copied rows' version and the truncate mark (default: the point itself);
    ``source_time_ms``: the source's clock at (or just before) the copy's snapshot, so cdc_lag
    knows the table is complete through it."""
    version = version or position
    import json

    from pyspark.sql import functions as F

    clash = [c for c in frame.columns if c in {OP, EVENT_TIME, POSITION_COLUMN}]
    if clash:
        raise ProcedureArgumentError(
            f"the source has column(s) {', '.join(clash)}, which ingest_cdc keeps for itself; "
            "rename them in the source or the dump."
        )
    typed = frame.select(
        *[F.col(f"`{c}`") for c in frame.columns],
        F.lit("r").alias(OP),
        F.current_timestamp().alias(EVENT_TIME),
        F.lit(version).alias(POSITION_COLUMN),
    )
    if not spark.catalog.tableExists(settings.table):
        columns = [(f.name, f.dataType.simpleString()) for f in frame.schema.fields]
        properties = {**TABLE_PROPERTIES, "sparkext.cdc.source-table": source}
        progress(f"creating {settings.table}")
        create_table(spark, settings.table, [*columns, *SYSTEM_COLUMNS], key, properties)
    table = CdcTable(spark, settings.table)
    if set(table.key()) != set(key):
        raise ProcedureArgumentError(
            f"{settings.table} has primary key ({', '.join(table.key())}), the source "
            f"({', '.join(key)}); drop the empty table or bootstrap into a new name."
        )
    summary = {
        CHECKPOINT_ID: CHECKPOINT,
        BATCH_ID: "0",
        MAX_POSITION: position,
        TRUNCATE_POSITION: version,  # a key the copy does not hold: older changes are late too
        SOURCE_PROGRESS: json.dumps({}),
        BOOTSTRAP_POINT: point_text,
    }
    if source_time_ms is not None:
        summary[EVENT_TIME_MAX] = summary[EVENT_TIME_MAX_SO_FAR] = str(source_time_ms)
    writer = typed.select(*[F.col(f"`{c.name}`") for c in table.columns()]).writeTo(settings.table)
    for name, value in summary.items():
        writer = writer.option(f"snapshot-property.{name}", value)
    writer.append()  # Iceberg's own writer: the files from the tasks, ONE commit on the driver
    table.refresh()
    added = int(table.current_summary().get("added-records", "0"))
    return table.current_snapshot_id(), added


def _converted(frame: DataFrame, columns: Sequence[plan.Column]) -> DataFrame:
    """The JDBC rows as the lake types (times arrive as exact microseconds, dates as days)."""
    from pyspark.sql import functions as F

    def convert(c: plan.Column) -> Column:
        value = F.col(f"`{c.name}`")
        if c.convert == "date":
            value = F.date_from_unix_date(value.cast("int"))
        elif c.convert == "ntz":
            value = ntz_from_micros(value.cast("bigint"))
        elif c.convert == "ltz":
            value = F.timestamp_micros(value.cast("bigint"))
        elif c.convert == "bits":  # big-endian hex -> the little-endian bytes Debezium sends
            pairs = F.regexp_extract_all(value, F.lit("(..)"), 1)
            value = F.unhex(F.array_join(F.reverse(pairs), ""))
        elif c.convert in ("geometry", "point"):  # as ingest_cdc keeps the connector's struct
            value = _geometry_json(value, c.convert == "point")
        return value.cast(c.spark_type).alias(c.name)

    return frame.select(*[convert(c) for c in columns])


def _geometry_json(value: Column, point: bool) -> Column:
    """``'HEX(wkb):srid[:x:y]'`` -> the JSON text ingest_cdc keeps of the MySQL connector's
    Geometry struct (``{"wkb": base64, "srid": n}``; a Point's ``x`` and ``y`` first), the
    SRID 0 of a plain geometry as null, as the connector sends it."""
    from pyspark.sql import functions as F

    parts = F.split(value, ":")
    wkb = F.base64(F.unhex(parts[0]))
    srid = F.when(parts[1] == "0", F.lit("null")).otherwise(parts[1])
    text = F.concat(F.lit('"wkb":"'), wkb, F.lit('","srid":'), srid, F.lit("}"))
    if point:
        x, y = (parts[i].cast("double").cast("string") for i in (2, 3))
        return F.when(value.isNotNull(), F.concat(
            F.lit('{"x":'), x, F.lit(',"y":'), y, F.lit(","), text
        ))  # fmt: skip
    return F.when(value.isNotNull(), F.concat(F.lit("{"), text))


def _check_wal_level(pool: Pool) -> None:
    level = pool.query("SHOW wal_level")[0][0]
    if level != "logical":
        raise SourceDatabaseError(
            f"The source's wal_level is '{level}', not 'logical', so no logical replication "
            "slot can be made; set wal_level = logical in postgresql.conf and restart it."
        )


def _source_columns(pool: Pool, source: str) -> tuple[list[plan.Column], list[str]]:
    regclass = plan.table_sql(source, "postgres").replace("'", "''")
    try:
        rows = pool.query(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
            f"WHERE a.attrelid = '{regclass}'::regclass AND a.attnum > 0 "
            "AND NOT a.attisdropped ORDER BY a.attnum"
        )
    except SourceDatabaseError:
        raise SourceDatabaseError(
            f"The source has no table {source}; name it as schema.table in the source-table option."
        ) from None
    key = [
        str(r[0])
        for r in pool.query(
            "SELECT a.attname FROM pg_index i, unnest(i.indkey) WITH ORDINALITY AS k(num, ord), "
            "pg_attribute a WHERE a.attrelid = i.indrelid AND a.attnum = k.num "
            f"AND i.indrelid = '{regclass}'::regclass AND i.indisprimary ORDER BY k.ord"
        )
    ]
    if not key:
        raise SourceDatabaseError(
            f"The source table {source} has no primary key, and a CDC table is upserted key "
            f"by key; add one (ALTER TABLE {source} ADD PRIMARY KEY) before bootstrapping."
        )
    return [plan.column_plan(str(n), str(t)) for n, t in rows], key


def _type_of(columns: Sequence[plan.Column], name: str) -> str:
    return next(c.source_type for c in columns if c.name == name)


def _check_slot(pool: Pool, slot: str) -> None:
    literal = plan.text_literal(slot)
    if pool.query(f"SELECT 1 FROM pg_replication_slots WHERE slot_name = {literal}"):
        raise SourceDatabaseError(
            f"The replication slot '{slot}' already exists, and its changes do not start at a "
            "new copy; name a new one with options => map('slot', '...'), or drop it "
            "(pg_drop_replication_slot) if nothing streams from it."
        )


def _ensure_publication(pool: Pool, publication: str, source: str) -> None:
    """The publication Debezium's pgoutput reads, created BEFORE the slot: a publication that
    is newer than the changes pgoutput decodes is not found for them."""
    literal = plan.text_literal(publication)
    found = pool.query(f"SELECT puballtables FROM pg_publication WHERE pubname = {literal}")
    schema, _, name = source.partition(".")
    if not found:
        quoted = identifier(publication, "postgres")
        pool.execute(f"CREATE PUBLICATION {quoted} FOR TABLE {plan.table_sql(source, 'postgres')}")
        return
    if found[0][0] in ("t", "true"):
        return
    listed = pool.query(
        f"SELECT 1 FROM pg_publication_tables WHERE pubname = {literal} AND schemaname = "
        f"{plan.text_literal(schema)} AND tablename = "
        f"{plan.text_literal(name)}"
    )
    if not listed:
        raise SourceDatabaseError(
            f"The publication '{publication}' does not publish {source}, so the slot would "
            f"send none of its changes; ALTER PUBLICATION {publication} ADD TABLE {source}, or "
            "name another publication."
        )


def _edges(pool: Pool, source: str, key: str, segments: int) -> list[Any]:
    """Range edges at the quantiles of a key sample sorted by the source (its collation)."""
    if segments <= 1:
        return []
    regclass = plan.table_sql(source, "postgres").replace("'", "''")
    estimate = float(
        pool.query(f"SELECT reltuples FROM pg_class WHERE oid = '{regclass}'::regclass")[0][0] or 0
    )
    percent = plan.sample_percent(estimate, segments)
    column = identifier(key, "postgres")
    table = plan.table_sql(source, "postgres")
    sample = f" TABLESAMPLE BERNOULLI ({percent})" if percent < 100 else ""
    keys = [r[0] for r in pool.query(f"SELECT {column} FROM {table}{sample} ORDER BY {column}")]
    return plan.boundaries(keys, segments)


def _drop_slot(pool: Pool, slot: str) -> None:
    """Drop the slot of a failed bootstrap (it would hold WAL back); retried while the closed
    replication connection's walsender goes away."""
    literal = plan.text_literal(slot)
    for _ in range(20):
        with contextlib.suppress(SourceDatabaseError):
            pool.execute(
                f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                f"WHERE slot_name = {literal}"
            )
            return
        time.sleep(0.25)
