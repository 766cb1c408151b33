"""Small queries against a source database over JDBC, from the driver (through py4j): results of
a few rows each (segment counts and hash sums, key lists of small segments, a log position).
The database does the scanning; sparkext reads what it computed.

The JDBC driver must be on the driver's class path (``spark.driver.extraClassPath`` or
``spark.jars``), as for Spark's own JDBC source.

Floor: iceberg (the Iceberg Java API).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sparkext.errors import SourceDatabaseError
from sparkext.spark.java import jvm as jvm_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def dialect_of(url: str) -> str:
    """``postgres`` or ``mysql`` (MySQL and MariaDB) from a JDBC URL.

    >>> dialect_of("jdbc:postgresql://db:5432/shop"), dialect_of("jdbc:mariadb://db/shop")
    ('postgres', 'mysql')
    """
    lowered = url.lower()
    if lowered.startswith("jdbc:postgresql:"):
        return "postgres"
    if lowered.startswith(("jdbc:mysql:", "jdbc:mariadb:")):
        return "mysql"
    raise SourceDatabaseError(
        f"source => '{_masked(url)}' is not a PostgreSQL, MySQL or MariaDB JDBC URL; write e.g. "
        "'jdbc:postgresql://host:5432/db' or 'jdbc:mysql://host:3306/db'."
    )


def _masked(url: str) -> str:
    """The URL without a password parameter (for sentences and logs)."""
    import re

    return re.sub(r"(?i)(password=)[^&;]*", r"\1***", url)


@dataclass
class Pool:
    """Up to ``size`` JDBC connections, each used by one thread at a time."""

    spark: SparkSession
    url: str
    properties: Mapping[str, str]
    size: int = 4
    _free: list[Any] = field(default_factory=list)
    _all: list[Any] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _slots: threading.Semaphore = field(init=False)

    def __post_init__(self) -> None:
        self._slots = threading.Semaphore(self.size)

    def _connect(self) -> Any:
        jvm = jvm_of(self.spark)
        props = jvm.java.util.Properties()
        for key, value in self.properties.items():
            props.setProperty(key, value)
        try:
            connection = jvm.java.sql.DriverManager.getConnection(self.url, props)
            connection.setReadOnly(True)
        except Exception as error:  # py4j carries the driver's SQLException
            raise SourceDatabaseError(
                f"Could not connect to {_masked(self.url)}: {_java_message(error)}; check the "
                "URL, the user and password options, and that the JDBC driver is on the "
                "driver's class path."
            ) from None
        return connection

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        with self._slots:
            with self._lock:
                connection = self._free.pop() if self._free else None
            if connection is None:
                connection = self._connect()
                with self._lock:
                    self._all.append(connection)
            try:
                yield connection
            finally:
                with self._lock:
                    self._free.append(connection)

    def query(self, sql: str) -> list[tuple[str | None, ...]]:
        """Every row of ``sql`` (values as strings or None: exact, whatever the column type).
        Literals are in the text, quoted by the caller (sqlglot)."""
        with self.connection() as connection:
            try:
                statement = connection.createStatement()
                try:
                    result = statement.executeQuery(sql)
                    return _rows(result)
                finally:
                    statement.close()
            except SourceDatabaseError:
                raise
            except Exception as error:
                raise SourceDatabaseError(
                    f"The source database refused a query: {_java_message(error)}"
                ) from None

    def execute(self, sql: str) -> None:
        """Run one statement that writes (DDL such as CREATE PUBLICATION), committed at once."""
        with self.connection() as connection:
            try:
                connection.setReadOnly(False)
                statement = connection.createStatement()
                try:
                    statement.execute(sql)
                finally:
                    statement.close()
                    connection.setReadOnly(True)
            except Exception as error:
                raise SourceDatabaseError(
                    f"The source database refused a statement: {_java_message(error)}"
                ) from None

    def query_in_session(
        self, setup: Sequence[str], sql: str, teardown: Sequence[str] = ()
    ) -> list[tuple[str | None, ...]]:
        """``sql`` on one connection after the ``setup`` statements (``LOCK TABLES ... READ``,
        say); the ``teardown`` statements run whatever happens."""
        with self.connection() as connection:
            statement = None
            try:
                statement = connection.createStatement()
                for line in setup:
                    statement.execute(line)
                result = statement.executeQuery(sql)
                return _rows(result)
            except Exception as error:
                raise SourceDatabaseError(
                    f"The source database refused a query: {_java_message(error)}"
                ) from None
            finally:
                if statement is not None:
                    for line in teardown:
                        with contextlib.suppress(Exception):
                            statement.execute(line)
                    with contextlib.suppress(Exception):
                        statement.close()

    def query_in_snapshot(self, snapshot: str, sql: str) -> list[tuple[str | None, ...]]:
        """``sql`` in a REPEATABLE READ transaction on an exported PostgreSQL snapshot."""
        with self.connection() as connection:
            try:
                connection.setAutoCommit(False)
                connection.setTransactionIsolation(4)  # Connection.TRANSACTION_REPEATABLE_READ
                statement = connection.createStatement()
                try:
                    quoted = snapshot.replace("'", "''")
                    statement.execute(f"SET TRANSACTION SNAPSHOT '{quoted}'")
                    result = statement.executeQuery(sql)
                    return _rows(result)
                finally:
                    statement.close()
                    connection.rollback()
                    connection.setAutoCommit(True)
                    connection.setTransactionIsolation(2)  # TRANSACTION_READ_COMMITTED
            except Exception as error:
                raise SourceDatabaseError(
                    f"The source database refused a query: {_java_message(error)}"
                ) from None

    def close(self) -> None:
        with self._lock:
            for connection in self._all:
                with contextlib.suppress(Exception):
                    connection.close()
            self._all.clear()
            self._free.clear()


def _rows(result: Any) -> list[tuple[str | None, ...]]:
    """Every row of a JDBC result set, each value as its string (or None)."""
    width = result.getMetaData().getColumnCount()
    rows = []
    while result.next():
        rows.append(tuple(result.getString(i) for i in range(1, width + 1)))
    return rows


def _java_message(error: BaseException) -> str:
    java = getattr(error, "java_exception", None)
    if java is not None:
        with contextlib.suppress(Exception):
            return str(java.getMessage())
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


@dataclass
class ExportedSlot:
    """A logical replication slot just created with an exported snapshot, on a replication
    connection kept open: the snapshot can be imported (SET TRANSACTION SNAPSHOT) until
    :meth:`close`. ``consistent_point``: the LSN text the slot's changes start after."""

    name: str
    consistent_point: str
    snapshot: str
    _connection: Any = None

    def close(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(Exception):
                self._connection.close()
            self._connection = None


def create_exported_slot(
    spark: SparkSession,
    url: str,
    properties: Mapping[str, str],
    slot: str,
    plugin: str = "pgoutput",
    server_version: int = 150000,
) -> ExportedSlot:
    """``CREATE_REPLICATION_SLOT <slot> LOGICAL <plugin>`` exporting its snapshot, on a
    replication connection (pgjdbc ``replication=database``, simple query mode)."""
    jvm = jvm_of(spark)
    props = jvm.java.util.Properties()
    for key, value in properties.items():
        props.setProperty(key, value)
    props.setProperty("replication", "database")
    props.setProperty("preferQueryMode", "simple")
    props.setProperty("assumeMinServerVersion", "10")
    name = '"' + slot.replace('"', '""') + '"'
    export = "(SNAPSHOT 'export')" if server_version >= 150000 else "EXPORT_SNAPSHOT"
    command = f"CREATE_REPLICATION_SLOT {name} LOGICAL {plugin} {export}"
    connection = None
    try:
        connection = jvm.java.sql.DriverManager.getConnection(url, props)
        statement = connection.createStatement()
        result = statement.executeQuery(command)
        result.next()
        found = ExportedSlot(
            str(result.getString(1)), str(result.getString(2)), str(result.getString(3))
        )
        found._connection = connection
        return found
    except Exception as error:
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.close()
        raise SourceDatabaseError(
            f"Could not create the replication slot '{slot}' on {_masked(url)}: "
            f"{_java_message(error)}; the user needs the REPLICATION attribute and the server "
            "free replication slots and WAL senders (max_replication_slots, max_wal_senders)."
        ) from None
