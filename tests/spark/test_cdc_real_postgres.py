"""``ingest_cdc`` against the real thing: the real Debezium PostgreSQL connector (pydbzengine's
embedded engine, ``pgoutput``, the JSON converter with schemas, its default type modes) on a real
PostgreSQL server, records landed as Kafka Connect's sinks land them, and the lake table held
against **PostgreSQL's own rows**, column by column.

The workload: every column type a user puts in a table, TOASTed values under REPLICA IDENTITY
DEFAULT (placeholders) and FULL (old values sent), updates, deletes and re-inserts, a primary-key
change, a composite key, a large transaction, ``ALTER TABLE`` ADD / DROP COLUMN and int -> bigint
widening mid-stream, ``TRUNCATE``, a connector crash that re-delivers, and a table created while
the connector runs. The comparison of each type is written here, from PostgreSQL's own text of
the value, not from sparkext's type mapping.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from tests.helpers import debezium, real_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# name, PostgreSQL type, value of row g (SQL), kind (how both sides are compared)
ITEMS = [
    ("qty", "integer", "g", "int"),
    ("small", "smallint", "(g % 300)::smallint", "int"),
    ("big", "bigint", "g * 10000000000", "int"),
    ("price", "numeric(10,2)", "g * 1.25", "dec"),
    ("ratio", "numeric", "round(g / 7.0, 8)", "dec"),  # fits the default decimal(38,10)
    ("cash", "money", "(g * 3.5)::numeric::money", "money"),
    ("real4", "real", "g / 4.0", "float"),
    ("dbl", "double precision", "g / 3.0", "float"),
    ("flag", "boolean", "g % 2 = 0", "bool"),
    ("name", "varchar(40)", "'name-' || g", "text"),
    ("code", "char(6)", "'c' || g", "text"),
    ("body", "text", "CASE WHEN g <= 4 THEN repeat(md5(g::text), 400) ELSE 'b' || g END", "text"),
    (
        "doc",
        "jsonb",
        "jsonb_build_object('g', g, 'pad', CASE WHEN g <= 4 "
        "THEN repeat(md5(g::text), 300) ELSE 'x' END)",
        "json",
    ),
    ("plain_json", "json", "json_build_object('g', g)", "json"),
    ("uid", "uuid", "md5(g::text)::uuid", "text"),
    (
        "blob",
        "bytea",
        "CASE WHEN g <= 4 THEN decode(repeat(md5(g::text), 200), 'hex') "
        "ELSE decode(md5(g::text), 'hex') END",
        "hex",
    ),
    (
        "tags",
        "text[]",
        "ARRAY['t' || g, repeat('y', CASE WHEN g <= 4 THEN 3000 ELSE 3 END)]",
        "list",
    ),
    ("nums", "integer[]", "array_fill(g, ARRAY[CASE WHEN g <= 4 THEN 2000 ELSE 3 END])", "list"),
    (
        "longs",
        "bigint[]",
        "array_fill(g::bigint, ARRAY[CASE WHEN g <= 4 THEN 1000 ELSE 2 END])",
        "list",
    ),
    (
        "uuids",
        "uuid[]",
        "array_fill(md5(g::text)::uuid, ARRAY[CASE WHEN g <= 4 THEN 300 ELSE 2 END])",
        "list",
    ),
    ("kv", "hstore", "hstore('k', repeat('z', CASE WHEN g <= 4 THEN 5000 ELSE 2 END))", "json"),
    ("mood", "mood", "(ARRAY['sad','ok','happy'])[g % 3 + 1]::mood", "text"),
    ("ts", "timestamp", "timestamp '2026-01-01 10:00:00.123456' + g * interval '1 hour'", "ntz"),
    (
        "tstz",
        "timestamptz",
        "timestamptz '2026-03-29 00:30:00+00' + g * interval '61 minutes'",
        "instant",
    ),
    ("day", "date", "date '1999-12-31' + g", "days"),
    ("tod", "time", "time '10:00:01.5' + g * interval '1 minute'", "micros"),
    ("span", "interval", "g * interval '1 day 2 hours 3.5 seconds'", "micros"),
    ("bits", "bit(4)", "(g % 16)::bit(4)", "bits"),
    ("vbits", "varbit", "(g % 8)::bit(3)::varbit", "bits"),
    ("addr", "inet", "('10.0.0.' || (g % 250))::inet", "text"),
    ("pt", "point", "point(g, g / 2.0)", "point"),
    ("x", "xml", "('<a>' || g || '</a>')::xml", "text"),
]
LAKE_TYPES = {
    "qty": "bigint", "small": "int", "big": "bigint", "price": "decimal(10,2)",
    "ratio": "decimal(38,10)", "real4": "float", "dbl": "double", "flag": "boolean",
    "name": "string", "doc": "string", "uid": "string", "blob": "binary",
    "tags": "array<string>", "nums": "array<int>", "longs": "array<bigint>",
    "uuids": "array<string>", "ts": "timestamp_ntz", "tstz": "timestamp", "day": "date",
    "tod": "bigint", "span": "bigint", "note": "string",
}  # fmt: skip
TOASTED = ("body", "doc", "blob", "tags", "nums", "longs", "uuids", "kv")


def pg_canonical(name: str, kind: str) -> str:
    """PostgreSQL's own text of a column, in the form the comparison wants."""
    return {
        "dec": f"{name}::text",
        "money": f"{name}::numeric::text",
        "json": f"{name}::jsonb::text" if name != "kv" else f"hstore_to_json({name})::text",
        "hex": f"encode({name}, 'hex')",
        "list": f"to_json({name})::text",
        "ntz": f"to_char({name}, 'YYYY-MM-DD HH24:MI:SS.US')",
        "instant": f"(extract(epoch from {name}) * 1000000)::bigint::text",
        "bits": f"{name}::text",
        "point": f"CASE WHEN {name} IS NOT NULL "
        f"THEN json_build_array({name}[0], {name}[1])::text END",
        "days": f"({name} - date '1970-01-01')::text",
        "micros": f"(extract(epoch from {name}) * 1000000)::bigint::text",
    }.get(kind, f"CASE WHEN {name} IS NOT NULL THEN format('%s', {name}) END")  # its output


def lake_canonical(name: str, kind: str) -> str:
    """The lake's value as text, with Spark SQL (no sparkext code)."""
    quoted = f"`{name}`"
    if kind == "ntz":
        return f"date_format({quoted}, 'yyyy-MM-dd HH:mm:ss.SSSSSS')"
    if kind == "instant":
        return f"cast(unix_micros({quoted}) AS string)"
    if kind == "hex":
        return f"lower(hex({quoted}))"
    if kind == "list":
        return f"to_json({quoted})"
    if kind == "bits":
        return f"hex({quoted})"
    if kind == "days":
        return f"cast(unix_date({quoted}) AS string)"
    return f"cast({quoted} AS string)"


def same(kind: str, pg: str | None, lake: str | None, width: int | None = None) -> bool:
    if pg is None or lake is None:
        return pg is None and lake is None
    if kind in ("dec", "money"):
        return Decimal(pg) == Decimal(lake)
    if kind == "float":
        return float(pg) == float(lake)
    if kind == "bool":
        return pg[0] == lake[0]
    if kind in ("json", "list"):
        return json.loads(pg) == json.loads(lake)
    if kind == "bits":  # Debezium's Bits: the bit string's value, little-endian bytes
        value = int.from_bytes(bytes.fromhex(lake), "little")
        return int(pg, 2) == value
    if kind == "point":
        x, y = json.loads(pg)
        return json.loads(lake)["x"] == x and json.loads(lake)["y"] == y
    return pg == lake


def pg_rows(server, database: str, table: str, key: str, columns) -> dict:
    exprs = ", ".join(
        [f"'{k}', {k}" for k in key.split(",")]
        + [f"'{n}', {pg_canonical(n, k)}" for n, _, _, k in columns]
    )
    out = server.psql(
        f"SELECT json_agg(json_build_object({exprs}) ORDER BY {key}) FROM {table}", database
    )
    rows = json.loads(out) or []
    return {tuple(str(r[k]) for k in key.split(",")): r for r in rows}


def lake_rows(spark, table: str, key: str, columns) -> dict:
    return real_rows.lake_rows(spark, table, key, columns, lake_canonical)


def mismatches(source: dict, lake: dict, columns) -> list[str]:
    return real_rows.mismatches(source, lake, columns, same, "PostgreSQL")


@pytest.fixture(scope="module")
def shop(postgres_server):
    reason = debezium.unavailable()
    if reason is not None:
        pytest.skip(reason)
    return postgres_server


def _ingest(table: str, source, checkpoint, key: str, files: str) -> dict:
    """One call; ``files``: the most landed files one commit takes ('1': one commit per file,
    the connector's batches, so schema changes and re-deliveries fall between commits as with a
    stream)."""
    import sparkext

    return (
        sparkext.sql(
            f"CALL sparkext.ingest_cdc(table => '{table}', source => '{source}', "
            f"checkpoint => '{checkpoint}', primary_key => '{key}', create => true, "
            f"options => map('max-files-per-batch', '{files}'))"
        )
        .first()
        .asDict()
    )


@pytest.mark.parametrize(
    "files",
    [
        # every file a call finds in one commit: two commits per table, the second holding the
        # schema changes, the widening, the TRUNCATE and the re-delivery
        pytest.param("1000", id="all-files-per-commit"),
        pytest.param("1", id="one-file-per-commit", marks=pytest.mark.stress),
    ],
)
def test_real_connector_lake_equals_postgres(spark, shop, tmp_path, files):
    db = f"shop{len(files)}"
    shop.psql(f"CREATE DATABASE {db}")
    lake = f"lake.test.pg{len(files)}"
    columns = ", ".join(f"{n} {t}" for n, t, _, _ in ITEMS)
    values = ", ".join(v for _, _, v, _ in ITEMS)
    external = ", ".join(f"ALTER COLUMN {n} SET STORAGE EXTERNAL" for n in TOASTED)
    shop.psql(
        f"""
        CREATE EXTENSION hstore;
        CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
        CREATE TABLE items (id integer PRIMARY KEY, {columns}, dropme text);
        ALTER TABLE items {external};
        INSERT INTO items SELECT g, {values}, 'd' FROM generate_series(1, 30) g;
        CREATE TABLE lines (order_id integer, line_no integer, sku text, note text,
                            PRIMARY KEY (order_id, line_no));
        ALTER TABLE lines REPLICA IDENTITY FULL, ALTER COLUMN note SET STORAGE EXTERNAL;
        INSERT INTO lines SELECT g / 4, g % 4, 's' || g, repeat(md5(g::text), 200)
          FROM generate_series(0, 39) g;
        """,
        db,
    )
    connector = debezium.Connector(
        debezium.postgres_config(
            shop,
            db,
            f"lake{len(files)}",
            r"public\.(items|lines|extra)",
            **{"publication.autocreate.mode": "all_tables"},
        ),
        tmp_path / "landing",
    ).start()
    try:
        connector.wait_for(70)  # the snapshot: 30 items, 40 lines
        shop.psql(
            """
            UPDATE items SET qty = qty + 100 WHERE id <= 10;         -- TOASTed columns untouched
            UPDATE items SET body = 'new body', nums = ARRAY[7] WHERE id = 2;
            DELETE FROM items WHERE id IN (11, 12);
            UPDATE items SET id = 113 WHERE id = 13;                 -- a primary-key change
            UPDATE lines SET sku = sku || '-v2' WHERE order_id < 3;  -- FULL: old values sent
            BEGIN;                                                   -- a large transaction
            INSERT INTO lines SELECT 100 + g / 10, g % 10, 'big' || g, 'n'
              FROM generate_series(0, 799) g;
            UPDATE items SET small = small + 1;
            COMMIT;
            """,
            db,
        )
        connector.settle()
        first = _ingest(f"{lake}_items", connector.topic("pg.public.items"),
                        tmp_path / "ck-items", "id", files)  # fmt: skip
        assert first["rejected"] == 0, first
        # a crash: what the connector read since its last flushed offset comes again
        connector.kill()
        shop.psql(
            """
            INSERT INTO items (id, qty, name) VALUES (11, 1, 're-inserted');
            ALTER TABLE items ADD COLUMN note text;
            UPDATE items SET note = 'noted ' || id WHERE id % 5 = 0;
            ALTER TABLE items ALTER COLUMN qty TYPE bigint;          -- int -> bigint
            UPDATE items SET qty = 5000000000 + id WHERE id IN (3, 4);
            ALTER TABLE items DROP COLUMN dropme;
            UPDATE items SET name = 'after drop' WHERE id = 5;
            TRUNCATE lines;
            INSERT INTO lines VALUES (1, 1, 'after truncate', 'n');
            CREATE TABLE extra (id integer PRIMARY KEY, label text);
            INSERT INTO extra VALUES (1, 'one'), (2, 'two');
            UPDATE extra SET label = 'deux' WHERE id = 2;
            """,
            db,
        )
        connector.start()
        # the last statement's event, then whatever else comes (a re-delivery) settles
        connector.wait_for_topic("pg.public.extra", 3)
        connector.settle(quiet=2)
    finally:
        connector.stop()

    results = {
        "items": _ingest(f"{lake}_items", connector.topic("pg.public.items"),
                         tmp_path / "ck-items", "id", files),
        "lines": _ingest(f"{lake}_lines", connector.topic("pg.public.lines"),
                         tmp_path / "ck-lines", "order_id,line_no", files),
        "extra": _ingest(f"{lake}_extra", connector.topic("pg.public.extra"),
                         tmp_path / "ck-extra", "id", files),
    }  # fmt: skip
    assert all(r["rejected"] == 0 for r in results.values()), results

    # the table types Debezium's documented mapping and ingest_cdc's give (a double that became
    # a string would compare equal as text: the types are held too)
    types = {c: t for c, t in spark.table(f"{lake}_items").dtypes if c in LAKE_TYPES}
    assert types == LAKE_TYPES
    items = [*ITEMS, ("note", "text", "", "text")]
    problems = mismatches(
        pg_rows(shop, db, "items", "id", items),
        lake_rows(spark, f"{lake}_items", "id", items),
        items,
    )
    lines = [("sku", "text", "", "text"), ("note", "text", "", "text")]
    problems += mismatches(
        pg_rows(shop, db, "lines", "order_id,line_no", lines),
        lake_rows(spark, f"{lake}_lines", "order_id,line_no", lines),
        lines,
    )
    extra = [("label", "text", "", "text")]
    problems += mismatches(
        pg_rows(shop, db, "extra", "id", extra),
        lake_rows(spark, f"{lake}_extra", "id", extra),
        extra,
    )
    assert not problems, "\n".join(problems[:40])
