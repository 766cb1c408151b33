"""``sparkext-sql serve --auth password``'s user file: salted PBKDF2-HMAC-SHA256 hashes.

One line per user, ``name:$pbkdf2-sha256$<iterations>$<salt>$<hash>`` (salt and hash base64),
the format the server's JVM side (``io.sparkext.spark.PasswordFile``) verifies. hashlib's PBKDF2
and Java's ``PBKDF2WithHmacSHA256`` compute the same bytes. The file is written atomically and
readable by its owner only.

Floor: security.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import tempfile
from pathlib import Path

from sparkext.errors import ServeSetupError

SCHEME = "pbkdf2-sha256"
# OWASP's 2023 figure for PBKDF2-HMAC-SHA256; about 0.3 s per login on one core, once per
# connection.
ITERATIONS = 600_000
_FORBIDDEN = set(":\n\r\t ")


def hash_password(password: str, iterations: int = ITERATIONS, salt: bytes | None = None) -> str:
    """The stored form of ``password``.

    >>> stored = hash_password("s3cret", iterations=1000, salt=b"0123456789abcdef")
    >>> stored  # doctest: +ELLIPSIS
    '$pbkdf2-sha256$1000$MDEyMzQ1Njc4OWFiY2RlZg==$...'
    >>> verify("s3cret", stored), verify("S3cret", stored)
    (True, False)
    """
    salt = salt if salt is not None else secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    encode = base64.b64encode
    return f"${SCHEME}${iterations}${encode(salt).decode()}${encode(digest).decode()}"


def verify(password: str, stored: str) -> bool:
    """Whether ``password`` matches ``stored`` (constant-time comparison)."""
    parts = stored.split("$")
    if len(parts) != 5 or parts[1] != SCHEME:
        return False
    salt, expected = base64.b64decode(parts[3]), base64.b64decode(parts[4])
    actual = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, int(parts[2]))
    return hmac.compare_digest(actual, expected)


def read_users(path: Path) -> dict[str, str]:
    """``{user: stored hash}`` of the file (missing file: none)."""
    if not path.exists():
        return {}
    users: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.strip()
        if text and not text.startswith("#") and ":" in text:
            name, _, stored = text.rpartition(":")
            users[name] = stored
    return users


def check_user_name(name: str) -> str:
    """``name`` when it can be a line's user name, else one sentence."""
    if not name or _FORBIDDEN & set(name) or name.startswith("#"):
        raise ServeSetupError(
            f"The user name {name!r} cannot be stored: use a non-empty name without ':', spaces "
            "or line breaks that does not start with '#'."
        )
    return name


def set_user(path: Path, name: str, password: str, iterations: int = ITERATIONS) -> None:
    """Add ``name`` or change its password."""
    if not password:
        raise ServeSetupError(f"The password for {name!r} is empty; give a non-empty one.")
    users = read_users(path)
    users[check_user_name(name)] = hash_password(password, iterations)
    _write(path, users)


def remove_user(path: Path, name: str) -> None:
    users = read_users(path)
    if name not in users:
        raise ServeSetupError(
            f"The password file {path} has no user {name!r}; its users: "
            f"{', '.join(sorted(users)) or 'none'}."
        )
    del users[name]
    _write(path, users)


def _write(path: Path, users: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    header = "# sparkext-sql serve users: name:$pbkdf2-sha256$iterations$salt$hash\n"
    body = "".join(f"{name}:{stored}\n" for name, stored in sorted(users.items()))
    handle, temporary = tempfile.mkstemp(prefix=".users-", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(header + body)
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
