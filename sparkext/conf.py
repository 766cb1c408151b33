"""Read conf/spark-defaults.conf: the single source of Spark configuration.

Floor: util.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from sparkext.errors import EnvironmentSetupError

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def expand(value: str, env: Mapping[str, str]) -> str:
    """Expand ``${VAR}`` and ``${VAR:-default}`` from ``env``.

    >>> expand("${A:-x}/${B}", {"B": "y"})
    'x/y'
    """

    def sub(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in env and env[name] != "":
            return env[name]
        return default if default is not None else ""

    return _VAR.sub(sub, value)


def parse_defaults(text: str, env: Mapping[str, str]) -> dict[str, str]:
    """Parse spark-defaults.conf text: ``key value`` (or ``key=value``) per line, ``#`` comments.

    >>> parse_defaults("# c\\nspark.a  1\\nspark.b=${X:-2}\\n", {})
    {'spark.a': '1', 'spark.b': '2'}
    """
    result: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = re.match(r"^(\S+?)(?:\s*=\s*|\s+)(.*)$", line)
        if not match:
            raise EnvironmentSetupError(
                f"Line {number} of spark-defaults.conf, '{line}', has no value; write 'key value'."
            )
        result[match.group(1)] = expand(match.group(2).strip(), env)
    return result


def absolutize_warehouses(conf: dict[str, str], cwd: Path) -> dict[str, str]:
    """Make ``~`` and relative ``*.warehouse`` paths absolute, so a session does not depend on
    its cwd.

    >>> absolutize_warehouses({"spark.sql.catalog.lake.warehouse": "wh"}, Path("/x"))
    {'spark.sql.catalog.lake.warehouse': '/x/wh'}
    >>> absolutize_warehouses({"c.warehouse": "~/w"}, Path("/x"))["c.warehouse"].startswith("~")
    False
    """
    out = dict(conf)
    for key, value in conf.items():
        if key.endswith(".warehouse") and value and not _SCHEME.match(value):
            value = os.path.expanduser(value)
            out[key] = str((cwd / value).resolve()) if not os.path.isabs(value) else value
    return out


def load_defaults(conf_dir: Path, cwd: Path | None = None) -> dict[str, str]:
    """Load ``conf_dir/spark-defaults.conf`` with env expansion and absolute warehouse paths."""
    path = conf_dir / "spark-defaults.conf"
    env = {**os.environ, "SPARKEXT_CONF_DIR": str(conf_dir)}
    conf = parse_defaults(path.read_text(encoding="utf-8"), env)
    return absolutize_warehouses(conf, cwd or Path.cwd())
