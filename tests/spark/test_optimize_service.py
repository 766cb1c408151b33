"""The optimisation service and the per-table lease.

Oracles: the tables read exactly what they read before (stock Iceberg-Spark); the run log, read
back with SQL, says what ran; lease intervals recorded by real concurrent processes never
overlap on one table.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

import sparkext
from sparkext.actions import lease
from sparkext.errors import ProcedureArgumentError, TableBusyError

NAMESPACE = "lake.svc"
_ids = itertools.count(1)


@pytest.fixture
def namespace(spark, request):
    """A fresh namespace per test (the service discovers tables by pattern)."""
    name = f"{NAMESPACE}{request.node.name.split('[')[0][-12:].replace('-', '_')}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name}")
    return name


def small_files(spark, name: str, parts: str = "ab", files: int = 4, start: int = 0) -> None:
    if not spark.catalog.tableExists(name):
        spark.sql(
            f"CREATE TABLE {name} (k int, p string) USING iceberg PARTITIONED BY (p) "
            "TBLPROPERTIES ('format-version'='2', 'sparkext.optimize.l0.min-files'='3')"
        )
    for i in range(files):
        values = ", ".join(f"({start + i * 10 + j}, '{p}')" for j, p in enumerate(parts))
        spark.sql(f"INSERT INTO {name} VALUES {values}")


def catalog_settings(spark, catalog: str) -> dict[str, str]:
    """What another process needs to open ``catalog`` as this session does."""
    prefix = f"spark.sql.catalog.{catalog}"
    out = {k: v for k, v in spark.sparkContext.getConf().getAll() if k.startswith(prefix)}
    for key in ("uri", "catalog-impl", "jdbc.user", "jdbc.password", "jdbc.schema-version",
                "warehouse", ""):  # fmt: skip
        full = f"{prefix}.{key}" if key else prefix
        value = spark.conf.get(full, None)
        if value is not None:
            out[full] = value
    extra = spark.sparkContext.getConf().get("spark.driver.extraClassPath", None)
    if extra:
        out["spark.driver.extraClassPath"] = extra
    return out


def rows(spark, name: str) -> list[tuple]:
    spark.catalog.refreshTable(name)
    return sorted(tuple(r) for r in spark.table(name).collect())


def file_count(spark, name: str) -> int:
    spark.catalog.refreshTable(name)
    return spark.sql(f"SELECT count(*) FROM {name}.files").first()[0]


def log(spark, log_table: str, where: str = "true") -> list:
    spark.catalog.refreshTable(log_table)
    return spark.sql(f"SELECT * FROM {log_table} WHERE {where} ORDER BY ts").collect()


def test_the_lease_is_exclusive_and_a_dead_holders_lease_expires(spark, catalog):
    table_name = f"{catalog}.test.leased_{next(_ids)}"
    small_files(spark, table_name, files=1)
    assert lease.try_acquire(spark, table_name, "a", ttl_ms=60_000) is None
    assert lease.try_acquire(spark, table_name, "a", ttl_ms=60_000) is None  # renewal
    blocker = lease.try_acquire(spark, table_name, "b", ttl_ms=60_000)
    assert blocker is not None and blocker.owner == "a"
    lease.release(spark, table_name, "b")  # not b's: nothing happens
    assert lease.try_acquire(spark, table_name, "b") is not None
    lease.release(spark, table_name, "a")
    assert lease.try_acquire(spark, table_name, "b", ttl_ms=1) is None  # b dies at once
    time.sleep(0.01)
    assert lease.try_acquire(spark, table_name, "c", ttl_ms=60_000) is None  # b's expired
    lease.release(spark, table_name, "c")


def test_a_manual_tiered_optimize_waits_for_the_lease_holder(spark, table_name):
    small_files(spark, table_name)
    before = rows(spark, table_name)
    files = file_count(spark, table_name)
    assert lease.try_acquire(spark, table_name, "optimize-service@elsewhere:1", 60_000) is None
    with pytest.raises(TableBusyError) as busy:
        sparkext.sql(f"CALL sparkext.tiered_optimize(table => '{table_name}')")
    text = str(busy.value)
    assert "optimize-service@elsewhere:1" in text and "\n" not in text
    assert file_count(spark, table_name) == files
    lease.release(spark, table_name, "optimize-service@elsewhere:1")
    sparkext.sql(f"CALL sparkext.tiered_optimize(table => '{table_name}')").collect()
    assert file_count(spark, table_name) == 2 and rows(spark, table_name) == before
    assert lease.store.holder(spark, table_name) is None  # released after the run


def test_once_optimises_every_matching_table_and_logs_every_job(spark, namespace):
    first, second, other = (f"{namespace}.orders", f"{namespace}.users", "lake.test.untouched")
    for name in (first, second):
        small_files(spark, name)
    small_files(spark, other)
    before = {n: rows(spark, n) for n in (first, second)}
    other_files = file_count(spark, other)
    log_table = f"{namespace}.log"
    service = sparkext.optimize_service(
        f"{namespace}.*", once=True, log_table=log_table, log=lambda line: None
    )
    stats = service.run()
    assert stats.jobs_failed == 0
    for name in (first, second):
        assert rows(spark, name) == before[name]
        assert file_count(spark, name) == 2  # 4 small files per partition merged into 1
    assert file_count(spark, other) == other_files
    entries = log(spark, log_table)
    merged = {(e.table_name, e.partition) for e in entries if e.job == "L0" and e.outcome == "ok"}
    assert merged == {(n, f'{{"p":"{p}"}}') for n in (first, second) for p in "ab"}
    actions = {(e.table_name, e.job) for e in entries if e.partition is None}
    assert (first, "expire_snapshots") in actions and (second, "remove_orphan_files") in actions
    assert log(spark, log_table, "outcome <> 'ok' AND outcome <> 'skipped'") == []
    assert all(e.service == service.owner and e.duration_ms >= 0 for e in entries)
    # and the audit log holds each job as a call on the service's route (issue 53)
    from sparkext.security import audit

    audit.flush(spark)
    spark.sql(f"REFRESH TABLE {audit.audit_log(spark).table}")
    calls = spark.sql(
        f"SELECT user, client, routine, tables, snapshots, outcome FROM "
        f"{audit.audit_log(spark).table} "
        f"WHERE route = 'service' AND tables[0] IN ('{first}', '{second}')"
    ).collect()
    merges = {c.tables[0] for c in calls if c.routine == "sparkext.tiered_optimize"}
    assert merges == {first, second}, calls
    user = spark.sparkContext.sparkUser()
    assert all(c.user == user and c.client == service.owner for c in calls), calls
    assert all(c.outcome == "ok" for c in calls), calls
    assert all(c.snapshots for c in calls if c.routine == "sparkext.tiered_optimize"), calls

    # a restart resumes: nothing committed is redone, maintenance is not yet due again
    again = sparkext.optimize_service(
        f"{namespace}.*", once=True, log_table=log_table, log=lambda line: None
    )
    again.run()
    assert again.ran == []


def test_fresh_partitions_go_before_history(spark, namespace, monkeypatch):
    """The service's clock is stopped 1 ms after the last commit of partition n; its fresh
    window reaches back to 1 ms after partition o's last commit: n is fresh (tier 0) and goes
    first although o's bigger merge has the bigger benefit; o, 1 ms too old, is history."""
    import sparkext.service.service as service_module
    from sparkext.iceberg.catalog import snapshot_commit_times

    name = f"{namespace}.events"
    small_files(spark, name, parts="o", files=6)  # more files: the bigger benefit
    history_ms = max(snapshot_commit_times(spark, name))[0]
    small_files(spark, name, parts="n", files=3, start=1000)
    fresh_ms = max(snapshot_commit_times(spark, name))[0]
    assert fresh_ms > history_ms

    class StoppedClock:  # the service module's ``time``, with time() standing still
        def __getattr__(self, attribute):
            return getattr(time, attribute)

        def time(self) -> float:
            return (fresh_ms + 1.5) / 1000  # int(time() * 1000) is fresh_ms + 1

    monkeypatch.setattr(service_module, "time", StoppedClock())
    lines: list[str] = []
    service = sparkext.optimize_service(
        name, once=True, max_concurrent=1, fresh_window=f"{fresh_ms - history_ms} ms",
        maintenance=False, log_table=f"{namespace}.log", log=lines.append,
    )  # fmt: skip
    service.run()
    assert [(j.label, j.tier) for j in service.ran] == [('{"p":"n"}', 0), ('{"p":"o"}', 2)]
    assert len(lines) == 2 and "ok" in lines[0] and '{"p":"n"} L0' in lines[0]


def test_a_table_leased_elsewhere_waits_until_the_dead_holders_lease_expires(
    spark, namespace, monkeypatch
):
    """Another process holds the table's lease and dies (never renews): the service leaves the
    table alone while the lease runs (busy, the holder named), then optimises it. The other
    process takes its 2-second lease just before the service's first attempt (so the service
    meets it however long the service takes to start)."""
    import contextlib

    name = f"{namespace}.busy"
    small_files(spark, name)
    before = rows(spark, name)
    files = file_count(spark, name)
    holders = []
    real_held = lease.held

    @contextlib.contextmanager
    def dead_holder_first(spark, table, *args, **kwargs):
        if not holders:
            assert lease.try_acquire(spark, table, "optimize-service@dead:2", 2_000) is None
            holders.append(lease.store.holder(spark, table))
        with real_held(spark, table, *args, **kwargs):
            yield

    monkeypatch.setattr(lease, "held", dead_holder_first)
    service = sparkext.optimize_service(
        name, once=True, maintenance=False, log_table=f"{namespace}.log", log=lambda x: None
    )
    stats = service.run()
    assert stats.jobs_busy >= 1 and stats.jobs_ok == 2 and stats.jobs_failed == 0
    busy = log(spark, f"{namespace}.log", "outcome = 'busy'")
    assert busy and "optimize-service@dead:2" in busy[0].error
    merged = log(spark, f"{namespace}.log", "outcome = 'ok'")
    (holder,) = holders
    assert all(e.started.timestamp() * 1000 >= holder.expires_ms - 1000 for e in merged)
    assert files == 8 and file_count(spark, name) == 2 and rows(spark, name) == before


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"tables": "orders"}, "catalog.namespace.table"),
        ({"tables": " , "}, "names no table"),
        ({"tables": "lake.a.b", "max_concurrent": 0}, "use 1 or more"),
        ({"tables": "lake.a.b", "poll_interval": "often"}, "not a duration"),
    ],
)
def test_bad_service_settings_are_one_sentence(spark, kwargs, words):
    tables = kwargs.pop("tables")
    with pytest.raises(ProcedureArgumentError) as error:
        sparkext.optimize_service(tables, **kwargs)
    assert words in str(error.value) and "\n" not in str(error.value)


SERVICE_SCRIPT = textwrap.dedent(
    """
    import contextlib, json, os, sys, time
    import sparkext
    from sparkext.actions import lease
    held = lease.held

    @contextlib.contextmanager
    def recorded(spark, name, *args, **kwargs):  # the time inside each hold, to a file
        with held(spark, name, *args, **kwargs):
            start = time.time()
            try:
                yield
            finally:
                with open(sys.argv[5], "a") as out:
                    out.write(json.dumps([name, start, time.time()]) + "\\n")

    lease.held = recorded
    spark = sparkext.session(master="local[1]", warehouse=sys.argv[1],
                             **{"spark.sql.shuffle.partitions": "1", **json.loads(sys.argv[4])})
    while not os.path.exists(sys.argv[6]):  # the tables are being made while the JVM started
        time.sleep(0.02)
    service = sparkext.optimize_service(sys.argv[2], once=True, max_concurrent=2,
                                        maintenance=False, log_table=sys.argv[3])
    stats = service.run()
    print("OWNER", service.owner, "FAILED", stats.jobs_failed)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("catalog", "tables", "parts", "files"),
    [  # the default tier races on fewer tables and partitions; JDBC's lease: the lease tests
        pytest.param("hadoop", 2, "ab", 3, id="hadoop-small"),
        pytest.param("hadoop", 3, "abcd", 4, id="hadoop", marks=pytest.mark.stress),
        pytest.param("jdbc", 3, "abcd", 4, id="jdbc", marks=pytest.mark.stress),
    ],
    indirect=["catalog"],
)
def test_two_service_processes_never_optimise_one_table_at_once(spark, catalog, tmp_path,
                                                                warehouse, tables, parts,
                                                                files):  # fmt: skip
    namespace = f"{catalog}.svc{next(_ids)}"
    names = [f"{namespace}.t{i}" for i in range(tables)]
    log_table = f"{namespace}.log"
    script = tmp_path / "service.py"
    script.write_text(SERVICE_SCRIPT)
    go = tmp_path / "go"  # both processes start their service once it exists
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                str(script),
                str(warehouse),
                f"{namespace}.t*",
                log_table,
                json.dumps(catalog_settings(spark, catalog)),
                str(tmp_path / f"held-{i}.jsonl"),
                str(go),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for i in range(2)
    ]
    try:  # the tables, while their JVMs start
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
        for name in names:
            small_files(spark, name, parts=parts, files=files)
        before = {n: rows(spark, n) for n in names}
        from sparkext.actions import runlog

        runlog.ensure(spark, log_table)
    except BaseException:
        for process in processes:
            process.kill()
            process.communicate()
        raise
    go.touch()
    outputs = [p.communicate(timeout=900) for p in processes]
    for process, (out, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err[-3000:]
        assert "FAILED 0" in out, out + err[-2000:]
    entries = [e for e in log(spark, log_table) if e.outcome in ("ok", "busy")]
    assert {e.service for e in entries if e.outcome == "ok"}  # somebody did the work
    # each process recorded the time it spent inside every lease it held (a part of the hold:
    # the run log's [started, ts] brackets it from outside, so those may touch harmlessly)
    holds = [
        (i, *json.loads(line))
        for i in range(2)
        if (tmp_path / f"held-{i}.jsonl").exists()
        for line in (tmp_path / f"held-{i}.jsonl").read_text().splitlines()
    ]
    assert holds
    for a in holds:
        for b in holds:
            if a[0] != b[0] and a[1] == b[1]:
                assert a[3] <= b[2] or b[3] <= a[2], (a, b)
    for name in names:
        assert rows(spark, name) == before[name]
        assert file_count(spark, name) == len(parts)  # every partition merged exactly once


def test_a_holder_that_loses_its_lease_is_told_before_its_next_commit(spark, table_name):
    """Another process took the lease (this one's renewals failed until it expired): the
    renewer notices and calls on_lost, so the work stops before committing."""
    import threading

    small_files(spark, table_name, files=1)
    lost = threading.Event()
    with lease.held(spark, table_name, "me", ttl_ms=1500, on_lost=lost.set):
        lease.store.swap(spark, table_name, "thief", lease.store.Holder("thief", 10**13),
                         now_ms=10**13)  # fmt: skip
        assert lost.wait(10)
    assert lease.store.holder(spark, table_name).owner == "thief"  # ours never overwrote it
    lease.release(spark, table_name, "thief")


@pytest.mark.parametrize("zone", ["Asia/Shanghai", "America/Los_Angeles"])
def test_run_log_times_are_instants_whatever_the_hosts_zone(spark, namespace, zone):
    """A job logged on a host east or west of UTC reads back as the same instant: a restart
    neither repeats maintenance nor holds it back by the zone's offset."""
    from sparkext.actions import runlog
    from tests.helpers.zones import host_zone

    log_table = f"{namespace}.log_{zone.split('/')[1].lower()}"
    runlog.ensure(spark, log_table)
    with host_zone(zone):
        now = runlog.utc_now()
        entry = runlog.Entry(now, "me", "lake.x.t", None, "expire_snapshots", "", 0, None, None,
                             None, None, 0, "ok", started=now)  # fmt: skip
        runlog.append(spark, log_table, [entry])
        last = runlog.last_runs(spark, log_table, ["lake.x.t"])[("lake.x.t", "expire_snapshots")]
    assert abs(last - time.time() * 1000) < 120_000
