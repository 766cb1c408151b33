"""Which users and groups may call which sparkext routines and Iceberg procedures, on which tables.

A policy is a TOML file (``spark.sparkext.policy``), read again whenever it changes::

    default = "read-only"        # users no grant names: "read-only" (default), "none" or "all"

    [groups]
    engineers = ["alice", "bob"]

    [[grant]]
    to = ["group:engineers"]     # "user:<name>", "group:<name>", a bare user name, or "*"
    routines = ["*"]             # patterns over sparkext.<name> and system.<procedure>

    [[grant]]
    to = ["carol"]
    routines = ["read-only", "sparkext.tag_event_time_days"]
    tables = ["lake.sales.*"]    # only on these tables (default: any)

``read-only`` names every routine that changes no table (``help``, ``table_health``, …). Pure:
no Spark, no files beyond the policy's own.

Floor: security.
"""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkext.errors import PolicyError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

READ_ONLY = "read-only"
DEFAULTS = ("read-only", "none", "all")
# Iceberg's procedures that change nothing (every other one writes a table or its metadata).
ICEBERG_READ_ONLY = frozenset({"ancestors_of"})


@dataclass(frozen=True)
class Grant:
    to: tuple[str, ...]
    routines: tuple[str, ...]
    tables: tuple[str, ...] = ()  # empty: any table

    def names(self, user: str, groups: frozenset[str]) -> bool:
        return any(
            who == "*"
            or who == user
            or who == f"user:{user}"
            or (who.startswith("group:") and who[6:] in groups)
            for who in self.to
        )

    def covers(self, routine: str, writes: bool, tables: Iterable[str]) -> bool:
        named = any(
            (pattern == READ_ONLY and not writes) or fnmatch.fnmatchcase(routine, pattern)
            for pattern in self.routines
        )
        return named and all(
            not self.tables or any(fnmatch.fnmatchcase(t.lower(), p.lower()) for p in self.tables)
            for t in tables
        )


@dataclass(frozen=True)
class Policy:
    """A parsed policy; ``source`` names it in refusals (a path, or what stands for one)."""

    source: str
    default: str = READ_ONLY
    groups: Mapping[str, frozenset[str]] | None = None
    grants: tuple[Grant, ...] = ()

    def groups_of(self, user: str) -> frozenset[str]:
        return frozenset(g for g, members in (self.groups or {}).items() if user in members)

    def decide(
        self, user: str, routine: str, writes: bool, tables: Iterable[str] = ()
    ) -> str | None:
        """None when ``user`` may call ``routine``, else why not (the end of a sentence).

        >>> p = parse('default = "none"\\n[[grant]]\\nto = ["bob"]\\nroutines = ["read-only"]', "p")
        >>> p.decide("bob", "sparkext.help", writes=False) is None
        True
        >>> p.decide("bob", "sparkext.maintain", writes=True)
        'p grants bob read-only routines only'
        >>> p.decide("eve", "sparkext.help", writes=False)
        'p grants nothing to users it does not name'
        """
        tables = tuple(tables)
        groups = self.groups_of(user)
        mine = [g for g in self.grants if g.names(user, groups)]
        if not mine:
            if self.default == "all" or (self.default == READ_ONLY and not writes):
                return None
            if self.default == READ_ONLY:
                return f"{self.source} grants users it does not name read-only routines only"
            return f"{self.source} grants nothing to users it does not name"
        if any(g.covers(routine, writes, tables) for g in mine):
            return None
        if any(g.covers(routine, writes, ()) for g in mine):
            return f"{self.source} grants {user} {routine} only on {_tables(mine, routine, writes)}"
        if all(set(g.routines) == {READ_ONLY} for g in mine):
            return f"{self.source} grants {user} read-only routines only"
        return f"{self.source} grants {user} no {routine}"


def _tables(grants: list[Grant], routine: str, writes: bool) -> str:
    patterns = [p for g in grants if g.covers(routine, writes, ()) for p in g.tables]
    return ", ".join(sorted(set(patterns)))


def _strings(value: Any, where: str, source: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise PolicyError(
            f"{where} in policy {source} must be a list of non-empty strings, got {value!r}; "
            'write e.g. ["group:engineers", "alice"].'
        )
    return tuple(value)


def parse(text: str, source: str) -> Policy:
    """The policy of a TOML text; one sentence naming the place of any mistake."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise PolicyError(
            f"The policy {source} is not valid TOML ({error}); fix that line."
        ) from None
    known = {"default", "groups", "grant"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise PolicyError(
            f"The policy {source} has unknown key(s) {', '.join(unknown)}; it may hold "
            "default, [groups] and [[grant]] tables."
        )
    default = data.get("default", READ_ONLY)
    if default not in DEFAULTS:
        raise PolicyError(
            f"default = {default!r} in policy {source} is not one of read-only, none, all."
        )
    groups_raw = data.get("groups", {})
    if not isinstance(groups_raw, dict):
        raise PolicyError(f"[groups] in policy {source} must be a table of name = [users].")
    groups = {
        name: frozenset(_strings(members, f"groups.{name}", source))
        for name, members in groups_raw.items()
    }
    grants = []
    raw_grants = data.get("grant", [])
    if not isinstance(raw_grants, list):
        raise PolicyError(f"grant in policy {source} must be [[grant]] tables.")
    for number, raw in enumerate(raw_grants, start=1):
        extra = sorted(set(raw) - {"to", "routines", "tables"})
        if extra or "to" not in raw or "routines" not in raw:
            raise PolicyError(
                f"Grant {number} of policy {source} must have to and routines (and may have "
                f"tables){'; unknown: ' + ', '.join(extra) if extra else ''}."
            )
        grants.append(
            Grant(
                _strings(raw["to"], f"grant {number}'s to", source),
                _strings(raw["routines"], f"grant {number}'s routines", source),
                _strings(raw.get("tables", []), f"grant {number}'s tables", source)
                if raw.get("tables")
                else (),
            )
        )
    return Policy(source, default, groups, tuple(grants))


_cache: dict[str, tuple[float, int, Policy]] = {}


def load(path: str) -> Policy:
    """The policy at ``path``, parsed again only when the file changed."""
    file = Path(path).expanduser()
    try:
        stat = file.stat()
        cached = _cache.get(path)
        if cached and cached[0] == stat.st_mtime and cached[1] == stat.st_size:
            return cached[2]
        text = file.read_text(encoding="utf-8")
    except OSError as error:
        raise PolicyError(
            f"The policy file {path} cannot be read ({error.strerror}); fix "
            "spark.sparkext.policy or the file's permissions."
        ) from None
    policy = parse(text, str(file))
    _cache[path] = (stat.st_mtime, stat.st_size, policy)
    return policy


# A networked server with no policy file: what an unknown user of the network may call.
NETWORK_DEFAULT = Policy("sparkext-sql serve's network default (no spark.sparkext.policy)")
