"""sparkext.spark.java: the JVM view that remembers its lookups gives what py4j's own gives,
in fewer round trips, and never remembers a class the JVM could not load."""

from __future__ import annotations

import threading

import pytest
from py4j.java_gateway import JavaClass
from py4j.protocol import Py4JError

from sparkext.spark.java import iterate, jvm, map_values, string_map


@pytest.fixture
def commands(spark, monkeypatch):
    """The py4j commands this thread sends from now on (their first lines)."""
    client = spark.sparkContext._gateway._gateway_client
    sent: list[str] = []
    original = type(client).send_command

    me = threading.get_ident()

    def counting(self, command, *args, **kwargs):
        kind = command.split("\n", 1)[0]
        # not another thread's, not a garbage collection's deletes (they may come at any time)
        if threading.get_ident() == me and kind != "m":
            sent.append(kind)
        return original(self, command, *args, **kwargs)

    monkeypatch.setattr(type(client), "send_command", counting)
    return sent


def test_a_repeated_static_call_is_one_round_trip(spark, table_name, commands):
    spark.sql(f"CREATE TABLE {table_name} (id bigint) USING iceberg")
    load = lambda: jvm(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(  # noqa: E731
        spark._jsparkSession, table_name
    )
    first = load()
    commands.clear()
    again = load()
    assert commands == ["c"]  # the call itself, nothing asked about the names
    assert str(again.name()) == str(first.name())
    via_py4j = spark._jvm.org.apache.iceberg.spark.Spark3Util
    assert isinstance(jvm(spark).org.apache.iceberg.spark.Spark3Util, JavaClass)
    assert jvm(spark).org.apache.iceberg.spark.Spark3Util._fqn == via_py4j._fqn


def test_constructors_nested_classes_fields_and_imported_names(spark):
    view = jvm(spark)
    names = view.java.util.ArrayList()
    names.add("a")
    assert list(iterate(names)) == ["a"]
    entry = view.java.util.AbstractMap.SimpleEntry("k", "v")  # a nested class
    assert (entry.getKey(), entry.getValue()) == ("k", "v")
    assert view.org.apache.iceberg.TableProperties.FORMAT_VERSION == "format-version"
    assert view.SparkSession.getDefaultSession().isDefined()  # java_import'ed by PySpark


def test_a_class_the_jvm_cannot_load_is_asked_again_and_not_callable(spark):
    missing = jvm(spark).io.sparkext.nosuch.Missing
    assert not isinstance(missing, JavaClass)
    with pytest.raises(Py4JError, match="Trying to call a package"):
        missing()
    assert "Missing" not in jvm(spark).io.sparkext.nosuch._names


def test_iterate_and_string_map_equal_py4js_own_iteration(spark, table_name, commands):
    spark.sql(
        f"CREATE TABLE {table_name} (id bigint, v string) USING iceberg "
        "TBLPROPERTIES ('a' = '1', 'b.c' = 'x=y, \"z\"', 'empty' = '')"
    )
    table = jvm(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, table_name
    )
    properties = table.properties()
    string_map(properties)  # the first asks what JsonUtil is
    commands.clear()
    mapped = string_map(properties)
    assert commands == ["c", "c"]  # the mapper and the JSON, whatever the number of properties
    assert mapped == {str(k): str(v) for k, v in properties.items()}
    assert mapped["b.c"] == 'x=y, "z"' and mapped["empty"] == ""
    assert string_map(None) == {}
    columns = table.schema().columns()
    assert [str(c.name()) for c in iterate(columns)] == [str(c.name()) for c in columns]
    assert list(iterate(jvm(spark).java.util.ArrayList())) == []
    specs = table.specs()
    assert [int(s.specId()) for s in map_values(specs)] == [int(s.specId()) for s in specs.values()]


def test_pysparks_short_names_resolve_to_the_classes_its_wildcard_imports_give(spark):
    """The single-class imports sparkext adds answer each short name with the class PySpark's
    own imports resolve it to (a fresh view with only PySpark's imports is the oracle)."""
    from py4j.java_gateway import java_import

    from sparkext.spark.java import PYSPARK_SHORT_NAMES, import_pyspark_short_names

    gateway = spark.sparkContext._gateway
    fresh = gateway.new_jvm_view()
    for name in (
        "org.apache.spark.SparkConf",
        "org.apache.spark.api.java.*",
        "org.apache.spark.api.python.*",
        "org.apache.spark.ml.python.*",
        "org.apache.spark.mllib.api.python.*",
        "org.apache.spark.resource.*",
        "org.apache.spark.sql.*",
        "org.apache.spark.sql.api.python.*",
        "org.apache.spark.sql.hive.*",
        "scala.Tuple2",
    ):  # pyspark/java_gateway.py's launch_gateway
        java_import(fresh, name)
    imported = import_pyspark_short_names(spark)
    assert len(imported) == len(PYSPARK_SHORT_NAMES)
    for name in PYSPARK_SHORT_NAMES:
        assert getattr(spark._jvm, name)._fqn == getattr(fresh, name)._fqn, name
