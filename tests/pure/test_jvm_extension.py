"""sparkext's JVM extension: the committed jar is what its sources compile to, and its settings."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from sparkext import jvm
from sparkext.spark.extension import spark_conf


def javac_major() -> int:
    out = subprocess.run(["javac", "-version"], capture_output=True, text=True, check=True)
    return int(re.search(r"javac (\d+)", out.stdout + out.stderr).group(1))


def members(classes: dict[str, bytes], directory: Path) -> str:
    """``javap -p`` of the classes: their declared members, whatever compiled them."""
    for name, data in classes.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_bytes(data)
    names = sorted(str(directory / name) for name in classes)
    done = subprocess.run(["javap", "-p", *names], capture_output=True, text=True, check=True)
    return done.stdout


def test_the_committed_jar_is_built_from_the_sources(tmp_path):
    if shutil.which("javac") is None:
        pytest.fail("javac is missing: bash .ci/setup installs openjdk-17-jdk-headless")
    rebuilt = jvm.compile_classes(tmp_path / "out")
    committed = jvm.jar_classes()
    assert sorted(rebuilt) == sorted(committed), "run: python -m sparkext.jvm"
    if javac_major() == int(jvm.JAVA_RELEASE):  # the jar's compiler: the same bytes
        changed = [name for name in rebuilt if rebuilt[name] != committed[name]]
        assert not changed, f"{changed} differ from their sources; run: python -m sparkext.jvm"
    else:  # another javac writes other bytes for the same source: compare what they declare
        ours, theirs = members(rebuilt, tmp_path / "a"), members(committed, tmp_path / "b")
        assert ours.replace(str(tmp_path / "a"), "") == theirs.replace(str(tmp_path / "b"), "")


def test_the_jar_is_reproducible(tmp_path):
    classes = jvm.jar_classes()
    first, second = tmp_path / "a.jar", tmp_path / "b.jar"
    jvm.write_jar(classes, first)
    jvm.write_jar(classes, second)
    assert first.read_bytes() == second.read_bytes() == jvm.JAR.read_bytes()


def test_the_extension_comes_after_icebergs_and_its_jar_on_both_paths():
    iceberg = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
    conf = spark_conf(
        {
            "spark.sql.extensions": iceberg,
            "spark.jars": "/opt/iceberg.jar,s3://bucket/udfs.jar",
            "spark.driver.extraClassPath": "/usr/share/java/postgresql.jar",
        }
    )
    assert conf["spark.sql.extensions"] == f"{iceberg},{jvm.EXTENSION}"
    assert conf["spark.jars"] == f"/opt/iceberg.jar,s3://bucket/udfs.jar,{jvm.JAR}"
    assert conf["spark.driver.extraClassPath"] == (
        f"/usr/share/java/postgresql.jar:/opt/iceberg.jar:{jvm.JAR}"
    )
    assert spark_conf(conf) == conf  # adding it twice changes nothing


def test_a_missing_jar_is_one_sentence(monkeypatch, tmp_path):
    from sparkext.errors import EnvironmentSetupError

    monkeypatch.setattr(jvm, "JAR", tmp_path / "gone.jar")
    with pytest.raises(EnvironmentSetupError, match=r"rebuild it with `python -m sparkext.jvm`"):
        jvm.jar_path()
