"""Which snapshot ranges a changelog replay oracle checks, by tier.

For snapshots S1 < … < Sn and "before the first" (``None``), the default tier checks every single
commit (S(i-1), Si) and the whole history (before the first, Sn); the stress tier checks every
pair. The oracle and its assertions are the same in both; only the number of ranges differs.
Tests take the tier as a parameter: ``@EVERY_PAIR`` runs them once in each tier.
"""

from __future__ import annotations

import itertools

import pytest

EVERY_PAIR = pytest.mark.parametrize(
    "every_pair",
    [
        pytest.param(False, id="each-commit"),
        pytest.param(True, id="every-pair", marks=pytest.mark.stress),
    ],
)


def ranges(ids: list, every_pair: bool) -> list[tuple]:
    """``ids`` starts with None (before the first snapshot); the ranges (start, end) to check, in
    history order.

    >>> ranges([None, 1, 2, 3], every_pair=False)
    [(None, 1), (1, 2), (2, 3), (None, 3)]
    >>> len(ranges([None, 1, 2, 3], every_pair=True))
    6
    """
    if every_pair:
        return [(a, b) for i, a in enumerate(ids) for b in ids[i + 1 :]]
    singles = list(itertools.pairwise(ids))
    whole = (ids[0], ids[-1])
    return singles + ([whole] if whole not in singles else [])
