"""The optimisation service: many tables, one Spark application (Bilibili Magnus' loop).

Each cycle (every ``poll_interval``):

1. **discover** the tables that match the patterns (``lake.ods.*``, exact names);
2. **poll** each table's current snapshot from its metadata file (one small read per table, no
   Spark job); a table whose snapshot changed since it was last planned is **planned** with
   ``tiered_optimize``'s own planner (metadata only) and its groups are queued as jobs (and,
   for a table that declares skipping indexes the current snapshot's index object does not
   cover, an ``index`` job that builds them, after the fresh groups); its maintenance actions
   are queued when their interval since the last successful run (kept in the run log, so a
   restart remembers) has passed. A table that no poll finds changed is not
   planned again — except when a job of it failed or was busy, so nothing is ever missed: the
   plan is always made from the table's state, never from an event.
3. **run** jobs from the priority queue (:mod:`sparkext.service.queue`) on up to
   ``max_concurrent`` threads, one job per table at a time, each under the table's lease across
   processes (:mod:`sparkext.actions.lease`); a job re-plans its (partition, level) when it
   starts, so work another process already committed is not redone.

Every job ends as one log line and rows in the run log (:mod:`sparkext.actions.runlog`).
:meth:`Service.stop` (Ctrl-C) stops taking jobs and lets the running ones finish;
:meth:`Service.cancel` (a second Ctrl-C) cancels them: they commit nothing more.

Floor: service.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sparkext.actions import health_report as report
from sparkext.actions import lease, runlog
from sparkext.actions.cdc.lag import table_lags
from sparkext.actions.maintain import maintain
from sparkext.actions.optimize import optimize, planned
from sparkext.actions.skipping import build_indexes, index_due
from sparkext.declarations import Context
from sparkext.durations import parse_ms as parse_duration_ms
from sparkext.errors import ProcedureArgumentError, SparkextError, TableBusyError
from sparkext.iceberg.catalog import (
    activate_session,
    discover,
    parse_patterns,
    refreshed_snapshot_id,
    resolve_table,
)
from sparkext.iceberg.errors import translate
from sparkext.literals import sql_string
from sparkext.planning.lag import table_lag
from sparkext.security.caller import Caller, spark_user
from sparkext.security.guard import governed
from sparkext.service.queue import INDEX, MAINTENANCE, Job, JobQueue, benefit, tier_of
from sparkext.spark import cancellation
from sparkext.spark.environment import check_executors

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkext.iceberg.catalog import TableRef

# how often each maintenance action is due, unless the table property
# sparkext.maintenance.<action>-every says otherwise (Magnus: hourly expiry, daily orphans and
# manifests)
LAG_ALERT_PROPERTY = "sparkext.cdc.lag-alert"  # a table's own lag threshold (a duration)
LAG_CHECK_S = 30.0  # a table's lag is read at most this often
RETRY_MS = 10 * 60 * 1000  # a failed maintenance action is tried again after this (or its interval)
EVERY_DEFAULT = {
    "expire_snapshots": "1 hour",
    "remove_dangling_deletes": "1 day",
    "rewrite_manifests": "1 day",
    "remove_orphan_files": "1 day",
}


@dataclass
class Settings:
    patterns: tuple[str, ...]
    max_concurrent: int = 2
    poll_interval_s: float = 10.0
    fresh_window_ms: int = 3_600_000
    lease_ttl_ms: int = lease.TTL_MS
    log_table: str | None = None
    maintenance: bool = True
    once: bool = False
    lag_alert_ms: int | None = None  # CDC tables further behind are logged and shown


@dataclass
class Stats:
    cycles: int = 0
    jobs_ok: int = 0
    jobs_failed: int = 0
    jobs_busy: int = 0
    discovery_s: list[float] = field(default_factory=list)


class Service:
    """One optimisation service in this Spark application (see the module docstring)."""

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        log: Callable[[str], None] = print,
        status: Callable[[str], None] = lambda text: None,
    ):
        self.spark = spark
        self.settings = settings
        self.log = log
        self.status = status
        self.owner = lease.owner_name("optimize-service")
        self.queue = JobQueue()
        self.stats = Stats()
        self.log_table = settings.log_table or runlog.default_table(settings.patterns)
        self._seen: dict[str, int | None] = {}  # table -> snapshot it was last planned at
        self._last_runs: dict[tuple[str, str], int] = {}
        self._attempts: dict[tuple[str, str], int] = {}  # failed maintenance: when last tried
        self._running: dict[str, tuple[Job, cancellation.Statement]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._maintained: set[str] = set()
        self.tables: list[str] = []
        self.ran: list[Job] = []  # every job taken, in order (tests, the report)
        self.lagging: dict[str, int] = {}  # CDC table -> its lag (ms) while over the threshold
        self._lag_checked: dict[str, float] = {}  # table -> when its lag was last read

    # ---- the loop --------------------------------------------------------------------------

    def run(self) -> Stats:
        """Serve until :meth:`stop` (or, with ``once``, until nothing is left to do)."""
        runlog.ensure(self.spark, self.log_table)
        self._last_runs = runlog.last_runs(self.spark, self.log_table, self._discover())
        with ThreadPoolExecutor(self.settings.max_concurrent, "optimize") as pool:
            futures: list[Future[None]] = []
            while not self._stopping.is_set():
                self._cycle()
                futures = self._dispatch(pool, futures)
                if self.settings.once and not len(self.queue) and not futures:
                    break
                self._wake.wait(self.settings.poll_interval_s if not futures else 0.5)
                self._wake.clear()
            for future in futures:
                future.exception()  # wait: running jobs finish (or were cancelled)
        return self.stats

    def stop(self) -> None:
        """Take no new job; running jobs finish."""
        self._stopping.set()
        self._wake.set()

    def cancel(self) -> None:
        """Cancel the running jobs too (their uncommitted files are discarded)."""
        self.stop()
        with self._lock:
            running = list(self._running.values())
        for _, statement in running:
            statement.cancelled.set()
            self.spark.sparkContext.cancelJobGroup(statement.group)

    def running(self) -> list[Job]:
        with self._lock:
            return [job for job, _ in self._running.values()]

    # ---- discovery and planning -------------------------------------------------------------

    def _discover(self) -> list[str]:
        self.tables = discover(self.spark, self.settings.patterns, exclude=(self.log_table,))
        return self.tables

    def _cycle(self) -> None:
        started = time.perf_counter()
        self.stats.cycles += 1
        with self._lock:
            busy = set(self._running)
        try:
            names = self._discover()
        except Exception as error:  # a catalog blip: the next cycle tries again
            self._log_line("failed", "discovery", _sentence(error))
            return
        for name in names:
            if self._stopping.is_set():
                return
            try:
                current = _current_snapshot(self.spark, name)
            except Exception as error:  # dropped meanwhile, not Iceberg, unreadable
                self._log_line("failed", f"{name} poll", _sentence(error))
                continue
            planned_once = self.settings.once and name in self._seen  # --once: plan once
            if name not in busy and not planned_once and self._seen.get(name, -1) != current:
                self._plan(name, current)
            if self.settings.maintenance and name not in busy and name not in self._maintained:
                self._plan_maintenance(name)
            self._check_lag(name)
        self.stats.discovery_s.append(time.perf_counter() - started)
        self.status(self._status_text())

    def _check_lag(self, name: str) -> None:
        """Log a CDC table whose lag crosses its threshold (the table property
        ``sparkext.cdc.lag-alert``, else the service's), once when it crosses and once when it
        is back within; :attr:`lagging` and the status line show the tables over it."""

        now = time.monotonic()
        if now - self._lag_checked.get(name, -LAG_CHECK_S) < LAG_CHECK_S:
            return
        self._lag_checked[name] = now
        try:
            own = dict(resolve_table(self.spark, name).properties).get(LAG_ALERT_PROPERTY)
            threshold = (
                _duration(own, f"{LAG_ALERT_PROPERTY} of {name}")
                if own
                else self.settings.lag_alert_ms
            )
            if threshold is None:
                return
            found = table_lag(table_lags(self.spark, name))
        except Exception as error:
            self._log_line("failed", f"{name} lag", _sentence(error))
            return
        if found is None or found.lag_ms is None:
            return
        assert found.complete_through_ms is not None  # table_lag picks rows that have it
        through = dt.datetime.fromtimestamp(found.complete_through_ms / 1000, dt.timezone.utc)
        detail = (
            f"CDC lag {_seconds(found.lag_ms)} (complete through "
            f"{through.strftime('%Y-%m-%dT%H:%M:%SZ')}; threshold {_seconds(threshold)})"
        )
        if found.lag_ms > threshold:
            if name not in self.lagging:
                self._log_line("alert", f"{name} lag", detail)
            self.lagging[name] = found.lag_ms
        elif self.lagging.pop(name, None) is not None:
            self._log_line("ok", f"{name} lag", f"back within the threshold: {detail}")

    def _plan(self, name: str, current: int | None) -> None:

        try:
            ref = resolve_table(self.spark, name)
            groups = planned(Context(self.spark), ref) if current is not None else []
            stale = index_due(self.spark, ref)
        except Exception as error:
            self._log_line("failed", f"{name} plan", _sentence(error))
            return
        self._seen[name] = current
        now = int(time.time() * 1000)
        for group in groups:
            self.queue.put(
                Job(
                    table=name,
                    kind=f"L{group.level}",
                    partition=group.partition,
                    reason=group.reason,
                    tier=tier_of(group.last_commit_ms, now, self.settings.fresh_window_ms),
                    benefit=benefit(
                        group.input_files,
                        group.input_bytes,
                        group.target_file_bytes,
                        group.level,
                        group.converts_deletes,
                    ),
                    input_files=group.input_files,
                    input_bytes=group.input_bytes,
                    label=group.label,
                )
            )
        if stale is not None:  # after the table's fresh groups, which write files to index
            self.queue.put(Job(name, INDEX, None, stale, MAINTENANCE, 0.0))

    def _plan_maintenance(self, name: str) -> None:

        try:
            properties = dict(resolve_table(self.spark, name).properties)
        except Exception as error:
            self._log_line("failed", f"{name} policy", _sentence(error))
            return
        now = int(time.time() * 1000)
        due = []
        for action, default in EVERY_DEFAULT.items():
            every = properties.get(f"sparkext.maintenance.{action}-every", default)
            try:
                interval = parse_duration_ms(every)
            except ValueError:
                interval = parse_duration_ms(default)
            last = self._last_runs.get((name, action))
            tried = self._attempts.get((name, action))
            retry = min(interval, RETRY_MS)  # a failing action is tried again, not every poll
            if (last is None or now - last >= interval) and (tried is None or now - tried >= retry):
                due.append(action)
        if due:
            if self.settings.once:
                self._maintained.add(name)  # --once: one maintenance job per table
            self.queue.put(
                Job(name, "maintain", None, "due by policy", MAINTENANCE, 1.0, frozenset(due))
            )

    # ---- running jobs -----------------------------------------------------------------------

    def _dispatch(
        self, pool: ThreadPoolExecutor, futures: list[Future[None]]
    ) -> list[Future[None]]:
        futures = [f for f in futures if not f.done()]
        while not self._stopping.is_set() and len(futures) < self.settings.max_concurrent:
            with self._lock:
                job = self.queue.pop(busy=set(self._running))
                if job is None:
                    break
                statement = cancellation.Statement()
                self._running[job.table] = (job, statement)
            self.ran.append(job)
            futures.append(pool.submit(self._run_job, job, statement))
        self.status(self._status_text())
        return futures

    def _run_job(self, job: Job, statement: cancellation.Statement) -> None:

        context = self.spark.sparkContext
        started = time.monotonic()
        job_started = runlog.utc_now()
        entries: list[runlog.Entry] = []
        outcome, error = "ok", None

        def lost() -> None:  # the lease was lost mid-job: stop before the next commit
            statement.cancelled.set()
            context.cancelJobGroup(statement.group)

        try:
            with cancellation.bound(statement):
                activate_session(self.spark)
                context.setJobGroup(statement.group, job.describe()[:200], True)
                with lease.held(
                    self.spark, job.table, self.owner, self.settings.lease_ttl_ms,
                    "optimize-service", on_lost=lost,
                ):  # fmt: skip
                    entries = self._execute(job)
        except TableBusyError as busy:
            outcome, error = "busy", str(busy)
        except cancellation.StatementCancelled as cancelled:
            outcome, error = "failed", str(cancelled)
        except Exception as failure:
            outcome, error = "failed", _sentence(failure)
        finally:
            # None clears the property (pyspark's annotation says str)
            context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
            context.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
        if not entries:
            entries = [self._entry(job, outcome, error, int((time.monotonic() - started) * 1000))]
        ended = runlog.utc_now()  # after the lease was released
        entries = [dataclasses.replace(e, ts=ended, started=job_started) for e in entries]
        now_ms = int(time.time() * 1000)
        worst = next((e for e in entries if e.outcome == "failed"), None) or entries[0]
        with self._lock:  # bookkeeping before the table is free for the next job
            for entry in entries:
                # plan it again next cycle; with --once only after "busy": the holder finishes
                # soon, and its work then leaves ours due or not (a failure is not retried)
                if entry.outcome == "busy" or (
                    entry.outcome == "failed" and not self.settings.once
                ):
                    self._seen.pop(job.table, None)
                if job.kind == "maintain":
                    key = (job.table, entry.job)
                    if entry.outcome in ("ok", "skipped"):
                        self._last_runs[key] = now_ms
                    else:
                        self._attempts[key] = now_ms
            if job.kind == "maintain" and outcome != "ok":
                for action in job.actions:
                    self._attempts[(job.table, action)] = now_ms
            if worst.outcome == "failed":
                self.stats.jobs_failed += 1
            elif worst.outcome == "busy":
                self.stats.jobs_busy += 1
            else:
                self.stats.jobs_ok += 1
            self._running.pop(job.table, None)
        self._wake.set()
        try:
            runlog.append(self.spark, self.log_table, entries)
        except Exception as failure:
            self.log(f"run log not written ({_sentence(failure)})")
        for entry in entries:
            self._log_line(entry.outcome, _entry_label(entry), _entry_detail(entry))

    def _execute(self, job: Job) -> list[runlog.Entry]:

        routine = {"maintain": "sparkext.maintain", INDEX: "sparkext.build_indexes"}.get(
            job.kind, "sparkext.tiered_optimize"
        )
        arguments = f"table => {sql_string(job.table)}, job => {sql_string(job.kind)}"
        # the policy names users, so the service acts as Spark's user; its owner name (which
        # holds the host and pid) is the audit row's client
        caller = Caller("service", spark_user(self.spark), self.owner)
        with governed(self.spark, routine, "procedure", arguments, caller) as call:
            ref = resolve_table(self.spark, job.table)
            call.tables = [ref.name]
            call.check(writes=True, tables=call.tables)
            call.note_before()
            check_executors(self.spark)  # once per application
            return self._perform(job, ref)

    def _perform(self, job: Job, ref: TableRef) -> list[runlog.Entry]:

        context = Context(self.spark)
        now = runlog.utc_now()
        if job.kind == "maintain":
            result = maintain(context, ref, only=job.actions)
            self._record_health(job.table)
            return [
                runlog.Entry(
                    now,
                    self.owner,
                    job.table,
                    None,
                    a.action,
                    a.reason,
                    a.items,
                    None,
                    a.files_deleted,
                    a.bytes_deleted,
                    a.snapshot_id,
                    a.duration_ms,
                    a.outcome if a.outcome != "planned" else "ok",
                    a.error,
                )
                for a in result.actions
            ]
        if job.kind == INDEX:
            return [self._index(job, ref)]
        level = int(job.kind[1:])
        optimized = optimize(
            context,
            ref,
            only_levels=frozenset({level}),
            only_partitions=frozenset({job.partition or ""}),
            leased=True,
            build_indexes=False,  # the table's index job builds them once its groups are done
        )
        if not optimized.groups:
            return [self._entry(job, "skipped", None, 0, "nothing due any more")]
        return [
            runlog.Entry(
                now,
                self.owner,
                job.table,
                g.partition,
                f"L{g.level}",
                g.reason,
                g.input_files,
                g.input_bytes,
                g.output_files,
                g.output_bytes,
                g.snapshot_id,
                g.duration_ms,
                "ok" if g.error is None else "failed",
                g.error,
            )
            for g in optimized.groups
        ]

    def _index(self, job: Job, ref: TableRef) -> runlog.Entry:
        """Build the table's skipping indexes (the files no index object lists yet)."""

        started = time.monotonic()
        built = build_indexes(Context(self.spark), ref)
        return runlog.Entry(
            runlog.utc_now(),
            self.owner,
            job.table,
            None,
            INDEX,
            built.summary(),
            built.files_read,
            built.bytes_read,
            1 if built.written else 0,
            built.index_bytes if built.written else 0,
            built.snapshot_id,
            int((time.monotonic() - started) * 1000),
            "ok" if built.written else "skipped",
        )

    def _record_health(self, name: str) -> None:
        """A data point of the report's trends, with each maintenance run (hourly)."""

        try:
            report.record(self.spark, self.log_table, self.owner, report.health(self.spark, [name]))
        except Exception as failure:
            self._log_line("failed", f"{name} health", _sentence(failure))

    def _entry(
        self, job: Job, outcome: str, error: str | None, duration_ms: int, reason: str = ""
    ) -> runlog.Entry:
        return runlog.Entry(
            runlog.utc_now(),
            self.owner,
            job.table,
            job.label,
            job.kind if job.kind != "maintain" else ",".join(sorted(job.actions)),
            reason or job.reason,
            job.input_files,
            job.input_bytes,
            None,
            None,
            None,
            duration_ms,
            outcome,
            error,
        )

    def _log_line(self, outcome: str, label: str, detail: str) -> None:
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.log(f"{stamp} {outcome:<7} {label}: {detail}")

    def _status_text(self) -> str:
        running = ", ".join(j.describe() for j in self.running()) or "idle"
        lagging = (
            " · lagging: "
            + ", ".join(f"{t} {_seconds(ms)}" for t, ms in sorted(self.lagging.items()))
            if self.lagging
            else ""
        )
        return (
            f"{len(self.tables)} tables · queue {len(self.queue)} · running: {running} · "
            f"ok {self.stats.jobs_ok}, failed {self.stats.jobs_failed}, busy "
            f"{self.stats.jobs_busy}{lagging}"
        )


def _current_snapshot(spark: SparkSession, name: str) -> int | None:

    return refreshed_snapshot_id(spark, name)


def _sentence(error: BaseException) -> str:

    if isinstance(error, SparkextError):
        return str(error)
    translated = translate(error)
    text = str(translated) if translated is not None else f"{type(error).__name__}: {error}"
    return (text.strip().splitlines() or ["failed"])[0]


def _entry_label(entry: runlog.Entry) -> str:
    where = f" {entry.partition}" if entry.partition else ""
    return f"{entry.table_name}{where} {entry.job}"


def _entry_detail(entry: runlog.Entry) -> str:
    if entry.error:
        return entry.error
    parts = [entry.reason] if entry.reason else []
    if entry.job.startswith("L") and entry.output_files is not None:
        parts.append(
            f"{entry.input_files} files {_mb(entry.input_bytes)} → {entry.output_files} files "
            f"{_mb(entry.output_bytes)}"
        )
    if entry.snapshot_id is not None:
        parts.append(f"snapshot {entry.snapshot_id}")
    parts.append(f"{entry.duration_ms / 1000:.1f} s")
    return "; ".join(parts)


def _seconds(ms: int) -> str:
    """
    >>> _seconds(754_000), _seconds(3_000), _seconds(7_500_000)
    ('12 min 34 s', '3 s', '2 h 05 min')
    """
    seconds = ms // 1000
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    if seconds >= 60:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds} s"


def _mb(size: int | None) -> str:
    return f"{(size or 0) / 2**20:,.1f} MB"


def serve(
    spark: SparkSession,
    tables: str | Sequence[str],
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
) -> Service:
    """Build a service (``.run()`` serves; ``.stop()`` from another thread ends it)."""
    patterns = parse_patterns(tables if isinstance(tables, str) else ",".join(tables))
    if max_concurrent < 1:
        raise ProcedureArgumentError(
            f"max_concurrent = {max_concurrent} runs nothing; use 1 or more, e.g. 4."
        )
    settings = Settings(
        patterns=patterns,
        max_concurrent=max_concurrent,
        poll_interval_s=_duration(poll_interval, "poll interval") / 1000,
        fresh_window_ms=_duration(fresh_window, "fresh window"),
        lease_ttl_ms=_duration(lease_ttl, "lease TTL"),
        log_table=log_table,
        maintenance=maintenance,
        once=once,
        lag_alert_ms=_duration(lag_alert, "lag alert") if lag_alert else None,
    )
    return Service(spark, settings, log=log)


def _duration(text: str, what: str) -> int:
    try:
        return parse_duration_ms(text)
    except ValueError:
        raise ProcedureArgumentError(
            f"The {what} '{text}' is not a duration; write e.g. '10 seconds' or '5 minutes'."
        ) from None


__all__: list[Any] = ["Service", "Settings", "serve"]
