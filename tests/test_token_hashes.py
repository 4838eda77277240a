"""Tokens at rest as salted scrypt hashes: api/token_hashes.py, the token
table's one check per token (api/auth.py), ``metaquorum hash-token``, and a
hashed token used through the real app."""

import asyncio
import subprocess
import sys

import pytest

from api import create_app
from api.auth import MAX_WAITING_CHECKS, Principal, Role, TokensFileError, parse_tokens
from api.token_hashes import (
    MAX_LOG_N,
    MAX_R,
    TokenHashError,
    hash_token,
    new_token,
    parse_hash,
    token_id,
)

TOKEN = "ab12cd34.the-secret-part-of-the-token"


def test_a_hash_matches_its_token_only():
    hashed = hash_token(TOKEN, log_n=10)
    text = str(hashed)
    assert text.startswith("$scrypt$id=ab12cd34$ln=10,r=8,p=1$") and TOKEN not in text
    again = parse_hash(text)
    assert again == hashed and again.matches(TOKEN)
    assert not again.matches(TOKEN + "x") and not again.matches("ab12cd34.another-secret-value!!")
    assert hash_token(TOKEN, log_n=10).salt != hashed.salt  # salted: two hashes differ


def test_new_tokens_are_id_dot_secret():
    token = new_token()
    assert token_id(token) == token.split(".")[0] and len(token.split(".")[1]) >= 40
    assert token_id("no-dot-here") is None and token_id("x.y") is None  # id too short


@pytest.mark.parametrize(
    "text,message",
    [
        ("$scrypt$ab$", "expected $scrypt$id=ID$ln=N,r=R,p=P$SALT$HASH"),
        ("$scrypt$id=ab12cd34$ln=30,r=8,p=1$c2FsdHNhbHQ$" + "A" * 43, "ln=30 is outside"),
        ("$scrypt$id=ab$ln=14,r=8,p=1$c2FsdHNhbHQ$" + "A" * 43, "id 'ab'"),
        ("$scrypt$id=ab12cd34$ln=14,r=8,p=1$c2FsdHNhbHQ$AAAA", "the hash 32"),
    ],
)
def test_a_bad_hash_is_refused_saying_why(text, message):
    with pytest.raises(TokenHashError, match=message.replace("$", r"\$")):
        parse_hash(text)


def test_only_id_dot_secret_tokens_are_hashed():
    with pytest.raises(TokenHashError, match="must look like ID.SECRET"):
        hash_token("a-plain-token-without-an-id")
    with pytest.raises(TokenHashError, match="shorter than 16"):
        hash_token("abcd.short")


def test_the_tokens_file_mixes_plain_and_hashed_tokens():
    table = parse_tokens(f"plain-admin admin\n{hash_token(TOKEN, log_n=10)} broker 4\n")
    assert len(table) == 2
    assert table.lookup("plain-admin") == Principal(Role.ADMIN, None, 1)
    assert table.lookup(TOKEN) == Principal(Role.BROKER, 4, 2)
    assert table.lookup("ab12cd34.wrong-secret-of-the-same-id") is None
    assert table.lookup("unknownid.the-secret-part-of-the-token") is None
    with pytest.raises(TokensFileError, match=r"line 2: not a hashed token"):
        parse_tokens("plain admin\n$scrypt$broken admin\n")
    line = f"{hash_token(TOKEN, log_n=10)} read"
    with pytest.raises(TokensFileError, match="id ab12cd34 is already defined on line 1"):
        parse_tokens(f"{line}\n{line}\n")


def test_a_hashed_token_is_checked_once_then_looked_up_by_digest():
    """``prepare`` (in a thread) leaves its verdict in the table's caches,
    where every later lookup finds it without running scrypt again."""
    table = parse_tokens(f"{hash_token(TOKEN, log_n=10)} admin\n")
    wrong = "ab12cd34.not-the-secret-at-all-no"
    for token in (TOKEN, wrong):
        asyncio.run(table.prepare(token))
    assert list(table._verified.values()) == [Principal(Role.ADMIN, None, 1)]
    assert len(table._refused) == 1
    table._hashed.clear()  # no hash left to check: the answers come from the caches
    assert table.lookup(TOKEN).role is Role.ADMIN and table.lookup(wrong) is None


def test_too_many_first_checks_at_once_are_asked_to_retry():
    table = parse_tokens(f"{hash_token(TOKEN, log_n=10)} admin\n")
    from api.auth import Authenticator

    auth = Authenticator(table)

    async def flood():
        wrong = [f"ab12cd34.wrong-secret-number-{i:04d}" for i in range(MAX_WAITING_CHECKS + 8)]
        return await asyncio.gather(
            *(auth.prepare(f"Bearer {t}") for t in wrong), return_exceptions=True
        )

    outcomes = asyncio.run(flood())
    refused = [o for o in outcomes if isinstance(o, Exception)]
    assert len(refused) == 8
    assert all(o.status == 429 and o.headers["Retry-After"] == "1" for o in refused)


def test_hash_token_prints_a_line_the_server_takes(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", "hash-token", "--role", "broker", "--broker-id", "9"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    token = r.stderr.split(": ", 1)[1].strip()
    line = r.stdout.strip()
    assert line.endswith(" broker 9") and token not in line
    assert parse_tokens(line).lookup(token) == Principal(Role.BROKER, 9, 1)
    (tmp_path / "t").write_text(token + "\n")
    r = subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", "hash-token", "--role", "read",
         "--token-file", str(tmp_path / "t")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (
        r.returncode == 0
        and r.stderr == ""
        and parse_tokens(r.stdout).lookup(token).role is Role.READ
    )
    (tmp_path / "t").write_text("plain-token-without-id\n")
    r = subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", "hash-token", "--role", "read",
         "--token-file", str(tmp_path / "t")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and "must look like ID.SECRET" in r.stderr


def test_the_app_authenticates_a_hashed_token(local, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{hash_token(TOKEN)} admin\n")
    app = create_app(local.node, tokens=str(tokens))
    assert local.request(app, "GET", "/v1/brokers", token=TOKEN).status_code == 200
    r = local.request(app, "POST", "/v1/topics", token=TOKEN, json={"topics": []})
    assert r.status_code == 200, r.text
    r = local.request(app, "GET", "/v1/brokers", token="ab12cd34.a-wrong-secret-for-this-id")
    assert r.status_code == 401 and "unknown bearer token" in r.json()["errorMessage"]


# ---------------------------------------------------------------- what the tokens file accepts

SALT, HASH = "c2FsdHNhbHRzYWx0c2FsdA", "A" * 43  # 16 and 32 bytes, as hash-token prints them


@pytest.mark.parametrize(
    "field,reason",
    [
        # Another scheme's hash: its literal text must not become a token.
        ("$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA", "`$argon2id$` is not a hash"),
        ("$2b$12$abcdefghijklmnopqrstuu", "`$2b$` is not a hash"),
        ("$SCRYPT$id=ab12cd34$ln=14,r=8,p=1$" + SALT + "$" + HASH, "`$SCRYPT$` is not a hash"),
        ("$Scrypt$id=ab12cd34$ln=14,r=8,p=1$" + SALT + "$" + HASH, "in lower case"),
        ("$scrypt", "`$scrypt` is not a hash"),
        ("$scryptid=ab12cd34", "`$scryptid=ab12cd34` is not a hash"),
        ("$", "a plain token may not start with $"),
        ("$$", "a plain token may not start with $"),
        # The supported scheme, but not as hash-token prints it.
        ("$scrypt$ID=ab12cd34$ln=14,r=8,p=1$" + SALT + "$" + HASH, "not a hashed token"),
        ("$scrypt$id=ab12cd34$LN=14,r=8,p=1$" + SALT + "$" + HASH, "not a hashed token"),
        ("$scrypt$id=ab12cd34$ln=14,r=8,p=1$" + SALT + "$" + HASH + "$", "not a hashed token"),
        ("$scrypt$id=ab12cd34$ln=14,r=8,p=1$" + SALT + "$" + HASH + "=", "not a hashed token"),
        ("$scrypt$id=ab12cd34$ln=14,r=8,p=1$" + SALT + "$" + "A" * 42 + "B", "not as printed"),
    ],
)
def test_a_dollar_field_that_is_no_supported_hash_refuses_the_file(field, reason):
    """A field starting with $ is a hash or nothing: never a plain token whose
    literal text would then authenticate (``$argon2id$...`` as an admin's)."""
    with pytest.raises(TokensFileError) as refused:
        parse_tokens(f"plain-admin admin\n\n{field} admin\n", "tokens")
    message = str(refused.value)
    assert message.startswith("tokens line 3: "), message
    assert reason in message, message


def test_the_refusal_says_what_the_server_checks():
    with pytest.raises(TokensFileError) as refused:
        parse_tokens("$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA admin\n", "tokens")
    assert str(refused.value) == (
        "tokens line 1: `$argon2id$` is not a hash this server checks: only `$scrypt$...` "
        "as `metaquorum hash-token` prints it (a plain token may not start with $)"
    )


# ---------------------------------------------------------------- the parameters' safe range


@pytest.mark.parametrize(
    "params,reason",
    [
        ("ln=16,r=8,p=1", "ln=16 is outside 10..15"),  # 64 MiB a check
        ("ln=18,r=8,p=1", "ln=18 is outside 10..15"),  # 256 MiB: what was accepted
        ("ln=9,r=8,p=1", "ln=9 is outside 10..15"),
        ("ln=14,r=16,p=1", "r=16 is outside 1..8"),
        ("ln=14,r=0,p=1", "r=0 is outside 1..8"),
        ("ln=14,r=8,p=2", "p=2 is outside 1..1"),
        ("ln=14,r=8,p=0", "p=0 is outside 1..1"),
    ],
)
def test_costlier_parameters_than_the_safe_range_refuse_the_file(params, reason):
    """An unauthenticated caller who knows a token's id makes the server run
    its hash: a line may not make that cost more than 32 MiB (N <= 2**15, r <= 8)."""
    field = f"$scrypt$id=ab12cd34${params}${SALT}${HASH}"
    with pytest.raises(TokensFileError) as refused:
        parse_tokens(f"# a comment\n{field} broker 3\n", "tokens")
    message = str(refused.value)
    assert message.startswith("tokens line 2: scrypt parameters "), message
    assert reason in message and "32 MiB" in message, message


def test_the_safe_range_holds_the_default_and_its_edges():
    for log_n, r in ((10, 1), (14, 8), (15, 8)):
        field = f"$scrypt$id=ab12cd34$ln={log_n},r={r},p=1${SALT}${HASH}"
        assert parse_hash(field).log_n == log_n
    assert 128 * MAX_R * (1 << MAX_LOG_N) == 32 << 20


def test_hash_token_makes_no_hash_outside_the_safe_range(tmp_path):
    with pytest.raises(TokenHashError, match="ln=16 is outside 10..15"):
        hash_token(TOKEN, log_n=16)
    (tmp_path / "t").write_text(TOKEN)
    r = subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", "hash-token", "--role", "read",
         "--token-file", str(tmp_path / "t"), "--log-n", "16"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and r.stdout == ""
    assert "metaquorum hash-token: scrypt parameters ln=16,r=8,p=1: ln=16 is outside" in r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", "hash-token", "--role", "read",
         "--token-file", str(tmp_path / "t"), "--log-n", "12"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "$ln=12,r=8,p=1$" in r.stdout and parse_tokens(r.stdout).lookup(TOKEN)
