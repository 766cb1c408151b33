"""sparkext: SQL procedures and table functions for Apache Iceberg tables on PySpark.

>>> import sparkext
>>> spark = sparkext.session()                                     # doctest: +SKIP
>>> sparkext.sql("CALL sparkext.table_health(table => 'lake.db.t')").show()  # doctest: +SKIP

Floor: top (the Python API).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sparkext.errors import SparkextError
from sparkext.spark import session as _session
from sparkext.spark.environment import check_executors
from sparkext.spark.extension import spark_conf as with_extension
from sparkext.spark.session import ICEBERG_EXTENSION, active_session, iceberg_jars
from sparkext.version import __version__

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from sparkext.actions.history.changelog_stream import ChangelogStream
    from sparkext.declarations import Context
    from sparkext.planning.changelog_stream import ConsumerReport
    from sparkext.service.service import Service

__all__ = [
    "SparkextError",
    "__version__",
    "attach",
    "changelog_consumers",
    "changelog_stream",
    "health_report",
    "ingest_cdc_database_stream",
    "ingest_cdc_stream",
    "optimize_service",
    "session",
    "spark_conf",
    "sql",
    "unregister_changelog_consumer",
]


def sql(text: str, spark: SparkSession | None = None) -> DataFrame:
    """Run one or several ``;``-separated statements and return the last statement's result.

    ``CALL sparkext.<procedure>(...)`` and ``FROM sparkext.<function>(...)`` are handled by
    sparkext; every other statement goes to ``spark.sql`` unchanged. Without ``spark``, the active
    session is used, or one is built with :func:`session`.
    """
    # loaded on first use: `import sparkext` runs in every executor and stays light
    from sparkext.routing.router import run_text
    from sparkext.security.caller import entered

    spark = spark or active_session() or session()
    with entered(spark, "python"):
        return run_text(spark, text)


def session(**overrides: Any) -> SparkSession:
    """Return a SparkSession configured from conf/ plus ``overrides``, with Iceberg available
    and sparkext's SQL in ``spark.sql``.

    If a session is already running it is returned as is (Spark cannot change static settings of
    a running session); runtime settings among ``overrides`` are applied to it.
    """
    # loaded on first use: `import sparkext` runs in every executor and stays light
    from sparkext.routing.in_spark import ANSWERS

    return _session.session(ANSWERS, **overrides)


def attach(spark: SparkSession | None = None) -> SparkSession:
    """Make ``spark.sql`` run sparkext's SQL: ``CALL sparkext.<procedure>(...)`` and
    ``sparkext.<function>(...)`` in FROM, in this session and every other session of its
    application (the Thrift server's included), with the same binding, output and errors as
    :func:`sql`. :func:`session` does it already; this is for a session built elsewhere
    (spark-submit, a notebook).

    A session built with :func:`spark_conf`'s settings is returned as it is. One built without
    them gets the extension added and a clone of it (same settings, temp views and catalogs) is
    returned and made active: write ``spark = sparkext.attach(spark)``.
    """
    # loaded on first use: `import sparkext` runs in every executor and stays light
    from sparkext.routing.in_spark import ANSWERS
    from sparkext.spark.extension import attach as attach_driver

    return attach_driver(spark or active_session() or session(), ANSWERS)


def spark_conf() -> dict[str, str]:
    """The Spark settings a session built outside sparkext needs for sparkext's SQL in
    ``spark.sql``: ``spark.sql.extensions`` (Iceberg's, then sparkext's), ``spark.jars`` and
    ``spark.driver.extraClassPath`` (the Iceberg runtime and sparkext's extension jar). Pass them
    to ``spark-submit --conf`` or a notebook's ``SparkSession.builder.config``, then call
    :func:`attach`."""
    return with_extension(iceberg_jars({"spark.sql.extensions": ICEBERG_EXTENSION}))


def ingest_cdc_stream(
    table: str,
    source: str,
    checkpoint: str,
    primary_key: str | None = None,
    create: bool = False,
    options: dict[str, str] | None = None,
    interval: str = "10 seconds",
    spark: SparkSession | None = None,
) -> StreamingQuery:
    """Run ``CALL sparkext.ingest_cdc`` continuously, one micro-batch every ``interval``.

    Same parameters, options, table and checkpoint layout as the procedure, so a continuous job
    and a catch-up CALL can share a checkpoint (not at the same time). Stop with ``query.stop()``.
    """
    # loaded on first use: `import sparkext` runs in every executor and stays light
    from sparkext.actions.cdc import ingest_cdc
    from sparkext.actions.cdc import options as cdc_options

    spark = spark or active_session() or session()
    check_executors(spark)
    bound = cdc_options.bind(options)
    return ingest_cdc.start_cdc(
        spark, table, source, checkpoint, primary_key, create, bound, interval=interval
    )


def ingest_cdc_database_stream(
    namespace: str,
    source: str,
    checkpoint: str,
    options: dict[str, str] | None = None,
    interval: str = "10 seconds",
    spark: SparkSession | None = None,
) -> StreamingQuery:
    """Run ``CALL sparkext.ingest_cdc_database`` continuously, one micro-batch every
    ``interval``: a topic that appears becomes its table at the next batch.

    Same parameters, options, tables and checkpoint layout as the procedure, so a continuous
    job and a catch-up CALL can share a checkpoint (not at the same time). Stop with
    ``query.stop()``.
    """
    # loaded on first use: `import sparkext` runs in every executor and stays light
    from sparkext.actions.cdc import ingest_cdc
    from sparkext.actions.cdc import options as cdc_options

    spark = spark or active_session() or session()
    check_executors(spark)
    bound = cdc_options.bind_database(options)
    return ingest_cdc.start_cdc_database(
        spark, namespace, source, checkpoint, bound, interval=interval
    )


def changelog_stream(
    table: str,
    checkpoint: str,
    options: dict[str, str] | None = None,
    spark: SparkSession | None = None,
    progress: Callable[[str], None] = lambda message: None,
) -> ChangelogStream:
    """The changelog of ``table`` as micro-batches for a ``foreachBatch``-style consumer.

    Each batch is ``sparkext.changelog`` of (last consumed snapshot, head] — the table's
    columns plus ``_change_type``, ``_change_ordinal``, ``_commit_snapshot_id`` and
    ``_commit_timestamp`` — handed to the consumer as a DataFrame with its batch id. Progress
    is kept in ``checkpoint`` (a path or any URI pyarrow reaches); a batch interrupted before
    the consumer returned is delivered again with the same id and range after a restart.

    Args:
        table: an Iceberg table, e.g. ``'lake.db.orders'``.
        checkpoint: the stream's own directory; reuse it to resume.
        options: ``starting`` (``earliest``, default, or ``latest``) or ``start-snapshot-id``
            for a new checkpoint; ``branch``; ``max-snapshots-per-batch``; ``compute-updates``,
            ``identifier-columns``, ``net-changes`` (per batch) as ``sparkext.changelog``;
            ``consumer-name`` (register for maintenance) and ``consumer-ttl`` (default
            ``7 days``).
        spark: the session (default: the active one).
        progress: called with one line per batch (``print`` will do).

    Returns:
        A :class:`~sparkext.actions.history.changelog_stream.ChangelogStream`: set the consumer with
        ``foreach_batch(fn)``, then ``process_available()`` (what is there now) or
        ``start(interval)`` / ``stop()`` / ``await_termination()``.

    Raises:
        ChangelogRangeLostError: snapshots the next batch needs have expired (one sentence
            naming the range), when a batch is run.
        OptionError: an unknown option or a bad value; a checkpoint of another table.

    Example::

        stream = sparkext.changelog_stream("lake.db.orders", "/ck/orders-to-es")
        stream.foreach_batch(lambda frame, batch_id: frame.write.mode("append").parquet(out))
        stream.process_available()
    """
    # loaded on first use: `import sparkext` runs in every executor and stays light
    from sparkext.actions.history.changelog_stream import ChangelogStream

    spark = spark or active_session() or session()
    check_executors(spark)
    return ChangelogStream(spark, table, checkpoint, options, progress)


def changelog_consumers(table: str, spark: SparkSession | None = None) -> ConsumerReport:
    """The changelog consumers registered on ``table`` (``consumers``: each registration and
    whether it is stale) and ``needed``: the oldest snapshot they still need."""
    # loaded on first use: `import sparkext` runs in every executor and stays light
    from sparkext.actions.history.changelog_stream import changelog_consumers as report

    spark = spark or active_session() or session()
    return report(spark, table)


def unregister_changelog_consumer(table: str, name: str, spark: SparkSession | None = None) -> bool:
    """Remove consumer ``name``'s registration from ``table`` (True when it was there)."""
    # loaded on first use: `import sparkext` runs in every executor and stays light
    from sparkext.actions.history.changelog_stream import unregister_changelog_consumer as remove

    spark = spark or active_session() or session()
    return remove(spark, table, name)


def optimize_service(
    tables: str,
    *,
    once: bool = False,
    max_concurrent: int = 2,
    poll_interval: str = "10 seconds",
    fresh_window: str = "1 hour",
    lease_ttl: str = "5 minutes",
    log_table: str | None = None,
    maintenance: bool = True,
    log: Callable[[str], None] = print,
    lag_alert: str | None = None,
    spark: SparkSession | None = None,
) -> Service:
    """The optimisation service over ``tables`` (``'lake.ods.*,lake.dw.orders'``), as
    ``sparkext-sql optimize-service`` runs it: ``.run()`` serves (until ``.stop()`` from another
    thread, or with ``once`` until nothing is due), ``.stats`` counts jobs, the run log table
    keeps every job; ``log`` gets one line per job; ``lag_alert`` (a duration) logs and shows
    CDC tables further behind their source."""
    # loaded on first use: `import sparkext` runs in every executor and stays light
    from sparkext.service.service import serve

    spark = spark or active_session() or session()
    return serve(
        spark, tables, once=once, max_concurrent=max_concurrent, poll_interval=poll_interval,
        fresh_window=fresh_window, lease_ttl=lease_ttl, log_table=log_table,
        maintenance=maintenance, log=log, lag_alert=lag_alert,
    )  # fmt: skip


def health_report(
    tables: str,
    out: str | None = None,
    *,
    log_table: str | None = None,
    title: str = "sparkext table health",
    record: bool = True,
    spark: SparkSession | None = None,
    progress: Callable[[str], None] | None = None,
) -> str | DataFrame:
    """The health report of ``tables``: with ``out``, write the HTML page there and return its
    path; without, return the rows ``CALL sparkext.health_report`` returns."""
    from pathlib import Path

    # loaded on first use: `import sparkext` runs in every executor and stays light
    from sparkext.actions import health_report as report
    from sparkext.routing.router import run_action
    from sparkext.security.caller import entered

    spark = spark or active_session() or session()
    if out is None:  # the procedure's rows, checked and audited as its CALL is
        given = {"tables": tables, **({"log_table": log_table} if log_table else {})}

        def rows(context: Context) -> list[tuple[Any, ...]]:
            found = report.gather(
                context.spark, tables, log_table or None, record, context.progress
            )
            return report.rows(*found)

        with entered(spark, "python"):
            return run_action(spark, "health_report", {**given, "record": record}, rows, progress)
    partitions, trend = report.gather(
        spark, tables, log_table, record, progress or (lambda message: None)
    )
    path = Path(out)
    path.write_text(report.render(partitions, trend, title), encoding="utf-8")
    return str(path)
