"""Reconcile a lake table with its source database, key by key, while CDC keeps writing.

1. The key space (the first key column) is cut into segments at quantiles of a lake sample.
2. Per segment, the source counts its rows and sums their 64-bit hashes over the canonical text
   of every compared column (:mod:`sparkext.actions.cdc.canonical`): one range query per segment, a
   few at a time; the lake does the same for every segment in one Spark pass.
3. A segment that differs is cut again, down to segments small enough to list: then the keys and
   hashes of both sides are compared (missing, extra, stale), and a stale key's canonical values
   name the differing columns.
4. **Lag**: every difference found is a candidate. The source's log position is read, the
   candidates' source rows are read again, and once the lake has applied a change at or after
   that position (its snapshot summaries say so), or is complete through the source's clock at
   that moment (a Debezium heartbeat ingest_cdc confirmed, see cdc_lag: an idle source makes no
   change to reach), their lake rows are read again: only what still differs is reported, as
   *confirmed*. A lake that does not catch up within the wait leaves the candidates reported as
   *unconfirmed* (the lake may only be behind).

Floor: actions (the procedure :mod:`sparkext.procedures.reconcile` calls :func:`reconcile_table`
and gets a typed :class:`ReconcileResult` back; this module declares the options).

Over 600 lines on purpose: the segment loop, its source queries, the lake's side and the
result are one action whose parts share the run's state; the pure parts are already
:mod:`sparkext.planning.reconcile`.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sparkext.actions.cdc import canonical
from sparkext.actions.cdc.connection import CONNECTION_OPTIONS, connection
from sparkext.actions.cdc.lag import table_lags
from sparkext.declarations import Option, parse_columns, parse_count, parse_duration
from sparkext.errors import IngestError, ProcedureArgumentError
from sparkext.iceberg.cdc_table import CdcTable
from sparkext.iceberg.jdbc import Pool, dialect_of
from sparkext.identifiers import col
from sparkext.planning.lag import table_lag
from sparkext.planning.reconcile import (
    DUPLICATE,
    DUPLICATED,
    EXTRA,
    MISSING,
    STALE,
    Segment,
    boundaries,
    caught_up,
    diff,
    identifier,
    literal,
    split,
    table_sql,
)
from sparkext.planning.summary import MAX_POSITION

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from sparkext.iceberg.catalog import TableRef

Key = tuple[str, ...]
_SYSTEM_PREFIX = "_cdc_"
_NUMERIC_KEY = ("int",)

SOURCE_TABLE = "source-table"
SEGMENTS = "segments"
LEAF_ROWS = "leaf-rows"
PARALLELISM = "parallelism"
CATCH_UP_TIMEOUT = "catch-up-timeout"
ROUNDS = "rounds"
COLUMNS = "columns"
MAX_KEYS = "max-keys"
MAX_REPORT = "max-report"

OPTIONS = (
    Option(SOURCE_TABLE, "", "the source table: schema.table or database.table"),
    *CONNECTION_OPTIONS,
    Option(SEGMENTS, "32", "key ranges of the first pass", parse_count),
    Option(LEAF_ROWS, "20000", "a differing range this small is listed key by key", parse_count),
    Option(PARALLELISM, "4", "source queries (connections) at a time", parse_count),
    Option(
        CATCH_UP_TIMEOUT,
        "60 seconds",
        "how long a recheck waits for the lake to reach the source's position",
        parse_duration,
    ),
    Option(ROUNDS, "3", "rechecks of the differing keys at most", parse_count),
    Option(
        COLUMNS,
        "",
        "compare only these columns (default: all both sides have)",
        parse_columns,
    ),
    Option(
        MAX_KEYS,
        "1000000",
        "keys listed from differing ranges at most; ranges beyond are counted, not listed",
        parse_count,
    ),
    Option(MAX_REPORT, "1000", "differences listed in the result at most", parse_count),
)


@dataclass(frozen=True)
class Settings:
    source_table: str
    segments: int = 32
    leaf_rows: int = 20_000
    parallelism: int = 4
    catch_up_timeout_s: float = 60.0
    rounds: int = 3
    max_keys: int = 1_000_000
    report: int = 1000
    columns: tuple[str, ...] = ()  # only these (default: every column both sides have)


@dataclass(frozen=True)
class Difference:
    key: str  # JSON object of the key columns' canonical texts
    kind: str  # missing, extra, stale
    columns: str  # stale: the differing columns, comma-separated
    confirmed: bool


@dataclass(frozen=True)
class ReconcileResult:
    equal: bool
    source_rows: int
    lake_rows: int
    segments: int
    segments_differing: int
    ranges_not_listed: int
    missing: int
    extra: int
    duplicate: int
    stale: int
    unconfirmed: int
    compared_columns: tuple[str, ...]
    not_compared: tuple[str, ...]
    source_position: str
    lake_position: str | None
    differences: tuple[Difference, ...] = field(default=())
    duration_ms: int = 0

    def row(self) -> tuple[Any, ...]:
        """The procedure's output row (its declared columns, in order)."""
        return (
            self.equal, self.source_rows, self.lake_rows, self.segments,
            self.segments_differing, self.ranges_not_listed, self.missing, self.extra,
            self.duplicate, self.stale, self.unconfirmed, ",".join(self.compared_columns),
            ",".join(self.not_compared), self.source_position, self.lake_position,
            [  # structs as dicts: the result crosses as JSON (routing.local_rows)
                {"key": d.key, "kind": d.kind, "columns": d.columns, "confirmed": d.confirmed}
                for d in self.differences
            ],
            self.duration_ms,
        )  # fmt: skip


@dataclass(frozen=True)
class _Plan:
    dialect: str
    table_sql: str
    key: tuple[str, ...]
    kinds: Mapping[str, str]  # column -> family (keys and compared columns)
    source_types: Mapping[str, canonical.SourceColumn]
    lake_types: Mapping[str, str]
    compared: tuple[str, ...]
    not_compared: tuple[str, ...]

    @property
    def numeric(self) -> bool:
        return self.kinds[self.key[0]] in _NUMERIC_KEY

    def source_text(self, name: str) -> str:
        return canonical.source_sql(
            self.dialect, self.kinds[name], identifier(name, self.dialect), self.source_types[name]
        )

    def source_hash(self) -> str:
        parts = [self.source_text(c) for c in (*self.key, *self.compared)]
        return canonical.source_hash(self.dialect, canonical.source_row_text(self.dialect, parts))

    def lake_text(self, name: str) -> Column:
        return canonical.lake_column(self.kinds[name], col(name), self.lake_types[name])

    def lake_hash(self) -> Column:
        parts = [self.lake_text(c) for c in (*self.key, *self.compared)]
        return canonical.lake_hash(canonical.lake_row_text(parts))


def reconcile_table(
    spark: SparkSession,
    table: TableRef,
    source: str,
    options: Mapping[str, Any],
    progress: Callable[[str], None] = lambda message: None,
) -> ReconcileResult:
    """Compare ``table`` with its source (a JDBC URL or a named connection, see
    :mod:`sparkext.actions.cdc.connection`); ``options`` are the resolved :data:`OPTIONS`."""
    url, properties = connection(spark, source, options)
    dialect = dialect_of(url)
    if not options[SOURCE_TABLE]:
        raise ProcedureArgumentError(
            "reconcile needs the source table: add options => map('source-table', "
            "'schema.table') (PostgreSQL) or 'database.table' (MySQL)."
        )
    key = CdcTable(spark, table.name).key()
    if not key:
        raise ProcedureArgumentError(
            f"{table.name} has no primary key (Iceberg identifier fields); reconcile compares "
            "tables key by key (ingest_cdc sets them)."
        )
    settings = Settings(
        source_table=options[SOURCE_TABLE],
        segments=max(1, options[SEGMENTS]),
        leaf_rows=max(1, options[LEAF_ROWS]),
        parallelism=max(1, options[PARALLELISM]),
        catch_up_timeout_s=options[CATCH_UP_TIMEOUT] / 1000,
        rounds=max(1, options[ROUNDS]),
        report=options[MAX_REPORT],
        max_keys=max(1, options[MAX_KEYS]),
        columns=options[COLUMNS],
    )
    pool = Pool(spark, url, properties, settings.parallelism)
    try:
        return reconcile(spark, table.name, key, pool, settings, dialect, progress)
    finally:
        pool.close()


def reconcile(
    spark: SparkSession,
    table_name: str,
    key: Sequence[str],
    pool: Pool,
    settings: Settings,
    dialect: str,
    progress: Callable[[str], None] = lambda message: None,
) -> ReconcileResult:
    started = time.monotonic()
    plan = _plan(spark, table_name, key, pool, settings, dialect)
    source_position = _source_position(pool, dialect)
    lake_position = _lake_position(spark, table_name)
    lake = _lake(spark, table_name)
    progress(f"sampling {table_name}'s keys")
    lake_rows = lake.count()
    edges = _sample_boundaries(lake, plan, lake_rows, settings.segments)
    segments = split(Segment(), edges)
    progress(f"comparing {len(segments)} segments with {settings.source_table}")
    with ThreadPoolExecutor(1) as beside:  # the database and Spark work at the same time
        from_source = beside.submit(_source_segments, pool, plan, segments, settings.parallelism)
        lake_stats = _lake_segments(lake, plan, segments)
        source_stats = from_source.result()
    source_rows = sum(s[0] for s in source_stats)
    pending = [
        (seg, a[0] + b[0])
        for seg, a, b in zip(segments, source_stats, lake_stats, strict=True)
        if tuple(a) != tuple(b)
    ]
    differing = len(pending)
    candidates: dict[Key, str] = {}
    not_listed = 0  # differing ranges left unlisted: the key lists would pass max-keys
    while pending:
        segment, rows = pending.pop()
        if len(candidates) + min(rows, settings.leaf_rows) > settings.max_keys:
            not_listed += 1
            continue
        parts = [] if rows <= settings.leaf_rows else _cut(pool, lake, plan, segment, rows)
        if not parts:  # small enough, or nothing left to cut at: list its keys
            if rows > settings.max_keys - len(candidates):
                not_listed += 1
                continue
            lake_keys = _lake_keys(lake, plan, segment)
            for k, kind in diff(_source_keys(pool, plan, segment), lake_keys):
                candidates[k] = kind
            continue
        within = lake.where(_lake_range(plan, segment))
        a_stats = _source_segments(pool, plan, parts, settings.parallelism)
        b_stats = _lake_segments(within, plan, parts)
        for part, a, b in zip(parts, a_stats, b_stats, strict=True):
            if tuple(a) != tuple(b):
                pending.append((part, a[0] + b[0]))
    confirmed, unconfirmed = _recheck(spark, table_name, pool, plan, candidates, settings, progress)
    found = {
        **{k: (v, True) for k, v in confirmed.items()},
        **{k: (v, False) for k, v in unconfirmed.items()},
    }
    columns = _stale_columns(
        spark,
        table_name,
        pool,
        plan,
        [k for k, (v, _) in found.items() if v == STALE][: settings.report],
    )
    differences = tuple(
        Difference(
            _key_json(plan, k),
            kind,
            ",".join(columns.get(k, ())),
            ok,
        )
        for k, (kind, ok) in sorted(found.items())[: settings.report]
    )
    kinds = [v for v, _ in found.values()]
    return ReconcileResult(
        equal=not found and not not_listed,
        source_rows=source_rows,
        lake_rows=lake_rows,
        segments=len(segments),
        segments_differing=differing,
        ranges_not_listed=not_listed,
        missing=kinds.count(MISSING),
        extra=kinds.count(EXTRA),
        duplicate=kinds.count(DUPLICATE),
        stale=kinds.count(STALE),
        unconfirmed=len(unconfirmed),
        compared_columns=plan.compared,
        not_compared=plan.not_compared,
        source_position=str(source_position),
        lake_position=lake_position,
        differences=differences,
        duration_ms=int((time.monotonic() - started) * 1000),
    )


# ---- planning -----------------------------------------------------------------------------------


def _key_json(plan: _Plan, key: Key) -> str:
    """A differing key as a JSON object, integer key columns as numbers (every dialect alike):
    ``{"id": 7}``, ``{"order_id": 3, "sku": "a-1"}``."""
    values = {
        name: int(value) if plan.kinds.get(name) == "int" and value is not None else value
        for name, value in zip(plan.key, key, strict=True)
    }
    return json.dumps(values)


def _source_columns(pool: Pool, dialect: str, source_table: str) -> list[canonical.SourceColumn]:
    schema, _, name = source_table.rpartition(".")
    if dialect == "postgres":
        sql = (
            "SELECT c.column_name, lower(c.data_type), c.udt_name, t.typtype "
            "FROM information_schema.columns c LEFT JOIN pg_catalog.pg_type t "
            "ON t.typname = c.udt_name "
            f"WHERE c.table_schema = {literal(schema or 'public', dialect, False)} "
            f"AND c.table_name = {literal(name, dialect, False)} ORDER BY c.ordinal_position"
        )
        rows = pool.query(sql)
        # information_schema.columns: column_name and data_type are NOT NULL
        return [
            canonical.SourceColumn(n, "enum" if typtype == "e" else kind, udt or "")  # type: ignore[arg-type]
            for n, kind, udt, typtype in rows
        ]
    schema_sql = literal(schema, dialect, False) if schema else "DATABASE()"
    sql = (
        "SELECT column_name, lower(data_type), lower(column_type) FROM information_schema.columns "
        f"WHERE table_schema = {schema_sql} AND table_name = {literal(name, dialect, False)} "
        "ORDER BY ordinal_position"
    )
    # information_schema.columns: column_name and data_type are NOT NULL
    return [canonical.SourceColumn(n, kind, detail or "") for n, kind, detail in pool.query(sql)]  # type: ignore[arg-type]


def _plan(
    spark: SparkSession,
    table_name: str,
    key: Sequence[str],
    pool: Pool,
    settings: Settings,
    dialect: str,
) -> _Plan:
    source = {c.name: c for c in _source_columns(pool, dialect, settings.source_table)}
    if not source:
        raise IngestError(
            f"The source has no table {settings.source_table} (or this user cannot see it); "
            "name it as schema.table (PostgreSQL) or database.table (MySQL) with "
            "options => map('source-table', ...)."
        )
    lake_types = {
        f.name: f.dataType.simpleString()
        for f in spark.table(table_name).schema.fields
        if not f.name.startswith(_SYSTEM_PREFIX)
    }
    kinds: dict[str, str] = {}
    for k in key:
        if k not in source:
            raise IngestError(
                f"Key column {k} of {table_name} is not a column of {settings.source_table}; "
                "reconcile compares a table with the source table it was ingested from."
            )
        kind = canonical.family(dialect, source[k], lake_types[k])
        if kind is None or (k == key[0] and kind not in ("int", "text")):
            raise IngestError(
                f"Key column {k} ({source[k].data_type}) cannot be compared across the source "
                "and the lake; reconcile needs integer or text key columns."
            )
        kinds[k] = kind
    wanted = settings.columns or tuple(c for c in lake_types if c not in key)
    compared, skipped = [], []
    for name in wanted:
        if name not in lake_types or name not in source:
            skipped.append(name)
            continue
        kind = canonical.family(dialect, source[name], lake_types[name])
        if kind is None:
            skipped.append(name)
        else:
            kinds[name] = kind
            compared.append(name)
    return _Plan(
        dialect,
        table_sql(settings.source_table, dialect),
        tuple(key),
        kinds,
        source,
        lake_types,
        tuple(compared),
        tuple(skipped),
    )


# ---- the source side ----------------------------------------------------------------------------


def _source_position(pool: Pool, dialect: str) -> Any:
    if dialect == "postgres":
        (value,) = pool.query("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::text")[0]
        return int(str(value).split(".")[0])
    rows = pool.query("SHOW MASTER STATUS")
    if not rows:
        raise IngestError(
            "The source's binary log is off (SHOW MASTER STATUS is empty); CDC with Debezium "
            "needs log_bin on, and reconcile reads its position."
        )
    file, position = rows[0][0], rows[0][1]
    assert position is not None  # SHOW MASTER STATUS: Position is never null
    digits = "".join(ch for ch in str(file).rsplit(".", 1)[-1] if ch.isdigit())
    return (int(digits or 0), int(position))


def _source_clock_ms(pool: Pool, dialect: str) -> int:
    """The source's clock, epoch ms: a lake complete through it (a confirmed heartbeat, see
    cdc_lag) holds every change the source had committed when it was read."""
    if dialect == "postgres":
        sql = "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"
    else:
        sql = "SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)"
    (value,) = pool.query(sql)[0]
    return int(str(value))


def _complete_through(spark: SparkSession, table_name: str) -> int:
    """The source time the lake is complete through (cdc_lag), -1 when unknown."""
    found = table_lag(table_lags(spark, table_name))
    return found.complete_through_ms if found and found.complete_through_ms is not None else -1


def _source_segments(
    pool: Pool, plan: _Plan, segments: Sequence[Segment], parallelism: int
) -> list[tuple[int, int]]:
    hashed = plan.source_hash()
    first = identifier(plan.key[0], plan.dialect)

    def one(segment: Segment) -> tuple[int, int]:
        where = segment.source_predicate(first, plan.dialect, plan.numeric)
        rows = f"SELECT {hashed} AS h FROM {plan.table_sql} WHERE {where}"
        sql = f"SELECT count(*), sum(h) FROM ({rows}) s"
        count, total = pool.query(sql)[0]
        assert count is not None  # count(*) is never null
        return int(count), int(total or 0)

    with ThreadPoolExecutor(max(1, parallelism)) as workers:
        return list(workers.map(one, segments))


def _source_keys(
    pool: Pool, plan: _Plan, segment: Segment, keys: Sequence[Key] = ()
) -> dict[Key, int]:
    key_texts = ", ".join(plan.source_text(k) for k in plan.key)
    first = identifier(plan.key[0], plan.dialect)
    where = segment.source_predicate(first, plan.dialect, plan.numeric)
    if keys:
        where = _source_key_filter(plan, keys)
    rows = pool.query(
        f"SELECT {key_texts}, {plan.source_hash()} FROM {plan.table_sql} WHERE {where}"
    )
    # the key columns are NOT NULL and the row hash is of coalesced texts: never null
    return {tuple(r[:-1]): int(r[-1]) for r in rows}  # type: ignore[arg-type]


def _source_key_filter(plan: _Plan, keys: Sequence[Key]) -> str:
    """Rows whose key texts are among ``keys`` (compared as canonical text: exact)."""
    texts = [plan.source_text(k) for k in plan.key]
    if len(texts) == 1 and plan.numeric:  # the column itself: its index serves
        listed = ", ".join(literal(k[0], plan.dialect, True) for k in keys)
        return f"{identifier(plan.key[0], plan.dialect)} IN ({listed})"
    if len(texts) == 1:
        listed = ", ".join(literal(k[0], plan.dialect, False) for k in keys)
        return f"{texts[0]} IN ({listed})"
    rows = " OR ".join(
        "("
        + " AND ".join(
            f"{t} = {literal(v, plan.dialect, False)}" for t, v in zip(texts, k, strict=True)
        )
        + ")"
        for k in keys
    )
    return rows or "1 = 0"


def _source_values(
    pool: Pool, plan: _Plan, keys: Sequence[Key]
) -> dict[Key, tuple[str | None, ...]]:
    if not keys:
        return {}
    texts = ", ".join(plan.source_text(c) for c in (*plan.key, *plan.compared))
    rows = pool.query(
        f"SELECT {texts} FROM {plan.table_sql} WHERE {_source_key_filter(plan, keys)}"
    )
    width = len(plan.key)
    # the key columns are NOT NULL
    return {tuple(r[:width]): tuple(r[width:]) for r in rows}  # type: ignore[arg-type]


# ---- the lake side ------------------------------------------------------------------------------


def _lake(spark: SparkSession, table_name: str) -> DataFrame:
    return spark.table(table_name)


def _lake_position(spark: SparkSession, table_name: str) -> str | None:
    table = CdcTable(spark, table_name)
    table.refresh()
    return table.current_summary().get(MAX_POSITION)


def _lake_first_key(plan: _Plan) -> Column:
    return col(plan.key[0]) if plan.numeric else col(plan.key[0]).cast("string")


def _lake_range(plan: _Plan, segment: Segment) -> Column:
    from pyspark.sql import functions as F

    first = _lake_first_key(plan)
    condition = F.lit(True)
    if segment.lo is not None:
        condition = condition & (first >= F.lit(segment.lo))
    if segment.hi is not None:
        condition = condition & (first < F.lit(segment.hi))
    return condition


def _cut(pool: Pool, lake: DataFrame, plan: _Plan, segment: Segment, rows: int) -> list[Segment]:
    """A differing range cut in up to 16: at quantiles of the lake's keys in it, or, where the
    lake holds too few of them (it lost the range), an integer key's range between the source's
    own lowest and highest key cut evenly. Empty: nothing to cut at (list it)."""
    inner = _sample_boundaries(lake.where(_lake_range(plan, segment)), plan, rows, 16)
    inner = [
        b
        for b in inner
        if (segment.lo is None or b > segment.lo) and (segment.hi is None or b < segment.hi)
    ]
    if not inner and plan.numeric:
        first = identifier(plan.key[0], plan.dialect)
        where = segment.source_predicate(first, plan.dialect, plan.numeric)
        low, high = pool.query(
            f"SELECT min({first}), max({first}) FROM {plan.table_sql} WHERE {where}"
        )[0]
        # max(first) is null only when min(first) is
        if low is not None and int(high) > int(low):  # type: ignore[arg-type]
            assert high is not None
            step = max(1, (int(high) - int(low)) // 16)
            inner = list(range(int(low) + step, int(high) + 1, step))[:15]
    return split(segment, inner) if inner else []


def _sample_boundaries(lake: DataFrame, plan: _Plan, rows: int, segments: int) -> list[Any]:
    if rows <= 0 or segments <= 1:
        return []
    wanted = 200 * segments
    fraction = min(1.0, wanted / rows)
    frame = lake.select(_lake_first_key(plan).alias("k")).where("k IS NOT NULL")
    if fraction < 1.0:
        frame = frame.sample(fraction=fraction, seed=random.randrange(1 << 30))
    sample = sorted(r.k for r in frame.collect())  # at most ~200 keys per segment
    return boundaries(sample, segments)


def _lake_segments(
    lake: DataFrame, plan: _Plan, segments: Sequence[Segment]
) -> list[tuple[int, int]]:
    from pyspark.sql import functions as F

    edges = [s.lo for s in segments[1:]]
    first = _lake_first_key(plan)
    index = F.lit(0)
    for edge in edges:
        index = index + F.when(first >= F.lit(edge), 1).otherwise(0)
    within = _lake_range(plan, Segment(segments[0].lo, segments[-1].hi))
    rows = (
        lake.where(within)
        .select(index.alias("segment"), plan.lake_hash().cast("decimal(38,0)").alias("h"))
        .groupBy("segment")
        .agg(F.count("*").alias("n"), F.sum("h").alias("h"))
        .collect()
    )
    found = {r.segment: (int(r.n), int(r.h or 0)) for r in rows}
    return [found.get(i, (0, 0)) for i in range(len(segments))]


def _lake_keys(
    lake: DataFrame, plan: _Plan, segment: Segment, keys: Sequence[Key] = ()
) -> dict[Key, int]:
    texts = [plan.lake_text(k).alias(f"__k{i}") for i, k in enumerate(plan.key)]
    frame = lake.where(_lake_range(plan, segment)).select(*texts, plan.lake_hash().alias("__h"))
    if keys:
        frame = frame.where(_lake_key_filter(plan, keys))
    found: dict[Key, int] = {}
    for r in frame.collect():
        k = tuple(r[:-1])
        found[k] = DUPLICATED if k in found else int(r[-1])
    return found


def _lake_key_filter(plan: _Plan, keys: Sequence[Key]) -> Column:
    from pyspark.sql import functions as F

    names = [f"__k{i}" for i in range(len(plan.key))]
    if len(names) == 1:
        return F.col(names[0]).isin([k[0] for k in keys])
    joined = F.concat_ws(chr(canonical.SEPARATOR), *(F.col(n) for n in names))
    return joined.isin([chr(canonical.SEPARATOR).join(k) for k in keys])


def _lake_values(
    lake: DataFrame, plan: _Plan, keys: Sequence[Key]
) -> dict[Key, tuple[str | None, ...]]:
    if not keys:
        return {}
    texts = [plan.lake_text(k).alias(f"__k{i}") for i, k in enumerate(plan.key)]
    values = [plan.lake_text(c).alias(f"__v{i}") for i, c in enumerate(plan.compared)]
    rows = lake.select(*texts, *values).where(_lake_key_filter(plan, keys)).collect()
    width = len(plan.key)
    return {tuple(r[:width]): tuple(r[width:]) for r in rows}


# ---- lag and columns ----------------------------------------------------------------------------


def _recheck(
    spark: SparkSession,
    table_name: str,
    pool: Pool,
    plan: _Plan,
    candidates: Mapping[Key, str],
    settings: Settings,
    progress: Callable[[str], None],
) -> tuple[dict[Key, str], dict[Key, str]]:
    """(confirmed, unconfirmed) differences: what still differs once the lake has applied every
    change up to the source's position at the time of the recheck."""
    remaining = dict(candidates)
    for _ in range(settings.rounds):
        if not remaining:
            return {}, {}
        keys = sorted(remaining)
        position = _source_position(pool, plan.dialect)
        clock = _source_clock_ms(pool, plan.dialect)
        source = {}
        for chunk in _chunks(keys, 1000):
            source.update(_source_keys(pool, plan, Segment(), chunk))
        progress(f"{len(keys)} keys differ; waiting for {table_name} to reach the source")
        deadline = time.monotonic() + settings.catch_up_timeout_s
        while not (
            caught_up(plan.dialect, _lake_position(spark, table_name), position)
            or _complete_through(spark, table_name) >= clock
        ):
            if time.monotonic() > deadline:
                return {}, _still(remaining, source, _lake_now(spark, table_name, plan, keys))
            time.sleep(1.0)
        lake = _lake_now(spark, table_name, plan, keys)
        remaining = _still(remaining, source, lake)
        if not remaining:
            break
    return remaining, {}


def _lake_now(
    spark: SparkSession, table_name: str, plan: _Plan, keys: Sequence[Key]
) -> dict[Key, int]:
    lake = _lake(spark, table_name)
    found: dict[Key, int] = {}
    for chunk in _chunks(keys, 1000):
        found.update(_lake_keys(lake, plan, Segment(), chunk))
    return found


def _still(
    remaining: Mapping[Key, str], source: Mapping[Key, int], lake: Mapping[Key, int]
) -> dict[Key, str]:
    subset = {k: source[k] for k in remaining if k in source}
    lake_subset = {k: lake[k] for k in remaining if k in lake}
    return dict(diff(subset, lake_subset))


def _stale_columns(
    spark: SparkSession, table_name: str, pool: Pool, plan: _Plan, keys: Sequence[Key]
) -> dict[Key, tuple[str, ...]]:
    source = _source_values(pool, plan, keys)
    lake = _lake_values(_lake(spark, table_name), plan, keys)
    out = {}
    for k in keys:
        a, b = source.get(k), lake.get(k)
        if a is None or b is None:
            continue
        out[k] = tuple(c for c, x, y in zip(plan.compared, a, b, strict=True) if x != y)
    return out


def _chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
