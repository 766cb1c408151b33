"""Bind written arguments to a routine's declared parameters, with one clear error per mistake.

Order matters for users: name checks (unknown, duplicate, mixed, missing, too many) run before
anything touches Spark, so a misspelt call fails fast and changes nothing.

Floor: routing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from sparkext.declarations import (
    BoundArgs,
    Param,
    ParamType,
    Routine,
    bind_options,
    describe,
    label,
    type_label,
)
from sparkext.errors import ProcedureArgumentError, did_you_mean
from sparkext.iceberg.errors import spark_message
from sparkext.literals import sql_string
from sparkext.routing.constants import check_constant, evaluate
from sparkext.routing.invocations import RawArg

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def match(routine: Routine, args: Sequence[RawArg]) -> dict[str, RawArg]:
    """Map each written argument to its parameter name; pure, no Spark."""
    named = [a for a in args if a.name is not None]
    if named and len(named) != len(args):
        raise ProcedureArgumentError(
            f"Named and positional arguments cannot be mixed in {label(routine)}(...); "
            "write every argument as name => value, or none."
        )
    names = [p.name for p in routine.params]
    matched: dict[str, RawArg] = {}
    if named:
        for arg in args:
            assert arg.name is not None
            if routine.param(arg.name) is None:
                valid = ", ".join(names) or "none"
                option = _as_option(routine, arg.name)
                if option is not None:
                    raise ProcedureArgumentError(
                        f"'{arg.name}' is an option of {label(routine)}, not a parameter: write "
                        f"options => map('{option}', {arg.sql})."
                    )
                raise ProcedureArgumentError(
                    f"{label(routine)} has no parameter '{arg.name}'"
                    f"{did_you_mean(arg.name, names)}; parameters: {valid}."
                )
            if arg.name in matched:
                raise ProcedureArgumentError(
                    f"Parameter '{arg.name}' is given more than once in {label(routine)}(...); "
                    "keep one."
                )
            matched[arg.name] = arg
    else:
        if len(args) > len(routine.params):
            raise ProcedureArgumentError(
                f"{label(routine)} takes at most {len(routine.params)} argument(s) "
                f"({', '.join(names) or 'none'}) but {len(args)} were given."
            )
        matched = {p.name: a for p, a in zip(routine.params, args, strict=False)}
    missing = [p.name for p in routine.params if p.required and p.name not in matched]
    if missing:
        raise ProcedureArgumentError(
            f"Missing required parameter(s) {', '.join(repr(m) for m in missing)} for "
            f"{label(routine)}; see CALL sparkext.help('{routine.name}')."
        )
    return matched


def _as_option(routine: Routine, name: str) -> str | None:
    """The option key a misplaced named argument means (``min_files`` for ``min-files``)."""
    wanted = name.lower().replace("_", "-")
    for option in routine.options:
        if not option.prefix and option.key.replace(".", "-") in (wanted, wanted.replace(".", "-")):
            return option.key
    return None


def _option_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _coerce(routine: Routine, param: Param, value: Any) -> Any:
    expected = param.type
    where = f"Parameter '{param.name}' of {label(routine)}"
    ok: bool
    if value is None:
        if param.required:
            raise ProcedureArgumentError(f"{where} is required and cannot be NULL.")
        return param.default
    if expected == ParamType.STRING and isinstance(value, (int, Decimal)):
        ok = not isinstance(value, bool) and value == int(value)  # 20261121 as '20261121'
        value = str(int(value)) if ok else value
    elif expected in (ParamType.STRING, ParamType.TABLE):
        ok = isinstance(value, str)
    elif expected == ParamType.SNAPSHOT:
        value, ok = _snapshot_text(value)
    elif expected == ParamType.LONG:
        ok = isinstance(value, int) and not isinstance(value, bool)
        if isinstance(value, Decimal) and value == value.to_integral_value():
            value, ok = int(value), True
    elif expected == ParamType.DOUBLE:
        ok = isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif expected == ParamType.BOOLEAN:
        ok = isinstance(value, bool)
    elif expected == ParamType.TIMESTAMP:
        ok = isinstance(value, dt.datetime)
    elif expected == ParamType.INTERVAL:
        ok = isinstance(value, dt.timedelta)
    elif expected == ParamType.STRING_MAP:
        ok = isinstance(value, dict) and all(isinstance(k, str) for k in value)
        if ok:
            nulls = [k for k, v in value.items() if v is None]
            if nulls:
                raise ProcedureArgumentError(
                    f"{where} has a NULL value for key '{nulls[0]}'; "
                    "give it a value or leave the key out."
                )
            value = {k: _option_text(v) for k, v in value.items()}
    elif expected == ParamType.STRING_ARRAY:
        ok = isinstance(value, list)
        value = [None if v is None else _option_text(v) for v in value] if ok else value
    else:  # pragma: no cover - every ParamType is handled above
        raise AssertionError(expected)
    if not ok:
        hint = {
            ParamType.TIMESTAMP: " (write TIMESTAMP '2026-11-21 00:00:00')",
            ParamType.INTERVAL: " (write INTERVAL '1' DAY)",
            ParamType.STRING_MAP: " (write map('key', 'value', ...))",
            ParamType.TABLE: " (write the table name as a string, e.g. 'lake.db.t')",
            ParamType.SNAPSHOT: (
                " (write a snapshot id such as 5837411, a tag or branch name such as 'v1', "
                "or a time such as TIMESTAMP '2026-11-21 08:00:00')"
            ),
        }.get(expected, "")
        raise ProcedureArgumentError(
            f"{where} expects a {expected.value}, got {describe(value)} "
            f"({type_label(value)}){hint}."
        )
    return value


def _snapshot_text(value: Any) -> tuple[Any, bool]:
    """A snapshot argument as the text the history readers parse: ids as digits, times with
    their offset (an evaluated TIMESTAMP is an aware instant), dates as dates.

    >>> _snapshot_text(1210247136009801999), _snapshot_text("v1"), _snapshot_text(True)
    (('1210247136009801999', True), ('v1', True), (True, False))
    >>> _snapshot_text(dt.datetime(2026, 11, 21, 8, tzinfo=dt.timezone.utc))
    ('2026-11-21T08:00:00+00:00', True)
    """
    if isinstance(value, bool):
        return value, False
    if isinstance(value, int):
        return str(value), True
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return str(int(value)), True
    if isinstance(value, str):
        return value, True
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat(), True
    return value, False


def _as_written(param: Param, expression: exp.Expression) -> exp.Expression:
    """What a user would type for ``param``, made what it means: a bare table name
    (``table => lake.db.t``) is that name; a string for a TIMESTAMP parameter is cast as Spark
    casts it (in the session time zone), so ``as_of => '2026-11-21 08:00:00'`` works."""
    bare_name = isinstance(expression, (exp.Column, exp.Dot)) and all(
        isinstance(p, exp.Identifier) for p in expression.parts
    )
    if param.type == ParamType.TABLE and bare_name:
        return exp.Literal.string(expression.sql(dialect="spark"))
    if param.type == ParamType.TIMESTAMP:
        if isinstance(expression, exp.Literal) and expression.is_string:
            return exp.cast(expression, exp.DataType.build("timestamp"))
        if isinstance(expression, exp.Cast) and expression.to.this == exp.DataType.Type.DATE:
            return exp.cast(expression, exp.DataType.build("timestamp"))
    return expression


# How to write a valid value of a type, for a typed literal or CAST that came out NULL.
_DATETIME_FORMS = {
    "DATE": ("date", "yyyy-MM-dd"),
    "TIMESTAMP": ("timestamp", "yyyy-MM-dd HH:mm:ss"),
    "TIMESTAMP_LTZ": ("timestamp", "yyyy-MM-dd HH:mm:ss"),
    "TIMESTAMP_NTZ": ("timestamp", "yyyy-MM-dd HH:mm:ss"),
}
_VALUE_HINTS = {
    exp.DataType.Type.BOOLEAN: "write true or false",
    **dict.fromkeys(exp.DataType.INTEGER_TYPES, "write a whole number such as 42"),
    **dict.fromkeys(exp.DataType.REAL_TYPES, "write a number such as 1.5"),
}


def invalid_literal(cast: exp.Cast) -> str:
    """Why a typed literal or a CAST of a string came out NULL (Spark's INVALID_TYPED_LITERAL,
    which a CAST outside ANSI mode turns into a NULL), and how to write it.

    >>> from sqlglot import parse_one
    >>> print(invalid_literal(parse_one("DATE '2026-13-45'", read="spark")))
    DATE '2026-13-45' is not a valid date; write it as DATE 'yyyy-MM-dd'
    >>> invalid_literal(parse_one("CAST('x' AS INT)", read="spark"))
    "CAST('x' AS INT) is NULL: 'x' is not a valid INT; write a whole number such as 42"
    """
    type_name = cast.to.sql("spark")
    text = sql_string(cast.this.name)
    if type_name in _DATETIME_FORMS:
        noun, pattern = _DATETIME_FORMS[type_name]
        return f"{type_name} {text} is not a valid {noun}; write it as {type_name} '{pattern}'"
    hint = _VALUE_HINTS.get(cast.to.this, f"write a valid {type_name} value")
    return f"{cast.sql('spark')} is NULL: {text} is not a valid {type_name}; {hint}"


def _explain_null(
    routine: Routine,
    param: Param,
    expression: exp.Expression,
    evaluate: Callable[[Sequence[exp.Expression]], list[Any]],
) -> None:
    """Raise when ``expression`` names no NULL but evaluated to NULL: a typed literal or CAST
    of a string that is no valid value (TIMESTAMP '2026-13-45 00:00:00'), or, for a required
    parameter, any expression; a NULL the user wrote is left to :func:`_coerce`."""
    if expression.find(exp.Null) is not None:
        return
    where = f"Parameter '{param.name}' of {label(routine)}"
    casts = [
        node
        for node in expression.walk()
        if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string
    ]
    if casts and (len(casts) > 1 or casts[0] is not expression):
        # which one is NULL: one more query, on this error path only
        casts = [c for c, v in zip(casts, evaluate(casts), strict=True) if v is None]
    if casts:
        raise ProcedureArgumentError(f"{where}: {invalid_literal(casts[0])}.")
    if param.required:
        raise ProcedureArgumentError(
            f"{where} is required, but {expression.sql('spark')} evaluates to NULL; "
            "check the values in it."
        )


def bind(
    routine: Routine,
    args: Sequence[RawArg],
    evaluate: Callable[[Sequence[exp.Expression]], list[Any]],
    resolve_table: Callable[[str], Any],
) -> BoundArgs:
    """Bind ``args`` to ``routine``: match names, evaluate values, check types, resolve tables."""

    matched = match(routine, args)
    expressions = {}
    for name, arg in matched.items():
        param = routine.param(name)
        assert param is not None
        expressions[name] = _as_written(param, arg.expression)
        check_constant(expressions[name], f"Parameter '{name}' of {label(routine)}")
    names = list(matched)
    values = evaluate([expressions[n] for n in names]) if names else []
    bound: dict[str, Any] = {p.name: p.default for p in routine.params}
    for name, value in zip(names, values, strict=True):
        param = routine.param(name)
        assert param is not None
        if value is None:
            _explain_null(routine, param, expressions[name], evaluate)
        bound[name] = _coerce(routine, param, value)
    for param in routine.params:
        if param.type == ParamType.TABLE and bound[param.name] is not None:
            bound[param.name] = resolve_table(bound[param.name])
    options = bind_options(routine, bound.get("options")) if routine.options else {}
    return BoundArgs(bound, options)


def evaluator(
    spark: SparkSession, routine: Routine
) -> Callable[[Sequence[exp.Expression]], list[Any]]:
    """An ``evaluate`` for :func:`bind` that runs on ``spark`` and names the routine on failure."""

    def run(expressions: Sequence[exp.Expression]) -> list[Any]:
        try:
            return evaluate(spark, expressions)
        except Exception as error:
            # positions would point into the SELECT sparkext wrote, not the user's text
            message = spark_message(error, positions=False)
            if message is None:
                raise
            raise ProcedureArgumentError(
                f"Cannot evaluate the arguments of {label(routine)}: {message}"
            ) from None

    return run
