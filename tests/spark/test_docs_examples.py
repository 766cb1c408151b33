"""Every example of README.md and of the docs runs as written, in page order, and prints what its
page says.

The order is README.md, then docs/ in mkdocs.yml's nav order (``doc_blocks.pages()``). How the
pages mark their blocks is in tests/helpers/doc_blocks.py (```output after an example,
```text for what is not code, ``<!-- not-run: why -->`` and ``<!-- from: path -->`` above a fence).
Here, on the one shared session:

- sql blocks run through ``Shell(spark, …).run_text``, as typed into ``sparkext-sql``;
- python blocks are exec'd in one namespace, in order, as in one Python session
  (``sparkext.session()`` returns the shared session);
- bash blocks run their ``sparkext-sql`` / ``sparkext-demo`` commands in-process through click's
  ``CliRunner`` (the active session is reused); install and test commands (``SKIPPED`` in the
  helper) are skipped by name. The current directory is the repository root (the docs are
  read from a fresh clone), HOME is a temporary directory, and a ``--conf`` or ``--database`` a
  command sets is undone after it.
- The example directory ``/tmp/sparkext-examples`` is a temporary one: that path is replaced in
  the blocks, in their stated outputs and in the sql/examples/ scripts the commands run.

To update a stated output, set ``SPARKEXT_README_PRINTED=DIR``: what each example printed is
kept in DIR, one file per example, under its page's path
(``DIR/docs/reference/ingest_cdc.md:123-sql.txt``).

The namespaces the examples write (lake.db, lake.ods, lake.dw, lake.demo) are emptied first, as
on a new warehouse, and again at the end. The examples depend on each other as they did in the
single README they were split from: when one fails, the later ones may fail with it; read the
first failure.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import doc_blocks as docs
from tests.helpers.doc_blocks import ROOT

EXAMPLES = docs.examples()
NAMESPACES = ("lake.db", "lake.ods", "lake.dw", "lake.demo")


def _empty(spark, namespaces) -> None:
    existing = {f"lake.{row[0]}" for row in spark.sql("SHOW NAMESPACES IN lake").collect()}
    for namespace in namespaces:
        if namespace not in existing:
            continue
        for table in spark.sql(f"SHOW TABLES IN {namespace}").collect():
            spark.sql(f"DROP TABLE IF EXISTS {namespace}.`{table.tableName}` PURGE")
        spark.sql(f"DROP NAMESPACE IF EXISTS {namespace}")


@dataclass
class Walkthrough:
    """The pages read top to bottom: one session, one example directory, one Python namespace."""

    spark: object
    data: Path
    scripts: Path
    namespace: dict = field(default_factory=dict)

    def run(self, block: docs.Block) -> str:
        text = docs.relocate(block.text, self.data)
        if block.lang == "sql":
            return self._sql(text, block)
        if block.lang == "python":
            return self._python(text, block)
        return "".join(self._command(command, block) for command in docs.commands(text))

    def _sql(self, text: str, block: docs.Block) -> str:
        from sparkext.cli.shell import Shell

        printed = io.StringIO()
        ok = Shell(self.spark, out=printed, err=printed).run_text(text)
        assert ok, f"{block.name} failed:\n{printed.getvalue()}"
        return printed.getvalue()

    def _python(self, text: str, block: docs.Block) -> str:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            exec(compile(text, block.name, "exec"), self.namespace)
        return printed.getvalue()

    def _command(self, command: docs.Command, block: docs.Block) -> str:
        from sparkext import demo
        from sparkext.cli.shell import cli

        if command.kind == "skip":
            return ""
        assert command.kind, f"{block.name}: cannot run {' '.join(command.argv)!r}"
        program = cli if command.kind == "shell" else demo.main
        args = [self._argument(a) for a in command.args]
        confs = [v.partition("=")[0] for o, v in itertools.pairwise(args) if o == "--conf"]
        saved = {key: self.spark.conf.get(key, None) for key in confs}
        catalog = self.spark.catalog.currentCatalog()
        database = self.spark.catalog.currentDatabase()
        sigterm = signal.getsignal(signal.SIGTERM)
        try:
            result = CliRunner().invoke(program, args, input=command.stdin or "")
        finally:
            signal.signal(signal.SIGTERM, sigterm)  # `stream` sets its own
            for key, value in saved.items():
                if value is None:
                    self.spark.conf.unset(key)
                else:
                    self.spark.conf.set(key, value)
            self.spark.catalog.setCurrentCatalog(catalog)  # and its default namespace
            if database:
                self.spark.catalog.setCurrentDatabase(database)
        words = " ".join(command.argv)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise AssertionError(f"{block.name}: {words} raised:\n{result.output}") from (
                result.exception
            )
        assert result.exit_code == 0, f"{block.name}: {words} exited {result.exit_code}:\n" + (
            result.output
        )
        return result.output

    def _argument(self, word: str) -> str:
        """``~`` expanded; a repository script naming the example directory → a relocated copy."""
        word = os.path.expanduser(word)
        path = ROOT / word
        if word.endswith(".sql") and path.is_file():
            text = path.read_text(encoding="utf-8")
            if docs.EXAMPLES_DIR in text:
                copy = self.scripts / path.name
                copy.write_text(docs.relocate(text, self.data), encoding="utf-8")
                return str(copy)
        return word


@pytest.fixture(scope="module")
def walkthrough(spark, tmp_path_factory):
    from sparkext.streaming.udf import REGISTRY

    base = tmp_path_factory.mktemp("docs")
    (base / "home").mkdir()
    (base / "scripts").mkdir()
    registry = dict(REGISTRY)  # the UDF example declares functions
    zone = spark.conf.get("spark.sql.session.timeZone")
    manager = spark._jsparkSession.sessionState().catalogManager()
    catalog, namespace = str(manager.currentCatalog().name()), list(manager.currentNamespace())
    _empty(spark, NAMESPACES)
    # what conf/spark-defaults.conf gives a new session, whatever earlier tests left behind
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    spark.catalog.setCurrentCatalog("lake")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(base / "home"))
        patch.chdir(ROOT)
        yield Walkthrough(spark, base / "sparkext-examples", base / "scripts")
    for query in spark.streams.active:  # left running by an example that failed
        query.stop()
    REGISTRY.clear()
    REGISTRY.update(registry)
    _empty(spark, NAMESPACES)
    spark.conf.set("spark.sql.session.timeZone", zone)
    # exactly the catalog and namespace before (an example's USE lake.db must not outlive the
    # namespace it names; setting the same catalog again would keep it)
    manager.setCurrentCatalog("spark_catalog" if catalog != "spark_catalog" else "lake")
    manager.setCurrentCatalog(catalog)
    if namespace:
        gateway = spark.sparkContext._gateway
        parts = gateway.new_array(gateway.jvm.String, len(namespace))
        for index, part in enumerate(namespace):
            parts[index] = part
        manager.setCurrentNamespace(parts)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.block.name for e in EXAMPLES])
def test_docs_example(walkthrough, example):
    printed = walkthrough.run(example.block)
    if os.environ.get("SPARKEXT_README_PRINTED"):
        kept = Path(os.environ["SPARKEXT_README_PRINTED"]) / f"{example.block.name}.txt"
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(printed, encoding="utf-8")
    if example.output is not None:
        stated = docs.relocate(example.output, walkthrough.data)
        gap = docs.missing(stated, printed)
        assert gap is None, (
            f"{example.block.name} did not print this line of its stated output:\n{gap}\n"
            f"It printed:\n{printed}"
        )
