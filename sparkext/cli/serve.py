"""``sparkext-sql serve``: Spark's Thrift JDBC/ODBC server with sparkext's SQL in every session.

beeline, JDBC tools (DBeaver, DataGrip, Superset through PyHive) and Python HiveServer2 clients
connect with ``jdbc:hive2://HOST:PORT/default`` and run ``CALL sparkext.*``, ``FROM
sparkext.*()`` and any Spark or Iceberg SQL. Library: click (options). Ctrl-C or SIGTERM stops.
"""

from __future__ import annotations

import signal
import socket
import sys
import threading

import click

from sparkext.cli.common import fail, overrides_of
from sparkext.cli.streaming import _inherited, _session, spark_options
from sparkext.errors import EnvironmentSetupError


def port_free(host: str, port: int) -> bool:
    """Whether ``host:port`` can be bound now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@spark_options
@click.option("--port", default=10000, show_default=True, help="The port clients connect to.")
@click.option(
    "--host",
    default="localhost",
    show_default=True,
    help="The address to listen on (0.0.0.0: every interface).",
)
def serve(confs, master, verbose, port: int, host: str) -> None:
    """Serve sparkext over JDBC/ODBC (HiveServer2 protocol): jdbc:hive2://HOST:PORT/default."""
    from sparkext.iceberg.extension import SYNC_EXECUTION, start_thrift_server

    confs, master, verbose = _inherited(confs, master, verbose)
    if not port_free(host, port):
        fail(
            EnvironmentSetupError(
                f"Port {port} on {host} is already in use; stop what listens there or pick "
                "another with --port."
            ),
            verbose,
        )
    spark = _session({**SYNC_EXECUTION, **overrides_of(confs, master)}, verbose)
    try:
        server = start_thrift_server(spark, host, port)
    except Exception as error:
        fail(error, verbose)
    stopped = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopped.set())
    click.echo(
        f"sparkext Thrift server on {server.url} (beeline -u {server.url}); Ctrl-C stops.",
        err=True,
    )
    while not stopped.wait(0.5):
        pass
    server.stop()
    click.echo("stopped.", err=True)
    sys.exit(0)


COMMANDS = {"serve": serve}
