"""What the JVM's console appender prints, kept while a block runs on the shared session.

A command run in a fresh process writes the JVM's log lines (log4j's ``console`` appender, on
the JVM's stderr) to the same terminal as its own messages. Run in-process (``CliRunner`` on
the suite's session) those lines go to the suite's JVM's stderr instead; ``console(spark)``
copies, line for line, what that appender prints while the block runs, with its layout and
through the same loggers and levels, so a test can read the terminal as a user would see it:
``console_text + result.stderr`` (the JVM's lines come while the statement runs, before the
one-sentence error that ends it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

APPENDER = "console"  # the name in conf/log4j2.properties (and the shipped copy)
TEE = "tests-console-tee"


def _loggers(config) -> list:
    """Every logger configuration, the root's included, once each."""
    found = {str(logger.getName()): logger for logger in config.getLoggers().values()}
    found.setdefault(str(config.getRootLogger().getName()), config.getRootLogger())
    return list(found.values())


class Console:
    text = ""


@contextlib.contextmanager
def console(spark) -> Iterator[Console]:
    """``Console.text``: what the console appender printed inside the block (set on exit)."""
    log4j = spark._jvm.org.apache.logging.log4j
    context = log4j.LogManager.getContext(False)
    config = context.getConfiguration()
    target = config.getAppender(APPENDER)
    assert target is not None, f"no log4j appender named {APPENDER!r}"
    writer = spark._jvm.java.io.StringWriter()
    tee = log4j.core.appender.WriterAppender.createAppender(
        target.getLayout(), None, writer, TEE, False, True
    )
    tee.start()
    config.addAppender(tee)
    for logger in _loggers(config):
        if logger.getAppenders().containsKey(APPENDER):
            logger.addAppender(tee, None, None)
    context.updateLoggers()
    seen = Console()
    try:
        yield seen
    finally:
        for logger in _loggers(config):
            logger.removeAppender(TEE)
        context.updateLoggers()
        tee.stop()
        seen.text = str(writer.toString())
