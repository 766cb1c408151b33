"""UDFs written once: the same Python or pandas function in stream and batch mode.

Decorate a function and name it in a job::

    # mypkg/udfs.py
    from sparkext.streaming import udf

    @udf("string")
    def norm(s):
        return s.strip().lower() if s is not None else None

    @udf("double", pandas=True)
    def to_usd(amount: pd.Series, rate: pd.Series) -> pd.Series:
        return amount * rate

    -- job.sql
    CREATE FUNCTION norm AS 'mypkg.udfs.norm';

Both modes run the job's SQL in one Spark session and register the function there with
``spark.udf.register`` (a pandas UDF through ``pandas_udf``), so the code path is the same.

Floor: streaming.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from sparkext.errors import SparkextError
from sparkext.spark.environment import check_executors

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkext.streaming.job import Job

_F = TypeVar("_F", bound=Callable[..., Any])


class UdfError(SparkextError, LookupError):
    """A CREATE FUNCTION names something that is not a sparkext UDF."""


@dataclass(frozen=True)
class UdfSpec:
    name: str
    function: Callable[..., Any]
    return_type: str
    pandas: bool


REGISTRY: dict[str, UdfSpec] = {}


def udf(
    return_type: str = "string", *, name: str | None = None, pandas: bool = False
) -> Callable[[_F], _F]:
    """Declare a UDF (Spark DDL return type, e.g. 'double' or 'array<string>'); the function is
    returned unchanged so it stays a plain, testable Python function."""

    def declare(function: _F) -> _F:
        spec = UdfSpec(name or function.__name__, function, return_type, pandas)
        function.__sparkext_udf__ = spec  # type: ignore[attr-defined]  # marks the function itself
        REGISTRY[spec.name.lower()] = spec
        return function

    return declare


def resolve(target: str) -> UdfSpec:
    """``'module.function'`` → its declaration."""
    module_name, _, attribute = target.rpartition(".")
    try:
        function = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise UdfError(
            f"CREATE FUNCTION … AS '{target}': cannot import it ({error}); check the module is "
            "on PYTHONPATH of the driver and the executors."
        ) from None
    spec: UdfSpec | None = getattr(function, "__sparkext_udf__", None)
    if spec is None:
        raise UdfError(
            f"'{target}' is not a sparkext UDF; decorate it with @sparkext.streaming.udf('<type>')."
        )
    return spec


def register(spark: SparkSession, name: str, spec: UdfSpec) -> None:
    if spec.pandas:
        from pyspark.sql.functions import pandas_udf

        # pyspark's stubs have no overload without functionType (inferred from the type hints)
        spark.udf.register(name, pandas_udf(spec.function, spec.return_type))  # type: ignore[call-overload]
    else:
        spark.udf.register(name, spec.function, spec.return_type)


def register_job_functions(spark: SparkSession, job: Job) -> None:
    """Register every CREATE FUNCTION of the job in the session (its Python runs on the
    executors: they are checked first, see :mod:`sparkext.spark.environment`)."""
    if job.functions:
        check_executors(spark)
    for name, target in job.functions.items():
        register(spark, name, resolve(target))
