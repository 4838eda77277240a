"""The image as bytes: the snapshot format and the digest voters compare.

The encoding is canonical (brokers, topics and partitions sorted), so two voters
hold the same image exactly when their digests match. It is our own JSON, made
with the codec's value shapes, never pickled classes: ``image_to_obj``'s
object as orjson writes it. ``encode_image_chunks`` writes those bytes in
pieces, from the same parts of that object (a backup,
metadata_records/backup_file.py), and ``encode_image`` joins them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Annotated, Any

import msgspec
import orjson

from .acls import StandardAcl
from .acls_image import AclsImage
from .chunked_map import ChunkedMap
from .client_quotas import Entity, entity_data, entity_key, entity_problem, sort_key
from .codec import DecodeError, _decode_value, _encode_value, _int, _loads, _obj, brief
from .delegation_tokens import DelegationToken, split_principal
from .image import BrokerRegistration, MetadataImage, PartitionRegistration, TopicImage
from .partition_map import PartitionMap
from .partition_states import partitions_from_rows, partitions_of
from .records import Kind
from .scram import MECHANISMS, ScramCredential

SNAPSHOT_FORMAT = 1
# About this many partitions a piece of encode_image_chunks (about 0.5 MB).
CHUNK_PARTITIONS = 8_192

_BROKER_FIELDS = (
    ("brokerId", Kind.INT32),
    ("incarnationId", Kind.UUID),
    ("brokerEpoch", Kind.INT64),
    ("endPoints", Kind.ENDPOINTS),
    ("features", Kind.FEATURES),
    ("rack", Kind.NULLABLE_STRING),
    ("fenced", Kind.BOOL),
    ("inControlledShutdown", Kind.BOOL),
    ("registrationOffset", Kind.INT64),
)
# A partition is a positional array, in PartitionRegistration's field order.
_PARTITION_FIELDS = (
    ("partitionId", Kind.INT32),
    ("replicas", Kind.INT32_LIST),
    ("isr", Kind.INT32_LIST),
    ("removingReplicas", Kind.INT32_LIST),
    ("addingReplicas", Kind.INT32_LIST),
    ("leader", Kind.INT32),
    ("leaderRecoveryState", Kind.INT8),
    ("leaderEpoch", Kind.INT32),
    ("partitionEpoch", Kind.INT32),
)
# An ACL is a positional array: its id, then StandardAcl's fields in order.
_ACL_FIELDS = (
    ("id", Kind.UUID),
    ("resourceType", Kind.INT8),
    ("resourceName", Kind.STRING),
    ("patternType", Kind.INT8),
    ("principal", Kind.STRING),
    ("host", Kind.STRING),
    ("operation", Kind.INT8),
    ("permissionType", Kind.INT8),
)
# KIP-966: a partition with an ELR or a last known ELR has two more fields;
# one without keeps the nine, so images without ELR encode (and digest) as before.
_PARTITION_ELR_FIELDS = (
    *_PARTITION_FIELDS,
    ("eligibleLeaderReplicas", Kind.INT32_LIST),
    ("lastKnownElr", Kind.INT32_LIST),
)
_IMAGE_KEYS = (
    "format",
    "nextOffset",
    "controllerEpoch",
    "leaderId",
    "leaderUrl",
    "ignoredRecords",
    "features",
    "brokers",
    "topics",
)


def image_to_obj(image: MetadataImage) -> dict[str, Any]:
    return {
        **_head_obj(image),
        "topics": [_topic_obj(t, _partition_rows(t)) for _, t in sorted(image.topics.items())],
        **_tail_obj(image),
    }


def _head_obj(image: MetadataImage) -> dict[str, Any]:
    """The keys before "topics", in the order they are written."""
    return {
        "format": SNAPSHOT_FORMAT,
        "nextOffset": image.next_offset,
        "controllerEpoch": image.controller_epoch,
        "leaderId": image.leader_id,
        "leaderUrl": image.leader_url,
        "ignoredRecords": image.ignored_records,
        "features": dict(sorted(image.features.items())),
        "brokers": [
            [_encode_value(kind, value) for (_, kind), value in zip(_BROKER_FIELDS, b, strict=True)]
            for _, b in sorted(image.brokers.items())
        ],
    }


def _topic_obj(t: TopicImage, partitions: list) -> dict[str, Any]:
    return {
        "name": t.name,
        "topicId": t.topic_id,
        "configs": dict(sorted(t.configs.items())),
        "partitions": partitions,
    }


def _partition_rows(t: TopicImage) -> list[list]:
    return [_partition_row(pid, p) for pid, p in sorted(t.partitions.items())]


def _tail_obj(image: MetadataImage) -> dict[str, Any]:
    """The keys after "topics", each written only when set."""
    obj: dict[str, Any] = {}
    # Only once a voter set was written, so images (and digests) from before
    # voter sets existed are unchanged.
    if image.voters:
        obj["voters"] = _encode_value(Kind.VOTERS, image.voters)
    # Likewise only once a producer id block was granted, and a broker config set.
    if image.next_producer_id:
        obj["nextProducerId"] = image.next_producer_id
    if image.broker_configs:
        obj["brokerConfigs"] = {
            name: dict(sorted(configs.items()))
            for name, configs in sorted(image.broker_configs.items())
        }
    # Likewise only once a client quota was set.
    if image.client_quotas:
        obj["clientQuotas"] = [
            {
                "entity": _encode_value(Kind.QUOTA_ENTITY, entity_data(entity)),
                "quotas": dict(sorted(quotas.items())),
            }
            for entity, quotas in sorted(image.client_quotas.items(), key=lambda e: sort_key(e[0]))
        ]
    # And once an ACL was created.
    if image.acls:
        obj["acls"] = [[acl_id, *acl] for acl_id, acl in sorted(image.acls.items())]
    # And once a SCRAM credential was set: the secrets as they are (a voter
    # restored from a snapshot or a backup must authenticate the same users).
    if image.scram:
        obj["scram"] = [
            [user, mechanism, *(_encode_value(Kind.BYTES, b) for b in c[:3]), c.iterations]
            for user, credentials in sorted(image.scram.items())
            for mechanism, c in sorted(credentials.items())
        ]
    # And once a delegation token was created (never an HMAC: none is kept).
    if image.delegation_tokens:
        obj["delegationTokens"] = [
            [token_id, t.owner, t.requester, list(t.renewers), *t[3:]]
            for token_id, t in sorted(image.delegation_tokens.items())
        ]
    return obj


# A delegation token is a positional array: its id, then DelegationToken's fields in order.
_TOKEN_FIELDS = (
    ("tokenId", Kind.STRING),
    ("owner", Kind.STRING),
    ("requester", Kind.STRING),
    ("renewers", Kind.STRING_LIST),
    ("issueTimestamp", Kind.INT64),
    ("maxTimestamp", Kind.INT64),
    ("expirationTimestamp", Kind.INT64),
)


def _decode_tokens(rows: Any) -> dict[str, DelegationToken]:
    if type(rows) is not list:
        raise DecodeError("snapshot.delegationTokens: expected array")
    out: dict[str, DelegationToken] = {}
    for i, row in enumerate(rows):
        where = f"snapshot.delegationTokens[{i}]"
        token_id, *fields = _row(row, _TOKEN_FIELDS, where)
        token = DelegationToken(*fields)
        if not token_id or split_principal(token.owner) is None:
            raise DecodeError(f"{where}: token {token_id!r} of owner {token.owner!r}")
        if token_id in out:
            raise DecodeError(f"{where}: token {token_id!r} appears twice")
        out[token_id] = token
    return out


# A SCRAM credential is a positional array: the user, the mechanism type,
# then ScramCredential's fields in order.
_SCRAM_FIELDS = (
    ("name", Kind.STRING),
    ("mechanism", Kind.INT8),
    ("salt", Kind.BYTES),
    ("storedKey", Kind.BYTES),
    ("serverKey", Kind.BYTES),
    ("iterations", Kind.INT32),
)


def _decode_scram(rows: Any) -> dict[str, dict[int, ScramCredential]]:
    if type(rows) is not list:
        raise DecodeError("snapshot.scram: expected array")
    out: dict[str, dict[int, ScramCredential]] = {}
    for i, row in enumerate(rows):
        where = f"snapshot.scram[{i}]"
        user, mechanism, *fields = _row(row, _SCRAM_FIELDS, where)
        if not user or mechanism not in MECHANISMS:
            raise DecodeError(f"{where}: user {user!r} with mechanism {mechanism}")
        credentials = out.setdefault(user, {})
        if mechanism in credentials:
            raise DecodeError(f"{where}: user {user!r}'s mechanism {mechanism} appears twice")
        credentials[mechanism] = ScramCredential(*fields)
    return out


def _decode_client_quotas(value: Any) -> dict[Entity, dict[str, float]]:
    out: dict[Entity, dict[str, float]] = {}
    if type(value) is not list:
        raise DecodeError("snapshot.clientQuotas: expected array")
    for i, item in enumerate(value):
        where = f"snapshot.clientQuotas[{i}]"
        item = _obj(item, where, ("entity", "quotas"))
        components = _decode_value(Kind.QUOTA_ENTITY, item["entity"], f"{where}.entity")
        problem = entity_problem(components)
        if problem is not None:
            raise DecodeError(f"{where}.entity: {problem}")
        entity = entity_key(components)
        quotas = item["quotas"]
        if type(quotas) is not dict or not quotas:
            raise DecodeError(f"{where}.quotas: expected a non-empty object")
        if entity in out:
            raise DecodeError(f"{where}: the entity appears twice")
        out[entity] = {
            k: _decode_value(Kind.FLOAT64, v, f"{where}.quotas.{k}") for k, v in quotas.items()
        }
    return out


def _partition_row(pid: int, p: PartitionRegistration) -> list:
    return [pid, *p] if p.elr or p.last_known_elr else [pid, *p[:-2]]


def encode_image(image: MetadataImage) -> bytes:
    """``orjson.dumps(image_to_obj(image))`` byte for byte, made a piece at a
    time (``encode_image_chunks``): the whole object of 2,000,000 partitions'
    rows was about 1.8 GB at once in the process encoding it (a worker's
    image, the snapshot writer), and took twice as long (2.9 against 6.0 s
    at 1,000,000)."""
    return b"".join(encode_image_chunks(image))


def encode_image_chunks(
    image: MetadataImage, partitions_per_chunk: int = CHUNK_PARTITIONS
) -> Iterator[bytes]:
    """``encode_image(image)``, byte for byte, in pieces of about
    ``partitions_per_chunk`` partitions each: a backup of 2,000,000
    partitions (about 80 MB encoded) never sits whole in memory as bytes.
    Every piece is orjson's own output of a part of ``image_to_obj``'s
    object, cut at the brackets and commas orjson writes with no spaces."""
    head = orjson.dumps(_head_obj(image))
    yield head[:-1] + b',"topics":['  # without its closing brace
    pending: list[bytes] = []
    rows = 0
    for n, (_, t) in enumerate(sorted(image.topics.items())):
        empty = orjson.dumps(_topic_obj(t, []))  # ...,"partitions":[]}
        pending.append((b"," if n else b"") + empty[:-2])  # open: ...,"partitions":[
        first = True
        partitions = t.partitions
        pids = sorted(partitions)
        for start in range(0, len(pids), partitions_per_chunk):
            batch = [
                _partition_row(pid, partitions[pid])
                for pid in pids[start : start + partitions_per_chunk]
            ]
            pending.append((b"" if first else b",") + orjson.dumps(batch)[1:-1])
            first = False
            rows += len(batch)
            if rows >= partitions_per_chunk:
                yield b"".join(pending)
                pending, rows = [], 0
        pending.append(b"]}")
        rows += 1  # topics of no partitions still add up to a piece
        if rows >= partitions_per_chunk:
            yield b"".join(pending)
            pending, rows = [], 0
    tail = orjson.dumps(_tail_obj(image))
    pending.append(b"]" + (b"," + tail[1:] if len(tail) > 2 else b"}"))
    yield b"".join(pending)


def image_digest(image: MetadataImage) -> str:
    """SHA-256 of the canonical encoding: equal digests, equal images."""
    return hashlib.sha256(encode_image(image)).hexdigest()


def _row(value: Any, spec: tuple, where: str) -> list:
    if type(value) is not list or len(value) != len(spec):
        raise DecodeError(f"{where}: expected an array of {len(spec)} fields")
    return [
        _decode_value(kind, v, f"{where}.{name}")
        for (name, kind), v in zip(spec, value, strict=True)
    ]


_I32 = range(-(2**31), 2**31)
_I8 = range(-(2**7), 2**7)


def _int32s(values: Any) -> tuple[int, ...] | None:
    if type(values) is not list:
        return None
    for v in values:
        if type(v) is not int or v not in _I32:
            return None
    return tuple(values)


def _partition_fast(row: Any) -> list | None:
    """A well-formed partition row, checked without per-field calls (a restart
    loads a million of them); None sends the row to the slow, explaining path."""
    if type(row) is not list or len(row) != 9:
        return None
    pid, replicas, isr, removing, adding, leader, lrs, le, pe = row
    for v, kind in ((pid, _I32), (leader, _I32), (lrs, _I8), (le, _I32), (pe, _I32)):
        if type(v) is not int or v not in kind:
            return None
    lists = [_int32s(replicas), _int32s(isr), _int32s(removing), _int32s(adding)]
    if None in lists:
        return None
    return [pid, *lists, leader, lrs, le, pe]


# The snapshot's keys, and its topics, each left as JSON (``_snapshot_obj``).
_TOP_LEVEL = msgspec.json.Decoder(dict[str, msgspec.Raw])
_TOPIC_LIST = msgspec.json.Decoder(list[msgspec.Raw])
_I32_ = Annotated[int, msgspec.Meta(ge=-(2**31), lt=2**31)]
_I32S = tuple[_I32_, ...]
# A partition row without ELR, checked by msgspec in C: 0.5 µs, against
# 8 µs for _partition_fast's checks in Python (a restart reads millions).
_ROWS = msgspec.json.Decoder(
    list[
        tuple[
            _I32_, _I32S, _I32S, _I32S, _I32S, _I32_,
            Annotated[int, msgspec.Meta(ge=-(2**7), lt=2**7)], _I32_, _I32_,
        ]
    ]
)  # fmt: skip


class _CheckedRows(list):
    """A topic's partition rows msgspec found well-formed (no ELR), as tuples."""


# What msgspec or orjson raise on JSON they cannot read as asked: the caller
# then decodes it whole with _loads, whose error names what is wrong.
_UNREADABLE = (
    msgspec.DecodeError,
    orjson.JSONDecodeError,
    KeyError,
    TypeError,
    ValueError,
    RecursionError,
)


def _with_one_key_as(data: Any, key: str, decoder: msgspec.json.Decoder) -> dict[str, Any]:
    """A JSON object's keys decoded by orjson, but ``key``'s value by
    ``decoder``; raises one of _UNREADABLE when it cannot."""
    parts = _TOP_LEVEL.decode(data)
    lazy = decoder.decode(parts[key])
    obj = {k: orjson.loads(memoryview(v)) for k, v in parts.items() if k != key}
    obj[key] = lazy
    return obj


class _TopicsAsRead(list):
    """A snapshot's topics, each decoded as it is read: the rows of every
    partition never exist at once. A restart's memory peak was that whole
    decoded object (about 900 bytes a partition, against 104 for what the
    image keeps), and a process's resident set stays at its peak. A topic's
    rows come as _CheckedRows when msgspec finds them well-formed, else as
    JSON for the checks that name what is wrong."""

    def __iter__(self):
        for i, raw in enumerate(super().__iter__()):
            try:
                topic = _with_one_key_as(raw, "partitions", _ROWS)
            except _UNREADABLE:
                yield _loads(memoryview(raw), f"snapshot.topics[{i}]")
                continue
            topic["partitions"] = _CheckedRows(topic["partitions"])
            yield topic


def _snapshot_obj(data: Any) -> Any:
    """``_loads(data, "snapshot")``, with each topic decoded only when read.
    Anything msgspec does not read as a JSON object with a topic list is
    decoded whole, so that its error says what is wrong as it always did."""
    try:
        obj = _with_one_key_as(data, "topics", _TOPIC_LIST)
    except _UNREADABLE:
        return _loads(data, "snapshot")
    obj["topics"] = _TopicsAsRead(obj["topics"])
    return obj


def decode_image(data: Any) -> MetadataImage:
    """An image from ``encode_image`` bytes; DecodeError names what is wrong."""
    obj = _snapshot_obj(data)
    voters = obj.pop("voters", []) if type(obj) is dict else []
    broker_configs = obj.pop("brokerConfigs", {}) if type(obj) is dict else {}
    next_producer_id = obj.pop("nextProducerId", 0) if type(obj) is dict else 0
    client_quotas = obj.pop("clientQuotas", []) if type(obj) is dict else []
    acl_rows = obj.pop("acls", []) if type(obj) is dict else []
    scram_rows = obj.pop("scram", []) if type(obj) is dict else []
    token_rows = obj.pop("delegationTokens", []) if type(obj) is dict else []
    obj = _obj(obj, "snapshot", _IMAGE_KEYS)
    if type(obj["format"]) is not int or obj["format"] != SNAPSHOT_FORMAT:
        raise DecodeError(f"snapshot: unsupported format {brief(obj['format'])}")
    features = obj["features"]
    if type(features) is not dict:
        raise DecodeError("snapshot.features: expected object")
    brokers: dict[int, BrokerRegistration] = {}
    if type(obj["brokers"]) is not list:
        raise DecodeError("snapshot.brokers: expected array")
    for i, row in enumerate(obj["brokers"]):
        reg = BrokerRegistration(*_row(row, _BROKER_FIELDS, f"snapshot.brokers[{i}]"))
        if reg.broker_id in brokers:
            raise DecodeError(f"snapshot.brokers[{i}]: broker {reg.broker_id} appears twice")
        brokers[reg.broker_id] = reg
    topics: dict[str, TopicImage] = {}
    topic_ids: dict[str, str] = {}
    count = 0
    if not isinstance(obj["topics"], list):
        raise DecodeError("snapshot.topics: expected array")
    for i, t in enumerate(obj["topics"]):
        where = f"snapshot.topics[{i}]"
        t = _obj(t, where, ("name", "topicId", "configs", "partitions"))
        name = _decode_value(Kind.STRING, t["name"], f"{where}.name")
        topic_id = _decode_value(Kind.UUID, t["topicId"], f"{where}.topicId")
        if name in topic_ids or topic_id in topics:
            raise DecodeError(f"{where}: topic {name!r} appears twice")
        configs = t["configs"]
        if type(configs) is not dict or any(type(v) is not str for v in configs.values()):
            raise DecodeError(f"{where}.configs: expected an object of strings")
        if not isinstance(t["partitions"], list):
            raise DecodeError(f"{where}.partitions: expected array")
        if type(t["partitions"]) is _CheckedRows:
            partitions, twice = partitions_from_rows(t["partitions"])
            if twice is not None:
                pid = t["partitions"][twice][0]
                raise DecodeError(f"{where}.partitions[{twice}]: partition {pid} appears twice")
            count += len(partitions)
            topics[topic_id] = TopicImage(name, topic_id, partitions, configs)
            topic_ids[name] = topic_id
            continue
        partitions: dict[int, PartitionRegistration] = {}
        for j, row in enumerate(t["partitions"]):
            fields = _partition_fast(row)
            if fields is None:  # something is off (or ELR): the slow path names it
                spec = (
                    _PARTITION_ELR_FIELDS
                    if type(row) is list and len(row) == len(_PARTITION_ELR_FIELDS)
                    else _PARTITION_FIELDS
                )
                fields = _row(row, spec, f"{where}.partitions[{j}]")
            pid, replicas, isr, *rest = fields
            if pid in partitions:
                raise DecodeError(f"{where}.partitions[{j}]: partition {pid} appears twice")
            isr = replicas if isr == replicas else isr  # share, as apply does
            partitions[pid] = PartitionRegistration(replicas, isr, *rest)
        count += len(partitions)
        topics[topic_id] = TopicImage(name, topic_id, partitions_of(partitions), configs)
        topic_ids[name] = topic_id
    for name, level in features.items():
        if _int(level, Kind.INT16, f"snapshot.features.{name}") < 1:
            raise DecodeError(
                f"snapshot.features.{name}: level {level} (a finalized level is >= 1)"
            )
    if type(broker_configs) is not dict or any(
        type(configs) is not dict or any(type(v) is not str for v in configs.values())
        for configs in broker_configs.values()
    ):
        raise DecodeError("snapshot.brokerConfigs: expected an object of objects of strings")
    leader_url = obj["leaderUrl"]
    if leader_url is not None and type(leader_url) is not str:
        raise DecodeError("snapshot.leaderUrl: expected string or null")
    if type(acl_rows) is not list:
        raise DecodeError("snapshot.acls: expected array")
    acls: dict[str, StandardAcl] = {}
    for i, row in enumerate(acl_rows):
        acl_id, *fields = _row(row, _ACL_FIELDS, f"snapshot.acls[{i}]")
        if acl_id in acls:
            raise DecodeError(f"snapshot.acls[{i}]: ACL {acl_id} appears twice")
        acls[acl_id] = StandardAcl(*fields)
    try:
        indexed_acls = AclsImage(acls)
    except ValueError as e:
        raise DecodeError(f"snapshot.acls: {e}") from None
    return MetadataImage(
        brokers=PartitionMap(brokers),
        topics=ChunkedMap(topics),
        topic_ids=ChunkedMap(topic_ids),
        features=features,
        next_offset=_int(obj["nextOffset"], Kind.INT64, "snapshot.nextOffset"),
        controller_epoch=_int(obj["controllerEpoch"], Kind.INT32, "snapshot.controllerEpoch"),
        leader_id=_int(obj["leaderId"], Kind.INT32, "snapshot.leaderId"),
        leader_url=leader_url,
        partition_count=count,
        ignored_records=_int(obj["ignoredRecords"], Kind.INT64, "snapshot.ignoredRecords"),
        voters=_decode_value(Kind.VOTERS, voters, "snapshot.voters"),
        broker_configs=ChunkedMap(
            {name: configs for name, configs in broker_configs.items() if configs}
        ),
        next_producer_id=_int(next_producer_id, Kind.INT64, "snapshot.nextProducerId"),
        client_quotas=ChunkedMap(_decode_client_quotas(client_quotas)),
        acls=indexed_acls,
        scram=ChunkedMap(_decode_scram(scram_rows)),
        delegation_tokens=ChunkedMap(_decode_tokens(token_rows)),
    )
