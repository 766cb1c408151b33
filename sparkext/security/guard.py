"""Every routine call passes here: the policy decides, the audit log records.

:func:`governed` wraps one call of a sparkext routine (``run_invocation``, on every route);
:func:`begin_procedure` and :func:`end_procedure` do the same for an Iceberg procedure, which the
JVM extension holds (``io.sparkext.spark.IcebergCall``) and Spark runs between the two.
A refusal is :class:`~sparkext.errors.AccessDeniedError`, one sentence naming the user, the routine
and the policy; the data is untouched.

Floor: security.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sparkext.errors import AccessDeniedError, SparkextError
from sparkext.iceberg.catalog import refreshed_snapshot_id
from sparkext.iceberg.errors import one_line, translate
from sparkext.security import audit, policy
from sparkext.security.caller import Caller, current
from sparkext.spark import settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkext.declarations import BoundArgs, Routine

# Set by ``sparkext-sql serve`` when it listens beyond this machine: its clients then get
# policy.NETWORK_DEFAULT when no policy file is configured.
_networked = threading.Event()


def serve_networked() -> None:
    _networked.set()


def active_policy(spark: SparkSession, caller: Caller) -> policy.Policy | None:
    """The policy this call answers to: the file of ``spark.sparkext.policy``, else the network
    default for a networked server's clients, else none (everything is allowed)."""
    path = settings.setting(spark, "spark.sparkext.policy")
    if path:
        return policy.load(path)
    if caller.route == "serve" and _networked.is_set():
        return policy.NETWORK_DEFAULT
    return None


def refusal(caller: Caller, routine: str, why: str) -> AccessDeniedError:
    return AccessDeniedError(
        f"User '{caller.user}' may not call {routine}: {why}; ask whoever keeps the policy "
        "for a grant."
    )


@dataclass
class Call:
    """One call in progress: what the audit row will say."""

    spark: SparkSession
    caller: Caller
    routine: str
    kind: str
    arguments: str
    rules: policy.Policy | None
    written: str | None = None  # the name as the statement wrote it, when it differs
    ts: dt.datetime = field(default_factory=audit.now)
    started: float = field(default_factory=time.monotonic)
    tables: list[str] = field(default_factory=list)
    before: dict[str, int | None] = field(default_factory=dict)
    writes: bool = True

    def check(self, writes: bool, tables: Iterable[str] = ()) -> None:
        """Raise the refusal when the policy does not allow this call (on ``tables``)."""
        if self.rules is None:
            return
        why = self.rules.decide(self.caller.user, self.routine, writes, tables)
        if why is not None:
            raise refusal(self.caller, self.routine, why)

    def resolved(self, routine: Routine) -> None:
        """The routine is known: a user it is refused to whatever the arguments is refused
        before they are bound (binding would say which tables exist)."""
        self.check(routine.writes if isinstance(routine.writes, bool) else False)

    def bound(self, routine: Routine, args: BoundArgs) -> None:
        """The arguments are known: check the tables and the writing, note the snapshots."""
        self.writes = routine.writes_for(args)
        self.tables = routine.tables_of(args)
        self.check(self.writes, self.tables)
        self.note_before()

    def note_before(self) -> None:
        if self.writes:
            self.before = {t: _snapshot(self.spark, t) for t in self.tables}

    def entry(self, outcome: str, error: str | None) -> audit.Entry:
        snapshots: dict[str, int] = {}
        if self.writes and outcome != "refused":
            for table in self.tables:
                after = _snapshot(self.spark, table)
                if after is not None and after != self.before.get(table):
                    snapshots[table] = after
        return audit.Entry(
            ts=self.ts,
            user=self.caller.user,
            route=self.caller.route,
            client=self.caller.address,
            routine=self.written or self.routine,
            kind=self.kind,
            arguments=audit.mask(self.arguments, audit.redaction(self.spark)),
            tables=list(self.tables),
            snapshots=snapshots,
            outcome=outcome,
            error=error,
            duration_ms=int((time.monotonic() - self.started) * 1000),
            application=settings.application(self.spark).id,
        )


def _snapshot(spark: SparkSession, table: str) -> int | None:

    try:
        return refreshed_snapshot_id(spark, table)
    except Exception:  # dropped, or never created: nothing produced there
        return None


def _record(call: Call, outcome: str, error: str | None) -> None:
    try:
        log = audit.audit_log(call.spark)
        if log is not None:
            log.record(call.entry(outcome, error))
    except Exception:  # the audit log never fails the call it records
        audit._LOG.warning("sparkext audit: a call could not be recorded", exc_info=True)


def _outcome(error: BaseException) -> tuple[str, str]:

    if isinstance(error, AccessDeniedError):
        return "refused", str(error)
    if isinstance(error, SparkextError):
        return "failed", str(error)
    translated = translate(error) if isinstance(error, Exception) else None
    return "failed", str(translated) if translated else one_line(f"{type(error).__name__}: {error}")


@contextlib.contextmanager
def governed(
    spark: SparkSession, routine: str, kind: str, arguments: str, caller: Caller | None = None
) -> Iterator[Call]:
    """One call of ``routine``: refused unless the policy allows it, recorded either way.

    Before the arguments are bound, a user the policy gives no form of the routine is refused
    (binding would tell them which tables exist); :meth:`Call.bound` checks the rest.
    """
    caller = caller or current(spark)
    call = Call(spark, caller, routine, kind, arguments, None)
    try:
        call.rules = active_policy(spark, caller)
        call.check(writes=False)
    except BaseException as error:
        _record(call, *_outcome(error))
        raise
    try:
        yield call
    except BaseException as error:
        _record(call, *_outcome(error))
        raise
    _record(call, "ok", None)


# Iceberg procedure calls between the JVM's begin and end (``IcebergCall``).
_open: dict[str, Call] = {}
_tokens = itertools.count(1)


def begin_procedure(
    spark: SparkSession, caller: Caller, procedure: str, table: str | None, sql: str
) -> str:
    """Check an Iceberg procedure call; return its token (``#n``) or the refusal sentence."""
    short = ".".join(procedure.lower().split(".")[-2:])  # system.<name>, whatever the catalog
    writes = short.split(".")[-1] not in policy.ICEBERG_READ_ONLY
    call = Call(spark, caller, short, "iceberg procedure", _arguments(sql), None, procedure)
    call.tables = [table] if table else []  # made whole in the procedure's catalog by the JVM
    try:
        call.rules = active_policy(spark, caller)
        call.writes = writes
        call.check(writes, call.tables)
    except SparkextError as error:
        _record(call, *_outcome(error))
        return str(error)
    call.note_before()
    token = f"#{next(_tokens)}"
    _open[token] = call
    return token


def end_procedure(token: str, error: str | None) -> None:
    call = _open.pop(token, None)
    if call is not None:
        _record(call, "ok" if error is None else "failed", error)


def _arguments(sql: str) -> str:
    """The text between a CALL's outer parentheses."""
    start, end = sql.find("("), sql.rfind(")")
    return sql[start + 1 : end].strip() if 0 <= start < end else ""
