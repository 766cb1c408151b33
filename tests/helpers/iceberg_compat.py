"""Iceberg 1.10's own SQL, and Spark's statements a parser wrapper can disturb, as one script.

``run(spark, workdir, script=...)`` plays the script (all of it, "full", or its "core": see
SCRIPTS) on a session and returns one outcome per step: whether it ran and its rows with what
differs between two runs masked (snapshot ids, timestamps, file paths, byte counts).
``tests/spark/test_iceberg_compat.py`` plays it on the suite's attached session and, through
``python -m tests.helpers.iceberg_compat MODE WORKDIR SCRIPT``, in a plain Iceberg
application (no sparkext) and in one with sparkext's extension listed BEFORE Iceberg's, and
requires the same outcomes. The extensions in that reversed order are also built in-process
(``reversed_session``): a second session of the suite's application, on a warehouse of its own.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import sys
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

NS = "lake.compat"
T = f"{NS}.c"
ICEBERG_EXTENSION = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
SOURCE = "compat_source"


@dataclass(frozen=True)
class Step:
    sql: str
    args: Any = None  # spark.sql(sql, args=...): a dict (named) or a list (positional)
    compare: str = "rows"  # "rows": the masked rows; "count": how many rows (EXPLAIN's text)
    full_only: bool = False  # played in the full script only (the stress tier), see SCRIPTS


# {snap1}: the table's first snapshot; {newest}: its newest; {wap}: the staged WAP snapshot;
# {metadata}: its current metadata file; {dir}: a scratch directory of the run; {source}: the
# name of a table in Spark's own catalog (compat_source; two sessions of one application that
# play the script at once share that catalog)
STEPS: tuple[Step, ...] = (
    Step(f"CREATE NAMESPACE IF NOT EXISTS {NS}"),
    Step(
        f"CREATE TABLE {T} (id bigint NOT NULL, s string, d date) USING iceberg "
        "PARTITIONED BY (d) TBLPROPERTIES ('format-version' = '2', "
        "'write.delete.mode' = 'merge-on-read', 'write.update.mode' = 'merge-on-read')"
    ),
    Step(f"INSERT INTO {T} VALUES (1, 'q', DATE '2026-01-01'), (5, 'a', DATE '2026-01-02')"),
    Step(f"INSERT INTO {T} VALUES (3, 'z', DATE '2026-01-01'), (2, NULL, DATE '2026-01-02')"),
    Step(f"INSERT INTO {T} VALUES (4, 'b', DATE '2026-01-01'), (6, 'c', DATE '2026-01-02')"),
    Step(
        "CALL lake.system.rewrite_data_files(table => 'compat.c', strategy => 'sort', "
        "sort_order => 'id DESC NULLS LAST', options => map('rewrite-all', 'true'))"
    ),
    Step(f"SELECT d, collect_list(id) AS ids FROM {T} GROUP BY d ORDER BY d"),
    Step(
        "CALL lake.system.rewrite_data_files(table => 'compat.c', strategy => 'sort', "
        "sort_order => 'zorder(id, s)', options => map('rewrite-all', 'true'))"
    ),
    Step(
        "CALL lake.system.rewrite_data_files(table => 'compat.c', "
        "options => map('rewrite-all', 'true'))",
        full_only=True,
    ),
    Step(f"DELETE FROM {T} WHERE id = 2"),
    Step(f"SELECT content, count(*) AS files FROM {T}.all_files GROUP BY 1 ORDER BY 1"),
    Step(
        "CALL lake.system.rewrite_position_delete_files(table => 'compat.c', "
        "options => map('rewrite-all', 'true'))",
        full_only=True,
    ),
    Step("CALL lake.system.rewrite_manifests('compat.c')", full_only=True),
    Step(f"ALTER TABLE {T} WRITE ORDERED BY id DESC NULLS LAST, s"),
    Step(f"ALTER TABLE {T} WRITE DISTRIBUTED BY PARTITION LOCALLY ORDERED BY s"),
    Step(f"INSERT INTO {T} VALUES (7, 'k', DATE '2026-01-01')"),
    Step(f"ALTER TABLE {T} WRITE UNORDERED"),
    Step(f"ALTER TABLE {T} ADD PARTITION FIELD bucket(4, id)"),
    Step(f"ALTER TABLE {T} DROP PARTITION FIELD bucket(4, id)"),
    Step(f"ALTER TABLE {T} SET IDENTIFIER FIELDS id"),
    Step(f"ALTER TABLE {T} DROP IDENTIFIER FIELDS id"),
    Step(f"ALTER TABLE {T} CREATE BRANCH b1"),
    Step(f"ALTER TABLE {T} CREATE TAG t1 AS OF VERSION {{snap1}}"),
    Step(f"ALTER TABLE {T} REPLACE BRANCH b1 AS OF VERSION {{snap1}}"),
    Step(f"SELECT name, type FROM {T}.refs ORDER BY name"),
    Step(f"SELECT count(*) AS n FROM {T} VERSION AS OF 't1'"),
    Step(f"ALTER TABLE {T} DROP TAG t1"),
    Step(f"ALTER TABLE {T} DROP BRANCH b1"),
    Step("CALL lake.system.ancestors_of('compat.c')"),
    Step("CALL lake.system.ancestors_of(table => 'compat.c', snapshot_id => {newest})"),
    Step("CALL lake.system.rollback_to_snapshot('compat.c', {snap1})"),
    Step(f"SELECT count(*) AS n FROM {T}"),
    Step("CALL lake.system.set_current_snapshot('compat.c', {newest})"),
    Step(f"SELECT id FROM {T} ORDER BY id"),
    Step(f"ALTER TABLE {T} SET TBLPROPERTIES ('write.wap.enabled' = 'true')", full_only=True),
    Step("SET spark.wap.id = compat1", full_only=True),
    Step(f"INSERT INTO {T} VALUES (8, 'w', DATE '2026-01-02')", full_only=True),
    Step("RESET spark.wap.id", full_only=True),
    Step(f"SELECT count(*) AS n FROM {T}", full_only=True),
    Step("CALL lake.system.cherrypick_snapshot('compat.c', {wap})", full_only=True),
    Step(f"SELECT count(*) AS n FROM {T}", full_only=True),
    Step(f"CREATE TABLE {NS}.a (id bigint, s string) USING iceberg"),
    Step(
        "INSERT OVERWRITE DIRECTORY '{dir}/parquet' USING parquet "
        "SELECT id, CAST(id AS string) AS s FROM range(0, 5, 1, 1)"
    ),
    Step(
        "CALL lake.system.add_files(table => 'compat.a', "
        "source_table => '`parquet`.`{dir}/parquet`')"
    ),
    Step(f"SELECT count(*) AS n, sum(id) AS total FROM {NS}.a"),
    Step(f"INSERT INTO {NS}.a VALUES (10, 'ten')"),
    Step(
        "CALL lake.system.create_changelog_view(table => 'compat.a', "
        "changelog_view => 'compat_changes', net_changes => false)"
    ),
    Step(
        "SELECT _change_type, _change_ordinal, count(*) AS n FROM compat_changes "
        "GROUP BY 1, 2 ORDER BY 1, 2"
    ),
    Step(
        "CALL lake.system.register_table(table => 'compat.registered', "
        "metadata_file => '{metadata}')",
        full_only=True,
    ),
    Step(
        "CREATE TABLE spark_catalog.default.{source} (id bigint) USING parquet "
        "LOCATION '{dir}/source'",
        full_only=True,
    ),
    Step("INSERT INTO spark_catalog.default.{source} VALUES (1), (2)", full_only=True),
    Step(
        "CALL lake.system.snapshot(source_table => 'spark_catalog.default.{source}', "
        "table => 'lake.compat.snap')",
        full_only=True,
    ),
    Step("SELECT count(*) AS n FROM lake.compat.snap", full_only=True),
    Step("DROP TABLE IF EXISTS spark_catalog.default.{source}", full_only=True),
    Step(
        "CALL lake.system.expire_snapshots(table => 'compat.c', retain_last => 1)", full_only=True
    ),
    Step(
        "CALL lake.system.remove_orphan_files(table => 'compat.c', dry_run => true)", full_only=True
    ),
    # Spark's own statements that go through the session's parser
    Step("SET sparkext.compat.answer = 41"),
    Step("SELECT ${sparkext.compat.answer} + 1 AS v"),
    Step("SELECT :a + 1 AS v, :b AS s", args={"a": 41, "b": "x"}),
    Step("SELECT ? * 2 AS v", args=[21]),
    Step(f"EXPLAIN SELECT * FROM {T} WHERE id = 1", compare="count"),
    Step(f"EXPLAIN EXTENDED SELECT count(*) FROM {T}", compare="count"),
    Step("WITH x AS (SELECT 1 AS a UNION ALL SELECT 2) SELECT sum(a) AS s FROM x"),
    Step(f"CREATE OR REPLACE TEMP VIEW compat_view AS SELECT id FROM {T} WHERE id > 3"),
    Step("SELECT count(*) AS n FROM compat_view"),
    Step("DROP VIEW compat_view"),
    Step("SELECT count(*) AS n FROM compat_view"),  # an error in both
    Step("RESET sparkext.compat.answer"),
)
# "full": every step (the stress tier). "core" (the default tier): every statement form a
# parser wrapper can disturb: each Iceberg SQL extension; CALL with named and positional
# arguments, string, number, boolean and map(...) values and a path identifier among them; the
# sort and Z-order rewrites, which need Iceberg's ExtendedParser; metadata tables, time travel,
# a procedure's temp view, INSERT OVERWRITE DIRECTORY, SET/RESET, ${...} substitution, named
# and positional parameters, EXPLAIN, WITH, temp views and a failing statement. Left to "full":
# the steps that only repeat one of those forms on another procedure (the bin-pack and
# position-delete rewrites, rewrite_manifests, register_table, snapshot, expire_snapshots,
# remove_orphan_files) and write-audit-publish (Iceberg's execution, not the parser).
SCRIPTS = ("core", "full")


def steps(script: str) -> tuple[Step, ...]:
    """The steps of ``script`` (one of SCRIPTS), in order."""
    if script not in SCRIPTS:
        raise ValueError(f"script {script!r} is not one of {SCRIPTS}")
    return tuple(s for s in STEPS if script == "full" or not s.full_only)


def _scalar(spark, sql: str) -> Any:
    rows = spark.sql(sql).collect()
    return rows[0][0] if rows else None


_VALUES = {
    "snap1": f"SELECT snapshot_id FROM {T}.snapshots ORDER BY committed_at LIMIT 1",
    "newest": f"SELECT snapshot_id FROM {T}.snapshots ORDER BY committed_at DESC LIMIT 1",
    "wap": f"SELECT snapshot_id FROM {T}.snapshots WHERE summary['wap.id'] = 'compat1'",
    "metadata": f"SELECT file FROM {T}.metadata_log_entries ORDER BY timestamp DESC LIMIT 1",
}


def _values(spark, workdir: str, sql: str = "") -> dict[str, Any]:
    """The values of the placeholders ``sql`` names (a query each, only for those); one that
    cannot be read (no table) stays a placeholder, so its step fails as an outcome."""
    out: dict[str, Any] = {"dir": workdir}
    for name, query in _VALUES.items():
        if "{" + name + "}" in sql:
            with contextlib.suppress(Exception):  # the table is not there
                out[name] = _scalar(spark, query)
    return out


def _mask(key: str, value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _mask(str(k), v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_mask(key, v) for v in value]
    if "bytes" in key or "size" in key:
        return "<bytes>"
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return "<id>" if abs(value) >= 10**12 else value
    if isinstance(value, (dt.datetime, dt.date)):
        return "<time>"
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, str) and ("/" in value or value.startswith("file:")):
        return "<path>"
    return value


def _rows(frame) -> list[dict[str, Any]]:
    return [_mask("", row.asDict(recursive=True)) for row in frame.collect()]


def _failure(error: BaseException) -> str:
    """What failed, as stable as two runs allow: Spark's error class, else the Java class."""
    text = str(error)
    cls = getattr(error, "getErrorClass", lambda: None)()
    if cls:
        return f"error {cls}"
    for line in text.splitlines():
        if "Exception" in line:
            return "error " + line.split(":")[0].strip()
    return f"error {type(error).__name__}"


def run(spark, workdir: str, source: str = SOURCE, script: str = "full") -> list[dict[str, Any]]:
    """Play ``script`` on ``spark``; one outcome per step."""
    outcomes = []
    for step in steps(script):
        values = {**_values(spark, workdir, step.sql), "source": source}
        sql = step.sql
        for name, value in values.items():
            sql = sql.replace("{" + name + "}", str(value))
        try:
            frame = spark.sql(sql, args=step.args) if step.args is not None else spark.sql(sql)
            rows = _rows(frame)
            result: Any = len(rows) if step.compare == "count" else rows
            outcomes.append({"sql": step.sql, "ok": True, "result": result})
        except Exception as error:  # the outcome is the datum
            outcomes.append({"sql": step.sql, "ok": False, "result": _failure(error)})
    return outcomes


def _session(mode: str, workdir: str):
    from pyspark.sql import SparkSession

    from sparkext import jvm
    from sparkext.spark.session import build_conf

    conf = build_conf({"warehouse": f"{workdir}/warehouse", "master": "local[1]"})
    conf["spark.sql.shuffle.partitions"] = "2"
    conf["spark.driver.memory"] = "1g"
    iceberg = ICEBERG_EXTENSION
    if mode == "plain":  # stock Iceberg-Spark: no sparkext anywhere
        conf["spark.sql.extensions"] = iceberg
        conf["spark.jars"] = ",".join(
            j for j in conf["spark.jars"].split(",") if "sparkext" not in j
        )
    else:  # sparkext's extension first: Iceberg's parser wraps sparkext's
        conf["spark.sql.extensions"] = f"{jvm.EXTENSION},{iceberg}"
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if mode != "plain":
        import sparkext

        spark = sparkext.attach(spark)
    return spark


def sparkext_sql(spark) -> dict[str, Any]:
    """sparkext's own SQL, after the script, on a session whose parser is Iceberg's outermost."""
    frame = spark.sql(f"CALL sparkext.table_health(table => '{T}')")
    return {
        "table_health_rows": frame.count(),
        "changelog_rows": spark.sql(
            f"SELECT * FROM sparkext.changelog('{T}', {_scalar(spark, _VALUES['snap1'])})"
        ).count(),
    }


def reversed_session(spark, warehouse: str):
    """A new session of ``spark``'s application built with sparkext's extension applied BEFORE
    Iceberg's, as ``spark.sql.extensions = "<sparkext's>,<Iceberg's>"`` applies them (Iceberg's
    parser wrapping sparkext's), attached; its catalog ``lake`` on ``warehouse``. It shares the
    application's shared state (Spark's own catalog among it), not its session state: parser,
    conf, temp views and catalogs are its own."""
    from pyspark.sql import SparkSession

    import sparkext
    from sparkext import jvm as sparkext_jvm

    jvm = spark.sparkContext._jvm
    extensions = jvm.org.apache.spark.sql.SparkSessionExtensions()
    for name in (sparkext_jvm.EXTENSION, ICEBERG_EXTENSION):  # Spark's applyExtensions, in order
        cls = jvm
        for part in name.split("."):
            cls = getattr(cls, part)
        cls().apply(extensions)
    jsession = spark._jsparkSession
    no_options = getattr(getattr(jvm.scala.collection.immutable, "Map$"), "MODULE$").empty()
    built = jvm.org.apache.spark.sql.SparkSession(
        jsession.sparkContext(),
        jvm.scala.Option.apply(jsession.sharedState()),
        jvm.scala.Option.empty(),
        extensions,
        no_options,
    )
    built.conf().set("spark.sql.catalog.lake.warehouse", warehouse)
    built.conf().set("spark.sql.shuffle.partitions", "2")
    return sparkext.attach(SparkSession(spark.sparkContext, built))


def play_sparkext_first(spark, workdir: str, script: str = "full") -> dict[str, Any]:
    """The script and sparkext's SQL on ``reversed_session(spark, …)``, made the active session
    of the calling thread while they run (as an application's own session is): what
    ``python -m tests.helpers.iceberg_compat reversed WORKDIR SCRIPT`` prints, and the session's
    parser (its class name). Its table in Spark's own catalog has a name of its own, so it can
    run while the script plays on ``spark``."""
    sessions = spark.sparkContext._jvm.org.apache.spark.sql.SparkSession
    ordered = reversed_session(spark, f"{workdir}/warehouse")
    sessions.setActiveSession(ordered._jsparkSession)
    try:
        outcomes = run(
            ordered, f"{workdir}/scratch", source=f"{SOURCE}_sparkext_first", script=script
        )
        extra = sparkext_sql(ordered)
    finally:
        sessions.clearActiveSession()
    parser = ordered._jsparkSession.sessionState().sqlParser().getClass().getName()
    return {"outcomes": outcomes, "extra": extra, "parser": str(parser)}


def forget(spark) -> None:
    """Drop what an earlier run of the script left in ``spark``'s catalogs."""
    spark.sql(f"DROP TABLE IF EXISTS spark_catalog.default.{SOURCE}")
    if spark.sql(f"SHOW NAMESPACES IN lake LIKE '{NS.split('.')[1]}'").count():
        for table in spark.sql(f"SHOW TABLES IN {NS}").collect():
            spark.sql(f"DROP TABLE IF EXISTS {NS}.`{table.tableName}`")
        spark.sql(f"DROP NAMESPACE {NS}")


def main(mode: str, workdir: str, script: str = "full") -> None:
    spark = _session(mode, workdir)
    outcomes = run(spark, f"{workdir}/scratch", script=script)
    extra = {}
    if mode == "reversed":  # sparkext's own SQL still works in that order
        extra = sparkext_sql(spark)
    print(json.dumps({"outcomes": outcomes, "extra": extra}, default=str))


if __name__ == "__main__":
    main(*sys.argv[1:4])
