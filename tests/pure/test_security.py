"""Issue 53's pure parts: the password file, the routine policy, the audit log's masking and
serve's refusals of unsafe settings (no Spark)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sparkext.cli.serve import check_security, hive_settings, is_loopback
from sparkext.errors import PolicyError, ServeSetupError
from sparkext.security import passwords, policy
from sparkext.security.audit import mask

pytestmark = pytest.mark.pure

POLICY = """
default = "none"

[groups]
engineers = ["alice", "bob"]

[[grant]]
to = ["group:engineers"]
routines = ["*"]

[[grant]]
to = ["carol", "user:dave"]
routines = ["read-only", "sparkext.tag_event_time_days", "system.rewrite_data_files"]
tables = ["lake.sales.*"]
"""


def test_a_password_file_holds_salted_hashes_only(tmp_path):
    users = tmp_path / "users"
    passwords.set_user(users, "alice", "correct horse", iterations=1000)
    passwords.set_user(users, "bob", "correct horse", iterations=1000)
    text = users.read_text()
    assert "correct horse" not in text
    stored = passwords.read_users(users)
    assert stored["alice"] != stored["bob"]  # a salt of its own each
    assert passwords.verify("correct horse", stored["alice"])
    assert not passwords.verify("Correct horse", stored["alice"])
    assert oct(users.stat().st_mode & 0o777) == "0o600"
    passwords.set_user(users, "alice", "new one", iterations=1000)
    assert passwords.verify("new one", passwords.read_users(users)["alice"])
    passwords.remove_user(users, "bob")
    assert set(passwords.read_users(users)) == {"alice"}
    with pytest.raises(ServeSetupError, match=r"has no user 'bob'; its users: alice\."):
        passwords.remove_user(users, "bob")
    for bad in ("", "a:b", "with space", "#x"):
        with pytest.raises(ServeSetupError, match="cannot be stored"):
            passwords.set_user(users, bad, "pw", iterations=1000)
    with pytest.raises(ServeSetupError, match="is empty"):
        passwords.set_user(users, "eve", "", iterations=1000)


def test_add_user_reads_the_password_from_standard_input(tmp_path):
    users = tmp_path / "users"
    done = subprocess.run(
        [sys.executable, "-m", "sparkext.cli.shell", "serve", "--password-file", str(users),
         "--add-user", "alice"],
        input="s3cret\n", capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == f"alice can log in (password file {users})."
    assert passwords.verify("s3cret", passwords.read_users(users)["alice"])


def test_the_policy_grants_by_user_group_routine_and_table():
    rules = policy.parse(POLICY, "/etc/sparkext/policy.toml")
    assert rules.decide("alice", "sparkext.maintain", writes=True, tables=["lake.x.y"]) is None
    assert rules.decide("bob", "system.expire_snapshots", writes=True) is None
    # carol: read-only routines, two named writers, on lake.sales.* only
    assert rules.decide("carol", "sparkext.table_health", False, ["lake.sales.o"]) is None
    assert rules.decide("dave", "sparkext.tag_event_time_days", True, ["lake.sales.o"]) is None
    assert rules.decide("carol", "system.rewrite_data_files", True, ["LAKE.SALES.o"]) is None
    assert rules.decide("carol", "sparkext.maintain", True, ["lake.sales.o"]) == (
        "/etc/sparkext/policy.toml grants carol no sparkext.maintain"
    )
    assert rules.decide("carol", "sparkext.table_health", False, ["lake.hr.pay"]) == (
        "/etc/sparkext/policy.toml grants carol sparkext.table_health only on lake.sales.*"
    )
    assert rules.decide("eve", "sparkext.help", False) == (
        "/etc/sparkext/policy.toml grants nothing to users it does not name"
    )


def test_the_default_for_unknown_users_is_read_only():
    rules = policy.parse("", "p.toml")
    assert rules.decide("anyone", "sparkext.table_health", writes=False) is None
    assert rules.decide("anyone", "sparkext.maintain", writes=True) == (
        "p.toml grants users it does not name read-only routines only"
    )
    everyone = policy.parse('default = "all"', "p.toml")
    assert everyone.decide("anyone", "sparkext.maintain", writes=True) is None
    network = policy.NETWORK_DEFAULT
    assert network.decide("x", "sparkext.help", writes=False) is None
    assert network.decide("x", "system.rewrite_data_files", writes=True) is not None


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        ("default = ", r"is not valid TOML \(.*\); fix that line\."),
        ('default = "some"', r"default = 'some' in policy p\.toml is not one of read-only"),
        ("users = 1", r"has unknown key\(s\) users; it may hold default, \[groups\]"),
        ("[[grant]]\nto = ['a']", r"Grant 1 of policy p\.toml must have to and routines"),
        ("[[grant]]\nto = 'a'\nroutines = [1]", r"grant 1's routines in policy p\.toml must be"),
        ("[[grant]]\nto = ['a']\nroutines = ['*']\nwho = 1", r"; unknown: who\."),
        ("[groups]\nx = 3", r"groups\.x in policy p\.toml must be a list"),
    ],
)
def test_a_bad_policy_is_one_sentence(text, sentence):
    with pytest.raises(PolicyError, match=sentence):
        policy.parse(text, "p.toml")


def test_an_unreadable_policy_refuses_with_its_path(tmp_path):
    with pytest.raises(PolicyError, match=r"The policy file .*nope\.toml cannot be read"):
        policy.load(str(tmp_path / "nope.toml"))


def test_secrets_are_masked_in_recorded_arguments():
    assert mask(
        "table => 'lake.db.t', options => map('database.password', 'hunter2', "
        "'database.user', 'bob', 'sasl.jaas.config', 'x', 'api_token', 'tok')"
    ) == (
        "table => 'lake.db.t', options => map('database.password', '***', "
        "'database.user', 'bob', 'sasl.jaas.config', 'x', 'api_token', '***')"
    )
    assert mask("source => 'jdbc:mysql://h/db?user=u&password=p4ss;token=zz'") == (
        "source => 'jdbc:mysql://h/db?user=u&password=***;token=***'"
    )
    assert mask("secret_key => 'abc', 'fs.s3a.access.key', 'AKIA'") == (
        "secret_key => '***', 'fs.s3a.access.key', '***'"
    )
    assert mask("table => 'it''s fine'") == "table => 'it''s fine'"


def test_a_networked_server_without_authentication_is_refused(tmp_path):
    users = tmp_path / "users"
    assert is_loopback("localhost") and not is_loopback("0.0.0.0")
    with pytest.raises(ServeSetupError) as refused:
        check_security("0.0.0.0", "none", False, users, None, None, None)
    assert str(refused.value) == (
        "sparkext-sql serve would listen on 0.0.0.0 (beyond this machine) without "
        "authentication, so anyone who reaches the port could run any SQL; add --auth password "
        "(users from sparkext-sql serve --add-user NAME) or --auth ldap, or pass --insecure to "
        "accept that."
    )
    check_security("0.0.0.0", "none", True, users, None, None, None)  # forced
    check_security("localhost", "none", False, users, None, None, None)
    with pytest.raises(ServeSetupError, match=r"has none; add one with sparkext-sql serve --add"):
        check_security("0.0.0.0", "password", False, users, None, None, None)
    with pytest.raises(ServeSetupError, match=r"--auth ldap needs the directory's address"):
        check_security("0.0.0.0", "ldap", False, users, None, None, None)
    with pytest.raises(ServeSetupError, match=r"The TLS keystore .* does not exist"):
        check_security("localhost", "none", False, users, None, tmp_path / "ks.p12", "pw")
    (tmp_path / "ks.p12").write_bytes(b"x")
    with pytest.raises(ServeSetupError, match=r"needs its password"):
        check_security("localhost", "none", False, users, None, tmp_path / "ks.p12", None)


def test_serve_refuses_a_networked_server_before_starting_spark(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "sparkext.cli.shell", "serve", "--host", "0.0.0.0", "--port",
         "10999"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().startswith("Error: sparkext-sql serve would listen on 0.0.0.0")
    assert "\n" not in done.stderr.strip() and "Traceback" not in done.stderr


def test_hive_settings_keep_ldap_and_tls_keys_as_hive_names_them(tmp_path):
    settings = hive_settings(
        "ldap",
        None,
        {"url": "ldap://h:389", "baseDN": "ou=people,dc=x", "Domain": None},
        tmp_path / "ks.p12",
        "pw",
    )
    assert settings == {
        "hive.server2.authentication": "LDAP",
        "hive.server2.authentication.ldap.url": "ldap://h:389",
        "hive.server2.authentication.ldap.baseDN": "ou=people,dc=x",
        "hive.server2.use.SSL": "true",
        "hive.server2.keystore.path": str(tmp_path / "ks.p12"),
        "hive.server2.keystore.password": "pw",
    }
