from __future__ import annotations

from pathlib import Path

import pytest

from sparkext.conf import absolutize_warehouses, expand, load_defaults, parse_defaults
from sparkext.errors import EnvironmentSetupError
from sparkext.resources import resource_dir
from sparkext.spark.session import build_conf, iceberg_jars, java_version


def test_shipped_defaults_configure_catalog_lake():
    conf = load_defaults(resource_dir("conf"), cwd=Path("/data"))
    assert conf["spark.sql.catalog.lake"] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf["spark.sql.catalog.lake.type"] == "hadoop"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.sql.extensions"].endswith("IcebergSparkSessionExtensions")
    assert Path(conf["spark.sql.catalog.lake.warehouse"]).is_absolute()


def test_environment_overrides_warehouse(monkeypatch):
    monkeypatch.setenv("SPARKEXT_WAREHOUSE", "s3a://bucket/wh")
    conf = load_defaults(resource_dir("conf"))
    assert conf["spark.sql.catalog.lake.warehouse"] == "s3a://bucket/wh"


def test_expand_and_parse():
    assert expand("${NOPE:-d}-${X}", {"X": "x"}) == "d-x"
    assert parse_defaults("a.b  1 2\n#c\nc.d=3", {}) == {"a.b": "1 2", "c.d": "3"}
    with pytest.raises(EnvironmentSetupError, match=r"Line 1 of spark-defaults\.conf"):
        parse_defaults("lonely", {})


def test_relative_warehouse_becomes_absolute():
    conf = absolutize_warehouses({"x.warehouse": "wh", "y.warehouse": "hdfs://n/wh"}, Path("/a"))
    assert conf == {"x.warehouse": "/a/wh", "y.warehouse": "hdfs://n/wh"}


def test_bundled_jar_is_used_only_when_nothing_else_is_set(tmp_path):
    jar = tmp_path / "runtime.jar"
    jar.write_bytes(b"")
    maven = {"spark.jars.packages": "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"}
    assert "spark.jars" not in iceberg_jars(maven, environ={})
    assert iceberg_jars({}, environ={"SPARKEXT_ICEBERG_JAR": str(jar)})["spark.jars"] == str(jar)
    assert iceberg_jars({}, environ={})["spark.jars"].endswith(
        "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
    )


def test_missing_user_jar_is_one_sentence(tmp_path):
    with pytest.raises(EnvironmentSetupError) as caught:
        iceberg_jars({}, environ={"SPARKEXT_ICEBERG_JAR": str(tmp_path / "no.jar")})
    assert "no such file exists" in str(caught.value)


def test_overrides_accept_spark_keys_and_shortcuts(tmp_path):
    conf = build_conf({"master": "local[1]", "warehouse": str(tmp_path), "spark.a.b": 3})
    assert conf["spark.master"] == "local[1]"
    assert conf["spark.sql.catalog.lake.warehouse"] == str(tmp_path)
    assert conf["spark.a.b"] == "3"
    with pytest.raises(EnvironmentSetupError, match="Unknown session override 'shuffle'"):
        build_conf({"shuffle": 4})


def test_conf_dir_override_must_hold_defaults(monkeypatch, tmp_path):
    monkeypatch.setenv("SPARKEXT_CONF_DIR", str(tmp_path))
    with pytest.raises(EnvironmentSetupError, match=r"holds no spark-defaults\.conf"):
        resource_dir("conf")


def _fake_java(tmp_path: Path, banner: str) -> str:
    java = tmp_path / "java"
    java.write_text(f"#!/bin/sh\necho '{banner}' >&2\n")
    java.chmod(0o755)
    return str(java)


def test_java_version_parsing(tmp_path):
    assert java_version(_fake_java(tmp_path, 'openjdk version "17.0.15" 2025-04-15')) == 17
    assert java_version(_fake_java(tmp_path, 'java version "1.8.0_392"')) == 8


def test_missing_or_old_java_is_one_actionable_sentence(monkeypatch, tmp_path):
    from sparkext.spark.session import check_java

    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(EnvironmentSetupError) as caught:
        check_java()
    assert str(caught.value).startswith("sparkext needs Java 17 but found no java on JAVA_HOME")
    home = tmp_path / "jdk11"
    (home / "bin").mkdir(parents=True)
    _fake_java(home / "bin", 'openjdk version "11.0.2" 2019-01-15')
    monkeypatch.setenv("JAVA_HOME", str(home))
    with pytest.raises(EnvironmentSetupError, match=r"is Java 11; install Java 17"):
        check_java()


def test_the_jdbc_catalog_example_parses_into_a_jdbc_catalog():
    from pathlib import Path

    from sparkext.conf import parse_defaults

    text = (Path(__file__).parents[2] / "conf" / "jdbc-catalog.conf.example").read_text()
    conf = parse_defaults(text, {"ICEBERG_DB_PASSWORD": "p"})
    assert conf["spark.sql.catalog.lake.catalog-impl"] == "org.apache.iceberg.jdbc.JdbcCatalog"
    assert conf["spark.sql.catalog.lake.uri"].startswith("jdbc:postgresql://")
    assert conf["spark.sql.catalog.lake.jdbc.password"] == "p"
    assert conf["spark.driver.extraClassPath"].endswith("postgresql.jar")
