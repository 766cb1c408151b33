"""The streaming dialect's changelog source hint: what a job may do with it (no Spark)."""

from __future__ import annotations

import pytest

from sparkext.streaming import to_batch
from sparkext.streaming.changelog_source import _replace_source, plan_changelog_job
from sparkext.streaming.job import StreamingSqlError, parse_job

HINT = "/*+ OPTIONS('changelog'='true', 'starting'='latest', 'consumer-name'='es') */"


def test_the_hinted_table_is_read_from_the_batch_view_with_its_alias():
    job = parse_job(
        f"INSERT INTO lake.db.out SELECT o.id, UPPER(v) AS v, _change_type "
        f"FROM lake.db.orders {HINT} AS o JOIN lake.db.regions r ON o.region = r.id WHERE o.id > 1"
    )
    source, options, (insert,) = plan_changelog_job(job)
    assert source == "lake.db.orders"
    assert options == {"changelog": "true", "starting": "latest", "consumer-name": "es"}
    assert _replace_source(insert, "batch_view").sql("spark") == (
        "INSERT INTO lake.db.out SELECT o.id, UPPER(v) AS v, _change_type FROM batch_view AS o "
        "JOIN lake.db.regions AS r ON o.region = r.id WHERE o.id > 1"
    )


@pytest.mark.parametrize(
    ("query", "what"),
    [
        ("SELECT v, count(*) AS n FROM t {hint} GROUP BY v", "the aggregate COUNT(*)"),
        ("SELECT DISTINCT v FROM t {hint}", "DISTINCT"),
        ("SELECT v, row_number() OVER (ORDER BY v) AS n FROM t {hint}", "an OVER window"),
    ],
)
def test_state_across_batches_is_refused_by_name(query, what):
    job = parse_job("INSERT INTO s " + query.format(hint="/*+ OPTIONS('changelog'='true') */"))
    with pytest.raises(StreamingSqlError) as raised:
        plan_changelog_job(job)
    assert f": {what} keeps state across the batches of a changelog source" in str(raised.value)


def test_unknown_options_two_sources_and_backfills_are_refused():
    with pytest.raises(StreamingSqlError, match="'foo' is not an option of a changelog source"):
        plan_changelog_job(
            parse_job("INSERT INTO s SELECT * FROM t /*+ OPTIONS('changelog'='true', 'foo'='1') */")
        )
    two = (
        "INSERT INTO s SELECT * FROM a /*+ OPTIONS('changelog'='true') */ "
        "UNION ALL SELECT * FROM b /*+ OPTIONS('changelog'='true') */"
    )
    with pytest.raises(StreamingSqlError, match="a job reads one changelog source, and this one"):
        plan_changelog_job(parse_job(two))
    with pytest.raises(StreamingSqlError) as raised:
        to_batch(
            "INSERT INTO s SELECT * FROM t /*+ OPTIONS('changelog'='true') */", None, "2024-01-02"
        )
    assert str(raised.value) == (
        "line 1, column 29: 'changelog'='true' reads the changes of t as they are committed, "
        "which only stream mode does; run the job with 'sparkext-sql stream', or read a range's "
        "changes with sparkext.changelog('t', start, end)."
    )
