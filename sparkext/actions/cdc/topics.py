"""Which Iceberg table each Debezium topic of a whole-database sync lands in.

Pure Python: no Spark. Debezium names a table's topic ``<prefix>.<schema>.<table>``
(PostgreSQL) or ``<prefix>.<database>.<table>`` (MySQL); its other topics (heartbeats, schema
changes, transaction metadata) carry no rows and are ignored, by name. The default table name is
the source table's name, lower-cased, as Paimon's ``mysql_sync_database`` names it in a
case-insensitive catalog; a template, a prefix and a suffix change it, and regular expressions
choose the tables.

Floor: actions (the work, typed results).
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sparkext.errors import IngestError

PLACEHOLDERS = ("prefix", "db", "schema", "table", "topic")
TEMPLATE_DEFAULT = "{table}"
_IDENTIFIER = re.compile(r"[a-z0-9_]+")

HEARTBEAT = "ignored: Debezium heartbeat topic"
INTERNAL = "ignored: internal Kafka topic"
TRANSACTION = "ignored: Debezium transaction-metadata topic"
SCHEMA_CHANGES = "ignored: Debezium schema-change topic (the topic prefix alone)"
NO_TOPIC = "ignored: file(s) outside a topic directory"
EXCLUDED_BY_INCLUDING = "excluded: not matched by including-tables"
EXCLUDED_BY_EXCLUDING = "excluded: matched by excluding-tables"


@dataclass(frozen=True)
class TopicName:
    """A data topic's parts: ``pg.public.orders`` -> prefix ``pg``, db ``public``, table
    ``orders`` (a dotted prefix stays whole: the last two parts are the db and the table)."""

    topic: str
    prefix: str
    db: str
    table: str


def ignored(topic: str) -> str | None:
    """Why ``topic`` carries no table's rows (its status), or None for a data topic.

    >>> ignored("__debezium-heartbeat.pg"), ignored("pg"), ignored("pg.transaction")
    ('ignored: Debezium heartbeat topic', 'ignored: Debezium schema-change topic (the topic prefix alone)', 'ignored: Debezium transaction-metadata topic')
    >>> ignored("pg.public.orders") is None
    True
    """  # noqa: E501
    if not topic:
        return NO_TOPIC
    if topic.startswith("__debezium-heartbeat"):
        return HEARTBEAT
    if topic.startswith("__"):
        return INTERNAL
    if "." not in topic:
        return SCHEMA_CHANGES
    if topic.endswith(".transaction"):
        return TRANSACTION
    return None


def parse_topic(topic: str) -> TopicName:
    """The parts of a data topic (see :func:`ignored` first).

    >>> parse_topic("pg.public.orders")
    TopicName(topic='pg.public.orders', prefix='pg', db='public', table='orders')
    >>> parse_topic("prod.eu.shop.orders").prefix, parse_topic("shop.orders").prefix
    ('prod.eu', '')
    """
    parts = topic.split(".")
    return TopicName(topic, ".".join(parts[:-2]), parts[-2], parts[-1])


def check_template(template: str) -> str:
    """A ``table-name`` template: text with placeholders among :data:`PLACEHOLDERS`.

    >>> check_template("ods_{db}_{table}")
    'ods_{db}_{table}'
    >>> check_template("{tabel}")
    Traceback (most recent call last):
    ...
    ValueError: expected a template of {prefix}, {db}, {schema}, {table}, {topic} and text, such as '{db}_{table}'
    """  # noqa: E501
    expected = (
        "expected a template of "
        + ", ".join("{" + p + "}" for p in PLACEHOLDERS)
        + " and text, such as '{db}_{table}'"
    )
    try:
        fields = [f for _, f, spec, conv in string.Formatter().parse(template) if f is not None]
    except ValueError:
        raise ValueError(expected) from None
    if not template.strip() or any(f not in PLACEHOLDERS for f in fields):
        raise ValueError(expected)
    return template


def check_pattern(text: str) -> re.Pattern[str] | None:
    """A regular expression (Python's syntax, which Java's shares for the common cases);
    empty: none."""
    if not text.strip():
        return None
    try:
        return re.compile(text.strip())
    except re.error as error:
        raise ValueError(f"expected a regular expression ({error})") from None


@dataclass(frozen=True)
class Route:
    """Where one topic goes: ``table`` (the name in the namespace) or None with why not."""

    topic: str
    table: str | None
    status: str | None  # None: a table's topic


@dataclass(frozen=True)
class Naming:
    template: str = TEMPLATE_DEFAULT
    prefix: str = ""
    suffix: str = ""
    including: re.Pattern[str] | None = None
    excluding: re.Pattern[str] | None = None

    def route(self, topic: str) -> Route:
        """The table of ``topic``, or why it has none.

        ``including-tables`` and ``excluding-tables`` match (whole) the source table's name or
        ``<db>.<table>``; an excluded table's topic is reported, not read.

        >>> Naming().route("pg.public.Orders")
        Route(topic='pg.public.Orders', table='orders', status=None)
        >>> Naming("{db}_{table}", "ods_").route("pg.inventory.stock").table
        'ods_inventory_stock'
        >>> Naming(excluding=re.compile("public[.]tmp_.*")).route("pg.public.tmp_1").status
        'excluded: matched by excluding-tables'
        """
        reason = ignored(topic)
        if reason is not None:
            return Route(topic, None, reason)
        parts = parse_topic(topic)
        names = (parts.table, f"{parts.db}.{parts.table}")
        if self.including is not None and not any(self.including.fullmatch(n) for n in names):
            return Route(topic, None, EXCLUDED_BY_INCLUDING)
        if self.excluding is not None and any(self.excluding.fullmatch(n) for n in names):
            return Route(topic, None, EXCLUDED_BY_EXCLUDING)
        name = self.template.format(
            prefix=parts.prefix,
            db=parts.db,
            schema=parts.db,
            table=parts.table,
            topic=topic.replace(".", "_"),
        )
        return Route(topic, f"{self.prefix}{name}{self.suffix}".lower(), None)


def check_routes(
    routes: Iterable[Route],
    known: Mapping[str, str],
    namespace: str,
    done: str = "nothing was ingested",
) -> None:
    """Each table name valid, fed by one topic only, and each topic's table the one it had in
    earlier runs of this checkpoint (``known``: topic -> table); else :class:`IngestError`
    before anything is written (``done`` says so).

    >>> check_routes([Route("a.s.x", "x", None), Route("a.t.x", "x", None)], {}, "lake.db")
    Traceback (most recent call last):
    ...
    sparkext.errors.IngestError: Topics 'a.s.x' and 'a.t.x' would both land in lake.db.x: give option table-name a template that tells them apart, such as '{db}_{table}', or exclude one with excluding-tables; nothing was ingested.
    """  # noqa: E501
    owners = {table: topic for topic, table in known.items()}
    for route in routes:
        if route.table is None:
            continue
        if not _IDENTIFIER.fullmatch(route.table):
            raise IngestError(
                f"Topic '{route.topic}' would land in table '{route.table}', which is not a "
                "plain table name (letters, digits and _ only): change option table-name, "
                f"table-prefix or table-suffix, or exclude the table with excluding-tables; {done}."
            )
        before = known.get(route.topic)
        if before is not None and before != route.table:
            raise IngestError(
                f"Topic '{route.topic}' was synced into {namespace}.{before} under this "
                f"checkpoint, and the options now name {namespace}.{route.table}: keep the "
                "naming options the checkpoint started with, or start a new checkpoint; "
                f"{done}."
            )
        owner = owners.setdefault(route.table, route.topic)
        if owner != route.topic:
            first, second = sorted((owner, route.topic))
            raise IngestError(
                f"Topics '{first}' and '{second}' would both land in {namespace}."
                f"{route.table}: give option table-name a template that tells them apart, such "
                "as '{db}_{table}', or exclude one with excluding-tables; " + done + "."
            )
