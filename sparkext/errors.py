"""One exception tree for everything sparkext reports to a user.

Every message is one sentence that quotes the bad value and, where possible, suggests a fix.
Java and Spark exceptions are translated to this tree in exactly one place:
:func:`sparkext.iceberg.errors.translate`.

Floor: util.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class SparkextError(Exception):
    """Root of every error sparkext raises on purpose."""


class EnvironmentSetupError(SparkextError, RuntimeError):
    """The machine lacks something sparkext needs (Java 17, the Iceberg jar, a conf file)."""


class SqlParseError(SparkextError, ValueError):
    """A statement does not parse; the message gives line and column."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.line = line
        self.column = column


class RoutineReportedFailure(SparkextError, RuntimeError):
    """A routine ran and its result rows say that part of its work failed (their error column):
    the shell's ``-e``/``-f`` exit with status 1 after printing them."""


class UnknownRoutineError(SparkextError, LookupError):
    """`CALL sparkext.x` or `FROM sparkext.x(...)` names nothing in the registry."""


class ProcedureArgumentError(SparkextError, ValueError):
    """An argument is unknown, missing, duplicated, mixed, or of the wrong type."""


class OptionError(ProcedureArgumentError):
    """An `options => map(...)` key is unknown or its value is invalid."""


class UsageError(ProcedureArgumentError):
    """A statement asks for something that cannot work as given (an index of an unknown type, on
    an unknown column or with a bad option); the message names the valid choices."""


class TableNotFoundError(SparkextError, LookupError):
    """A table argument names no table."""


class NotAnIcebergTableError(SparkextError, ValueError):
    """A table argument names a table that is not an Iceberg table."""


class CommitConflictError(SparkextError, RuntimeError):
    """Another writer changed the table between plan and commit and retries ran out."""


class BatchOutdatedError(CommitConflictError):
    """Another writer changed what a batch was decided on (its keys, the schema); the batch is
    decided again. Raised to the user only when that keeps happening."""


class CommitStateUnknownError(SparkextError, RuntimeError):
    """The catalog could not say whether a commit landed; nothing was deleted."""


class AccessDeniedError(SparkextError, PermissionError):
    """The policy does not let this user call this routine (on these tables)."""


class PolicyError(SparkextError, ValueError):
    """The policy file cannot be read or says something sparkext cannot follow."""


class ServeSetupError(SparkextError, ValueError):
    """``sparkext-sql serve``'s security settings are missing, unsafe or inconsistent."""


class SparkError(SparkextError, RuntimeError):
    """A statement passed through to Spark failed; the message is Spark's own first line."""


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest choice, or ``""`` when none is close.

    >>> did_you_mean("tabel_health", ["table_health", "help"])
    " (did you mean 'table_health'?)"
    """
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{match[0]}'?)" if match else ""


class StreamingWriteError(SparkextError, ValueError):
    """A streaming job's rows cannot be written to its sink as they are."""


class SchemaChangeError(SparkextError, ValueError):
    """A source column changed type in a way Iceberg cannot follow."""


class SourceDatabaseError(SparkextError, RuntimeError):
    """A source database (reconcile's JDBC side) could not be reached or refused a query."""


class IngestError(SparkextError, RuntimeError):
    """CDC ingestion cannot go on (missing key, no table and create => false, ...)."""


class EventTimeError(SparkextError, ValueError):
    """A table has no event-time metadata, or an event-time argument does not fit the table."""


class SnapshotExpiredError(EventTimeError):
    """The base snapshot an event-time state needs is no longer retained."""


class ChangelogRangeLostError(SparkextError, LookupError):
    """A changelog stream's next range includes snapshots that are no longer retained (or no
    longer on the history it follows): those changes cannot be delivered."""


class TableBusyError(SparkextError, RuntimeError):
    """Another process holds the table's optimisation lease."""
