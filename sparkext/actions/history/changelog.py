"""The changelog of an Iceberg table between two snapshots, as ONE DataFrame (rows on executors).

Deletes of every kind included (position deletes, deletion vectors, equality deletes), where
Iceberg's own changelog scan refuses any table with delete files. The plan and its reads come from
:mod:`sparkext.planning.changelog` and :mod:`sparkext.iceberg.changelog`; this module is the
algebra on their rows:

1. every row read (``ADDED``: as written; ``BEFORE``: live at the parent) is matched by
   (snapshot, file, position) with the positions still live after the snapshot (``AFTER``): a
   ``BEFORE`` row no longer live is a DELETE; an ``ADDED`` row is an INSERT, and also a DELETE
   when it did not survive its own snapshot (a transient);
2. carry-over rows (a row deleted and written again unchanged in one snapshot, as copy-on-write
   rewrites do) are removed as Iceberg's ``RemoveCarryoverIterator`` does: per identical row and
   snapshot, equal numbers of DELETEs and INSERTs cancel. Transients are real changes and stay;
3. ``compute_updates`` pairs a DELETE and an INSERT of the same identifier in one snapshot into
   UPDATE_BEFORE / UPDATE_AFTER (Iceberg's ``ComputeUpdateIterator``); ``net_changes`` collapses
   the whole range per row (Iceberg's ``RemoveNetCarryoverIterator``), transients included.

In an equality run (see :mod:`sparkext.planning.changelog`) the DELETEs come instead from the
candidate rows whose key an equality-delete file of the run holds (a broadcast join with the
delete files' keys, grouped per key), the first such file within the read's reach and partition.

The driver only walks snapshots and plans file lists; joins and window functions do the rest.

Floor: actions (the routines :mod:`sparkext.procedures.changelog` and
:mod:`sparkext.procedures.create_changelog_view` call :func:`changelog` and
:func:`create_changelog_view`; this module declares their options).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from sparkext import times
from sparkext.declarations import Option, or_empty, parse_boolean, parse_long, parse_names
from sparkext.iceberg.changelog import ChangelogTable
from sparkext.identifiers import col, cols
from sparkext.planning.changelog import (
    DELETED_DATA_FILES,
    ChangelogRange,
    KeyDelete,
    Lane,
    RangeRequest,
    ReadSet,
    Role,
    bounds,
    change_options,
    needs,
    pack,
    plan_reads,
    resolve_range,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

    from sparkext.iceberg.catalog import TableRef

CHANGE_TYPE = "_change_type"
CHANGE_ORDINAL = "_change_ordinal"
COMMIT_SNAPSHOT_ID = "_commit_snapshot_id"
COMMIT_TIMESTAMP = "_commit_timestamp"
CHANGE_COLUMNS = (
    (CHANGE_TYPE, "string"),
    (CHANGE_ORDINAL, "int"),
    (COMMIT_SNAPSHOT_ID, "bigint"),
    (COMMIT_TIMESTAMP, "timestamp"),
)
DELETE, INSERT = "DELETE", "INSERT"
UPDATE_BEFORE, UPDATE_AFTER = "UPDATE_BEFORE", "UPDATE_AFTER"
CDC_POSITION = "_cdc_position"  # ingest_cdc's source position: orders changes in a snapshot

# working columns, dropped before the result
_SET, _FILE, _POS = "_sx_set", "_file", "_pos"
_ROLE, _CHECKED, _LIVE, _TIMESTAMP_MS = "_sx_role", "_sx_checked", "_sx_live", "_sx_ts_ms"
_TRANSIENT = "_sx_transient"
# keyed reads: the numbers of the equality deletes that may delete their rows, and the
# partition label of their file (which of those deletes apply)
_LO, _HI, _LABEL = "_sx_lo", "_sx_hi", "_sx_label"
_MANIFEST = (
    (_SET, "int"),
    (_FILE, "string"),
    (_ROLE, "string"),
    (CHANGE_ORDINAL, "int"),
    (COMMIT_SNAPSHOT_ID, "bigint"),
    (_TIMESTAMP_MS, "bigint"),
    (_CHECKED, "boolean"),
    (_LO, "int"),
    (_HI, "int"),
    (_LABEL, "string"),
)
_NUMBER, _DELETED_BY = "_sx_number", "_sx_deleted_by"


# Iceberg's read options for changelogs (SparkReadOptions), with Iceberg's meaning: snapshot
# ids, or epoch milliseconds for the snapshot current at that time.
START_SNAPSHOT_ID = "start-snapshot-id"
END_SNAPSHOT_ID = "end-snapshot-id"
START_TIMESTAMP = "start-timestamp"
END_TIMESTAMP = "end-timestamp"
RANGE_DEFAULT = ""  # empty: not given
COMPUTE_UPDATES = "compute-updates"
COMPUTE_UPDATES_DEFAULT = ""  # empty: Iceberg's default (true when identifier columns are given)
NET_CHANGES = "net-changes"
NET_CHANGES_DEFAULT = "false"
IDENTIFIER_COLUMNS = "identifier-columns"
IDENTIFIER_COLUMNS_DEFAULT = ""  # empty: the table's identifier fields

RANGE_OPTIONS = (
    Option(
        START_SNAPSHOT_ID,
        RANGE_DEFAULT,
        "start after this snapshot (exclusive), as Iceberg's read option",
        or_empty(parse_long),
    ),
    Option(
        END_SNAPSHOT_ID,
        RANGE_DEFAULT,
        "end at this snapshot (inclusive; default: the current snapshot)",
        or_empty(parse_long),
    ),
    Option(
        START_TIMESTAMP,
        RANGE_DEFAULT,
        "start after the snapshot current at this time (epoch milliseconds), as Iceberg",
        or_empty(parse_long),
    ),
    Option(
        END_TIMESTAMP,
        RANGE_DEFAULT,
        "end at the snapshot current at this time (epoch milliseconds), as Iceberg",
        or_empty(parse_long),
    ),
)


def range_request(
    options: Mapping[str, Any], start: str | None = None, end: str | None = None
) -> RangeRequest:
    """The range of a call: ``start``/``end`` arguments and Iceberg's read options."""
    return RangeRequest(
        start=start,
        end=end,
        start_snapshot_id=options[START_SNAPSHOT_ID],
        end_snapshot_id=options[END_SNAPSHOT_ID],
        start_timestamp_ms=options[START_TIMESTAMP],
        end_timestamp_ms=options[END_TIMESTAMP],
    )


CHANGE_OPTIONS = (
    Option(
        COMPUTE_UPDATES,
        COMPUTE_UPDATES_DEFAULT,
        "pair a DELETE and an INSERT of one identifier in a snapshot into UPDATE_BEFORE/"
        "UPDATE_AFTER (default: true when identifier-columns is given)",
        or_empty(parse_boolean),
    ),
    Option(
        IDENTIFIER_COLUMNS,
        IDENTIFIER_COLUMNS_DEFAULT,
        "columns identifying a row, comma-separated (default: the table's identifier fields)",
        or_empty(parse_names),
    ),
    Option(
        NET_CHANGES,
        NET_CHANGES_DEFAULT,
        "only the net change of each row over the whole range",
        parse_boolean,
    ),
)
OPTIONS = (*RANGE_OPTIONS, *CHANGE_OPTIONS)


def changelog(
    spark: SparkSession,
    table: TableRef,
    request: RangeRequest,
    *,
    compute_updates: bool | None = None,
    identifier_columns: Sequence[str] | None = None,
    net_changes: bool = False,
    progress: Callable[[str], None] = lambda message: None,
) -> DataFrame:
    """The table's columns + ``_change_type``, ``_change_ordinal``, ``_commit_snapshot_id``,
    ``_commit_timestamp``, for the snapshots in the range, ordered by ordinal, deletes before
    inserts (then ``_cdc_position`` for ``ingest_cdc`` tables). Argument and range errors are
    raised here, before any row is read; the rows are read when the DataFrame runs."""

    source = ChangelogTable(spark, table)
    user = source.schema()  # current schema: every change is read in it
    names = user.fieldNames()
    options = change_options(
        table.name,
        names,
        source.identifier_columns(),
        compute_updates,
        identifier_columns,
        net_changes,
    )
    history = source.history()
    start, end = bounds(request, history.refs, times.session_zone(spark))
    found = resolve_range(history, start, end)
    progress(f"planning the changelog of {table.name}: {len(found.changes)} snapshot(s)")
    changes = raw_changes(spark, source, found, user)
    changes = remove_carryovers(changes, names, options.net_changes)
    if options.compute_updates:
        changes = updates(changes, options.identifier_columns, table.name)
    elif options.net_changes:
        changes = net(changes, names)
    return ordered(changes.drop(_TRANSIENT), names)


@dataclass(frozen=True)
class ChangelogView:
    """The temp view :func:`create_changelog_view` made."""

    name: str  # as written in SQL (quoted when it is Iceberg's default)

    def row(self) -> tuple[Any, ...]:
        """The procedure's output row (its declared column, ``changelog_view``)."""
        return (self.name,)


def view_name(given: str | None, table: TableRef) -> str:
    """The view's name: ``given``, else Iceberg's default ```<table>_changes```."""
    if given is not None:
        return given
    return "`" + f"{table.parts[-1]}_changes".replace("`", "``") + "`"


def create_changelog_view(
    spark: SparkSession,
    table: TableRef,
    view: str | None,
    request: RangeRequest,
    *,
    compute_updates: bool | None = None,
    identifier_columns: Sequence[str] | None = None,
    net_changes: bool = False,
    progress: Callable[[str], None] = lambda message: None,
) -> ChangelogView:
    """Iceberg's create_changelog_view for every table: a session temp view of
    :func:`changelog` (its rows are read when the view is queried; the range is resolved, and
    bad arguments refused, now)."""
    frame = changelog(
        spark,
        table,
        request,
        compute_updates=compute_updates,
        identifier_columns=identifier_columns,
        net_changes=net_changes,
        progress=progress,
    )
    name = view_name(view, table)
    frame.createOrReplaceTempView(name)
    return ChangelogView(name)


def raw_changes(
    spark: SparkSession, source: ChangelogTable, found: ChangelogRange, user: StructType
) -> DataFrame:
    """Every INSERT and DELETE image of the range, carry-overs included, with ``_sx_transient``."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        BooleanType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    files, parent_deletes = {}, {}
    for change in found.changes:
        need = needs(change)
        files[change.ordinal] = source.snapshot_files(change, need)
        parent_deletes[change.ordinal] = need.parent_deletes
    plan = plan_reads(found.changes, files, parent_deletes, _removed_after(source, found))
    # reads whose rows may be deleted by an equality run's keys get scans of their own: only
    # they are joined with the keys (a join that shuffles when the keys cannot be broadcast)
    general = pack([r for r in plan.reads if r.reach is None])
    keyed = tuple(
        ReadSet(s.lane, s.index + len(general), s.reads)
        for s in pack([r for r in plan.reads if r.reach is not None])
    )
    sets = (*general, *keyed)
    if not any(s.lane == Lane.ROWS for s in sets):  # nothing changed in the range
        extra = [
            StructField(CHANGE_TYPE, StringType()),
            StructField(CHANGE_ORDINAL, IntegerType()),
            StructField(COMMIT_SNAPSHOT_ID, LongType()),
            StructField(COMMIT_TIMESTAMP, TimestampType()),
            StructField(_TRANSIENT, BooleanType()),
        ]
        return spark.createDataFrame([], StructType([*user.fields, *extra]))
    manifest = F.broadcast(_manifest(spark, source, sets))  # one local relation
    names = user.fieldNames()
    frames = []
    general_rows = [s for s in general if s.lane == Lane.ROWS]
    if general_rows:
        rows = source.read(general_rows, _SET).join(manifest, [_SET, _FILE])
        position_sets = [s for s in general if s.lane == Lane.POSITIONS]
        added = F.col(_ROLE) == Role.ADDED.value
        if position_sets:
            positions = (
                source.read(position_sets, _SET)
                .join(manifest, [_SET, _FILE])
                .select(CHANGE_ORDINAL, _FILE, _POS, F.lit(True).alias(_LIVE))
            )
            if source.fits_broadcast([r for s in position_sets for r in s.reads]):
                positions = F.broadcast(positions)
            rows = rows.join(positions, [CHANGE_ORDINAL, _FILE, _POS], "left")
            survived = F.col(_LIVE).isNotNull()
            live = F.when(added, ~F.col(_CHECKED) | survived).otherwise(survived)
        else:
            live = added
        own = (F.col(CHANGE_ORDINAL), F.col(COMMIT_SNAPSHOT_ID), F.col(_TIMESTAMP_MS))
        transient = added & ~live
        kinds = (
            F.when(added & live, F.array(_image(INSERT, *own, transient)))
            .when(added, F.array(_image(INSERT, *own, transient), _image(DELETE, *own, transient)))
            .when(~live, F.array(_image(DELETE, *own, transient)))
            .otherwise(F.array())  # a BEFORE row still live: no change
        )
        frames.append(_changes_of(rows, names, kinds))
    if keyed:
        rows = source.read(keyed, _SET).join(manifest, [_SET, _FILE])
        rows = _match_key_deletes(source, rows, plan.key_deletes)
        own = (F.col(CHANGE_ORDINAL), F.col(COMMIT_SNAPSHOT_ID), F.col(_TIMESTAMP_MS))
        inserted = F.when(
            F.col(_ROLE) == Role.ADDED.value, F.array(_image(INSERT, *own, F.lit(False)))
        ).otherwise(F.array())  # a CANDIDATE row: deleted, if at all, by a key
        at = (col(_DELETED_BY, "o"), col(_DELETED_BY, "s"), col(_DELETED_BY, "t"))
        kinds = F.when(
            F.col(_DELETED_BY).isNotNull(),
            F.concat(inserted, F.array(_image(DELETE, *at, F.lit(False)))),
        ).otherwise(inserted)
        frames.append(_changes_of(rows, names, kinds))
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def _removed_after(source: ChangelogTable, found: ChangelogRange) -> dict[int, frozenset[str]]:
    """The data files REPLACE snapshots removed, by the ordinal of the change before them."""
    removed: dict[int, frozenset[str]] = {}
    last = -1
    by_id = {c.snapshot.snapshot_id: c.ordinal for c in found.changes}
    for snapshot in found.snapshots:
        if snapshot.snapshot_id in by_id:
            last = by_id[snapshot.snapshot_id]
        elif snapshot.may(DELETED_DATA_FILES):
            removed[last] = removed.get(last, frozenset()) | source.removed_files(
                snapshot.snapshot_id
            )
    return removed


def _image(kind: str, ordinal: Column, snapshot: Column, ms: Column, transient: Column) -> Column:
    from pyspark.sql import functions as F

    return F.struct(
        F.lit(kind).alias(CHANGE_TYPE),
        ordinal.alias(CHANGE_ORDINAL),
        snapshot.alias(COMMIT_SNAPSHOT_ID),
        ms.alias(_TIMESTAMP_MS),
        transient.alias(_TRANSIENT),
    )


def _changes_of(rows: DataFrame, names: Sequence[str], kinds: Column) -> DataFrame:
    """One output row per image in ``kinds`` (an array of :func:`_image` structs)."""
    from pyspark.sql import functions as F

    change = F.explode(kinds).alias("_sx_change")
    return rows.select(*cols(names), change).select(
        *cols(names),
        col("_sx_change", CHANGE_TYPE).alias(CHANGE_TYPE),
        col("_sx_change", CHANGE_ORDINAL).alias(CHANGE_ORDINAL),
        col("_sx_change", COMMIT_SNAPSHOT_ID).alias(COMMIT_SNAPSHOT_ID),
        F.timestamp_millis(col("_sx_change", _TIMESTAMP_MS)).alias(COMMIT_TIMESTAMP),
        col("_sx_change", _TRANSIENT).alias(_TRANSIENT),
    )


def _match_key_deletes(
    source: ChangelogTable, rows: DataFrame, deletes: Sequence[KeyDelete]
) -> DataFrame:
    """``rows`` with ``_sx_deleted_by``: the first of the run's equality-delete files within the
    row's reach (``_sx_lo`` .. ``_sx_hi``) whose partition label is the row's file's (or ``*``)
    and that holds the row's key, as ``struct(o: ordinal, s: snapshot id, t: commit ms)``; NULL
    when none does.

    Each set of delete rows is grouped by key (one row per key: the files holding it) and
    joined to the rows, broadcast when it fits: the rows are read once and not shuffled."""
    from pyspark.sql import functions as F

    firsts: list[str] = []
    spark = rows.sparkSession
    for index, (columns, keys) in enumerate(source.read_key_deletes(deletes, _NUMBER, _LABEL)):
        renamed = [f"_sx_key{i}" for i in range(len(columns))]
        holders = f"_sx_holders{index}"
        grouped = keys.groupBy(*renamed).agg(
            F.array_sort(F.collect_set(F.struct(F.col(_NUMBER), F.col(_LABEL)))).alias(holders)
        )
        if source.keys_fit_broadcast([d for d in deletes if d.columns == columns]):
            grouped = F.broadcast(grouped)
        condition = None
        for name, key in zip(columns, renamed, strict=True):
            term = col(name).eqNullSafe(grouped[key])
            condition = term if condition is None else condition & term
        within = F.filter(  # NULL for a row whose key no delete file holds
            F.col(holders),
            lambda h: (
                (h[_NUMBER] >= F.col(_LO))
                & (h[_NUMBER] <= F.col(_HI))
                & ((h[_LABEL] == F.lit("*")) | (h[_LABEL] == F.col(_LABEL)))
            ),
        )
        first = f"_sx_first{index}"
        rows = (
            rows.join(grouped, condition, "left")
            .withColumn(first, F.array_min(F.transform(within, lambda h: h[_NUMBER])))
            .drop(holders, *renamed)
        )
        firsts.append(first)
    number = F.least(*(F.col(f) for f in firsts)) if len(firsts) > 1 else F.col(firsts[0])
    table = F.broadcast(_key_delete_table(spark, deletes))
    rows = rows.withColumn(_NUMBER, number).join(table, _NUMBER, "left")
    return rows.drop(_NUMBER, *firsts)


def _key_delete_table(spark: SparkSession, deletes: Sequence[KeyDelete]) -> DataFrame:
    """number -> struct(ordinal, snapshot, commit ms) of the run's delete files, as VALUES."""
    values = exp.values(
        [
            tuple(exp.convert(v) for v in (d.number, d.ordinal, d.snapshot_id, d.timestamp_ms))
            for d in deletes
        ],
        "k",
        ["n", "o", "s", "t"],
    )
    by = exp.func(
        "named_struct",
        exp.Literal.string("o"),
        exp.cast(exp.column("o"), "int"),
        exp.Literal.string("s"),
        exp.cast(exp.column("s"), "bigint"),
        exp.Literal.string("t"),
        exp.cast(exp.column("t"), "bigint"),
    )
    query = exp.select(
        exp.cast(exp.column("n"), "int").as_(_NUMBER), exp.alias_(by, _DELETED_BY)
    ).from_(values)
    return spark.sql(query.sql("spark"))


def _manifest(spark: SparkSession, source: ChangelogTable, sets: Sequence[ReadSet]) -> DataFrame:
    """Which read of which file stands for which snapshot (one small row per file read), as a
    VALUES relation: a local relation, broadcast from the driver without a Spark job (a
    DataFrame made from Python rows would start Python workers to be read)."""
    rows = []
    for s in sets:
        for r in s.reads:
            lo, hi = r.reach if r.reach is not None else (None, None)
            label = source.partition_label(r.snapshot_id, r.path) if r.reach else None
            facts = (s.index, r.path, r.role.value, r.ordinal, r.snapshot_id, r.timestamp_ms)
            rows.append(tuple(exp.convert(v) for v in (*facts, r.checked, lo, hi, label)))
    names = [name for name, _ in _MANIFEST]
    values = exp.values(rows, "m", names)
    query = exp.select(
        *(exp.cast(exp.column(name, quoted=True), kind).as_(name) for name, kind in _MANIFEST)
    ).from_(values)
    return spark.sql(query.sql("spark"))


def _groupable(frame: DataFrame, names: Sequence[str]) -> list[Column]:
    """The columns as grouping keys: a map (not groupable in Spark) by its JSON text."""
    from pyspark.sql import functions as F

    types: dict[str, DataType] = {f.name: f.dataType for f in frame.schema.fields}
    return [F.to_json(col(n)) if "map<" in types[n].simpleString() else col(n) for n in names]


def remove_carryovers(changes: DataFrame, columns: Sequence[str], net: bool) -> DataFrame:
    """Iceberg's carry-over removal: per identical row and snapshot, DELETEs and INSERTs cancel
    pairwise. Transients keep both images. Under ``net`` the net-change step does it instead."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if net:
        return changes
    group = [*_groupable(changes, columns), F.col(CHANGE_ORDINAL), F.col(_TRANSIENT)]
    is_delete = F.col(CHANGE_TYPE) == DELETE
    whole = Window.partitionBy(*group)
    deletes = F.sum(is_delete.cast("int")).over(whole)
    inserts = F.sum((~is_delete).cast("int")).over(whole)
    rank = F.row_number().over(Window.partitionBy(*group, F.col(CHANGE_TYPE)).orderBy(CHANGE_TYPE))
    surplus = F.when(is_delete, deletes - inserts).otherwise(inserts - deletes)
    marked = changes.withColumn("_sx_keep", F.col(_TRANSIENT) | (rank <= surplus))
    return marked.where("_sx_keep").drop("_sx_keep")


def updates(changes: DataFrame, identifiers: Sequence[str], table: str) -> DataFrame:
    """Iceberg's update images: in one snapshot, the DELETE and an INSERT of the same identifier
    become UPDATE_BEFORE and UPDATE_AFTER. Two DELETEs of one identifier in one snapshot are an
    error, as in Iceberg. Transients (inserted and deleted within the snapshot) do not pair."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    group = [*_groupable(changes, identifiers), F.col(CHANGE_ORDINAL), F.col(_TRANSIENT)]
    is_delete = F.col(CHANGE_TYPE) == DELETE
    whole = Window.partitionBy(*group)
    deletes = F.sum(is_delete.cast("int")).over(whole)
    inserts = F.sum((~is_delete).cast("int")).over(whole)
    first = F.row_number().over(Window.partitionBy(*group, F.col(CHANGE_TYPE)).orderBy(CHANGE_TYPE))
    steady = ~F.col(_TRANSIENT)
    message = F.concat(
        F.lit(f"Cannot compute updates of {table}: snapshot "),
        F.col(COMMIT_SNAPSHOT_ID).cast("string"),
        F.lit(
            f" deletes several rows with the same identifier ({', '.join(identifiers)}); give "
            "identifier_columns that are unique, or compute_updates => false."
        ),
    )
    change = (
        F.when(steady & (deletes > 1), F.raise_error(message).cast("string"))
        .when(steady & is_delete & (inserts >= 1), F.lit(UPDATE_BEFORE))
        .when(steady & ~is_delete & (deletes == 1) & (first == 1), F.lit(UPDATE_AFTER))
        .otherwise(F.col(CHANGE_TYPE))
    )
    return changes.withColumn(CHANGE_TYPE, change)


def net(changes: DataFrame, columns: Sequence[str]) -> DataFrame:
    """Iceberg's net changes over the whole range: per identical row (ignoring snapshot, ordinal
    and change type), INSERTs and DELETEs in ordinal order cancel; what remains is |net| copies
    of the row that opened the last run that never returned to zero."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    group = _groupable(changes, columns)
    sign = F.when(F.col(CHANGE_TYPE) == INSERT, 1).otherwise(-1)
    ordered_rows = Window.partitionBy(*group).orderBy(CHANGE_ORDINAL, CHANGE_TYPE)
    running = F.sum(sign).over(ordered_rows.rowsBetween(Window.unboundedPreceding, 0))
    whole = Window.partitionBy(*group)
    marked = changes.select(
        "*",
        F.row_number().over(ordered_rows).alias("_sx_rank"),
        running.alias("_sx_running"),
        F.sum(sign).over(whole).alias("_sx_net"),
    )
    last_zero = F.max(F.when(F.col("_sx_running") == 0, F.col("_sx_rank"))).over(whole)
    kept = marked.withColumn("_sx_last_zero", F.coalesce(last_zero, F.lit(0))).where(
        (F.col("_sx_rank") == F.col("_sx_last_zero") + 1) & (F.col("_sx_net") != 0)
    )
    copies = F.explode(F.sequence(F.lit(1), F.abs(F.col("_sx_net"))))
    return kept.select(*cols(changes.columns), copies.alias("_sx_copy")).drop("_sx_copy")


def ordered(changes: DataFrame, columns: Sequence[str]) -> DataFrame:
    """By change ordinal, deletes before inserts, then ingest_cdc's source position."""
    from pyspark.sql import functions as F

    later = F.col(CHANGE_TYPE).isin(INSERT, UPDATE_AFTER).cast("int")
    keys = [F.col(CHANGE_ORDINAL), later]
    if CDC_POSITION in columns:
        keys.append(col(CDC_POSITION))
    return changes.orderBy(*keys).select(*cols(columns), *(n for n, _ in CHANGE_COLUMNS))
