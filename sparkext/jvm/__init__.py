"""sparkext's JVM component: the Spark session extension that puts sparkext's SQL in ``spark.sql``.

The Java sources are in ``src/``; ``sparkext-spark.jar`` beside them is built from them by
``python -m sparkext.jvm`` (javac from a JDK, against the jars of the installed pyspark) and kept in
the repository so an install needs no JDK. A test rebuilds it and checks the classes are the same.

The extension routes: ``CALL sparkext.<name>(...)``, ``sparkext.<name>(...)`` in FROM and the
index statements (``CREATE INDEX … USING <type>``, ``DROP INDEX``, ``SHOW INDEXES``) are turned into
calls back into the Python driver (``sparkext.spark.extension``), which binds and runs the routine
exactly as ``sparkext.sql`` does and hands Spark the result's plan. Its optimizer hook prunes
Iceberg scans by sparkext's skipping indexes, asking the Python driver which files to keep; those
classes compile against the Iceberg runtime and are loaded only where Iceberg's classes are.

Floor: spark (the JVM extension's sources and jar).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from sparkext.errors import EnvironmentSetupError

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "src"
JAR = HERE / "sparkext-spark.jar"
EXTENSION = "io.sparkext.spark.SparkextExtensions"
BRIDGE = "io.sparkext.spark.Bridge"
JAVA_RELEASE = "17"
# The Iceberg Spark runtime the skipping-index hook compiles against (the bundled one).
ICEBERG_RUNTIME = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
# Fixed entry times make the jar a function of the classes alone.
_EPOCH = (1980, 1, 1, 0, 0, 0)
_MANIFEST = "Manifest-Version: 1.0\r\nCreated-By: sparkext\r\n\r\n"


def spark_jars() -> Path:
    """The jars directory of the installed pyspark (Spark, Scala, Hive): the compile classpath."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def iceberg_runtime() -> Path:
    """The bundled Iceberg runtime jar: on the compile classpath, not in ours."""
    try:
        from snowpark_connect_deps_iceberg import get_jar_path
    except ImportError as error:
        raise EnvironmentSetupError(
            "Building sparkext's JVM extension needs the bundled Iceberg runtime; run pip "
            "install 'snowpark-connect-deps-iceberg==1.0.2'."
        ) from error
    return Path(get_jar_path(ICEBERG_RUNTIME))


def compile_classes(out: Path) -> dict[str, bytes]:
    """Compile ``src/`` into ``out`` and return every class file's bytes by its path in the jar."""
    javac = shutil.which("javac")
    if javac is None:
        raise EnvironmentSetupError(
            "Building sparkext's JVM extension needs javac; install a JDK "
            "(e.g. apt-get install -y openjdk-17-jdk-headless)."
        )
    sources = sorted(str(p) for p in SOURCES.rglob("*.java"))
    command = [javac, "--release", JAVA_RELEASE, "-nowarn", "-encoding", "UTF-8"]
    classpath = os.pathsep.join([f"{spark_jars()}/*", str(iceberg_runtime())])
    command += ["-cp", classpath, "-d", str(out), *sources]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise EnvironmentSetupError(f"javac failed on sparkext's JVM sources:\n{done.stderr}")
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*.class"))}


def write_jar(classes: dict[str, bytes], jar: Path) -> None:
    """A jar whose bytes depend only on ``classes`` (sorted entries, fixed times)."""
    with zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("META-INF/MANIFEST.MF", _EPOCH), _MANIFEST)
        for name in sorted(classes):
            info = zipfile.ZipInfo(name, _EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, classes[name])


def jar_classes(jar: Path = JAR) -> dict[str, bytes]:
    with zipfile.ZipFile(jar) as archive:
        return {n: archive.read(n) for n in archive.namelist() if n.endswith(".class")}


def build(jar: Path = JAR) -> Path:
    """Compile the sources and write the jar; return its path."""
    with tempfile.TemporaryDirectory(prefix="sparkext-javac-") as out:
        write_jar(compile_classes(Path(out)), jar)
    return jar


def jar_path() -> Path:
    """The extension's jar, or one sentence saying how to get it back."""
    if not JAR.is_file():
        raise EnvironmentSetupError(
            f"sparkext's JVM extension {JAR} is missing; rebuild it with "
            "`python -m sparkext.jvm` (needs a JDK) or reinstall sparkext."
        )
    return JAR
