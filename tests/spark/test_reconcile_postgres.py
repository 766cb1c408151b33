"""``CALL sparkext.reconcile`` against a real PostgreSQL whose table the real Debezium connector
streams into the lake through ``ingest_cdc``.

The oracle is the database and the faults injected: rows the lake lost, kept, duplicated or
holds stale (made in the lake directly, as lost or doubled change events would leave it). First
with the source idle: every fault found, and each reported unconfirmed (nothing shows the lake
has reached the source's position). Then while the source keeps changing other rows and
ingest_cdc keeps applying them: the same faults found and confirmed, and no false report for
any row that changed during the check.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

import sparkext
from tests.helpers import debezium

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TABLE = "lake.test.reconciled"


@pytest.fixture(scope="module")
def source(postgres_server):
    reason = debezium.unavailable()
    if reason is not None:
        pytest.skip(reason)
    postgres_server.psql("CREATE DATABASE recon")
    postgres_server.psql(
        """
        CREATE TYPE tier AS ENUM ('free', 'pro');
        CREATE TABLE accounts (
          id integer PRIMARY KEY, name varchar(40), balance numeric(12,2), ratio numeric,
          score double precision, opened date, seen timestamptz, local timestamp, active boolean,
          tags text[], avatar bytea, plan tier, doc jsonb, hits bigint);
        INSERT INTO accounts SELECT g, 'user ' || g, g * 1.25, round(g / 7.0, 6), g / 3.0,
          date '2020-01-01' + g, timestamptz '2026-01-01 00:00:00+00' + g * interval '1 minute',
          timestamp '2026-01-01 00:00:00.5' + g * interval '1 second', g % 2 = 0,
          ARRAY['t' || (g % 5)], decode(md5(g::text), 'hex'),
          (ARRAY['free', 'pro'])[g % 2 + 1]::tier, jsonb_build_object('g', g), g * 1000
          FROM generate_series(1, 3000) g;
        """,
        "recon",
    )
    return postgres_server


def _ingest(landing, checkpoint) -> dict:
    return (
        sparkext.sql(
            f"CALL sparkext.ingest_cdc(table => '{TABLE}', source => '{landing}', "
            f"checkpoint => '{checkpoint}', primary_key => 'id', create => true)"
        )
        .first()
        .asDict()
    )


def _reconcile(server, **options) -> dict:
    given = {"source-table": "public.accounts", "segments": "8", "leaf-rows": "200", **options}
    pairs = ", ".join(f"'{k}', '{v}'" for k, v in given.items())
    url = f"jdbc:postgresql://127.0.0.1:{server.port}/recon"
    row = sparkext.sql(
        f"CALL sparkext.reconcile(table => '{TABLE}', source => '{url}', "
        f"options => map('user', 'sparkext', {pairs}))"
    ).first()
    return row.asDict(recursive=True)


def _found(result: dict) -> dict[int, tuple[str, str, bool]]:
    return {
        json.loads(d["key"])["id"] and int(json.loads(d["key"])["id"]): (
            d["kind"],
            d["columns"],
            d["confirmed"],
        )
        for d in result["differences"]
    }


def test_reconcile_finds_every_fault_and_no_false_alarm_under_live_writes(spark, source, tmp_path):
    connector = debezium.Connector(
        debezium.postgres_config(source, "recon", "recon", r"public\.accounts"),
        tmp_path / "landing",
    ).start()
    landing = connector.topic("pg.public.accounts")
    try:
        connector.wait_for(3000)
        connector.settle()
        assert _ingest(landing, tmp_path / "ck")["rejected"] == 0
        clean = _reconcile(source)
        assert clean["equal"], clean
        assert (clean["source_rows"], clean["lake_rows"], clean["not_compared"]) == (3000, 3000, "")
        assert clean["compared_columns"].split(",") == [
            "name", "balance", "ratio", "score", "opened", "seen", "local", "active", "tags",
            "avatar", "plan", "doc", "hits",
        ]  # fmt: skip

        # the faults, made in the lake: a lost insert, a lost delete, a stale update, a duplicate
        spark.sql(f"DELETE FROM {TABLE} WHERE id = 17")
        spark.sql(f"UPDATE {TABLE} SET balance = balance + 0.01 WHERE id = 250")
        spark.sql(
            f"INSERT INTO {TABLE} SELECT 5000 AS id, name, balance, ratio, score, opened, seen, "
            f"local, active, tags, avatar, plan, doc, hits, _cdc_op, _cdc_event_time, "
            f"_cdc_position FROM {TABLE} WHERE id = 3"
        )
        spark.sql(f"INSERT INTO {TABLE} SELECT * FROM {TABLE} WHERE id = 400")
        expected = {
            17: ("missing", "", False),
            250: ("stale", "balance", False),
            5000: ("extra", "", False),
            400: ("duplicate", "", False),
        }
        idle = _reconcile(source, **{"catch-up-timeout": "2 seconds", "rounds": "1"})
        assert not idle["equal"]
        assert _found(idle) == expected, idle
        assert (idle["missing"], idle["extra"], idle["stale"], idle["duplicate"]) == (1, 1, 1, 1)
        assert idle["unconfirmed"] == 4

        # live: other rows change all along, and ingest_cdc keeps applying them
        stop = threading.Event()
        errors: list[BaseException] = []

        def writes() -> None:
            step = 0
            while not stop.is_set():
                step += 1
                low = 1000 + (step * 37) % 1900
                source.psql(
                    f"UPDATE accounts SET hits = hits + 1, seen = now() WHERE id BETWEEN {low} "
                    f"AND {low + 20}; INSERT INTO accounts (id, name) VALUES ({10000 + step}, "
                    f"'new'); DELETE FROM accounts WHERE id = {10000 + step - 3};",
                    "recon",
                )
                time.sleep(0.2)

        def ingestion() -> None:
            while not stop.is_set():
                try:
                    _ingest(landing, tmp_path / "ck")
                except BaseException as error:  # the test fails with it below
                    errors.append(error)
                    return
                time.sleep(0.5)

        threads = [threading.Thread(target=writes), threading.Thread(target=ingestion)]
        for thread in threads:
            thread.start()
        try:
            time.sleep(3)
            live = _reconcile(source, **{"catch-up-timeout": "90 seconds"})
        finally:
            stop.set()
            for thread in threads:
                thread.join(120)
        assert not errors, errors
        confirmed = {k: (kind, columns, True) for k, (kind, columns, _) in expected.items()}
        assert _found(live) == confirmed, live
        assert live["unconfirmed"] == 0
    finally:
        connector.stop()
