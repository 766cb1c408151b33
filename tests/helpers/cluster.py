"""A real Spark standalone cluster for the cluster tier: a master and workers started from the
installed pyspark's launcher (``bin/spark-class`` with ``…deploy.master.Master`` and
``…deploy.worker.Worker``),
each worker with its own work, local (shuffle, block) and temp directories and its own Python;
executors are JVMs the workers start, whose Python workers run that node's interpreter.

"Its own Python": every worker's node interpreter is a venv of its own holding sparkext's
dependencies but **not sparkext** (a node that never installed it). The application names one
path for the executors' Python (``spark.pyspark.python``, as on a real cluster where every node
has the same path); here that path is a small script that runs the node's interpreter, which
each worker tells apart through the environment it hands its executors (``SPARKEXT_NODE_PYTHON``).
sparkext reaches the executors the documented way: shipped with the job (``spark.submit.pyFiles``
of ``sparkext.ship.package()``'s archive).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.serve import free_port

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
NODE_PYTHON = "SPARKEXT_NODE_PYTHON"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class Cluster:
    base: Path
    url: str  # spark://host:port
    web: str  # the master's web UI (its /json lists the workers)
    python: Path  # spark.pyspark.python: runs each node's own interpreter
    workers: list[Path]  # each worker's directory (work/, local/, tmp/, python/)
    processes: list[subprocess.Popen] = field(default_factory=list)

    def state(self) -> dict:
        with urllib.request.urlopen(f"{self.web}/json", timeout=10) as reply:
            return json.loads(reply.read())

    def executor_dirs(self) -> list[Path]:
        """The executors' working directories the workers made (one per application)."""
        return sorted(p for w in self.workers for p in (w / "work").glob("app-*/*") if p.is_dir())

    def logs(self) -> str:
        parts = []
        for log in sorted(self.base.glob("*.log")) + sorted(
            self.base.glob("worker-*/work/*/*/stderr")
        ):
            parts.append(f"--- {log}\n{log.read_text(errors='replace')[-4000:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)


def node_python(target: Path, with_sparkext: bool = False) -> Path:
    """A venv at ``target`` that sees this interpreter's packages but not sparkext: a node where
    sparkext's dependencies are installed and sparkext is not (``with_sparkext``: installed too)."""
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(target)], check=True)
    ours = Path(sysconfig.get_paths()["purelib"])
    theirs = target / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    for entry in ours.iterdir():
        if entry.name.startswith(("sparkext", "_editable_impl_sparkext", "__editable__")):
            continue
        if not (theirs / entry.name).exists():
            (theirs / entry.name).symlink_to(entry)
    if with_sparkext:
        import sparkext

        (theirs / "sparkext").symlink_to(Path(sparkext.__file__).parent)
    return target / "bin" / "python"


def packed_environment(base: Path) -> Path:
    """A packed environment with sparkext installed, for ``spark.archives …#env`` and
    ``spark.pyspark.python ./env/bin/python`` (what ``venv-pack`` makes; its links point into
    this machine's interpreter and packages, as a packed venv's point at the image's)."""
    import tarfile

    python = node_python(base / "packed-env", with_sparkext=True)
    archive = base / "sparkext-env.tar.gz"
    with tarfile.open(archive, "w:gz") as packed:
        packed.add(python.parent.parent, arcname=".")
    return archive


def start(base: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> Cluster:
    """Start the master and ``workers`` workers and wait until every worker is ALIVE."""
    home = spark_home()
    launcher = str(home / "bin" / "spark-class")
    env = {**os.environ, "SPARK_HOME": str(home)}
    for name in ("PYSPARK_PYTHON", "SPARK_SUBMIT_OPTS", "PYTHONPATH"):
        env.pop(name, None)
    dispatch = base / "node-python"
    dispatch.write_text(f'#!/bin/sh\nexec "${{{NODE_PYTHON}:?not a cluster node}}" "$@"\n')
    dispatch.chmod(0o755)
    port, web_port = free_port(), free_port()
    url, web = f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web_port}"
    cluster = Cluster(base, url, web, dispatch, [])
    master = [launcher, MASTER, "--host", "127.0.0.1", "--port", str(port),
              "--webui-port", str(web_port)]  # fmt: skip
    cluster.processes.append(_spawn(master, env, base / "master.log"))
    try:
        for index in range(workers):
            node = base / f"worker-{index}"
            for name in ("work", "local", "tmp"):
                (node / name).mkdir(parents=True)
            python = node_python(node / "python")
            node_env = {
                **env,
                "SPARK_WORKER_DIR": str(node / "work"),
                "SPARK_LOCAL_DIRS": str(node / "local"),
                "TMPDIR": str(node / "tmp"),
                NODE_PYTHON: str(python),
            }
            worker = [launcher, WORKER, "--host", "127.0.0.1", "--cores", str(cores),
                      "--memory", memory, "--work-dir", str(node / "work"),
                      "--webui-port", str(free_port()), url]  # fmt: skip
            cluster.processes.append(_spawn(worker, node_env, base / f"worker-{index}.log"))
            cluster.workers.append(node)
        deadline = time.monotonic() + 180
        while True:
            for process in cluster.processes:
                assert process.poll() is None, cluster.logs()
            try:
                alive = [w for w in cluster.state()["workers"] if w["state"] == "ALIVE"]
            except OSError:
                alive = []
            if len(alive) == workers:
                return cluster
            assert time.monotonic() < deadline, cluster.logs()
            time.sleep(0.2)
    except BaseException:
        cluster.stop()
        raise


def _spawn(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("w") as sink:
        return subprocess.Popen(
            command, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )


def remove(cluster: Cluster) -> None:
    cluster.stop()
    shutil.rmtree(cluster.base, ignore_errors=True)
