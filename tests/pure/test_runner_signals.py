"""The Runner's own signal handling, without Spark: a Ctrl-C that lands while the Runner talks
to the JVM before waiting (listing the streaming queries, submitting the statement) is kept,
not dropped, and cancels the statement."""

from __future__ import annotations

import signal
import threading

import pytest

from sparkext.spark import cancellation
from sparkext.spark.cancellation import Runner, StatementCancelled
from tests.helpers.fake_spark import FakeSpark

pytestmark = pytest.mark.pure


def test_a_ctrl_c_inside_the_runners_own_py4j_call_cancels_the_statement():
    main = threading.main_thread().ident
    sent: list[bool] = []

    def ctrl_c_once() -> None:  # the query listing is a py4j call of the main thread
        if not sent:
            sent.append(True)
            signal.pthread_kill(main, signal.SIGINT)

    def work():
        statement = cancellation.current()
        assert statement is not None and statement.cancelled.wait(30)
        cancellation.raise_if_cancelled()  # as a cancelled Spark job fails the statement

    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(StatementCancelled) as cancelled:
        Runner(FakeSpark(ctrl_c_once)).run(work)
    assert sent
    assert str(cancelled.value) == "Cancelled; nothing was committed."
    assert signal.getsignal(signal.SIGINT) is before
