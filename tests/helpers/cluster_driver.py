"""A driver on the test cluster (tests/helpers/cluster.py), in a process of its own:
``python -m tests.helpers.cluster_driver SPEC.json OUT.json``.

SPEC: ``master``, ``conf`` (Spark settings: the catalog, the executors' Python), ``ns``, ``root``,
``phase`` and ``scenarios``. Phases:

* ``run``: first a routine before sparkext reaches the executors (the one-sentence error is
  recorded), then ``SparkContext.addPyFile(sparkext.spark.environment.package())`` — a notebook's
  way of shipping it — unless the conf ships it (``spark.sparkext.ship``) or the executors' Python
  has it (``installed``: a packed environment in ``spark.archives``); then the scenarios.
* ``probe``: one routine (``statement``, default a changelog); what it said (``error``).
* ``stream-crash``: ``ingest_cdc`` as a stream; two landings, the second while the process dies
  (``os._exit``, no clean-up, mid-batch or not).
* ``stream-restart``: the same stream from the same checkpoint, a third landing, the rows.

OUT: what each scenario returned (or its error), plus facts about the executors.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path


def main(spec_path: str, out_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    import sparkext
    from tests.helpers import cluster_scenarios as scenarios

    out: dict = {}

    def save() -> None:
        with open(out_path, "w") as sink:
            json.dump(out, sink, indent=1)

    spark = sparkext.session(master=spec["master"], **spec["conf"])
    ns, root = spec["ns"], spec["root"]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    out["daemon"] = spark.sparkContext.getConf().get("spark.python.daemon.module", None)
    phase = spec["phase"]
    if phase == "probe":  # one routine: what the executors' check says
        spark.sql(f"CREATE TABLE IF NOT EXISTS {ns}.first (id BIGINT) USING iceberg")
        statement = spec.get("statement", "SELECT * FROM sparkext.changelog('{ns}.first')")
        if "{root}/landing" in statement:
            scenarios.land(root, 0)
        try:
            sparkext.sql(statement.format(ns=ns, root=root)).collect()
            out["error"] = None
        except Exception as error:
            out["error"] = f"{type(error).__name__}: {error}"
    elif phase == "run":
        shipped = spec["conf"].get("spark.sparkext.ship") == "true"
        if not shipped and not spec.get("installed"):
            spark.sql(f"CREATE TABLE IF NOT EXISTS {ns}.first (id BIGINT) USING iceberg")
            try:
                sparkext.sql(f"SELECT * FROM sparkext.changelog('{ns}.first')").collect()
                out["before_shipping"] = "no error"
            except Exception as error:
                out["before_shipping"] = f"{type(error).__name__}: {error}"
            from sparkext.spark.environment import package

            spark.sparkContext.addPyFile(package())
        for name in spec["scenarios"]:
            started = time.monotonic()
            try:
                out[name] = scenarios.SCENARIOS[name](spark, ns, root)
            except Exception:
                out[name] = {"error": traceback.format_exc()}
            out[f"{name}_seconds"] = round(time.monotonic() - started, 1)
            save()
        infos = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
        out["executors"] = len(infos) - 1  # less the driver's own entry
    else:
        table, checkpoint = f"{ns}.stream_orders", f"{root}/ck-stream"
        if phase == "stream-crash":
            scenarios.land(root, 0)  # the stream's source must exist when it starts
        query = sparkext.ingest_cdc_stream(
            table, f"{root}/landing", checkpoint, primary_key="id", create=True,
            interval="1 second",
        )  # fmt: skip
        if phase == "stream-crash":
            query.processAllAvailable()
            out["first"] = scenarios.rows(spark, f"SELECT id, name FROM {table}")
            save()
            scenarios.land(root, 1)
            time.sleep(float(spec.get("crash_after", 1.5)))
            os._exit(17)  # a crash: no stop, no clean-up
        query.processAllAvailable()
        scenarios.land(root, 2)
        query.processAllAvailable()
        query.stop()
        out["rows"] = scenarios.rows(spark, f"SELECT id, name FROM {table}")
    save()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
