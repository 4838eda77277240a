"""Client quotas (Kafka's ``ClientQuotaRecord``, ``QuotaConfig``, ``ClientQuotasImage``
and the broker's ``ClientQuotaManager``): the rules every reader of the log
shares.

An *entity* is a set of components, each an entity type and a name, the name
None for the type's default entity: a user, a client id, or a user with a
client id (``/config/users/<user>/clients/<client-id>`` in Kafka's ZooKeeper
days), or an ip alone. Here an entity is kept in one canonical form,
``Entity``: a tuple of (type, name) pairs in the order user, client-id, ip, so
the same entity named in any order is the same key of the image.

Who uses what:

* the replay (``delta.py``) and the log checker: ``record_problem`` (a record
  that names no valid entity, or a key its entity cannot have, is ignored);
* the controller (``controller/client_quota_control.py``): ``entity_problem``,
  ``keys_for`` and ``value_problem``, Kafka's checks with Kafka's messages;
* every node's reads: ``describe`` (DescribeClientQuotas' filter);
* a broker's metadata cache: ``quota_limit`` and ``ip_quota_limit``, Kafka's
  precedence (the eight levels of user and client-id, then ip, then default).

Pure: no I/O. An ip is checked as a literal address (``ipaddress``), never
resolved (docs/decisions.md 107).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from .errors import ApiError, Errors
from .records import ClientQuotaRecord, EntityData

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)  # the canonical order of an entity's components
_ORDER = {t: i for i, t in enumerate(ENTITY_TYPES)}

# One entity, canonical: ((type, name | None), ...) in ENTITY_TYPES order.
Entity = tuple[tuple[str, str | None], ...]
# The image's quotas: entity -> {key: value}; an entity with no key is absent.
Quotas = Mapping[Entity, Mapping[str, float]]

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
SHORT_MAX = 2**15 - 1


class QuotaKey(NamedTuple):
    """A quota config (Kafka's ``QuotaConfig`` ConfigDef entries)."""

    name: str
    type: str  # Kafka's ConfigDef.Type: LONG, INT or DOUBLE
    default: float  # what applies when no entity sets it
    doc: str


PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# QuotaConfig.userAndClientQuotaConfigs(): user, client-id, and both.
USER_CLIENT_KEYS: dict[str, QuotaKey] = {
    k.name: k
    for k in (
        QuotaKey(
            PRODUCER_BYTE_RATE,
            "LONG",
            float(LONG_MAX),
            "A rate representing the upper bound (bytes/sec) for producer traffic.",
        ),
        QuotaKey(
            CONSUMER_BYTE_RATE,
            "LONG",
            float(LONG_MAX),
            "A rate representing the upper bound (bytes/sec) for consumer traffic.",
        ),
        QuotaKey(
            REQUEST_PERCENTAGE,
            "DOUBLE",
            float(INT_MAX),
            "A percentage representing the upper bound of time spent for processing requests.",
        ),
        QuotaKey(
            CONTROLLER_MUTATION_RATE,
            "DOUBLE",
            float(INT_MAX),
            "The rate at which mutations are accepted for the create topics request, the "
            "create partitions request and the delete topics request. The rate is accumulated "
            "by the number of partitions created or deleted.",
        ),
    )
}
# QuotaConfig.ipConfigs().
IP_KEYS: dict[str, QuotaKey] = {
    CONNECTION_CREATION_RATE: QuotaKey(
        CONNECTION_CREATION_RATE,
        "INT",
        float(INT_MAX),
        "An int representing the upper bound of connections accepted for the specified IP.",
    )
}
ALL_KEYS: dict[str, QuotaKey] = {**USER_CLIENT_KEYS, **IP_KEYS}


# ---------------------------------------------------------------- entities


def entity_key(components: Iterable[tuple[str, str | None]]) -> Entity:
    """The canonical form of an entity whose components are valid (known
    types, each once): ordered user, client-id, ip."""
    return tuple(sorted(((t, n) for t, n in components), key=lambda c: _ORDER[c[0]]))


def entity_data(entity: Entity) -> tuple[EntityData, ...]:
    """The record's ``Entity`` array for a canonical entity."""
    return tuple(EntityData(t, n) for t, n in entity)


def entity_text(entity: Iterable[tuple[str, str | None]]) -> str:
    """As operators read it: ``user=alice,client-id=<default>``."""
    return ",".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


def entity_problem(components: Iterable[tuple[str | None, str | None]]) -> str | None:
    """Why these components are no entity a quota can be set on, or None.
    Kafka's ``validateEntity`` then ``configKeysForEntityType``, with their
    messages; it does not look at an ip's form (``ip_problem``)."""
    seen: set[str] = set()
    for entity_type, name in components:
        if entity_type in seen:
            return f"Invalid client quota entity, duplicate entity entry {entity_type}"
        if entity_type not in _ORDER:
            return f"Unhandled client quota entity type: {entity_type}"
        seen.add(entity_type)
        if name is not None and not name:
            return f"Empty {entity_type} not supported"
    if not seen:
        return "Invalid empty client quota entity"
    if IP in seen and len(seen) > 1:
        # Kafka's message, its missing space included.
        return (
            "Invalid quota entity combination, IP entity should"
            "not be combined with User or ClientId"
        )
    return None


def ip_problem(ip: str | None) -> str | None:
    """Kafka's ``isValidIpEntity`` without a DNS lookup: the default entity
    (None) or an IPv4 or IPv6 literal."""
    if ip is None:
        return None
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        return f"{ip} is not a valid IP or resolvable host."
    return None


def keys_for(entity: Iterable[tuple[str, str | None]]) -> dict[str, QuotaKey]:
    """The keys an entity (valid: ``entity_problem`` None) may hold."""
    return IP_KEYS if any(t == IP for t, _ in entity) else USER_CLIENT_KEYS


def value_problem(keys: Mapping[str, QuotaKey], key: str, value: float) -> str | None:
    """Kafka's ``validateQuotaKeyValue``: a known key, a value above 0, whole
    and in range for an integer-typed key."""
    spec = keys.get(key)
    if spec is None:
        return f"Invalid configuration key {key}"
    if not value > 0.0:
        return f"Quota {key} must be greater than 0"
    if value == float("inf"):
        return f"Proposed value for {key} is too large for a {spec.type}."
    if spec.type == "DOUBLE":
        return None
    limit, article = {"SHORT": (SHORT_MAX, "a"), "INT": (INT_MAX, "an"), "LONG": (LONG_MAX, "a")}[
        spec.type
    ]
    if value > limit:
        return f"Proposed value for {key} is too large for {article} {spec.type}."
    if abs(value % 1.0) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None


def record_problem(r: ClientQuotaRecord) -> str | None:
    """Why a ClientQuotaRecord cannot take effect, or None: it names no valid
    entity, a key its entity cannot hold, or (setting) a value Kafka's
    controller would not have written. What replay ignores and the log's
    checkers report (rule ``quota.record-valid``); the messages do not depend
    on the order of the entity's components, so the Spark audit
    (pipeline/audit.py ``client_quota_checks``) writes the same words."""
    types = [e.entity_type for e in r.entity]
    unknown = sorted({t for t in types if t not in _ORDER})
    if not types:
        return "the record names no entity"
    if unknown:
        return f"unknown entity type {','.join(unknown)}"
    if len(set(types)) != len(types):
        return "an entity type appears more than once"
    if any(e.entity_name == "" for e in r.entity):
        return "an entity name is empty"
    if IP in types and len(types) > 1:
        return "ip is combined with user or client-id"
    keys = keys_for(r.entity)
    if r.key not in keys:
        return f"{r.key} is not a quota of this entity"
    if r.remove:
        return None
    spec = keys[r.key]
    if not r.value > 0.0:
        return f"{r.key} must be greater than 0"
    if spec.type != "DOUBLE" and value_problem(keys, r.key, r.value) is not None:
        if r.value > (INT_MAX if spec.type == "INT" else LONG_MAX):
            return f"{r.key} is too large for {spec.type}"
        return f"{r.key} cannot be a fractional value"
    return None


# ---------------------------------------------------------------- describe

MATCH_TYPE_EXACT = 0  # the entity of that name
MATCH_TYPE_DEFAULT = 1  # the type's default entity
MATCH_TYPE_SPECIFIED = 2  # any entity of that type, the default too


class FilterComponent(NamedTuple):
    """One component of DescribeClientQuotas' filter (Kafka's ComponentData)."""

    entity_type: str
    match_type: int
    match: str | None = None


def _filter(
    components: Iterable[FilterComponent],
) -> tuple[dict[str, str | None], set[str]] | ApiError:
    """Kafka's ``ClientQuotasImage.describe`` checks: (exact matches, type
    matches), or the error it answers."""
    exact: dict[str, str | None] = {}
    types: set[str] = set()
    for c in components:
        if not c.entity_type:
            return ApiError(Errors.INVALID_REQUEST, "Invalid empty entity type.")
        if c.entity_type in exact or c.entity_type in types:
            return ApiError(
                Errors.INVALID_REQUEST,
                f"Entity type {c.entity_type} cannot appear more than once in the filter.",
            )
        if c.entity_type not in _ORDER:
            return ApiError(Errors.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}")
        if c.match_type == MATCH_TYPE_EXACT:
            if c.match is None:
                return ApiError(
                    Errors.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                )
            exact[c.entity_type] = c.match
        elif c.match_type == MATCH_TYPE_DEFAULT:
            if c.match is not None:
                return ApiError(
                    Errors.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                )
            exact[c.entity_type] = None
        elif c.match_type == MATCH_TYPE_SPECIFIED:
            if c.match is not None:
                return ApiError(
                    Errors.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                )
            types.add(c.entity_type)
        else:
            return ApiError(Errors.INVALID_REQUEST, f"Unknown match type {c.match_type}")
    named = exact.keys() | types
    if IP in named and (USER in named or CLIENT_ID in named):
        return ApiError(
            Errors.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component.",
        )
    return exact, types


def sort_key(entity: Entity) -> tuple:
    """Entities in a stable order: by type, the default before named ones."""
    return tuple((_ORDER[t], n is not None, n or "") for t, n in entity)


def describe(
    quotas: Quotas, components: Iterable[FilterComponent], strict: bool = False
) -> list[tuple[Entity, dict[str, float]]] | ApiError:
    """DescribeClientQuotas: every entity the filter matches with its quotas
    (sorted by entity, keys sorted), or the error Kafka answers. A component
    matches an entity holding that type with that name (EXACT), with the
    default (DEFAULT) or with any name (SPECIFIED); ``strict`` also excludes
    entities with types the filter does not name. No component matches every
    entity (unless ``strict``: then none)."""
    parsed = _filter(components)
    if isinstance(parsed, ApiError):
        return parsed
    exact, types = parsed
    if strict and exact and not types:
        # One entity at most: found by its key, not by scanning every entity
        # (the answer a broker's or an operator's single lookup costs).
        entity = entity_key(exact.items())
        values = quotas.get(entity)
        return [] if values is None else [(entity, dict(sorted(values.items())))]
    out = []
    for entity, values in quotas.items():
        names = dict(entity)
        if strict and len(names) != len(exact) + len(types):
            continue
        if any(t not in names or names[t] != n for t, n in exact.items()):
            continue
        if any(t not in names for t in types):
            continue
        out.append((entity, dict(sorted(values.items()))))
    out.sort(key=lambda e: sort_key(e[0]))
    return out


# ---------------------------------------------------------------- resolution


def _levels(user: str, client_id: str) -> tuple[Entity, ...]:
    """Kafka's precedence for a (user, client id) (ClientQuotaManager's
    DefaultQuotaCallback, the eight levels of the Kafka docs):

    1. /config/users/<user>/clients/<client-id>
    2. /config/users/<user>/clients/<default>
    3. /config/users/<user>
    4. /config/users/<default>/clients/<client-id>
    5. /config/users/<default>/clients/<default>
    6. /config/users/<default>
    7. /config/clients/<client-id>
    8. /config/clients/<default>
    """
    return (
        ((USER, user), (CLIENT_ID, client_id)),
        ((USER, user), (CLIENT_ID, None)),
        ((USER, user),),
        ((USER, None), (CLIENT_ID, client_id)),
        ((USER, None), (CLIENT_ID, None)),
        ((USER, None),),
        ((CLIENT_ID, client_id),),
        ((CLIENT_ID, None),),
    )


def quota_limit(quotas: Quotas, key: str, user: str, client_id: str) -> tuple[float, Entity | None]:
    """The ``key`` quota (producer_byte_rate, consumer_byte_rate,
    request_percentage or controller_mutation_rate) that applies to a
    connection of ``user`` with ``client_id``: (value, the entity that sets
    it), or (Kafka's default, None) when no level sets it. Each key resolves
    on its own (Kafka keeps one ClientQuotaManager per quota type)."""
    spec = USER_CLIENT_KEYS.get(key)
    if spec is None:
        raise ValueError(
            f"{key} is not a user or client-id quota: one of {', '.join(USER_CLIENT_KEYS)}"
        )
    for entity in _levels(user, client_id):
        value = quotas.get(entity, {}).get(key)
        if value is not None:
            return value, entity
    return spec.default, None


def ip_quota_limit(quotas: Quotas, ip: str) -> tuple[float, Entity | None]:
    """connection_creation_rate for connections from ``ip`` (Kafka's
    ConnectionQuotas): the ip's own quota, else the default ip's, else
    Kafka's default (Int.MaxValue)."""
    for entity in (((IP, ip),), ((IP, None),)):
        value = quotas.get(entity, {}).get(CONNECTION_CREATION_RATE)
        if value is not None:
            return value, entity
    return IP_KEYS[CONNECTION_CREATION_RATE].default, None
