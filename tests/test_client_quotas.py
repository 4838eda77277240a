"""metadata_records.client_quotas: DescribeClientQuotas' filter (Kafka's
ClientQuotasRequestTest match tests, against ClientQuotasImage.describe's
rules), the broker's precedence (ClientQuotaManagerTest's
testQuotaConfigPrecedence and parsing tests, ConnectionQuotas' ip
resolution) and which records replay refuses."""

import pytest

from metadata_records.client_quotas import (
    CLIENT_ID,
    CONNECTION_CREATION_RATE,
    IP,
    LONG_MAX,
    MATCH_TYPE_DEFAULT,
    MATCH_TYPE_EXACT,
    MATCH_TYPE_SPECIFIED,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    FilterComponent,
    describe,
    entity_key,
    ip_quota_limit,
    quota_limit,
    record_problem,
)
from metadata_records.errors import ApiError, Errors
from metadata_records.records import ClientQuotaRecord, EntityData


def of_entity(t, name):
    return FilterComponent(t, MATCH_TYPE_EXACT, name)


def of_default(t):
    return FilterComponent(t, MATCH_TYPE_DEFAULT)


def of_type(t):
    return FilterComponent(t, MATCH_TYPE_SPECIFIED)


def ent(user=..., client=..., ip=...):
    parts = [(USER, user), (CLIENT_ID, client), (IP, ip)]
    return tuple((t, n) for t, n in parts if n is not ...)


# ClientQuotasRequestTest's matchUserClientEntities and matchIpEntities.
MATCH = {
    ent("user-1", "client-id-1"): 50.50,
    ent("user-2", "client-id-1"): 51.51,
    ent("user-3", "client-id-2"): 52.52,
    ent(None, "client-id-1"): 53.53,
    ent("user-1", None): 54.54,
    ent("user-3", None): 55.55,
    ent("user-1"): 56.56,
    ent("user-2"): 57.57,
    ent("user-3"): 58.58,
    ent(None): 59.59,
    ent(client="client-id-2"): 60.60,
}
QUOTAS = {e: {REQUEST_PERCENTAGE: v} for e, v in MATCH.items()}
QUOTAS[ent(ip="1.2.3.4")] = {CONNECTION_CREATION_RATE: 10.0}
QUOTAS[ent(ip="2.3.4.5")] = {CONNECTION_CREATION_RATE: 20.0}


def matched(components, strict=False):
    result = describe(QUOTAS, components, strict)
    assert not isinstance(result, ApiError), result
    return [e for e, _ in result]


def test_match_exact():
    """testDescribeClientQuotasMatchExact: every entity, named component by
    component (defaults with ofDefaultEntity), strictly, finds itself only."""
    for entity, value in MATCH.items():
        components = [of_default(t) if n is None else of_entity(t, n) for t, n in entity]
        assert describe(QUOTAS, components, strict=True) == [(entity, {REQUEST_PERCENTAGE: value})]


def test_a_strict_exact_filter_looks_its_entity_up_and_finds_what_a_scan_finds():
    """The strict, exact-only filter is answered by a key lookup: for every
    combination of named, default and absent components, the same answer as
    the other filters' scan (the filter plus one SPECIFIED type that every
    candidate holds gives the same set by scanning)."""
    names = {USER: ["user-1", "user-3", "nobody", None], CLIENT_ID: ["client-id-1", "x", None]}
    for user in [*names[USER], ...]:
        for client in [*names[CLIENT_ID], ...]:
            entity = ent(user, client)
            if not entity:
                continue
            components = [of_default(t) if n is None else of_entity(t, n) for t, n in entity]
            found = describe(QUOTAS, components, strict=True)
            scanned = [(e, dict(sorted(v.items()))) for e, v in QUOTAS.items() if e == entity]
            assert found == scanned, entity
    assert describe(QUOTAS, [of_entity(USER, "user-1"), of_entity(USER, "user-2")], True) == (
        ApiError(
            Errors.INVALID_REQUEST, "Entity type user cannot appear more than once in the filter."
        )
    )


@pytest.mark.parametrize(
    ("components", "strict", "count", "which"),
    [
        ([of_entity(USER, "user-1")], False, 3, lambda e: dict(e).get(USER) == "user-1"),
        ([of_entity(USER, "unknown")], False, 0, lambda e: False),
        (
            [of_entity(CLIENT_ID, "client-id-2")],
            False,
            2,
            lambda e: dict(e).get(CLIENT_ID) == "client-id-2",
        ),
        ([of_default(USER)], False, 2, lambda e: USER in dict(e) and dict(e)[USER] is None),
        ([of_entity(USER, "user-2")], True, 1, lambda e: e == ent("user-2")),
        ([of_entity(CLIENT_ID, "client-id-1")], True, 0, lambda e: False),
        ([of_type(USER)], True, 4, lambda e: USER in dict(e) and CLIENT_ID not in dict(e)),
        ([of_type(USER)], False, 10, lambda e: USER in dict(e)),
        ([of_type(CLIENT_ID)], True, 1, lambda e: CLIENT_ID in dict(e) and USER not in dict(e)),
        ([of_type(CLIENT_ID)], False, 7, lambda e: CLIENT_ID in dict(e)),
        ([of_type(IP)], False, 2, lambda e: IP in dict(e)),
        ([], False, 13, lambda e: True),
        ([], True, 0, lambda e: False),
    ],
)
def test_match_partial(components, strict, count, which):
    """testDescribeClientQuotasMatchPartial, filter by filter."""
    found = matched(components, strict)
    assert len(found) == count
    assert set(found) == {e for e in QUOTAS if which(e)}


def test_describe_is_sorted_defaults_first():
    assert matched([of_type(USER)], strict=True) == [
        ent(None),
        ent("user-1"),
        ent("user-2"),
        ent("user-3"),
    ]


@pytest.mark.parametrize(
    ("components", "error", "message"),
    [
        (
            [of_type(IP), of_type(USER)],
            Errors.INVALID_REQUEST,
            "Invalid entity filter component combination",
        ),
        (
            [of_type(IP), of_type(CLIENT_ID)],
            Errors.INVALID_REQUEST,
            "Invalid entity filter component combination",
        ),
        ([of_type("other")], Errors.UNSUPPORTED_VERSION, "Unsupported entity type other"),
        ([of_type("")], Errors.INVALID_REQUEST, "Invalid empty entity type."),
        (
            [of_type(USER), of_entity(USER, "a")],
            Errors.INVALID_REQUEST,
            "Entity type user cannot appear more than once in the filter.",
        ),
        (
            [FilterComponent(USER, MATCH_TYPE_EXACT, None)],
            Errors.INVALID_REQUEST,
            "Request specified MATCH_TYPE_EXACT, but set match string to null.",
        ),
        (
            [FilterComponent(USER, MATCH_TYPE_DEFAULT, "a")],
            Errors.INVALID_REQUEST,
            "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
        ),
        (
            [FilterComponent(USER, MATCH_TYPE_SPECIFIED, "a")],
            Errors.INVALID_REQUEST,
            "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
        ),
        ([FilterComponent(USER, 7)], Errors.INVALID_REQUEST, "Unknown match type 7"),
    ],
)
def test_invalid_filters(components, error, message):
    """testDescribeClientQuotasInvalidFilterCombination,
    testClientQuotasUnsupportedEntityTypes and describe's other checks."""
    result = describe(QUOTAS, components)
    assert isinstance(result, ApiError)
    assert result.error is error and result.message.startswith(message)


# ---------------------------------------------------------------- precedence


def produce(quotas, user, client):
    return quota_limit(quotas, PRODUCER_BYTE_RATE, user, client)[0]


def test_quota_config_precedence():
    """ClientQuotaManagerTest.testQuotaConfigPrecedence: the quota each
    (user, client-id) gets, as the broker resolves it, with each removal."""
    q = {
        ent(None): 1000,
        ent(client=None): 2000,
        ent(None, None): 3000,
        ent("userA"): 4000,
        ent("userA", "client1"): 5000,
        ent("userB"): 6000,
        ent("userB", "client1"): 7000,
        ent("userB", None): 8000,
        ent("userC"): 10000,
        ent(client="client1"): 9000,
    }
    quotas = {e: {PRODUCER_BYTE_RATE: float(v)} for e, v in q.items()}
    assert produce(quotas, "userA", "client1") == 5000  # <user, client> over <user>
    assert produce(quotas, "userA", "client2") == 4000  # <user> over <client> and defaults
    assert produce(quotas, "userA", "client3") == 4000
    assert produce(quotas, "userB", "client1") == 7000
    assert produce(quotas, "userB", "client2") == 8000  # <user, default client>
    assert produce(quotas, "userB", "client3") == 8000
    assert produce(quotas, "userD", "client1") == 3000  # <default user, default client>
    assert produce(quotas, "userD", "client2") == 3000
    assert produce(quotas, "userE", "client1") == 3000

    del quotas[ent(None, None)]  # back to the <user> default
    assert produce(quotas, "userD", "client1") == 1000
    assert produce(quotas, "userE", "client4") == 1000
    assert produce(quotas, "userF", "client4") == 1000

    del quotas[ent(None)]  # back to the <client-id> default
    assert produce(quotas, "userF", "client4") == 2000
    assert produce(quotas, "userG", "client5") == 2000

    quotas[ent("userA")] = {PRODUCER_BYTE_RATE: 8000.0}
    quotas[ent("userA", "client1")] = {PRODUCER_BYTE_RATE: 10000.0}
    assert produce(quotas, "userA", "client2") == 8000
    assert produce(quotas, "userA", "client1") == 10000
    del quotas[ent("userA", "client1")]
    assert produce(quotas, "userA", "client6") == 8000
    quotas[ent("userA", "client6")] = {PRODUCER_BYTE_RATE: 11000.0}
    assert produce(quotas, "userA", "client6") == 11000
    quotas[ent("userA", None)] = {PRODUCER_BYTE_RATE: 12000.0}
    del quotas[ent("userA", "client6")]
    assert produce(quotas, "userA", "client6") == 12000


def test_the_eight_levels_in_order():
    """Each level of Kafka's documented order wins over every level below it."""
    levels = [
        ent("u", "c"),
        ent("u", None),
        ent("u"),
        ent(None, "c"),
        ent(None, None),
        ent(None),
        ent(client="c"),
        ent(client=None),
    ]
    quotas = {e: {PRODUCER_BYTE_RATE: float(i + 1)} for i, e in enumerate(levels)}
    for i, level in enumerate(levels):
        assert quota_limit(quotas, PRODUCER_BYTE_RATE, "u", "c") == (float(i + 1), level)
        del quotas[level]
    assert quota_limit(quotas, PRODUCER_BYTE_RATE, "u", "c") == (float(LONG_MAX), None)


@pytest.mark.parametrize(
    ("entities", "sets"),
    [
        # testClientIdQuotaParsing: /config/clients/<client-id>, default /config/clients/<default>
        ((ent(client="p1"), ent(client="p2"), ent(client=None)), ("ANONYMOUS", "p1")),
        # testUserQuotaParsing: /config/users/<user>, default /config/users/<default>
        ((ent("User1"), ent("User2"), ent(None)), ("User1", "p1")),
        # testUserClientIdQuotaParsing: /config/users/<user>/clients/<client-id>
        ((ent("User1", "p1"), ent("User2", "p2"), ent(None, None)), ("User1", "p1")),
    ],
)
def test_quota_parsing(entities, sets):
    """ClientQuotaManagerTest's testQuotaParsing, per kind of entity: the
    override applies to its client, others get Kafka's default, and once the
    override is gone the default entity's quota applies."""
    own, other, default = entities
    quotas = {own: {PRODUCER_BYTE_RATE: 2000.0}, other: {PRODUCER_BYTE_RATE: 4000.0}}
    assert produce(quotas, "RandomUser", "random-client-id") == float(LONG_MAX)
    assert produce(quotas, *sets) == 2000
    quotas[own] = {PRODUCER_BYTE_RATE: 3000.0}
    assert produce(quotas, *sets) == 3000
    del quotas[own]
    quotas[default] = {PRODUCER_BYTE_RATE: 4000.0}
    assert produce(quotas, *sets) == 4000


def test_each_key_resolves_on_its_own():
    quotas = {
        ent("u"): {PRODUCER_BYTE_RATE: 1.0},
        ent(client="c"): {REQUEST_PERCENTAGE: 50.0},
    }
    assert quota_limit(quotas, PRODUCER_BYTE_RATE, "u", "c") == (1.0, ent("u"))
    assert quota_limit(quotas, REQUEST_PERCENTAGE, "u", "c") == (50.0, ent(client="c"))
    with pytest.raises(ValueError, match="connection_creation_rate is not a user or client-id"):
        quota_limit(quotas, CONNECTION_CREATION_RATE, "u", "c")


def test_ip_quota_resolution():
    """ConnectionQuotas: the ip's own quota, then the default ip's, then
    Kafka's default (Int.MaxValue)."""
    quotas = {ent(ip="1.2.3.4"): {CONNECTION_CREATION_RATE: 10.0}}
    assert ip_quota_limit(quotas, "1.2.3.4") == (10.0, ent(ip="1.2.3.4"))
    assert ip_quota_limit(quotas, "5.6.7.8") == (float(2**31 - 1), None)
    quotas[ent(ip=None)] = {CONNECTION_CREATION_RATE: 5.0}
    assert ip_quota_limit(quotas, "5.6.7.8") == (5.0, ent(ip=None))


# ---------------------------------------------------------------- records


def rec(entity, key=PRODUCER_BYTE_RATE, value=1.0, remove=False):
    return ClientQuotaRecord(
        entity=tuple(EntityData(t, n) for t, n in entity), key=key, value=value, remove=remove
    )


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        (rec(ent("u")), None),
        (rec(ent(client=None, user="u")), None),
        (rec(ent(ip="h"), CONNECTION_CREATION_RATE, 5.0), None),  # names are not resolved
        (rec(ent("u"), remove=True, value=-1.0), None),  # a removal's value is ignored
        (rec((("group", "g"), ("a", None), ("group", "h"))), "unknown entity type a,group"),
        (rec(()), "the record names no entity"),
        (rec(((USER, "a"), (USER, "b"))), "an entity type appears more than once"),
        (rec(ent("u", ip="1.2.3.4")), "ip is combined with user or client-id"),
        (rec(ent("")), "an entity name is empty"),
        (rec(ent(ip="1.2.3.4")), "producer_byte_rate is not a quota of this entity"),
        (rec(ent("u"), "x", remove=True), "x is not a quota of this entity"),
        (rec(ent("u"), value=0.0), "producer_byte_rate must be greater than 0"),
        (rec(ent("u"), value=1.5), "producer_byte_rate cannot be a fractional value"),
        (rec(ent("u"), value=2.0**63), "producer_byte_rate is too large for LONG"),
        (rec(ent(ip=None), CONNECTION_CREATION_RATE, 2.0**31), "is too large for INT"),
        (rec(ent("u"), REQUEST_PERCENTAGE, 2.0**70), None),
    ],
)
def test_which_records_replay_refuses(record, problem):
    got = record_problem(record)
    assert got == problem if problem is None else problem in got


def test_entity_key_is_canonical():
    assert entity_key(((CLIENT_ID, "c"), (USER, None))) == ((USER, None), (CLIENT_ID, "c"))
