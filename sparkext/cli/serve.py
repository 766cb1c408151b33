"""``sparkext-sql serve``: Spark's Thrift JDBC/ODBC server with sparkext's SQL in every session.

beeline, JDBC tools (DBeaver, DataGrip, Superset through PyHive) and Python HiveServer2 clients
connect with ``jdbc:hive2://HOST:PORT/default`` and run ``CALL sparkext.*``, ``FROM
sparkext.*()`` and any Spark or Iceberg SQL. Library: click (options). Ctrl-C or SIGTERM stops.

Security (docs/guides/serve-security.md): ``--auth password`` checks a file of salted hashes that
``--add-user`` writes, ``--auth ldap`` HiveServer2's LDAP provider; ``--tls-keystore`` turns on
TLS. A server that listens beyond this machine without authentication is refused unless
``--insecure`` says so, and its clients may call only read-only routines unless a policy
(``spark.sparkext.policy``) grants more.

Floor: top (command line).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import socket
import sys
import threading
from pathlib import Path

import click

from sparkext.cli.common import fail, overrides_of
from sparkext.cli.streaming import cli_session, inherited_options, spark_options
from sparkext.conf import load_defaults
from sparkext.errors import EnvironmentSetupError, ServeSetupError
from sparkext.resources import resource_dir
from sparkext.routing.in_spark import ANSWERS
from sparkext.security import audit
from sparkext.security.guard import serve_networked
from sparkext.security.passwords import read_users, remove_user, set_user
from sparkext.spark.extension import SYNC_EXECUTION, port_free, start_thrift_server
from sparkext.spark.settings import setting

DEFAULT_PASSWORD_FILE = Path("~/.sparkext/serve-users")
KEYSTORE_PASSWORD_ENV = "SPARKEXT_SERVE_KEYSTORE_PASSWORD"
PASSWORD_FILE_PROPERTY = "sparkext.serve.password-file"
PASSWORD_PROVIDER = "io.sparkext.spark.PasswordFile"
# HiveServer2 settings that hold a secret: JVM system properties only, never a session's conf
# (a client's SET would print it).
SECRET_KEYS = frozenset({"hive.server2.keystore.password"})


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is this machine's loopback.

    >>> is_loopback("localhost"), is_loopback("127.0.0.1"), is_loopback("0.0.0.0")
    (True, True, False)
    """
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


def hive_settings(
    auth: str,
    password_file: Path | None,
    ldap: dict[str, str | None],
    keystore: Path | None,
    keystore_password: str | None,
) -> dict[str, str]:
    """The HiveServer2 settings (and sparkext's system property) for the chosen security.

    >>> hive_settings("password", Path("/u"), {}, None, None)["hive.server2.authentication"]
    'CUSTOM'
    >>> sorted(hive_settings("ldap", None, {"url": "ldap://h", "baseDN": "dc=x"}, None, None))
    ['hive.server2.authentication', 'hive.server2.authentication.ldap.baseDN', \
'hive.server2.authentication.ldap.url']
    """
    settings: dict[str, str] = {}
    if auth == "password":
        assert password_file is not None
        settings["hive.server2.authentication"] = "CUSTOM"
        settings["hive.server2.custom.authentication.class"] = PASSWORD_PROVIDER
        settings[PASSWORD_FILE_PROPERTY] = str(password_file)
    elif auth == "ldap":
        settings["hive.server2.authentication"] = "LDAP"
        for key, value in ldap.items():
            if value:
                settings[f"hive.server2.authentication.ldap.{key}"] = value
    else:
        settings["hive.server2.authentication"] = "NONE"
    if keystore is not None:
        settings["hive.server2.use.SSL"] = "true"
        settings["hive.server2.keystore.path"] = str(keystore)
        settings["hive.server2.keystore.password"] = keystore_password or ""
    return settings


def check_security(
    host: str,
    auth: str,
    insecure: bool,
    password_file: Path,
    ldap_url: str | None,
    keystore: Path | None,
    keystore_password: str | None,
) -> None:
    """One sentence for a setting that would start an unsafe or broken server."""

    if auth == "none" and not insecure and not is_loopback(host):
        raise ServeSetupError(
            f"sparkext-sql serve would listen on {host} (beyond this machine) without "
            "authentication, so anyone who reaches the port could run any SQL; add --auth "
            "password (users from sparkext-sql serve --add-user NAME) or --auth ldap, or pass "
            "--insecure to accept that."
        )
    if auth == "password" and not read_users(password_file):
        raise ServeSetupError(
            f"--auth password needs users but the password file {password_file} has none; add "
            "one with sparkext-sql serve --add-user NAME (or point --password-file at yours)."
        )
    if auth == "ldap" and not ldap_url:
        raise ServeSetupError(
            "--auth ldap needs the directory's address; add --ldap-url ldap://HOST:389 (and "
            "--ldap-base-dn or --ldap-user-dn-pattern)."
        )
    if keystore is not None:
        if not keystore.is_file():
            raise ServeSetupError(
                f"The TLS keystore {keystore} does not exist; create one with keytool "
                "-genkeypair (docs: serve security) or fix --tls-keystore."
            )
        if not keystore_password:
            raise ServeSetupError(
                f"The TLS keystore needs its password; put it in a file for "
                f"--tls-keystore-password-file or in ${KEYSTORE_PASSWORD_ENV}."
            )


def _read_new_password(name: str) -> str:
    if sys.stdin.isatty():
        return str(click.prompt(f"Password for {name}", hide_input=True, confirmation_prompt=True))
    line = sys.stdin.readline()
    return line.rstrip("\r\n")


def manage_users(password_file: Path, add: str | None, remove: str | None) -> None:

    if add is not None:
        password = _read_new_password(add)
        set_user(password_file, add, password)
        click.echo(f"{add} can log in (password file {password_file}).", err=True)
    if remove is not None:
        remove_user(password_file, remove)
        click.echo(f"{remove} removed from {password_file}.", err=True)


def _keystore_password(path: Path | None) -> str | None:
    if path is not None:
        try:
            return path.read_text(encoding="utf-8").strip()
        except OSError as error:
            raise ServeSetupError(
                f"The keystore password file {path} cannot be read ({error.strerror}); fix "
                "--tls-keystore-password-file."
            ) from None
    return os.environ.get(KEYSTORE_PASSWORD_ENV) or None


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@spark_options
@click.option("--port", default=10000, show_default=True, help="The port clients connect to.")
@click.option(
    "--host",
    default="localhost",
    show_default=True,
    help="The address to listen on (0.0.0.0: every interface; needs --auth or --insecure).",
)
@click.option(
    "--auth",
    type=click.Choice(["none", "password", "ldap"]),
    default="none",
    show_default=True,
    help="How clients log in: users of --password-file, or an LDAP directory.",
)
@click.option(
    "--password-file",
    type=click.Path(path_type=Path),
    default=None,
    help=f"The users of --auth password [default: spark.sparkext.serve.password-file, else "
    f"{DEFAULT_PASSWORD_FILE}].",
)
@click.option("--add-user", metavar="NAME", help="Add a user (or change its password) and exit.")
@click.option("--remove-user", metavar="NAME", help="Remove a user from the password file, exit.")
@click.option("--ldap-url", help="--auth ldap: the directory, e.g. ldap://ldap.example.com:389.")
@click.option("--ldap-base-dn", help="--auth ldap: users are uid=NAME,<this>.")
@click.option("--ldap-domain", help="--auth ldap: users bind as NAME@<this> (Active Directory).")
@click.option(
    "--ldap-user-dn-pattern",
    help="--auth ldap: DN patterns with %s for the name, ':'-separated.",
)
@click.option(
    "--tls-keystore",
    type=click.Path(path_type=Path),
    help="Serve over TLS with this JKS/PKCS12 keystore (the server's key and certificate).",
)
@click.option(
    "--tls-keystore-password-file",
    type=click.Path(path_type=Path),
    help=f"A file holding the keystore's password [default: ${KEYSTORE_PASSWORD_ENV}].",
)
@click.option(
    "--insecure",
    is_flag=True,
    help="Listen beyond this machine without authentication (anyone reaching the port).",
)
def serve(
    confs,
    master,
    verbose,
    port: int,
    host: str,
    auth: str,
    password_file: Path | None,
    add_user: str | None,
    remove_user: str | None,
    ldap_url: str | None,
    ldap_base_dn: str | None,
    ldap_domain: str | None,
    ldap_user_dn_pattern: str | None,
    tls_keystore: Path | None,
    tls_keystore_password_file: Path | None,
    insecure: bool,
) -> None:
    """Serve sparkext over JDBC/ODBC (HiveServer2 protocol): jdbc:hive2://HOST:PORT/default."""

    confs, master, verbose = inherited_options(confs, master, verbose)
    overrides = overrides_of(confs, master)
    users = (password_file or _configured_password_file(overrides)).expanduser().resolve()
    if add_user is not None or remove_user is not None:
        try:
            manage_users(users, add_user, remove_user)
        except Exception as error:
            fail(error, verbose)
        sys.exit(0)
    try:
        keystore = tls_keystore.expanduser().resolve() if tls_keystore else None
        keystore_password = _keystore_password(tls_keystore_password_file)
        # Spark's JVM is started from this environment: a client could read it there.
        os.environ.pop(KEYSTORE_PASSWORD_ENV, None)
        check_security(host, auth, insecure, users, ldap_url, keystore, keystore_password)
    except ServeSetupError as error:
        fail(error, verbose)
    if not port_free(host, port):
        fail(
            EnvironmentSetupError(
                f"Port {port} on {host} is already in use; stop what listens there or pick "
                "another with --port."
            ),
            verbose,
        )
    ldap = {
        "url": ldap_url,
        "baseDN": ldap_base_dn,
        "Domain": ldap_domain,
        "userDNPattern": ldap_user_dn_pattern,
    }
    security = hive_settings(auth, users, ldap, keystore, keystore_password)
    hive = {k: v for k, v in overrides.items() if k.startswith("hive.server2.")}
    spark = cli_session({**SYNC_EXECUTION, **overrides}, verbose)
    networked = not is_loopback(host)
    if networked:
        serve_networked()
    try:
        server = start_thrift_server(spark, ANSWERS, host, port, {**hive, **security})
    except Exception as error:
        fail(error, verbose)
    stopped = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopped.set())
    click.echo(_banner(server.url, auth, keystore is not None, networked, spark), err=True)
    while not stopped.wait(0.5):
        pass
    server.stop()
    _flush_audit(spark)
    click.echo("stopped.", err=True)
    sys.exit(0)


def _configured_password_file(overrides: dict[str, str]) -> Path:

    key = "spark.sparkext.serve.password-file"
    if key in overrides:
        return Path(overrides[key])
    try:
        configured = load_defaults(resource_dir("conf")).get(key)
    except Exception:  # a broken conf is reported when the session starts
        configured = None
    return Path(configured) if configured else DEFAULT_PASSWORD_FILE


def _banner(url: str, auth: str, tls: bool, networked: bool, spark) -> str:

    shown = url + (";ssl=true" if tls else "")
    login = {"none": "no login", "password": "password file", "ldap": "LDAP"}[auth]
    policy = setting(spark, "spark.sparkext.policy")
    if policy:
        rights = f"policy {policy}"
    elif networked:
        rights = "read-only routines (no spark.sparkext.policy)"
    else:
        rights = "every routine (no spark.sparkext.policy)"
    return (
        f"sparkext Thrift server on {shown} ({login}{', TLS' if tls else ''}; {rights}); "
        f"beeline -u '{shown}'; Ctrl-C stops."
    )


def _flush_audit(spark) -> None:

    with contextlib.suppress(Exception):  # the audit log never fails what it records
        audit.flush(spark)


COMMANDS = {"serve": serve}
