"""Resolve table names to Iceberg tables and read table-level metadata through the Java API.

Floor: iceberg (the Iceberg Java API).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkext import identifiers
from sparkext.errors import NotAnIcebergTableError, ProcedureArgumentError, TableNotFoundError
from sparkext.iceberg.errors import location, spark_message
from sparkext.spark.java import iterate as _iterate
from sparkext.spark.java import jvm as jvm_of
from sparkext.spark.java import string_map

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024  # Iceberg's write.target-file-size-bytes default


@dataclass(frozen=True)
class TableRef:
    """An existing Iceberg table, by name, with the facts planners need (no JavaObjects)."""

    name: str  # as the user wrote it, e.g. "lake.db.orders"
    parts: tuple[str, ...]
    format_version: int
    partitioned: bool
    properties: tuple[tuple[str, str], ...]
    snapshot_count: int
    current_snapshot_id: int | None

    def prop(self, key: str, default: str | None = None) -> str | None:
        return dict(self.properties).get(key, default)

    @property
    def target_file_size_bytes(self) -> int:
        value = self.prop("write.target-file-size-bytes")
        return int(value) if value else _DEFAULT_TARGET_FILE_SIZE

    def metadata_table(self, name: str) -> str:
        """The multipart name of an Iceberg metadata table, e.g. ``lake.db.t.files``."""
        return identifiers.join((*self.parts, name))


def split_name(spark: SparkSession, name: str) -> tuple[str, ...]:
    parser = spark._jsparkSession.sessionState().sqlParser()
    parts = parser.parseMultipartIdentifier(name)
    return tuple(str(parts.apply(i)) for i in range(parts.size()))


def qualified(spark: SparkSession, parts: tuple[str, ...]) -> tuple[str, ...]:
    """``parts`` with the catalog and namespace Spark resolves them in, as after ``USE``: one
    part is a table of the current namespace; a first part that names no catalog is a
    namespace of the current catalog."""
    manager = spark._jsparkSession.sessionState().catalogManager()
    if len(parts) > 1 and (
        parts[0] == "spark_catalog" or bool(manager.isCatalogRegistered(parts[0]))
    ):
        return parts
    if len(parts) > 1 and spark.conf.get(f"spark.sql.catalog.{parts[0]}", None):
        return parts
    catalog = str(manager.currentCatalog().name())
    if len(parts) == 1:
        return (catalog, *(str(p) for p in manager.currentNamespace()), parts[0])
    return (catalog, *parts)


def where(spark: SparkSession, parts: tuple[str, ...] = ()) -> str:
    """`` in catalog lake (warehouse /home/u/.sparkext/warehouse)``: a "does not exist" error
    then says which warehouse was searched (the same command from another conf or directory
    may see another catalog). Empty when unknown."""
    found = location(spark, parts)
    return f" in catalog {found[0]} ({found[1]} {found[2]})" if found else ""


def metadata_name(spark: SparkSession, table: str, name: str) -> str:
    """The quoted name of metadata table ``name`` of ``table`` (a name as a user writes it).

    ``table`` + ``".files"`` as text goes wrong once a part needs quotes; the parts are parsed
    and quoted again instead.
    """
    return identifiers.join((*split_name(spark, table), name))


def load_java_table(spark: SparkSession, name: str):  # -> JavaObject, kept inside this package
    return jvm_of(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, name
    )


def activate_session(spark: SparkSession) -> None:
    """Make ``spark`` the JVM thread's active session: a Python thread of a pool has a fresh JVM
    twin without one, and Iceberg's source would then read a default SQLConf (without the
    catalogs) on its first staged scan."""
    jvm_of(spark).org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)


def refreshed_snapshot_id(spark: SparkSession, name: str) -> int | None:
    """The table's current snapshot, read from its metadata now (the catalog's cached table is
    refreshed, so later reads in this session see at least this snapshot)."""
    table = load_java_table(spark, name)
    table.refresh()
    current = table.currentSnapshot()
    return int(current.snapshotId()) if current is not None else None


def release_checkpoint(frame) -> None:
    """Free the blocks of a DataFrame made by ``localCheckpoint()`` (Spark keeps them until the
    session ends otherwise); a frame of any other kind is left alone."""
    try:
        plan = frame._jdf.queryExecution().logical()
        if plan.getClass().getSimpleName() == "LogicalRDD":
            plan.rdd().unpersist(False)
    except Exception:  # best effort: at worst the blocks stay until the session ends
        pass


def identifier_columns(spark: SparkSession, name: str) -> list[str]:
    """The table's identifier fields (its primary key), in field-id order."""
    schema = load_java_table(spark, name).schema()
    return [
        str(schema.findColumnName(i))
        for i in sorted(int(i) for i in _iterate(schema.identifierFieldIds()))
    ]


def set_identifier_columns(spark: SparkSession, name: str, columns: list[str]) -> None:
    """Make ``columns`` (required columns) the table's identifier fields (its primary key)."""
    jvm = jvm_of(spark)
    names = jvm.java.util.ArrayList()
    schema = load_java_table(spark, name).schema()
    for column in columns:
        field = schema.caseInsensitiveFindField(column)
        names.add(field.name() if field is not None else column)
    load_java_table(spark, name).updateSchema().setIdentifierFields(names).commit()


def resolve_table(spark: SparkSession, name: str) -> TableRef:
    """Return the Iceberg table called ``name`` or raise one clear error."""

    try:
        parts = split_name(spark, name)
    except Exception as error:
        raise TableNotFoundError(
            f"'{name}' is not a valid table name ({spark_message(error)}); "
            "write catalog.namespace.table, e.g. 'lake.db.orders'."
        ) from None
    if not spark.catalog.tableExists(name):
        show = f"SHOW TABLES IN {'.'.join(parts[:-1])}" if len(parts) > 1 else "SHOW TABLES"
        raise TableNotFoundError(
            f"Table '{name}' does not exist{where(spark, parts)}; check the name with {show}."
        )
    try:
        table = load_java_table(spark, name)
    except Exception as error:
        if spark_message(error) is None:
            raise
        # It exists for Spark (a view, a session-catalog table) but Iceberg cannot load it.
        raise NotAnIcebergTableError(
            f"Table '{name}' is not an Iceberg table; sparkext works on tables of an "
            "Iceberg catalog such as 'lake'."
        ) from None
    full = qualified(spark, parts)  # an Iceberg table, so no temp view: a catalog's table
    if full != parts:  # unqualified, after USE: every later name (metadata tables) is whole
        name, parts = identifiers.display(full), full
    metadata = table.operations().current()
    current = table.currentSnapshot()
    properties = string_map(table.properties())
    return TableRef(
        name=name,
        parts=parts,
        format_version=int(metadata.formatVersion()),
        partitioned=not table.spec().isUnpartitioned(),
        properties=tuple(sorted(properties.items())),
        snapshot_count=int(metadata.snapshots().size()),
        current_snapshot_id=int(current.snapshotId()) if current is not None else None,
    )


def partition_transforms(spark: SparkSession, name: str) -> list[tuple[str, str]]:
    """The current spec as (transform, source column): [('day', 'ts'), ('bucket[16]', 'id')]."""
    table = load_java_table(spark, name)
    schema = table.schema()
    return [
        (str(f.transform().toString()), str(schema.findColumnName(int(f.sourceId()))))
        for f in _iterate(table.spec().fields())
        if str(f.transform().toString()) != "void"
    ]


def snapshot_commit_times(spark: SparkSession, name: str) -> list[tuple[int, int]]:
    """(commit time in epoch milliseconds, snapshot id) of every retained snapshot."""
    table = load_java_table(spark, name)
    return [(int(s.timestampMillis()), int(s.snapshotId())) for s in _iterate(table.snapshots())]


def current_snapshot_summary(spark: SparkSession, name: str) -> tuple[int | None, dict[str, str]]:
    """The current snapshot's id and summary, straight from the table metadata."""
    snapshot = load_java_table(spark, name).currentSnapshot()
    if snapshot is None:
        return None, {}
    return int(snapshot.snapshotId()), string_map(snapshot.summary())


def parse_patterns(text: str) -> tuple[str, ...]:
    """``'lake.ods.*, lake.dw.orders'`` → the two patterns; each needs catalog.namespace.table.

    >>> parse_patterns("lake.ods.*, lake.dw.orders")
    ('lake.ods.*', 'lake.dw.orders')
    """
    out = tuple(p.strip() for p in (text or "").split(",") if p.strip())
    if not out:
        raise ProcedureArgumentError(
            "--tables names no table; pass patterns such as 'lake.ods.*,lake.dw.orders'."
        )
    for pattern in out:
        if pattern.count(".") < 2:
            raise ProcedureArgumentError(
                f"'{pattern}' is not catalog.namespace.table; write e.g. 'lake.ods.*' or "
                "'lake.dw.orders'."
            )
    return out


def discover(
    spark: SparkSession, patterns: Sequence[str], exclude: Sequence[str] = ()
) -> list[str]:
    """The tables the patterns name (``*``, ``?``, ``[...]`` in the table part), sorted."""
    found: list[str] = []
    for pattern in patterns:
        catalog_namespace, _, table_pattern = pattern.rpartition(".")
        if not any(c in table_pattern for c in "*?["):
            found.append(pattern)
            continue
        namespace = identifiers.join(catalog_namespace.split("."))
        for row in spark.sql(f"SHOW TABLES IN {namespace}").collect():
            if not row.isTemporary and fnmatch.fnmatchcase(row.tableName, table_pattern):
                found.append(f"{catalog_namespace}.{row.tableName}")
    skip = {e.lower() for e in exclude}
    return sorted({t for t in found if t.lower() not in skip})
