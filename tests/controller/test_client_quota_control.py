"""AlterClientQuotas in the pure controller, after Kafka's
ClientQuotaControlManagerTest (invalid entities, invalid keys, alter and
remove, every entity type, key validation), plus validateOnly, duplicates,
the record cap and a failover."""

import pytest

from controller.messages import (
    AlterClientQuotasRequest,
    ClientQuotaAlteration,
    ClientQuotaOp,
)
from controller.record_cap import MAX_RECORDS_PER_USER_OP
from metadata_records.client_quotas import (
    CLIENT_ID,
    IP,
    USER,
    USER_CLIENT_KEYS,
    entity_problem,
    ip_problem,
    keys_for,
    value_problem,
)
from metadata_records.errors import Errors
from metadata_records.records import ClientQuotaRecord, EntityData
from tests.harness import ControllerHarness

PRODUCER, CONSUMER = "producer_byte_rate", "consumer_byte_rate"
REQUEST, MUTATION = "request_percentage", "controller_mutation_rate"
CONNECTIONS = "connection_creation_rate"


@pytest.fixture
def h():
    return ControllerHarness()


def entry(entity: dict, **ops) -> ClientQuotaAlteration:
    """``ops``: key -> value, or None to remove."""
    return ClientQuotaAlteration(
        tuple(entity.items()),
        tuple(
            ClientQuotaOp(k, 0.0, True) if v is None else ClientQuotaOp(k, float(v))
            for k, v in ops.items()
        ),
    )


def alter(h, *entries, validate_only=False):
    response = h.run(AlterClientQuotasRequest(tuple(entries), validate_only))
    return [(dict(e.entity), e.error, e.error_message) for e in response.entries]


def quotas(h, entity: dict) -> dict:
    key = tuple(sorted(entity.items(), key=lambda c: [USER, CLIENT_ID, IP].index(c[0])))
    return h.image.client_quotas.get(key, {})


def record(entity, key, value=0.0, remove=False):
    return ClientQuotaRecord(
        entity=tuple(EntityData(t, n) for t, n in entity), key=key, value=value, remove=remove
    )


# ------------------------------------------------------------ Kafka's tests


@pytest.mark.parametrize(
    ("entity", "message"),
    [
        ({"foo": "bar"}, "Unhandled client quota entity type: foo"),
        ({None: "null"}, "Unhandled client quota entity type: None"),
        ({USER: "user-1", "foo": "bar"}, "Unhandled client quota entity type: foo"),
        ({"foo": "bar", IP: "1.2.3.4"}, "Unhandled client quota entity type: foo"),
        (
            {USER: "user-1", IP: "1.2.3.4"},
            "Invalid quota entity combination, IP entity shouldnot be combined with User "
            "or ClientId",
        ),
        (
            {CLIENT_ID: "user-1", IP: "1.2.3.4"},
            "Invalid quota entity combination, IP entity shouldnot be combined with User "
            "or ClientId",
        ),
        ({}, "Invalid empty client quota entity"),
        ({USER: ""}, "Empty user not supported"),
        ({IP: "example.invalid"}, "example.invalid is not a valid IP or resolvable host."),
    ],
)
def test_invalid_entity_types(h, entity, message):
    """testInvalidEntityTypes (and an empty name, an unresolvable ip)."""
    before = h.image.next_offset
    assert alter(h, entry(entity, producer_byte_rate=10000)) == [
        (entity, Errors.INVALID_REQUEST, message)
    ]
    assert h.last.records == () and h.image.next_offset == before


def test_a_repeated_entity_type_is_refused(h):
    duplicate = ClientQuotaAlteration(((USER, "a"), (USER, "b")), (ClientQuotaOp(PRODUCER, 1.0),))
    response = h.run(AlterClientQuotasRequest((duplicate,)))
    assert [(e.error, e.error_message) for e in response.entries] == [
        (Errors.INVALID_REQUEST, "Invalid client quota entity, duplicate entity entry user")
    ]
    assert h.last.records == ()


@pytest.mark.parametrize(
    "ops",
    [
        {"not.a.quota.key": 0.0, REQUEST: 99.9},
        {REQUEST: 99.9, "not.a.quota.key": 0.0},
        {CONNECTIONS: 10},  # an ip key on a user
    ],
)
def test_invalid_quota_keys(h, ops):
    """testInvalidQuotaKeys: one bad key refuses the entity, nothing is written."""
    [(_, error, message)] = alter(h, entry({USER: "user-1"}, **ops))
    assert error is Errors.INVALID_REQUEST and message.startswith("Invalid configuration key ")
    assert h.last.records == () and quotas(h, {USER: "user-1"}) == {}


def test_alter_and_remove(h):
    """testAlterAndRemove, step by step."""
    user = {USER: "user-1"}
    assert alter(h, entry(user, producer_byte_rate=10000)) == [(user, Errors.NONE, None)]
    assert quotas(h, user) == {PRODUCER: 10000.0}

    alter(h, entry(user, producer_byte_rate=10001, consumer_byte_rate=20000))
    assert quotas(h, user) == {PRODUCER: 10001.0, CONSUMER: 20000.0}

    alter(h, entry(user, producer_byte_rate=None))
    assert quotas(h, user) == {CONSUMER: 20000.0}

    # Remove a quota that is not set: success, nothing written.
    assert alter(h, entry(user, request_percentage=None)) == [(user, Errors.NONE, None)]
    assert h.last.records == () and quotas(h, user) == {CONSUMER: 20000.0}

    # The last quota removed: the entity is gone from the image.
    alter(h, entry(user, consumer_byte_rate=None))
    assert (("user", "user-1"),) not in h.image.client_quotas

    assert alter(h, entry(user, consumer_byte_rate=None)) == [(user, Errors.NONE, None)]
    assert h.last.records == ()

    # Mixed update.
    alter(
        h,
        entry(
            user,
            request_percentage=99,
            controller_mutation_rate=None,
            producer_byte_rate=10002,
            consumer_byte_rate=20001,
        ),
    )
    assert quotas(h, user) == {REQUEST: 99.0, PRODUCER: 10002.0, CONSUMER: 20001.0}
    assert h.replayed().client_quotas == h.image.client_quotas


def test_entity_types(h):
    """testEntityTypes: every kind of user/client-id entity, defaults
    included, one record each, in the canonical order user, client-id."""
    cases = [
        ({USER: "user-1", CLIENT_ID: "client-id-1"}, 50.50),
        ({USER: "user-2", CLIENT_ID: "client-id-1"}, 51.51),
        ({USER: "user-3", CLIENT_ID: "client-id-2"}, 52.52),
        ({USER: None, CLIENT_ID: "client-id-1"}, 53.53),
        ({USER: "user-1", CLIENT_ID: None}, 54.54),
        ({USER: "user-3", CLIENT_ID: None}, 55.55),
        ({USER: "user-1"}, 56.56),
        ({USER: "user-2"}, 57.57),
        ({USER: "user-3"}, 58.58),
        ({USER: None}, 59.59),
        ({CLIENT_ID: "client-id-2"}, 60.60),
    ]
    # Sent with client-id first: the records still name the user first.
    entries = [entry(dict(reversed(e.items())), request_percentage=v) for e, v in cases]
    assert all(error is Errors.NONE for _, error, _ in alter(h, *entries))
    assert list(h.last.records) == [record(tuple(e.items()), REQUEST, v) for e, v in cases]
    for e, v in cases:
        assert quotas(h, e) == {REQUEST: v}


def test_config_keys_for_each_entity_kind():
    """testConfigKeysForEntityType*: user, client-id and both take the four
    user/client keys; ip takes connection_creation_rate."""
    user_client = {PRODUCER, CONSUMER, MUTATION, REQUEST}
    assert set(keys_for(((USER, "foo"),))) == user_client
    assert set(keys_for(((CLIENT_ID, "foo"),))) == user_client
    assert set(keys_for(((USER, "foo"), (CLIENT_ID, "foo")))) == user_client
    assert set(keys_for(((IP, "127.0.0.1"),))) == {CONNECTIONS}
    assert entity_problem(()) == "Invalid empty client quota entity"
    assert ip_problem(None) is None and ip_problem("127.0.0.1") is None
    assert ip_problem("::1") is None
    assert ip_problem("example.invalid") == "example.invalid is not a valid IP or resolvable host."


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("foobar", 1.0, "Invalid configuration key foobar"),
        (PRODUCER, 0.0, "Quota producer_byte_rate must be greater than 0"),
        (CONSUMER, -2.0, "Quota consumer_byte_rate must be greater than 0"),
        (CONSUMER, 1234.0, None),
        (
            CONSUMER,
            36893488147419103232.4,
            "Proposed value for consumer_byte_rate is too large for a LONG.",
        ),
        (CONSUMER, 2.245, "consumer_byte_rate cannot be a fractional value."),
        (CONSUMER, 1235.0000001, None),
        (REQUEST, 56.62367, None),
    ],
)
def test_validate_quota_key_value(key, value, problem):
    """testValidateQuotaKeyValue*, Kafka's messages."""
    assert value_problem(USER_CLIENT_KEYS, key, value) == problem


def test_connection_creation_rate_is_a_whole_int(h):
    ip = {IP: "10.0.0.1"}
    [(_, error, message)] = alter(h, entry(ip, connection_creation_rate=2.5))
    assert (error, message) == (
        Errors.INVALID_REQUEST,
        "connection_creation_rate cannot be a fractional value.",
    )
    [(_, error, message)] = alter(h, entry(ip, connection_creation_rate=2**31))
    assert message == "Proposed value for connection_creation_rate is too large for an INT."
    assert alter(h, entry(ip, connection_creation_rate=100)) == [(ip, Errors.NONE, None)]
    assert alter(h, entry({IP: None}, connection_creation_rate=5)) == [
        ({IP: None}, Errors.NONE, None)
    ]
    assert quotas(h, ip) == {CONNECTIONS: 100.0}
    assert quotas(h, {IP: None}) == {CONNECTIONS: 5.0}


# ------------------------------------------------------------ beyond Kafka's tests


def test_each_entity_is_decided_on_its_own(h):
    good, bad = {USER: "alice"}, {USER: "bob"}
    answers = alter(h, entry(good, producer_byte_rate=1024), entry(bad, producer_byte_rate=-1))
    assert answers == [
        (good, Errors.NONE, None),
        (bad, Errors.INVALID_REQUEST, "Quota producer_byte_rate must be greater than 0"),
    ]
    assert quotas(h, good) == {PRODUCER: 1024.0} and quotas(h, bad) == {}


def test_an_unchanged_value_writes_nothing(h):
    user = {USER: "alice"}
    alter(h, entry(user, producer_byte_rate=1024))
    assert alter(h, entry(user, producer_byte_rate=1024)) == [(user, Errors.NONE, None)]
    assert h.last.records == ()


def test_validate_only_answers_the_same_and_writes_nothing(h):
    user, bad = {USER: "alice"}, {"group": "x"}
    request = (entry(user, producer_byte_rate=1024), entry(bad, producer_byte_rate=1))
    checked = alter(h, *request, validate_only=True)
    assert h.last.records == () and h.image.client_quotas == {}
    assert alter(h, *request) == checked
    assert quotas(h, user) == {PRODUCER: 1024.0}


def test_an_entity_named_twice_is_refused_whole(h):
    """Decision 108: Kafka answers the entity's error yet writes the first
    entry's records; here neither entry is written."""
    first = entry({USER: "alice", CLIENT_ID: "c"}, producer_byte_rate=1024)
    again = entry({CLIENT_ID: "c", USER: "alice"}, consumer_byte_rate=2048)
    other = entry({USER: "bob"}, producer_byte_rate=1)
    answers = alter(h, first, other, again)
    assert [(e, error) for e, error, _ in answers] == [
        ({USER: "alice", CLIENT_ID: "c"}, Errors.INVALID_REQUEST),
        ({USER: "bob"}, Errors.NONE),
    ]
    assert "Ignoring duplicate entity user=alice,client-id=c" in answers[0][2]
    assert list(h.image.client_quotas) == [((USER, "bob"),)]


def test_a_key_named_twice_refuses_the_entity(h):
    twice = ClientQuotaAlteration(
        ((USER, "alice"),), (ClientQuotaOp(PRODUCER, 1.0), ClientQuotaOp(PRODUCER, 2.0))
    )
    response = h.run(AlterClientQuotasRequest((twice,)))
    assert response.entries[0].error is Errors.INVALID_REQUEST
    assert response.entries[0].error_message == (
        "Duplicate quota key producer_byte_rate not updating quota for this entity user=alice"
    )
    assert h.last.records == ()


def test_past_the_record_cap_nothing_is_written(h):
    entries = [
        entry({USER: f"u{i}"}, producer_byte_rate=1, consumer_byte_rate=1)
        for i in range(MAX_RECORDS_PER_USER_OP // 2 + 1)
    ]
    response = h.run(AlterClientQuotasRequest(tuple(entries)))
    assert h.last.records == () and h.image.client_quotas == {}
    assert len(response.entries) == len(entries)
    assert {e.error for e in response.entries} == {Errors.POLICY_VIOLATION}


def test_a_new_leader_decides_on_the_quotas_in_the_log(h):
    user = {USER: "alice"}
    alter(h, entry(user, producer_byte_rate=1024))
    h.new_leader()
    alter(h, entry(user, producer_byte_rate=1024))
    assert h.last.records == ()  # it knows the value is set
    alter(h, entry(user, producer_byte_rate=None))
    assert h.image.client_quotas == {} == h.replayed().client_quotas
