"""What a command said on stderr, without the lines that depend on the machine's speed."""

from __future__ import annotations


def said(stderr: str) -> str:
    """``stderr`` without progress lines (``… 12 s: …``, printed when a statement runs past
    10 s with stderr not a terminal) and ``Time taken`` lines, stripped."""
    kept = [line for line in stderr.splitlines() if not line.startswith(("… ", "Time taken"))]
    return "\n".join(kept).strip()
