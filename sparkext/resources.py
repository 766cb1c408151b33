"""Locate the files sparkext ships beside the code: conf/ and sql/.

A wheel carries them as ``sparkext/_resources/{conf,sql}``; an editable install or a checkout finds
them at the repository root. ``SPARKEXT_CONF_DIR`` overrides the conf directory (a cluster setup).

Floor: util.
"""

from __future__ import annotations

import os
from pathlib import Path

from sparkext.errors import EnvironmentSetupError

_PACKAGE = Path(__file__).resolve().parent
_CANDIDATES = (_PACKAGE / "_resources", _PACKAGE.parent)


def resource_dir(name: str) -> Path:
    """Return the directory ``name`` ("conf" or "sql") shipped with sparkext."""
    if name == "conf" and os.environ.get("SPARKEXT_CONF_DIR"):
        path = Path(os.environ["SPARKEXT_CONF_DIR"]).expanduser().resolve()
        if not (path / "spark-defaults.conf").is_file():
            raise EnvironmentSetupError(
                f"SPARKEXT_CONF_DIR is '{path}' but it holds no spark-defaults.conf; "
                "point it at a directory like the conf/ shipped with sparkext."
            )
        return path
    for base in _CANDIDATES:
        if (base / name).is_dir():
            return base / name
    raise EnvironmentSetupError(
        f"sparkext cannot find its '{name}' directory next to {_PACKAGE}; reinstall the package."
    )
