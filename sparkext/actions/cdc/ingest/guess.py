"""The guess: a batch typed with the facts of its table's last batch (types, position family,
source partitions) while its own facts are observed on the way, one job less; the facts are
checked before anything is committed, and a batch whose facts differ is typed again.

Floor: actions (driver side of ingest_cdc). Holds the guesses (:class:`GuessCache`, an object
its owner passes in: the stream module keeps one for the process, see
:data:`sparkext.actions.cdc.stream.GUESSES`) and the check of a guess against observed facts.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sparkext.actions.cdc.ingest.figures import GuessedFacts, TypedFacts
from sparkext.actions.cdc.model import batch_types

if TYPE_CHECKING:
    from sparkext.actions.cdc.model import Settings

FoundTypes = tuple[Mapping[str, str], Mapping[str, str], bool]  # types, logical tags, exact
GuessKey = tuple[str, str, str]  # (table, checkpoint id, decimal setting)
GUESSED_PARTITIONS_MAX = 64  # source partitions a guess observes one by one (one figure each)
GUESSES_MAX = 256  # tables x checkpoints remembered


@dataclass(frozen=True)
class Guess:
    """The facts of a table's last batch, with which the next batch is typed while its own
    facts are observed (one job less); wrong, the batch is typed again."""

    family: str | None  # the position family of good events
    found_types: FoundTypes
    partitions: tuple[str, ...]  # source partitions seen so far
    events: int  # good events: sizes the event log until the batch's own count is known
    common: bool = True  # its changes were all newer than the table's (see Ingestor._common)


class Misguessed(Exception):
    """The batch's own facts differ from the guess it was typed with: type it again."""


class GuessCache:
    """(table, checkpoint id, decimal setting) -> the guess for its next batch, oldest use
    first; a hint only: every batch typed with it checks it against its own observed facts
    before anything is committed. Thread-safe: pipelines of several tables may run on several
    threads."""

    def __init__(self, most: int = GUESSES_MAX) -> None:
        self._guesses: dict[GuessKey, Guess] = {}
        self._most = most
        self._lock = threading.Lock()

    def get(self, key: GuessKey, held: str | None) -> Guess | None:
        """The last batch's facts, the family the table holds (``held``) in place of its own."""
        with self._lock:
            guess = self._guesses.get(key)
        if guess is None or held is None or held == guess.family:
            return guess
        return replace(guess, family=held)

    def remember(
        self,
        key: GuessKey,
        chosen: str | None,
        found: FoundTypes,
        per_partition: Mapping[str, str],
        events: int,
        common: bool,
    ) -> None:
        """The facts of a batch, for the next one; forgotten when they cannot type it."""
        with self._lock:
            old = self._guesses.pop(key, None)
            if not events or not found[0] or len(per_partition) > GUESSED_PARTITIONS_MAX:
                return  # nothing to type with; too many partitions to observe one by one
            partitions = set(per_partition) | set(old.partitions if old else ())
            if len(partitions) > GUESSED_PARTITIONS_MAX:
                partitions = set(per_partition)
            while len(self._guesses) >= self._most:
                self._guesses.pop(next(iter(self._guesses)))  # the least recently remembered
            self._guesses[key] = Guess(chosen, found, tuple(sorted(partitions)), events, common)

    def clear(self) -> None:
        with self._lock:
            self._guesses.clear()


def check(guess: Guess, seen: GuessedFacts, typed: TypedFacts, settings: Settings) -> FoundTypes:
    """The batch's types from its observed facts ``seen``, or :class:`Misguessed` when they
    differ from ``guess`` or do not cover exactly the ``typed`` rows (see
    ``Ingestor._guessed``)."""
    if seen.others:
        raise Misguessed(f"{seen.others} event(s) of another position family")
    if (typed.rows, typed.fingerprint) != (seen.good, seen.fingerprint):
        raise Misguessed(
            f"its facts saw {seen.good} of its {typed.rows} typed events, not "
            "exactly those (a task ran again)"
        )
    if seen.elsewhere:
        raise Misguessed("events of a source partition the last batch did not have")
    found = batch_types(seen.type_facts(), settings)
    if found != guess.found_types:
        raise Misguessed("its column types differ from the last batch's")
    return found
