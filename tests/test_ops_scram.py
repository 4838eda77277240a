"""``metaquorum scram`` against a real ``metaquorum serve`` voter: set from a
password file and from stdin (salted by the CLI, as kafka-configs does), list
(table and --json), delete, and the refusals with their exit codes; the
password on no command line and in no output."""

from __future__ import annotations

import json
import subprocess
import sys

PASSWORD = "correct horse battery staple"


def mq(*args, url, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", "scram", *args, "--url", url],
        capture_output=True, text=True, timeout=60, input=stdin,
    )  # fmt: skip


def test_set_list_delete(voter, tmp_path):
    url = voter.url(0)
    secret = tmp_path / "password"
    secret.write_text(PASSWORD + "\n")
    r = mq(
        "set", "--user", "alice", "--password-file", str(secret), "--iterations", "8192", url=url
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "set SCRAM-SHA-256 credential of user alice (8192 iterations)"
    r = mq("set", "--user", "alice", "--mechanism", "SCRAM-SHA-512", "--password-file", "-",
           url=url, stdin=PASSWORD + "\n")  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = mq("list", url=url)
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()[2:] if line.strip()]
    assert ["alice", "SCRAM-SHA-256", "8192"] in rows
    assert ["alice", "SCRAM-SHA-512", "4096"] in rows
    r = mq("list", "--user", "alice", "--json", url=url)
    assert r.returncode == 0, r.stderr
    [result] = json.loads(r.stdout)["results"]
    assert result["credentialInfos"] == [
        {"mechanism": 1, "iterations": 8192},
        {"mechanism": 2, "iterations": 4096},
    ]
    r = mq("delete", "--user", "alice", "--mechanism", "SCRAM-SHA-512", "--json", url=url)
    assert r.returncode == 0 and json.loads(r.stdout)["errorName"] == "NONE", r.stderr
    r = mq("list", "--user", "alice", "--user", "nobody", url=url)
    assert r.returncode == 1
    assert (
        "RESOURCE_NOT_FOUND: Attempt to describe a user credential that does not exist: nobody"
        in r.stderr
    )
    assert "SCRAM-SHA-512" not in r.stdout and "SCRAM-SHA-256" in r.stdout
    for out in (r.stdout, r.stderr):
        assert PASSWORD not in out


def test_refusals_and_exit_codes(voter, tmp_path):
    url = voter.url(0)
    secret = tmp_path / "password"
    secret.write_text(PASSWORD)
    r = mq("delete", "--user", "nobody", url=url)
    assert r.returncode == 1
    assert r.stderr == (
        "metaquorum: RESOURCE_NOT_FOUND: Attempt to delete a user credential that does not exist\n"
    )
    r = mq("set", "--user", "bob", url=url)
    assert r.returncode == 2 and "--password-file" in r.stderr
    r = mq("set", "--user", "bob", "--password-file", str(tmp_path / "missing"), url=url)
    assert r.returncode == 2 and "cannot read it" in r.stderr
    empty = tmp_path / "empty"
    empty.write_text("\n")
    r = mq("set", "--user", "bob", "--password-file", str(empty), url=url)
    assert r.returncode == 2 and "first line is empty" in r.stderr
    r = mq("set", "--user", "bob", "--password-file", str(secret), "--iterations", "100", url=url)
    assert r.returncode == 2 and "outside [4096, 16384]" in r.stderr
    r = mq("set", "--password-file", str(secret), url=url)
    assert r.returncode == 2 and "exactly one --user" in r.stderr
    r = mq("set", "--user", "bob", "--password", PASSWORD, url=url)
    assert r.returncode == 2  # there is no such flag
    r = mq("set", "--user", "", "--password-file", str(secret), url=url)
    assert r.returncode == 1 and "UNACCEPTABLE_CREDENTIAL: Username must not be empty" in r.stderr
