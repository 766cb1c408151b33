"""The application's facts the policy and the audit log read at every call, read once.

A Spark application's configuration cannot change while it runs, and a JDBC client's ``SET``
changes only its session's, never this: so the policy file and the audit settings come from
here. One py4j round trip per fact would cost every call milliseconds (``getConf()`` alone copies
the whole configuration); they are read once per SparkContext.

Floor: spark (the py4j edge into Spark).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Application:
    id: str
    user: str  # Spark's user: the OS user, or HADOOP_USER_NAME
    conf: Mapping[str, str]


_KNOWN: weakref.WeakKeyDictionary[Any, Application] = weakref.WeakKeyDictionary()


def application(spark: SparkSession) -> Application:
    context = spark.sparkContext
    found = _KNOWN.get(context)
    if found is None:
        found = Application(
            str(context.applicationId), str(context.sparkUser()), dict(context.getConf().getAll())
        )
        _KNOWN[context] = found
    return found


def setting(spark: SparkSession, key: str, default: str | None = None) -> str | None:
    """A setting of the application (``spark.sparkext.*``), never a session's ``SET``."""
    return application(spark).conf.get(key, default)
