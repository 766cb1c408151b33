"""CALL sparkext.help(['name']): list routines, or one routine's parameters, options and output.

Floor: procedures (the SQL façade of an action).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from sparkext.declarations import (
    BoundArgs,
    Kind,
    OutputColumn,
    Param,
    ParamType,
    Routine,
    describe,
)
from sparkext.errors import UnknownRoutineError, did_you_mean


def _rows_for(routine: Routine) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = [
        (routine.kind_label, routine.name, None, None, None, routine.doc)
    ]
    for p in routine.params:
        default = None if p.required else describe(p.default)
        rows.append(("parameter", p.name, p.type.value, p.required, default, p.doc))
    for o in routine.options:
        rows.append(("option", o.key, "string", False, describe(o.default), o.doc))
    for c in routine.output:
        rows.append(("output", c.name, c.type, None, None, c.doc))
    function = routine.function
    if function is not None:
        rows.append(("table function", function.name, None, None, None, function.doc))
        for p in function.params:
            default = None if p.required else describe(p.default)
            rows.append(("function parameter", p.name, p.type.value, p.required, default, p.doc))
        for o in function.options:
            rows.append(("function option", o.key, "string", False, describe(o.default), o.doc))
    return rows


def describe_routines(routines: Mapping[str, Routine], args: BoundArgs) -> list[tuple[Any, ...]]:
    """Every routine of ``routines`` in one line each, or one routine's lines."""
    ROUTINES = routines
    name = args["name"]
    if name is None:
        return [(r.kind_label, r.name, None, None, None, r.doc) for r in ROUTINES.values()]
    routine = ROUTINES.get(name.lower().removeprefix("sparkext."))
    if routine is None:
        raise UnknownRoutineError(
            f"Unknown procedure or function '{name}'{did_you_mean(name, ROUTINES)}; "
            "CALL sparkext.help() lists them."
        )
    return _rows_for(routine)


def _unlisted(context: object, args: BoundArgs) -> list[tuple[Any, ...]]:
    """help outside the registry has nothing to list: fail loudly rather than answer empty."""
    raise RuntimeError("sparkext.procedures.help.ROUTINE runs through the registry's listing()")


def listing(routines: Mapping[str, Routine]) -> Routine:
    """help's declaration over ``routines`` (the registry hands over its own map, which it fills
    after this call: help reads it when it runs)."""
    return dataclasses.replace(ROUTINE, run=lambda context, args: describe_routines(routines, args))


ROUTINE = Routine(
    writes=False,
    name="help",
    doc="List sparkext procedures and functions, or describe one: help('table_health').",
    kind=Kind.PROCEDURE | Kind.FUNCTION,
    params=(Param("name", ParamType.STRING, "procedure or function to describe"),),
    output=(
        OutputColumn(
            "section", "string", "procedure / table function / parameter / option / output"
        ),
        OutputColumn("name", "string", "routine, parameter, option or column name"),
        OutputColumn("type", "string", "SQL type"),
        OutputColumn("required", "boolean", "whether a parameter must be given"),
        OutputColumn("default", "string", "value used when the parameter is omitted"),
        OutputColumn("description", "string", "one-line description"),
    ),
    run=_unlisted,  # see listing(): the registry gives help its map
)
