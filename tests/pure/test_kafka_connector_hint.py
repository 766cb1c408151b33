"""The Kafka connector suggestion names the installed Spark's own connector."""

from __future__ import annotations

import pyspark

from sparkext.actions.cdc.stream import kafka_connector_hint, kafka_connector_package


def test_the_package_is_the_installed_spark_version_for_scala_2_12():
    expected = f"org.apache.spark:spark-sql-kafka-0-10_2.12:{pyspark.__version__}"
    assert kafka_connector_package() == expected


def test_the_hint_says_where_to_put_the_package():
    hint = kafka_connector_hint()
    package = kafka_connector_package()
    assert f"--packages {package}" in hint
    assert "spark.jars.packages in conf/spark-defaults.conf" in hint
    assert hint.startswith("Reading Kafka needs Spark's Kafka connector")
