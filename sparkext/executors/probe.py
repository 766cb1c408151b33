"""What one executor's Python reports to :func:`sparkext.spark.environment.check_executors`.

This module is pickled by value (its function travels in the task itself), so it runs on an
executor whose Python cannot import sparkext, and says so instead of failing to unpickle. It
imports nothing from sparkext at module level.

Floor: executors (runs inside Spark's tasks; no JVM).
"""

from __future__ import annotations


def probe(_: object) -> tuple[str, str, str, str]:
    """``(host, python major.minor, sparkext version or '', import error or '')``."""
    import socket
    import sys

    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    try:
        import sparkext  # the question itself: can this executor's Python import it?
    except Exception as error:
        return socket.gethostname(), python, "", f"{type(error).__name__}: {error}"
    return socket.gethostname(), python, str(getattr(sparkext, "__version__", "?")), ""
