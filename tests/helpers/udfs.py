"""UDFs the streaming tests name in CREATE FUNCTION.

Importable on executors: ``tests`` is a package.
"""

from __future__ import annotations

import pandas as pd

from sparkext.streaming import udf


@udf("string")
def label(item):
    return None if item is None else f"<{item.strip().upper()}>"


@udf("double", pandas=True)
def with_tax(price: pd.Series) -> pd.Series:
    return (price * 1.1).round(2)
