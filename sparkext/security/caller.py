"""Who runs the current statement, and through which route.

Routes: ``shell`` (sparkext-sql, interactive, ``-e``, ``-f``), ``python`` (``sparkext.sql``),
``spark.sql`` (a session's own ``spark.sql``, a notebook's ``%sql``), ``serve`` (a JDBC/ODBC client
of ``sparkext-sql serve``: the user its authentication established) and ``service`` (the
optimisation service). Outside ``serve`` the user is Spark's (``sparkContext.sparkUser()``: the OS
user, or ``HADOOP_USER_NAME``).

The route of a Python entry point is held in a context variable and, for the statements it passes
to Spark, in the JVM thread's ``io.sparkext.spark.Caller`` (PySpark pins each Python thread to one
JVM thread), so a routine Spark's parser hands back is attributed to the same route.

Floor: security.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkext.spark.extension import jvm_caller
from sparkext.spark.settings import application

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROUTES = ("shell", "python", "spark.sql", "serve", "service")


@dataclass(frozen=True)
class Caller:
    route: str
    user: str
    address: str | None = None  # a serve client's address


_CURRENT: contextvars.ContextVar[Caller | None] = contextvars.ContextVar(
    "sparkext_caller", default=None
)


def spark_user(spark: SparkSession) -> str:

    try:
        return application(spark).user
    except Exception:  # a stopped context
        import getpass

        return getpass.getuser()


def current(spark: SparkSession) -> Caller:
    """The caller of this Python context (a route entered with :func:`entered`), else ``python``."""
    found = _CURRENT.get()
    return found if found is not None else Caller("python", spark_user(spark))


def from_java(spark: SparkSession, text: str) -> Caller:
    """The caller the JVM extension reports: ``route \\t user \\t address``.

    >>> from_java(None, "serve\\talice\\t10.0.0.7")
    Caller(route='serve', user='alice', address='10.0.0.7')
    """
    route, user, address = ([*text.split("\t"), "", ""])[:3]
    if route not in ROUTES:
        route = "spark.sql"
    return Caller(route, user or spark_user(spark), address or None)


@contextlib.contextmanager
def entered(spark: SparkSession, route: str, user: str | None = None) -> Iterator[Caller]:
    """Run the block as ``route`` (nested entries keep the outermost route)."""
    outer = _CURRENT.get()
    if outer is not None:
        yield outer
        return
    caller = Caller(route, user or spark_user(spark))
    token = _CURRENT.set(caller)

    leave = jvm_caller(spark, caller.route, caller.user)
    try:
        yield caller
    finally:
        leave()
        _CURRENT.reset(token)


@contextlib.contextmanager
def acting_as(caller: Caller) -> Iterator[None]:
    """Run the block as ``caller`` (a JVM callback's thread, which starts with no context)."""
    token = _CURRENT.set(caller)
    try:
        yield
    finally:
        _CURRENT.reset(token)
