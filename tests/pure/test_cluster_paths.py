"""No driver-only paths (issue 54), checked on the source, and the executors' check's sentences.

Tables, checkpoints, event logs, key caches, landing zones and the files a task writes live on
whatever file system their URI names (``s3a://``, ``hdfs://``, ``abfs://``, ``file:``): the
modules that handle them reach them through :mod:`sparkext.fs` (pyarrow's file systems), Spark
or Iceberg's FileIO, never through Python's local file APIs. The few local-only places say why,
and test that the path is local first.
"""

from __future__ import annotations

import ast
import zipfile
from pathlib import Path

import pytest

import sparkext
from sparkext.errors import EnvironmentSetupError
from sparkext.spark import environment

ROOT = Path(sparkext.__file__).parent
# Packages whose paths are tables, checkpoints, event logs, key caches or landing zones.
DATA_PACKAGES = ("actions", "executors",
                 "iceberg", "spark", "procedures", "streaming", "service", "routing",
                 "planning")  # fmt: skip
LOCAL_CALLS = {
    "open", "os.open", "os.remove", "os.unlink", "os.rename", "os.replace", "os.makedirs",
    "os.mkdir", "os.listdir", "os.scandir", "os.walk", "os.stat", "os.path.exists",
    "os.path.isfile", "os.path.isdir", "os.path.getsize", "shutil.rmtree", "shutil.copyfile",
    "shutil.move", "shutil.copytree", "tempfile.mkdtemp", "tempfile.NamedTemporaryFile",
    "tempfile.mkstemp", "fcntl.flock", "glob.glob",
}  # fmt: skip
LOCAL_METHODS = {"write_text", "read_text", "write_bytes", "read_bytes", "mkdir", "unlink",
                 "rmdir", "iterdir", "glob", "rglob", "touch"}  # fmt: skip
# (module, call): why a local API is right there
ALLOWED = {
    ("iceberg/commit.py", "open"): "the Hadoop catalog's flock, only for a metadata file: path",
    ("iceberg/commit.py", "fcntl.flock"): "same",
    ("actions/cdc/checkpoint.py", "os.open"): "O_EXCL lock file, only on pyarrow's LocalFileSystem",
    (
        "executors/daemon.py",
        "os.stat",
    ): "the worker daemon's own shipped archive, on the node's disk",
}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _local_calls(path: Path) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        if name in LOCAL_CALLS:
            found.append((name, node.lineno))
        elif isinstance(node.func, ast.Attribute) and node.func.attr in LOCAL_METHODS:
            owner = node.func.value  # Path(...).write_text: a pathlib object, not a Location
            if isinstance(owner, ast.Call) and _dotted(owner.func) in ("Path", "pathlib.Path"):
                found.append((f"Path.{node.func.attr}", node.lineno))
    return found


def test_data_modules_use_no_local_file_api():
    offenders = []
    for package in DATA_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = str(path.relative_to(ROOT))
            for name, line in _local_calls(path):
                if (relative, name) not in ALLOWED:
                    offenders.append(f"{relative}:{line} {name}")
    assert not offenders, (
        "local file APIs where a path may be s3a://, hdfs:// or abfs:// (use sparkext.fs."
        f"Location, Spark or Iceberg's FileIO): {offenders}"
    )


def test_the_check_finds_local_file_apis(tmp_path):  # the check above can fail
    sample = tmp_path / "sample.py"
    sample.write_text("import os\nfrom pathlib import Path\nopen('x')\nos.makedirs('y')\n"
                      "Path('z').write_text('t')\n")  # fmt: skip
    assert [n for n, _ in _local_calls(sample)] == ["open", "os.makedirs", "Path.write_text"]


def test_the_package_holds_every_module_and_nothing_else(tmp_path):
    made = environment.package(tmp_path)
    assert environment.package(tmp_path) == made  # reused while the modules are unchanged
    with zipfile.ZipFile(made) as archive:
        names = set(archive.namelist())
    modules = {
        f"sparkext/{p.relative_to(ROOT)}"
        for p in ROOT.rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert modules <= names
    assert not [n for n in names if n.endswith((".jar", ".pyc", ".java"))]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "PySparkRuntimeError: [PYTHON_VERSION_MISMATCH] Python in worker has different "
            "version (3, 10) than that in driver 3.11, PySpark cannot run with different minor",
            "The executors run Python 3.10 but the driver runs 3.11; point spark.pyspark.python "
            "at a Python 3.11 on every node or ship one in spark.archives (docs/guides/deploy.md).",
        ),
        (
            'java.io.IOException: Cannot run program "/opt/env/bin/python": error=2, No such file',
            "The executors cannot start Python '/opt/env/bin/python' (no such program on a node); "
            "set spark.pyspark.python to an interpreter every node has, or ship one in "
            "spark.archives (docs/guides/deploy.md).",
        ),
    ],
)
def test_executor_failures_are_one_sentence(text, expected):
    assert environment._sentence(text, "python3") == expected


def test_an_executor_without_sparkext_or_with_another_version_is_named():
    with pytest.raises(EnvironmentSetupError, match=r"^The executors on node-2 cannot import"):
        missing = "ModuleNotFoundError: No module named 'sparkext'"
        environment._judge(
            [("node-1", "3.11", sparkext.__version__, ""), ("node-2", "3.11", "", missing)]
        )
    with pytest.raises(EnvironmentSetupError, match=r"import sparkext 0\.0\.1 but the driver"):
        environment._judge([("node-1", f"{__import__('sys').version_info[0]}."
                             f"{__import__('sys').version_info[1]}", "0.0.1", "")])  # fmt: skip


def test_a_plain_path_is_on_the_default_file_system_as_spark_reads_it(tmp_path, monkeypatch):
    from sparkext import fs
    from sparkext.actions.cdc.options import source_location

    monkeypatch.chdir(tmp_path)
    try:
        fs.set_default_filesystem("hdfs://nn:8020")
        assert fs.normalize("/data/ck/") == "hdfs://nn:8020/data/ck"
        assert fs.absolute("/data/landing") == "hdfs://nn:8020/data/landing"
        assert source_location("/data/landing") == "hdfs://nn:8020/data/landing"
        assert fs.absolute("s3a://b/ck") == "s3a://b/ck"  # a URI as written
        with pytest.raises(EnvironmentSetupError) as refused:
            fs.normalize("ck")
        assert str(refused.value) == (
            "'ck' is a relative path but the default file system is hdfs://nn:8020; write it "
            "in full (e.g. hdfs://nn:8020/data/ck) or as a /absolute/path."
        )
        fs.set_default_filesystem("file:///")  # the local default: local paths, as before
        assert fs.absolute("ck") == str(tmp_path / "ck")
    finally:
        fs.set_default_filesystem(None)


def test_pyarrow_file_systems_come_from_one_place():
    """``s3a://`` (Hadoop's name), ``file:/x`` and literal text are translated once, in
    ``sparkext.fs.filesystem``: a task that asked pyarrow itself failed on an s3a:// table."""
    offenders = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sorted(ROOT.rglob("*.py"))
        if path.name != "fs.py" or path.parent != ROOT
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == "from_uri"
    ]
    assert not offenders, f"use sparkext.fs.filesystem: {offenders}"


def test_a_task_that_failed_for_its_environment_is_named_and_others_are_not():
    missing = (
        "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
        '  File "/x/pyspark.zip/pyspark/serializers.py", line 471, in loads\n'
        "ModuleNotFoundError: No module named 'sparkext'"
    )
    assert environment.executor_failure(missing, "/usr/bin/python3") == (
        "The executors' Python ('/usr/bin/python3') cannot import sparkext; install sparkext "
        "where it runs, point spark.pyspark.python at an interpreter that has it, or ship it "
        "with the job (spark.sparkext.ship=true; docs/guides/deploy.md)."
    )
    assert environment.executor_failure("No module named 'sparkext.actions.cdc'", "p") is not None
    assert environment.executor_failure("No module named 'sparkextra'", "p") is None
    assert environment.executor_failure("Division by zero", "p") is None


def test_the_package_is_made_in_the_users_own_directory(tmp_path, monkeypatch):
    """Executors run the zip as found: it is never looked up in a shared temp directory."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    made = Path(environment.package())
    assert made.parent == tmp_path / "cache" / "sparkext" / "ship"
    assert made.parent.stat().st_mode & 0o777 == 0o700
