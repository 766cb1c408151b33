"""What the JVM extension hands the Python driver, refused before any Spark work."""

from __future__ import annotations

import pytest

from sparkext.errors import SparkextError
from sparkext.routing.in_spark import call_result, table_result


def test_spark_sql_takes_one_statement():
    with pytest.raises(SparkextError) as caught:
        call_result(None, "CALL sparkext.help(); DROP TABLE lake.db.t")
    assert str(caught.value) == (
        "spark.sql runs one statement but this text holds 2; run them one by one, or all at "
        "once with sparkext.sql(...)."
    )


def test_a_call_text_without_a_call():
    with pytest.raises(SparkextError, match=r"^The statement is not a CALL sparkext"):
        call_result(None, "SELECT 1")


def test_no_invocation_at_the_position_spark_gave():
    text = "SELECT * FROM sparkext.help() a, sparkext.help('x') b"
    with pytest.raises(SparkextError) as caught:
        table_result(None, text, 20)
    assert str(caught.value) == (
        "No sparkext.<function>(...) starts at character 20 of the statement Spark parsed; run "
        "it with sparkext.sql(...) and report the statement."
    )
