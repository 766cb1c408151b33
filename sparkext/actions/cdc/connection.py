"""How a routine that reads a source database logs in (reconcile, bootstrap_cdc): a JDBC URL, or
a connection named in the session conf (``spark.sparkext.connection.<name>.url`` / ``.user`` /
``.password``), with the ``user`` and ``password`` options.

Floor: actions (shared by :mod:`sparkext.actions.cdc.reconcile` and
:mod:`sparkext.actions.cdc.bootstrap`, whose option declarations include
:data:`CONNECTION_OPTIONS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sparkext.declarations import Option
from sparkext.errors import ProcedureArgumentError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CONNECTION_PREFIX = "spark.sparkext.connection."
USER = "user"
PASSWORD = "password"

# how a routine that reads a source database logs in (reconcile, bootstrap_cdc)
CONNECTION_OPTIONS = (
    Option(USER, "", "database user (default: the connection's)"),
    Option(
        PASSWORD,
        "",
        "database password (in the statement's text; a named connection keeps it out)",
    ),
)


def connection(
    spark: SparkSession, source: str, options: Mapping[str, Any]
) -> tuple[str, dict[str, str]]:
    """(JDBC URL, properties) of ``source``: a URL, or a connection named in the session conf
    (``spark.sparkext.connection.<name>.url`` / ``.user`` / ``.password``); ``options`` hold the
    resolved :data:`CONNECTION_OPTIONS`, which win over the named connection's."""
    conf = spark.conf
    if source.lower().startswith("jdbc:"):
        url, user, password = source, options[USER], options[PASSWORD]
    else:
        prefix = f"{CONNECTION_PREFIX}{source}."
        named = conf.get(f"{prefix}url", None)
        if not named:
            raise ProcedureArgumentError(
                f"source => '{source}' is neither a JDBC URL nor a named connection; write "
                "source => 'jdbc:postgresql://host:5432/db', or set "
                f"{prefix}url (and .user, .password) in the session."
            )
        url = named
        user = options[USER] or conf.get(f"{prefix}user", "") or ""
        password = options[PASSWORD] or conf.get(f"{prefix}password", "") or ""
    properties = {k: v for k, v in ((USER, user), (PASSWORD, password)) if v}
    return url, properties


def is_database(spark: SparkSession, source: str) -> bool:
    """Whether ``source`` is a JDBC URL or a named connection (else: a dump)."""
    if source.lower().startswith("jdbc:"):
        return True
    return bool(spark.conf.get(f"{CONNECTION_PREFIX}{source}.url", None))
