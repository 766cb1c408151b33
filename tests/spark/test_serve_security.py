"""``sparkext-sql serve`` safe to expose (issue 53): real clients (beeline, PyHive) log in with a
password over TLS or through a real LDAP directory (OpenLDAP's slapd, started here), are refused
without one, and the routine policy refuses calls in one sentence on a networked server."""

from __future__ import annotations

import os
import shutil
import signal
import ssl
import subprocess
import time
from pathlib import Path

import pytest

from sparkext.security import passwords
from tests.helpers.serve import free_port, launch, ready, stop
from tests.spark.test_thrift_server import BIN, lines

pytestmark = pytest.mark.slow
SLAPD = Path("/usr/sbin/slapd")


def keystores(tmp: Path) -> dict[str, Path]:
    """A server key and certificate (PKCS12) and a client trust store holding the certificate."""
    keytool = shutil.which("keytool") or str(
        Path(os.environ.get("JAVA_HOME", "/usr")) / "bin/keytool"
    )
    out = {"keystore": tmp / "server.p12", "cert": tmp / "server.pem", "trust": tmp / "trust.p12"}
    run = lambda *args: subprocess.run([keytool, *args], check=True, capture_output=True)  # noqa: E731
    run("-genkeypair", "-alias", "sparkext", "-keyalg", "RSA", "-keysize", "2048", "-validity",
        "2", "-dname", "CN=localhost", "-ext", "SAN=dns:localhost,ip:127.0.0.1", "-keystore",
        str(out["keystore"]), "-storetype", "PKCS12", "-storepass", "server-secret", "-keypass",
        "server-secret", "-noprompt")  # fmt: skip
    run("-exportcert", "-alias", "sparkext", "-keystore", str(out["keystore"]), "-storepass",
        "server-secret", "-rfc", "-file", str(out["cert"]))  # fmt: skip
    run("-importcert", "-alias", "sparkext", "-file", str(out["cert"]), "-keystore",
        str(out["trust"]), "-storetype", "PKCS12", "-storepass", "trust-secret",
        "-noprompt")  # fmt: skip
    return out


POLICY = """
default = "none"
[groups]
admins = ["alice"]
[[grant]]
to = ["group:admins"]
routines = ["*"]
[[grant]]
to = ["bob"]
routines = ["read-only"]
"""


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    """A networked server (0.0.0.0) with a password file, TLS and a policy: alice may call
    everything, bob read-only routines, nobody else anything."""
    tmp = tmp_path_factory.mktemp("secure-serve")
    stores = keystores(tmp)
    users = tmp / "users"
    passwords.set_user(users, "alice", "alice-pw-7")
    passwords.set_user(users, "bob", "bob-pw-8")
    (tmp / "keystore-password").write_text("server-secret\n")
    policy = tmp / "policy.toml"
    policy.write_text(POLICY)
    warehouse = tmp / "warehouse"
    served = ready(launch(
        tmp, warehouse, "--host", "0.0.0.0", "--auth", "password", "--password-file", str(users),
        "--tls-keystore", str(stores["keystore"]),
        "--tls-keystore-password-file", str(tmp / "keystore-password"),
        "--conf", f"spark.sparkext.policy={policy}",
    ))  # fmt: skip
    port = served.port
    url = f"jdbc:hive2://localhost:{port}/default;ssl=true;sslTrustStore={stores['trust']};"
    url += "trustStorePassword=trust-secret"
    yield {"port": port, "url": url, "log": served.log, "stores": stores, "policy": policy}
    stop(served)


def beeline(url: str, sql: str, *login: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "beeline"), "-u", url, *login, "--silent=true", "--outputformat=csv2",
         "-e", sql],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def pyhive_tls(port: int, cert: Path, user: str, password: str):
    """PyHive over TLS: its own transport over Thrift's TLS socket, SASL PLAIN as beeline."""
    from pyhive import hive
    from pyhive.sasl_compat import PureSASLClient
    from thrift.transport.TSSLSocket import TSSLSocket
    from thrift_sasl import TSaslClientTransport

    socket = TSSLSocket("localhost", port, ssl_context=ssl.create_default_context(cafile=cert))
    sasl = lambda: PureSASLClient("localhost", mechanism="PLAIN", username=user, password=password)  # noqa: E731
    return hive.connect(thrift_transport=TSaslClientTransport(sasl, "PLAIN", socket)).cursor()


def test_clients_log_in_with_a_password_over_tls_and_are_refused_without(secure):
    ok = beeline(secure["url"], "SELECT current_user() AS u", "-n", "alice", "-p", "alice-pw-7")
    assert ok.returncode == 0, ok.stderr
    assert lines(ok.stdout) == ["u", "alice"]
    for login in (("-n", "alice", "-p", "wr0ng-guess"), ("-n", "mallory", "-p", "x"), ()):
        refused = beeline(secure["url"], "SELECT 1", *login)
        assert refused.returncode != 0
        said = refused.stdout + refused.stderr
        assert "Peer indicated failure: Error validating the login" in said, said
        assert "\tat " not in said and "Exception" not in said, said
    plain = beeline(f"jdbc:hive2://localhost:{secure['port']}/default", "SELECT 1",
                    "-n", "alice", "-p", "alice-pw-7")  # fmt: skip
    assert plain.returncode != 0  # a client without TLS gets no session
    cursor = pyhive_tls(secure["port"], secure["stores"]["cert"], "bob", "bob-pw-8")
    cursor.execute("SELECT current_user()")
    assert cursor.fetchall() == [("bob",)]
    from thrift.transport.TTransport import TTransportException

    with pytest.raises(TTransportException, match="Error validating the login"):
        pyhive_tls(secure["port"], secure["stores"]["cert"], "bob", "alice-pw-7")
    # the server's environment and system properties are out of a client's reach
    from pyhive import exc

    for variable in ("${system:hive.server2.keystore.password}", "${ENV:HOME}", "${ system:x}"):
        with pytest.raises(exc.OperationalError) as refused:
            cursor.execute(f"SELECT '{variable}' AS v")
        message = refused.value.args[0].status.errorMessage.removeprefix("Error running query: ")
        assert message == (
            "A JDBC client's statement cannot read the server's environment or system properties"
            " (${env:...}, ${system:...}): they hold its secrets; pass a value with SET"
            " hivevar:name=value and write ${name}."
        )
    cursor.execute("SET hivevar:day=2026-12-07")
    cursor.execute("SELECT '${day}' AS v, '${hiveconf:hive.server2.keystore.password}' AS k")
    assert cursor.fetchall()[0][0] == "2026-12-07"  # the client's own variables still work
    log = secure["log"].read_text()
    for secret in ("alice-pw-7", "bob-pw-8", "server-secret", "wr0ng-guess"):
        assert secret not in log
    assert "login refused for user 'mallory'" in log and "(no such user)" in log


def test_the_policy_refuses_calls_in_one_sentence_and_changes_nothing(secure):
    alice = pyhive_tls(secure["port"], secure["stores"]["cert"], "alice", "alice-pw-7")
    bob = pyhive_tls(secure["port"], secure["stores"]["cert"], "bob", "bob-pw-8")
    alice.execute("CREATE TABLE IF NOT EXISTS lake.db.guarded (id bigint) USING iceberg")
    for i in range(3):
        alice.execute(f"INSERT INTO lake.db.guarded VALUES ({i})")
    alice.execute("SELECT count(*) FROM lake.db.guarded.snapshots")
    snapshots = alice.fetchall()
    from pyhive import exc

    refusals = {
        "CALL sparkext.tiered_optimize(table => 'lake.db.guarded')": "sparkext.tiered_optimize",
        "CALL lake.system.rewrite_data_files(table => 'db.guarded')": "system.rewrite_data_files",
        "CALL sparkext.health_report(tables => 'lake.db.*')": "sparkext.health_report",
    }
    for sql, routine in refusals.items():
        with pytest.raises(exc.OperationalError) as refused:
            bob.execute(sql)
        message = refused.value.args[0].status.errorMessage.removeprefix("Error running query: ")
        assert message == (
            f"User 'bob' may not call {routine}: {secure['policy']} grants bob read-only routines "
            "only; ask whoever keeps the policy for a grant."
        )
    bob.execute("SELECT data_files FROM sparkext.table_health('lake.db.guarded')")
    assert bob.fetchall() == [(3,)]
    bob.execute("CALL sparkext.health_report(tables => 'lake.db.*', record => false)")
    alice.execute("SELECT count(*) FROM lake.db.guarded.snapshots")
    assert alice.fetchall() == snapshots  # nothing bob tried changed the table
    alice.execute("CALL sparkext.tiered_optimize(table => 'lake.db.guarded', levels => 'l0')")
    assert alice.fetchall()[0][-1] is None  # its error column: the merge ran
    deadline = time.monotonic() + 60
    while True:  # the server appends its audit rows every second
        alice.execute("REFRESH TABLE lake.sparkext.audit_log")  # the session caches the table
        alice.execute(
            "SELECT user, routine, outcome, client FROM lake.sparkext.audit_log "
            "WHERE route = 'serve' AND user IN ('alice', 'bob')"
        )
        rows = alice.fetchall()
        if any(tuple(r[:3]) == ("alice", "sparkext.tiered_optimize", "ok") for r in rows):
            break
        if time.monotonic() > deadline:
            break
        time.sleep(1)
    refused_rows = {(u, r) for u, r, o, _ in rows if o == "refused"}
    assert refused_rows == {
        ("bob", "sparkext.tiered_optimize"),
        ("bob", "lake.system.rewrite_data_files"),
        ("bob", "sparkext.health_report"),
    }, rows
    assert ("alice", "sparkext.tiered_optimize", "ok") in {(u, r, o) for u, r, o, _ in rows}
    assert all(client for *_, client in rows)  # the client's address


@pytest.fixture(scope="module")
def directory(tmp_path_factory):
    """A real OpenLDAP server with one user, uid=carol,ou=people,dc=example,dc=org."""
    if not SLAPD.exists():
        pytest.fail("OpenLDAP's slapd is not installed; run .ci/setup (apt-get install slapd).")
    tmp = tmp_path_factory.mktemp("ldap")
    (tmp / "db").mkdir()
    port = free_port()
    (tmp / "slapd.conf").write_text(
        "include /etc/ldap/schema/core.schema\ninclude /etc/ldap/schema/cosine.schema\n"
        "include /etc/ldap/schema/inetorgperson.schema\nmodulepath /usr/lib/ldap\n"
        f"moduleload back_mdb\npidfile {tmp}/slapd.pid\ndatabase mdb\nmaxsize 10485760\n"
        'suffix "dc=example,dc=org"\nrootdn "cn=admin,dc=example,dc=org"\nrootpw admin-pw\n'
        f"directory {tmp}/db\n"
    )
    (tmp / "users.ldif").write_text(
        "dn: dc=example,dc=org\nobjectClass: dcObject\nobjectClass: organization\no: example\n"
        "dc: example\n\ndn: ou=people,dc=example,dc=org\nobjectClass: organizationalUnit\n"
        "ou: people\n\ndn: uid=carol,ou=people,dc=example,dc=org\nobjectClass: inetOrgPerson\n"
        "uid: carol\ncn: Carol\nsn: C\nuserPassword: carol-ldap-pw\n"
    )
    conf = str(tmp / "slapd.conf")
    subprocess.run(["/usr/sbin/slapadd", "-f", conf, "-l", str(tmp / "users.ldif")], check=True,
                   capture_output=True)  # fmt: skip
    subprocess.run([str(SLAPD), "-f", conf, "-h", f"ldap://127.0.0.1:{port}/"], check=True)
    yield f"ldap://127.0.0.1:{port}"
    pid = (tmp / "slapd.pid").read_text().strip()
    os.kill(int(pid), signal.SIGTERM)


def test_ldap_users_log_in_through_hiveserver2s_provider(directory, tmp_path):
    served = ready(launch(
        tmp_path, tmp_path / "warehouse", "--auth", "ldap", "--ldap-url", directory,
        "--ldap-base-dn", "ou=people,dc=example,dc=org",
    ))  # fmt: skip
    log, port = served.log, served.port
    try:
        url = f"jdbc:hive2://localhost:{port}/default"
        ok = beeline(url, "SELECT current_user() AS u", "-n", "carol", "-p", "carol-ldap-pw")
        assert ok.returncode == 0, ok.stderr
        assert lines(ok.stdout) == ["u", "carol"]
        refused = beeline(url, "SELECT 1", "-n", "carol", "-p", "not-it")
        assert refused.returncode != 0
        assert "Error validating the login" in refused.stdout + refused.stderr
        assert "carol-ldap-pw" not in log.read_text() and "not-it" not in log.read_text()
    finally:
        stop(served)
