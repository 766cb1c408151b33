"""Which statements keep a table function's view alive (the router's statement kinds)."""

from __future__ import annotations

import pytest

from sparkext.routing.router import _stored_query
from sparkext.routing.tokens import split_statements


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("CREATE OR REPLACE TEMP VIEW v AS SELECT * FROM sparkext.help()", "temp"),
        ("create temporary view if not exists v as select 1", "temp"),
        ("CREATE GLOBAL TEMPORARY VIEW v AS SELECT 1", "temp"),
        ("CACHE TABLE c AS SELECT 1", "temp"),
        ("CACHE LAZY TABLE c AS SELECT 1", "temp"),
        ("ALTER VIEW v AS SELECT 1", "temp"),
        ("CREATE VIEW lake.db.v AS SELECT 1", "persistent"),
        ("CREATE OR REPLACE VIEW v (a COMMENT 'x') AS SELECT 1", "persistent"),
        ("CREATE TABLE t AS SELECT 1", None),
        ("INSERT INTO t SELECT 1", None),
        ("SELECT 'CREATE VIEW'", None),
        ("WITH v AS (SELECT 1) SELECT * FROM v", None),
    ],
)
def test_statement_kinds(sql, kind):
    assert _stored_query(split_statements(sql)[0]) == kind
