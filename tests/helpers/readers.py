"""Independent readers of Iceberg tables for oracles: pyiceberg and DuckDB's iceberg extension."""

from __future__ import annotations

import glob
import json
import os
from collections import defaultdict
from typing import Any

from tests.helpers.iceberg import java_table


def metadata_location(spark, name: str) -> str:
    return str(java_table(spark, name).operations().current().metadataFileLocation())


def pyiceberg_table(spark, name: str):
    from pyiceberg.table import StaticTable

    return StaticTable.from_metadata(metadata_location(spark, name))


def _partition_key(partition: dict[str, Any] | None) -> str | None:
    if not partition:
        return None
    return json.dumps({k: v for k, v in partition.items()}, separators=(",", ":"), default=str)


def pyiceberg_file_stats(spark, name: str, small_threshold: int) -> dict[str | None, dict]:
    """Per-partition counts of live files, computed from pyiceberg's reading of the manifests."""
    files = pyiceberg_table(spark, name).inspect.files().to_pylist()
    stats: dict[str | None, dict] = defaultdict(lambda: defaultdict(int))
    for f in files:
        s = stats[_partition_key(f.get("partition"))]
        if f["content"] == 0:
            s["data_files"] += 1
            s["data_bytes"] += f["file_size_in_bytes"]
            s["data_records"] += f["record_count"]
            if f["file_size_in_bytes"] < small_threshold:
                s["small_files"] += 1
                s["small_bytes"] += f["file_size_in_bytes"]
        elif f["content"] == 1 and f["file_format"] == "PUFFIN":
            s["deletion_vectors"] += 1
            s["deletion_vector_records"] += f["record_count"]
        elif f["content"] == 1:
            s["position_delete_files"] += 1
            s["position_delete_records"] += f["record_count"]
        else:
            s["equality_delete_files"] += 1
            s["equality_delete_records"] += f["record_count"]
    return {k: dict(v) for k, v in stats.items()}


def _extension(module) -> str:
    base = os.path.dirname(module.__file__)
    return glob.glob(os.path.join(base, "extensions", "**", "*.duckdb_extension"), recursive=True)[
        0
    ]


def duckdb_query(
    spark, name: str, sql_with_table: str, snapshot_id: int | None = None
) -> list[tuple]:
    """Run ``sql_with_table`` in DuckDB, with ``{table}`` bound to an iceberg_scan of ``name``
    (of its snapshot ``snapshot_id`` when given, e.g. a tag's)."""
    import duckdb
    import duckdb_extension_avro
    import duckdb_extension_iceberg

    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{_extension(duckdb_extension_avro)}'")
    con.execute(f"LOAD '{_extension(duckdb_extension_iceberg)}'")
    version = f", snapshot_from_id => {int(snapshot_id)}" if snapshot_id is not None else ""
    scan = f"iceberg_scan('{metadata_location(spark, name)}'{version})"
    return con.execute(sql_with_table.format(table=scan)).fetchall()
