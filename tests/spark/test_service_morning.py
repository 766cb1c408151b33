"""A simulated morning: two ingest_cdc streams and an append job commit every few seconds into
three tables (in their own process) while the optimisation service runs here and a second
service runs in a third process: the stress tier's full morning. The default tier runs a shorter
morning with the same writers and oracles in this process, without the second service. Each
once: on Iceberg's JDBC catalog on
PostgreSQL (commit by a conditional UPDATE: the only test of ingest_cdc streams and maintenance on
that catalog), or on the Hadoop catalog where PostgreSQL cannot be started — the Hadoop catalog's
commits by rename are under every other test, and both catalogs have their two-service race in
tests/spark/test_optimize_service.py.

Oracles: each CDC table equals the replay of its source (tests/helpers/cdc_source.py, no shared
code), the append table holds every appended row; no writer fails; snapshots and orphans are
cleaned by the declared policy (an old orphan goes, a young one stays, every file a retained
snapshot reaches is still there); the queue ran the fresh partition before the history one;
the two services never held one table at the same time (their run-log intervals per table are
disjoint).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import sparkext
from tests.helpers.cdc_calls import ingest, land, table_rows
from tests.helpers.cdc_source import SourceTable, expected
from tests.helpers.readers import metadata_location
from tests.spark.test_optimize_service import catalog_settings

_ids = itertools.count(1)
FILES = 8  # CDC files per stream after the first (one micro-batch each)
APPENDS = 10  # commits of the append job, 2 s apart


def _policy(max_age: str, keep: int) -> str:
    """The morning's policy with its snapshot age and count scaled to the morning's length."""
    return POLICY.replace("15 seconds", max_age).replace("'4'", f"'{keep}'")


POLICY = (
    "'sparkext.maintenance.snapshot-max-age' = '15 seconds', "
    "'sparkext.maintenance.min-snapshots' = '4', "
    "'sparkext.maintenance.expire_snapshots-every' = '5 seconds', "
    "'sparkext.maintenance.remove_orphan_files-every' = '10 seconds', "
    "'sparkext.optimize.l0.min-files' = '3'"
)

WRITERS = textwrap.dedent(
    """
    import json, sys, time
    import sparkext
    (warehouse, conf, orders, users, events, zone_o, zone_u, ck_o, ck_u, appends) = sys.argv[1:]
    spark = sparkext.session(master="local[2]", warehouse=warehouse,
                             **{"spark.sql.shuffle.partitions": "1", **json.loads(conf)})
    options = {"max-files-per-batch": "1"}
    streams = [
        sparkext.ingest_cdc_stream(orders, zone_o, ck_o, primary_key="id", options=options,
                                   interval="2 seconds"),
        sparkext.ingest_cdc_stream(users, zone_u, ck_u, primary_key="id", options=options,
                                   interval="3 seconds"),
    ]
    for i in range(int(appends)):
        spark.sql(f"INSERT INTO {events} VALUES ({i}, DATE '2026-11-23')")
        print("APPENDED", i, flush=True)
        time.sleep(2)
    for query in streams:
        query.processAllAvailable()
        failed = query.exception()
        query.stop()
        print("STREAM", "FAILED " + str(failed) if failed else "OK", flush=True)
    """
)

SECOND_SERVICE = textwrap.dedent(
    """
    import json, sys, threading, time
    import sparkext
    warehouse, conf, pattern, log_table, seconds = sys.argv[1:]
    spark = sparkext.session(master="local[1]", warehouse=warehouse,
                             **{"spark.sql.shuffle.partitions": "1", **json.loads(conf)})
    service = sparkext.optimize_service(pattern, max_concurrent=1, poll_interval="1 second",
                                        log_table=log_table, log=lambda line: None)
    threading.Timer(float(seconds), service.stop).start()
    stats = service.run()
    print("SECOND", service.owner, stats.jobs_ok, stats.jobs_busy, flush=True)
    """
)


def _snapshot_count(spark, name: str) -> int:
    from sparkext.iceberg import changelog_consumers

    changelog_consumers.refresh(spark, name)
    return spark.sql(f"SELECT count(*) FROM {name}.snapshots").first()[0]


def _assert_reachable_files_exist(spark, name: str) -> None:
    from sparkext.iceberg import changelog_consumers

    changelog_consumers.refresh(spark, name)
    paths = [r[0] for r in spark.sql(f"SELECT file_path FROM {name}.all_files").collect()]
    paths += [r[0] for r in spark.sql(f"SELECT path FROM {name}.all_manifests").collect()]
    missing = [p for p in paths if not os.path.exists(p.removeprefix("file:"))]
    assert not missing, missing[:5]


def _write_here(spark, orders, users, events, zones, checkpoints, appends) -> str:
    """WRITERS, on this process's session and at a quicker pace (streams every second, an
    append every half second): the two streams and the append job (a thread)."""
    options = {"max-files-per-batch": "1"}
    streams = [
        sparkext.ingest_cdc_stream(orders, str(zones[orders]), str(checkpoints[orders]),
                                   primary_key="id", options=options, interval="1 second"),
        sparkext.ingest_cdc_stream(users, str(zones[users]), str(checkpoints[users]),
                                   primary_key="id", options=options, interval="1 second"),
    ]  # fmt: skip
    said = []
    for i in range(appends):
        spark.sql(f"INSERT INTO {events} VALUES ({i}, DATE '2026-11-23')")
        said.append(f"APPENDED {i}")
        time.sleep(0.5)  # the append job's pace (a commit every few moments), not a wait
    for query in streams:
        query.processAllAvailable()
        failed = query.exception()
        query.stop()
        said.append("STREAM " + (f"FAILED {failed}" if failed else "OK"))
    return "\n".join(said)


@pytest.mark.slow
@pytest.mark.stress
def test_a_morning_of_writers_with_two_services(spark, request, tmp_path, warehouse):
    """Full size: the writers and a second service in processes of their own."""
    _morning(spark, request, tmp_path, warehouse, files=FILES, appends=APPENDS, processes=True,
             max_age="15 seconds", keep=4)  # fmt: skip


def test_a_short_morning_of_writers_and_the_service_in_one_process(
    spark, request, tmp_path, warehouse
):
    """The default tier's morning: the same writers (two ingest_cdc streams and the append
    job, on this session, in a thread, at a quicker pace) and the same oracles, with fewer files
    and appends and no second service (two service processes racing:
    tests/spark/test_optimize_service.py); it ends once the service has done what the oracles
    look at, not after a fixed wait."""
    _morning(spark, request, tmp_path, warehouse, files=4, appends=6, processes=False,
             max_age="6 seconds", keep=2)  # fmt: skip


def _wait_for_the_service(spark, service, log_table: str, names, orphan, events) -> None:
    """Until the service has done what the oracles look at (instead of a fixed wait for it to
    catch up): snapshots of ``names`` expired, the old ``orphan`` removed, an optimisation of
    its own in the log, and both partitions of ``events`` optimised (so that the fresh-before-
    history check has something to compare); at most 300 s, then the oracles decide."""
    deadline = time.time() + 300
    while time.time() < deadline:
        taken = {j.label for j in service.ran if j.table == events and j.kind == "L0"}
        if not orphan.exists() and {'{"day":"2026-11-23"}', '{"day":"2026-01-01"}'} <= taken:
            spark.catalog.refreshTable(log_table)
            logged = spark.sql(
                f"SELECT job, table_name, service, input_files FROM {log_table} "
                "WHERE outcome = 'ok'"
            ).collect()
            expired = {
                r.table_name for r in logged if r.job == "expire_snapshots" and r.input_files > 0
            }
            optimised = any(r.job.startswith("L") and r.service == service.owner for r in logged)
            if expired >= set(names) and optimised:
                return
        time.sleep(0.1)


def _morning(spark, request, tmp_path, warehouse, *, files, appends, processes, max_age, keep):
    from tests.helpers import postgres

    catalog = "lake" if postgres.unavailable() else request.getfixturevalue("jdbc_catalog")
    namespace = f"{catalog}.morning{next(_ids)}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    orders, users, events = (f"{namespace}.{t}" for t in ("orders", "users", "events"))
    log_table = f"{namespace}_log.optimize_log"
    conf = json.dumps(catalog_settings(spark, catalog))

    # the append table, with a history partition of small files written long before
    spark.sql(
        f"CREATE TABLE {events} (id int, day date) USING iceberg PARTITIONED BY (day) "
        f"TBLPROPERTIES ('format-version'='2', {_policy(max_age, keep)})"
    )
    for i in range(4):
        spark.sql(f"INSERT INTO {events} VALUES ({1000 + i}, DATE '2026-01-01')")
    # the CDC tables: the first file ingested here, the rest by the streams
    sources, zones, checkpoints = {}, {}, {}
    for seed, name in ((1901, orders), (1902, users)):
        source = SourceTable(seed=seed, key_space=30)
        changes = [e for e in source.run(files * 25 + 25) if e["op"] != "t"]
        zone, checkpoint = tmp_path / f"zone-{seed}", tmp_path / f"ck-{seed}"
        land(zone, "0000.json", changes[:25])
        ingest(name, zone, checkpoint)
        spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ({_policy(max_age, keep)})")
        for index in range(1, files + 1):
            land(zone, f"{index:04d}.json", changes[index * 25 : (index + 1) * 25])
        sources[name], zones[name], checkpoints[name] = changes, zone, checkpoint
    # orphans in the orders table's data directory: one 4 days old, one just written
    data = Path(metadata_location(spark, orders).removeprefix("file:")).parent.parent / "data"
    data.mkdir(parents=True, exist_ok=True)
    old, young = data / "orphan-old.parquet", data / "orphan-young.parquet"
    old.write_bytes(b"o" * 100)
    young.write_bytes(b"y" * 100)
    past = time.time() - 4 * 86_400
    os.utime(old, (past, past))

    lines: list[str] = []
    service = sparkext.optimize_service(
        f"{namespace}.*", max_concurrent=2, poll_interval="1 second", fresh_window="20 seconds",
        log_table=log_table, log=lines.append,
    )  # fmt: skip
    if not processes:
        said: dict[str, str] = {}

        def write() -> None:
            try:
                said["out"] = _write_here(spark, orders, users, events, zones, checkpoints, appends)
            except Exception as error:  # reported below as a failed writer
                said["out"] = f"WRITER FAILED {error!r}"

        writing = threading.Thread(target=write)
        writing.start()
        deadline = time.time() + 300
        while _snapshot_count(spark, events) < 4 + 3 and time.time() < deadline:  # writing
            assert writing.is_alive() or "out" in said, said
            time.sleep(0.1)
        runner = threading.Thread(target=service.run)
        runner.start()
        try:
            writing.join(timeout=900)
            out, err = said.get("out", "WRITER DID NOT FINISH"), ""
            _wait_for_the_service(spark, service, log_table, (orders, users), old, events)
        finally:
            service.stop()
            runner.join(timeout=600)
        writers = second = None
    else:
        scripts = {"writers": WRITERS, "second": SECOND_SERVICE}
        for key, text in scripts.items():
            (tmp_path / f"{key}.py").write_text(text)
        writers = subprocess.Popen(
            [sys.executable, str(tmp_path / "writers.py"), str(warehouse), conf, orders, users,
             events, str(zones[orders]), str(zones[users]), str(checkpoints[orders]),
             str(checkpoints[users]), str(appends)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ),
        )  # fmt: skip
        deadline = time.time() + 300
        while _snapshot_count(spark, events) < 4 + 3 and time.time() < deadline:  # writing
            assert writers.poll() is None, writers.communicate()[1][-3000:]
            time.sleep(1)
        second = subprocess.Popen(
            [sys.executable, str(tmp_path / "second.py"), str(warehouse), conf,
             f"{namespace}.*", log_table, "45"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ),
        )  # fmt: skip
        runner = threading.Thread(target=service.run)
        runner.start()
        try:
            out, err = writers.communicate(timeout=900)
            time.sleep(15)  # the service catches up with the last commits
        finally:
            service.stop()
            runner.join(timeout=600)
        _second_out, second_err = second.communicate(timeout=600)

    # no writer failed
    if processes:
        assert writers.returncode == 0, err[-3000:]
        assert second.returncode == 0, second_err[-3000:]
    assert out.count("STREAM OK") == 2 and f"APPENDED {appends - 1}" in out, out + err[-2000:]
    # every table equals its oracle
    for name in (orders, users):
        spark.catalog.refreshTable(name)
        assert table_rows(spark, name) == expected(sources[name]), name
    spark.catalog.refreshTable(events)
    got = sorted(r.id for r in spark.table(events).collect())
    assert got == sorted([*range(appends), *range(1000, 1004)])
    # cleaned by policy, nothing reachable deleted
    assert not old.exists() and young.exists()
    spark.catalog.refreshTable(log_table)
    expired = spark.sql(
        f"SELECT table_name, sum(input_files) AS n FROM {log_table} WHERE job = "
        "'expire_snapshots' AND outcome = 'ok' GROUP BY table_name"
    ).collect()
    assert {r.table_name for r in expired if r.n > 0} >= {orders, users}
    for name in (orders, users, events):
        _assert_reachable_files_exist(spark, name)
    # fresh before history: the service's first optimisation of events is the new day
    taken = [j.label for j in service.ran if j.table == events and j.kind == "L0"]
    if '{"day":"2026-01-01"}' in taken:
        assert taken.index('{"day":"2026-11-23"}') < taken.index('{"day":"2026-01-01"}'), taken
    # two services, never one table at once
    entries = spark.sql(
        f"SELECT service, table_name, started, ts FROM {log_table} WHERE outcome = 'ok' "
        "AND job LIKE 'L%'"
    ).collect()
    owners = {e.service for e in entries}
    assert service.owner in owners
    for a, b in itertools.combinations(entries, 2):  # [started, ts] covers each lease
        if a.service != b.service and a.table_name == b.table_name:
            assert a.ts <= b.started or b.ts <= a.started, (a, b)
    assert not [line for line in lines if " failed " in line], lines
