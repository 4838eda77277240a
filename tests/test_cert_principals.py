"""api/cert_principals.py: the rules that map a verified client certificate
to a principal, and api/auth.py's Authenticator combining them with tokens.
A certificate here is ``getpeercert()``'s dict, as a real handshake gives it
(tests/test_tls.py checks that a real one reaches the scope in this shape)."""

import pytest

from api.auth import Authenticator, Principal, Role, parse_tokens
from api.cert_principals import CertPrincipals, PrincipalsFileError, parse_rules
from api.errors import ApiProblem
from api.tls import PEER_CERT, certificate_names


def cert(cn: str | list[str] | None = None, **sans: list[str]) -> dict:
    cns = [cn] if isinstance(cn, str) else cn or []
    out: dict = {"subject": tuple((("commonName", name),) for name in cns)}
    pairs = [(kind, v) for kind, values in sans.items() for v in values]
    if pairs:
        out["subjectAltName"] = tuple(pairs)
    return out


def scope_with(peer: dict | None) -> dict:
    return {"type": "http", "extensions": {"tls": {PEER_CERT: peer or {}}}}


DEFAULT = CertPrincipals.default()


@pytest.mark.parametrize(
    "peer,expected",
    [
        (cert("broker-3"), Principal(Role.BROKER, 3, 1, "CN=broker-3")),
        (cert("broker-0"), Principal(Role.BROKER, 0, 1, "CN=broker-0")),
        (cert("broker-2147483647"), Principal(Role.BROKER, 2147483647, 1, "CN=broker-2147483647")),
        (cert("admin-alice"), Principal(Role.ADMIN, None, 2, "CN=admin-alice")),
        (cert("read-grafana"), Principal(Role.READ, None, 3, "CN=read-grafana")),
    ],
)
def test_the_default_rules(peer, expected):
    assert DEFAULT.principal(peer) == expected


@pytest.mark.parametrize(
    "peer",
    [
        cert("broker-03"),  # a leading zero is not a broker id
        cert("broker-2147483648"),  # over int32
        cert("broker-"),
        cert("broker-3x"),
        cert("metaquorum-0"),  # a voter's server certificate
        cert("Admin-alice"),  # case matters
        cert(None, DNS=["admin-alice"]),  # the default rules read the CN only
    ],
)
def test_what_the_default_rules_map_to_no_one(peer):
    assert DEFAULT.principal(peer) is None


def test_rules_match_san_uris_and_dns_names_first_rule_first():
    rules = CertPrincipals(
        parse_rules(
            "# SPIFFE ids first\n"
            "URI=spiffe://prod.example/ns/kafka/sa/broker-{id}  broker {id}\n"
            "DNS=*.ops.example  admin\n"
            "CN=broker-7  broker 7   # a fixed binding\n"
            "CN=broker-*  broker     # unbound: may act for any broker\n"
        )
    )
    spiffe = cert("ignored", URI=["https://x", "spiffe://prod.example/ns/kafka/sa/broker-12"])
    assert rules.principal(spiffe) == Principal(
        Role.BROKER, 12, 2, "URI=spiffe://prod.example/ns/kafka/sa/broker-12"
    )
    assert rules.principal(cert(None, DNS=["alice.ops.example"])).role is Role.ADMIN
    assert rules.principal(cert("broker-7")) == Principal(Role.BROKER, 7, 4, "CN=broker-7")
    assert rules.principal(cert("broker-x")) == Principal(Role.BROKER, None, 5, "CN=broker-x")
    assert rules.principal(cert(None, DNS=["ops.example"])) is None


@pytest.mark.parametrize(
    "text,message",
    [
        ("", "no rules"),
        ("CN=a", "expected 'FIELD=PATTERN role [brokerId]', got 1 fields"),
        ("OU=a admin", "'OU=a' must start with CN=, URI= or DNS="),
        ("CN= admin", "the pattern after CN= is empty"),
        ("CN=a root", "unknown role 'root'"),
        ("CN=a admin 3", "only a broker rule can bind a brokerId"),
        ("CN=broker broker {id}", "brokerId {id} needs {id} in the pattern"),
        ("CN=b-{id}-{id} broker {id}", "{id} may appear once"),
        ("CN=b broker -1", "brokerId '-1' is neither {id} nor an integer"),
        ("CN=b broker 2147483648", "brokerId '2147483648' is neither"),
    ],
)
def test_a_bad_rules_file_is_refused_naming_the_line(text, message):
    with pytest.raises(PrincipalsFileError) as refused:
        parse_rules(text, "principals")
    assert message in str(refused.value)
    if text:
        assert "principals line 1" in str(refused.value)


# ---------------------------------------------------------------- tokens and certificates


TOKENS = parse_tokens("t-admin admin\nt-broker-5 broker 5\n")


def test_a_certificate_authenticates_without_a_token():
    auth = Authenticator(TOKENS, DEFAULT)
    who = auth.authenticate(None, Role.BROKER, scope_with(cert("broker-3")))
    assert who == Principal(Role.BROKER, 3, 1, "CN=broker-3")
    # Bound exactly as a broker token is: it acts for broker 3 only.
    auth.check_broker(who, 3)
    with pytest.raises(ApiProblem) as refused:
        auth.check_broker(who, 4)
    assert refused.value.status == 403
    assert (
        str(refused.value)
        == "the broker certificate CN=broker-3 for broker 3 may not act for broker 4"
    )


def test_a_token_decides_over_the_connections_certificate():
    auth = Authenticator(TOKENS, DEFAULT)
    scope = scope_with(cert("broker-3"))
    assert auth.identify("Bearer t-broker-5", scope) == Principal(Role.BROKER, 5, 2)
    with pytest.raises(ApiProblem) as refused:
        auth.identify("Bearer unknown", scope)
    assert refused.value.status == 401 and "unknown bearer token" in str(refused.value)


def test_a_read_certificate_cannot_write():
    auth = Authenticator(None, DEFAULT)
    with pytest.raises(ApiProblem) as refused:
        auth.authenticate(None, Role.BROKER, scope_with(cert("read-grafana")))
    assert refused.value.status == 403
    assert "the read certificate CN=read-grafana may not call this endpoint" in str(refused.value)
    assert "use a client certificate with that role" in str(refused.value)


def test_no_certificate_and_no_token_is_401_saying_what_to_send():
    with pytest.raises(ApiProblem, match=r"missing bearer token .* or a client certificate"):
        Authenticator(TOKENS, DEFAULT).identify(None, scope_with(None))
    with pytest.raises(ApiProblem, match="authenticates callers by their TLS client certificate"):
        Authenticator(None, DEFAULT).identify(None, scope_with(None))
    with pytest.raises(ApiProblem, match="this server has no tokens"):
        Authenticator(None, DEFAULT).identify("Bearer t-admin", scope_with(cert("admin-a")))


def test_a_certificate_no_rule_maps_is_401_naming_its_names():
    with pytest.raises(ApiProblem) as refused:
        Authenticator(TOKENS, DEFAULT).identify(None, scope_with(cert("someone", DNS=["x.y"])))
    message = str(refused.value)
    assert refused.value.status == 401
    assert "the client certificate (CN=someone, DNS=x.y) maps to no principal" in message
    assert "or send a bearer token" in message


def test_the_mapping_is_made_once_per_connection():
    auth = Authenticator(None, DEFAULT)
    scope = scope_with(cert("admin-a"))
    first = auth.identify(None, scope)
    scope["extensions"]["tls"][PEER_CERT] = cert("read-b")  # the same connection's dict
    assert auth.identify(None, scope) is first


def test_without_tokens_or_a_client_ca_auth_is_off():
    auth = Authenticator(None, None)
    assert not auth.enabled
    assert auth.identify(None, scope_with(cert("read-x"))).role is Role.ADMIN


# ---------------------------------------------------------------- one certificate, one principal


def refusal(rules: CertPrincipals, peer: dict) -> str:
    with pytest.raises(ApiProblem) as refused:
        Authenticator(TOKENS, rules).identify(None, scope_with(peer))
    assert refused.value.status == 403
    return str(refused.value)


def two_cn_certificate(tmp_path, first: str, second: str) -> dict:
    """A real certificate whose subject has two CNs, as getpeercert() parses it
    (``_test_decode_cert`` is the decoder getpeercert uses)."""
    import datetime as dt
    import ssl

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    from metaquorum.dev_certs import ThrowawayCA

    ca = ThrowawayCA("test CA")
    now = dt.datetime.now(dt.UTC)
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, first),
            x509.NameAttribute(NameOID.COMMON_NAME, second),
        ]
    )
    key = ec.generate_private_key(ec.SECP256R1())
    issued = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(ca.key, hashes.SHA256())
    )
    path = tmp_path / "two-cns.crt"
    path.write_bytes(issued.public_bytes(serialization.Encoding.PEM))
    return ssl._ssl._test_decode_cert(str(path))


def test_a_certificate_with_two_cns_is_refused_not_its_highest_role(tmp_path):
    """CN=read-x, CN=admin-y was admin: each CN was tried against the rules,
    and the admin rule came first."""
    peer = two_cn_certificate(tmp_path, "read-x", "admin-y")
    assert certificate_names(peer)["CN"] == ["read-x", "admin-y"]
    message = refusal(DEFAULT, peer)
    assert "the client certificate has 2 CNs (CN=read-x, CN=admin-y)" in message
    assert "one principal" in message


def test_two_cns_are_refused_even_when_they_agree():
    assert "has 2 CNs" in refusal(DEFAULT, cert(["broker-3", "broker-3"]))


@pytest.mark.parametrize(
    "peer,named",
    [
        # a role from the CN, another from a SAN
        (
            cert("admin-a", URI=["spiffe://x/broker-3"]),
            "CN=admin-a is admin, URI=spiffe://x/broker-3 is broker 3",
        ),
        # one role, two broker bindings
        (
            cert("broker-3", DNS=["broker-4.k.example"]),
            "CN=broker-3 is broker 3, DNS=broker-4.k.example is broker 4",
        ),
        # bound and unbound
        (
            cert(None, DNS=["broker-4.k.example", "any.k.example"]),
            "DNS=broker-4.k.example is broker 4, DNS=any.k.example is broker",
        ),
    ],
)
def test_names_that_map_to_different_principals_are_refused_naming_them(peer, named):
    rules = CertPrincipals(
        parse_rules(
            "URI=spiffe://x/broker-{id} broker {id}\n"
            "CN=broker-{id} broker {id}\n"
            "CN=admin-* admin\n"
            "DNS=broker-{id}.k.example broker {id}\n"
            "DNS=*.k.example broker\n"
        )
    )
    message = refusal(rules, peer)
    assert message.startswith("the client certificate maps to more than one principal: "), message
    assert named in message, message


def test_names_that_agree_are_one_principal():
    rules = CertPrincipals(
        parse_rules("URI=spiffe://x/broker-{id} broker {id}\nCN=broker-{id} broker {id}\n")
    )
    peer = cert("broker-3", URI=["spiffe://x/broker-3"], DNS=["unmapped.example"])
    assert rules.principal(peer) == Principal(Role.BROKER, 3, 1, "URI=spiffe://x/broker-3")
    auth = Authenticator(None, rules)
    assert auth.identify(None, scope_with(peer)).broker_id == 3


def test_a_token_still_decides_on_a_connection_with_an_ambiguous_certificate():
    auth = Authenticator(TOKENS, DEFAULT)
    assert (
        auth.identify("Bearer t-broker-5", scope_with(cert(["read-x", "admin-y"]))).broker_id == 5
    )
