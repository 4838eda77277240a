"""The quick request parser and response builders: the fast twin of ``models/brokers.py``.

Shadows, for the three broker endpoints only (nearly all of a cluster's write
traffic):

* ``models.AlterPartitionRequest`` + its ``to_message(version)`` with
  ``quick_alter_partition_message``, ``models.BrokerHeartbeatRequest`` +
  ``to_message()`` with ``quick_heartbeat_message``, and
  ``models.BrokerRegistrationRequest`` + ``to_message()`` with
  ``quick_registration_message``: msgspec, then the
  controller's request built directly, for plainly valid bodies; anything
  else returns None and the caller takes the pydantic path, which accepts it
  or names the problem, so every 400 still comes from the models
  (docs/decisions.md 18, 24 and 113: a 100-partition parse 222 -> 121 us, a
  heartbeat's 2.4 -> 1.0 us).
* ``<Model>.from_message(r).to_json_obj()`` of the heartbeat, registration and
  AlterPartition responses with ``quick_*_response_obj``: the same JSON
  object built as a dict, as pydantic models for every partition cost more
  than deciding the change (decisions.md 14). The models stay the OpenAPI
  contract.

The switch is ``QUICK`` below: False sends every body through pydantic and
builds every response through its model. The app calls only the functions at
the end of this module, which read it. Agreement tests:
``tests/test_api_models_fast.py`` (Hypothesis: the same bodies and responses
to both, and the app answering the same requests alike with ``QUICK`` on and
off). Every speed switch is listed in ``metaquorum/speed_switches.py``.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, UnsetType

from controller import messages as m
from metadata_records import limits
from metadata_records.codec_fast import bounded_int
from metadata_records.records import Endpoint, FeatureRange
from metadata_records.uuids import InvalidUuid, parse_uuid

from . import models as M

# The one switch: False takes the plain pydantic models for every body and answer.
# Listed with every other speed switch in metaquorum/speed_switches.py.
QUICK = True


# ---------------------------------------------------------------- responses


def _error_obj(r: Any) -> dict[str, Any]:
    """The error fields of a controller response (anything with ``error``,
    ``error_message`` and ``rule``) as JSON."""
    return {
        "errorCode": int(r.error),
        "errorName": r.error.name,
        "errorMessage": r.error_message,
        "rule": r.rule,
    }


def quick_registration_response_obj(r: m.BrokerRegistrationResponse) -> dict[str, Any]:
    """``BrokerRegistrationResponse.from_message(r).to_json_obj()``, built directly."""
    return {**_error_obj(r), "throttleTimeMs": 0, "brokerEpoch": r.broker_epoch}


def quick_heartbeat_response_obj(r: m.BrokerHeartbeatResponse) -> dict[str, Any]:
    """``BrokerHeartbeatResponse.from_message(r).to_json_obj()``, built directly
    (the hottest path)."""
    return {
        **_error_obj(r),
        "throttleTimeMs": 0,
        "isCaughtUp": r.is_caught_up,
        "isFenced": r.is_fenced,
        "shouldShutDown": r.should_shut_down,
    }


def quick_alter_partition_response_obj(r: m.AlterPartitionResponse) -> dict[str, Any]:
    """``AlterPartitionResponse.from_message(r).to_json_obj()``, built directly."""
    topics = []
    for t in r.topics:
        partitions = [
            {
                "errorCode": int(p.error),
                "errorName": p.error.name,
                "errorMessage": p.error_message,
                "rule": p.rule,
                "partitionIndex": p.partition_index,
                "leaderId": p.leader_id,
                "leaderEpoch": p.leader_epoch,
                "isr": list(p.isr),
                "leaderRecoveryState": p.leader_recovery_state,
                "partitionEpoch": p.partition_epoch,
            }
            for p in t.partitions
        ]
        if t.topic_id is None:
            topics.append({"topicName": t.topic_name, "partitions": partitions})
        else:
            topics.append({"topicId": t.topic_id, "partitions": partitions})
    return {**_error_obj(r), "throttleTimeMs": 0, "topics": topics}


# ---------------------------------------------------------------- request bodies

# msgspec decodes and checks a body into these Structs in C, about four times
# as fast as jiter builds the same body as dicts (100-partition AlterPartition:
# 35 against 117 us); the messages are then built from them. Optional fields
# default to UNSET, so what the body held is known: ``_keys`` counts it.

_I8 = bounded_int(*M.INT_KINDS["int8"])
_I32 = bounded_int(*M.INT_KINDS["int32"])
_I64 = bounded_int(*M.INT_KINDS["int64"])
_BROKER_ID = bounded_int(limits.BROKER_ID_MIN, limits.BROKER_ID_MAX)


class _Member(msgspec.Struct, rename="camel"):
    broker_id: _I32
    broker_epoch: _I64 | UnsetType = UNSET


class _Partition(msgspec.Struct, rename="camel"):
    partition_index: _I32
    leader_epoch: _I32
    partition_epoch: _I32
    new_isr: Annotated[list[_I32], Meta(max_length=limits.MAX_REPLICAS)] | None | UnsetType = UNSET
    new_isr_with_epochs: (
        Annotated[list[_Member], Meta(max_length=limits.MAX_REPLICAS)] | None | UnsetType
    ) = UNSET
    leader_recovery_state: _I8 | None | UnsetType = UNSET


class _Topic(msgspec.Struct, rename="camel"):
    partitions: Annotated[list[_Partition], Meta(max_length=limits.MAX_PARTITIONS_PER_TOPIC_ENTRY)]
    topic_id: str | None | UnsetType = UNSET
    topic_name: str | None | UnsetType = UNSET


class _AlterPartition(msgspec.Struct, rename="camel"):
    broker_id: _BROKER_ID
    topics: Annotated[list[_Topic], Meta(max_length=limits.MAX_TOPICS_PER_REQUEST)]
    broker_epoch: _I64 | UnsetType = UNSET


class _Heartbeat(msgspec.Struct, rename="camel"):
    broker_id: _BROKER_ID
    current_metadata_offset: _I64
    broker_epoch: _I64 | UnsetType = UNSET
    want_fence: bool | UnsetType = UNSET
    want_shut_down: bool | UnsetType = UNSET


def _bounded_str(max_length: int) -> Any:
    return Annotated[str, Meta(max_length=max_length)]


_I16 = bounded_int(*M.INT_KINDS["int16"])
_U16 = bounded_int(*M.INT_KINDS["uint16"])
_NAME = _bounded_str(limits.MAX_NAME_LENGTH)


class _Listener(msgspec.Struct, rename="camel"):
    name: _NAME
    host: _bounded_str(limits.MAX_HOST_LENGTH)
    port: _U16
    security_protocol: _I16


class _Feature(msgspec.Struct, rename="camel"):
    name: _NAME
    min_supported_version: _I16
    max_supported_version: _I16


class _Registration(msgspec.Struct, rename="camel"):
    broker_id: _BROKER_ID
    cluster_id: _bounded_str(limits.MAX_CLUSTER_ID_LENGTH)
    incarnation_id: str
    listeners: Annotated[list[_Listener], Meta(max_length=limits.MAX_LISTENERS)] | UnsetType = UNSET
    features: Annotated[list[_Feature], Meta(max_length=limits.MAX_FEATURES)] | UnsetType = UNSET
    rack: _bounded_str(limits.MAX_RACK_LENGTH) | None | UnsetType = UNSET
    is_migrating_zk_broker: bool | UnsetType = UNSET
    previous_broker_epoch: _I64 | UnsetType = UNSET


_ALTER_PARTITION = msgspec.json.Decoder(_AlterPartition)
_HEARTBEAT = msgspec.json.Decoder(_Heartbeat)
_REGISTRATION = msgspec.json.Decoder(_Registration)
_ABSENT = (UNSET, None)  # a field not sent, or sent as null


def _keys(body: bytes, counted: int) -> bool:
    """Whether ``body`` holds exactly the ``counted`` keys that were decoded,
    so no key twice and none unknown (decisions.md 45: a repeated key is
    refused, where msgspec keeps the last). Every key is followed by a colon,
    and outside strings only keys are; with no backslash in the body no key
    is escaped, so a colon inside a string (no name here has one) can only
    make the count differ, never hide a repeat: then pydantic decides."""
    return b"\\" not in body and body.count(b":") == counted


def quick_alter_partition_message(body: bytes, version: int) -> m.AlterPartitionRequest | None:
    """The controller's request straight from a plainly valid body, or None.

    AlterPartition bodies carry hundreds of partitions; building pydantic
    models for each and converting them costs more than deciding the change.
    This accepts only bodies that AlterPartitionRequest would accept and fit
    ``version``, and builds what its ``to_message`` would; for anything else
    (a wrong type, a range, a missing field, a field of another version, a
    repeated or unknown key, an escaped string) it returns None and the caller
    takes the pydantic path, which names the problem or accepts the body.
    ``tests/test_api_models_fast.py`` checks the equivalence with Hypothesis."""
    try:
        req = _ALTER_PARTITION.decode(body)
        keys = 3 if req.broker_epoch is not UNSET else 2
        topics = []
        memo: dict[tuple, tuple[m.BrokerState, ...]] = {}
        for t in req.topics:
            name, topic_id = t.topic_name, t.topic_id
            keys += 1 + (name is not UNSET) + (topic_id is not UNSET)
            if version >= 2:
                if name not in _ABSENT or type(topic_id) is not str:
                    return None
                topic_id = parse_uuid(topic_id)
                name = None
            else:
                if topic_id not in _ABSENT or type(name) is not str:
                    return None
                topic_id = None
            partitions = []
            for p in t.partitions:
                lrs = p.leader_recovery_state
                isr, states = (), ()
                with_epochs, plain = p.new_isr_with_epochs, p.new_isr
                keys += 3 + (lrs is not UNSET) + (with_epochs is not UNSET) + (plain is not UNSET)
                if lrs in _ABSENT:
                    lrs = 0
                elif version == 0:
                    return None
                if version >= 3:
                    if with_epochs in _ABSENT or plain not in _ABSENT:
                        return None
                    pairs = []
                    for member in with_epochs:
                        epoch = member.broker_epoch
                        if epoch is UNSET:
                            epoch = -1
                            keys += 1
                        else:
                            keys += 2
                        pairs.append((member.broker_id, epoch))
                    # The same members recur across partitions: built once.
                    key = tuple(pairs)
                    states = memo.get(key)
                    if states is None:
                        states = memo[key] = tuple([m.BrokerState(b, e) for b, e in pairs])
                else:
                    if plain in _ABSENT or with_epochs not in _ABSENT:
                        return None
                    isr = tuple(plain)
                partitions.append(
                    m.AlterPartitionPartition(
                        p.partition_index, p.leader_epoch, p.partition_epoch, isr, states, lrs
                    )
                )
            topics.append(
                m.AlterPartitionTopic(
                    partitions=tuple(partitions), topic_name=name, topic_id=topic_id
                )
            )
        if not _keys(body, keys):
            return None
        epoch = req.broker_epoch
        return m.AlterPartitionRequest(
            req.broker_id, -1 if epoch is UNSET else epoch, tuple(topics), version
        )
    except (msgspec.ValidationError, msgspec.DecodeError, InvalidUuid, RecursionError):
        # (msgspec gives up on values nested thousands deep with RecursionError)
        return None


def quick_heartbeat_message(body: bytes) -> m.BrokerHeartbeatRequest | None:
    """``BrokerHeartbeatRequest.model_validate_json(body).to_message()`` for a
    plainly valid body, or None (as ``quick_alter_partition_message``)."""
    try:
        req = _HEARTBEAT.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return None
    epoch, fence, shut_down = req.broker_epoch, req.want_fence, req.want_shut_down
    keys = 2 + (epoch is not UNSET) + (fence is not UNSET) + (shut_down is not UNSET)
    if not _keys(body, keys):
        return None
    return m.BrokerHeartbeatRequest(
        req.broker_id,
        -1 if epoch is UNSET else epoch,
        req.current_metadata_offset,
        fence is True,
        shut_down is True,
    )


def quick_registration_message(body: bytes) -> m.BrokerRegistrationRequest | None:
    """``BrokerRegistrationRequest.model_validate_json(body).to_message()`` for
    a plainly valid body, or None (as ``quick_alter_partition_message``). A
    rolling restart of a large cluster registers every broker within seconds."""
    try:
        req = _REGISTRATION.decode(body)
        incarnation_id = parse_uuid(req.incarnation_id)
    except (msgspec.ValidationError, msgspec.DecodeError, InvalidUuid, RecursionError):
        return None
    listeners, features, rack = req.listeners, req.features, req.rack
    zk, previous = req.is_migrating_zk_broker, req.previous_broker_epoch
    keys = 3 + (rack is not UNSET) + (zk is not UNSET) + (previous is not UNSET)
    if listeners is UNSET:
        listeners = ()
    else:
        keys += 1 + 4 * len(listeners)
        listeners = tuple(
            [Endpoint(x.name, x.host, x.port, x.security_protocol) for x in listeners]
        )
    if features is UNSET:
        features = ()
    else:
        keys += 1 + 3 * len(features)
        features = tuple(
            [
                FeatureRange(f.name, f.min_supported_version, f.max_supported_version)
                for f in features
            ]
        )
    if not _keys(body, keys):
        return None
    return m.BrokerRegistrationRequest(
        req.broker_id,
        req.cluster_id,
        incarnation_id,
        listeners,
        features,
        None if rack is UNSET else rack,
        zk is True,
        -1 if previous is UNSET else previous,
    )


# ---------------------------------------------------------------- what the app calls


def alter_partition_message(body: bytes, version: int) -> m.AlterPartitionRequest | None:
    """The quick parser's request, or None: the body is not plainly valid or
    QUICK is off, and the caller parses it with ``models.AlterPartitionRequest``."""
    return quick_alter_partition_message(body, version) if QUICK else None


def heartbeat_message(body: bytes) -> m.BrokerHeartbeatRequest | None:
    """As ``alter_partition_message``, for ``models.BrokerHeartbeatRequest``."""
    return quick_heartbeat_message(body) if QUICK else None


def registration_message(body: bytes) -> m.BrokerRegistrationRequest | None:
    """As ``alter_partition_message``, for ``models.BrokerRegistrationRequest``."""
    return quick_registration_message(body) if QUICK else None


def registration_response_obj(r: m.BrokerRegistrationResponse) -> dict[str, Any]:
    if QUICK:
        return quick_registration_response_obj(r)
    return M.BrokerRegistrationResponse.from_message(r).to_json_obj()


def heartbeat_response_obj(r: m.BrokerHeartbeatResponse) -> dict[str, Any]:
    if QUICK:
        return quick_heartbeat_response_obj(r)
    return M.BrokerHeartbeatResponse.from_message(r).to_json_obj()


def alter_partition_response_obj(r: m.AlterPartitionResponse) -> dict[str, Any]:
    if QUICK:
        return quick_alter_partition_response_obj(r)
    return M.AlterPartitionResponse.from_message(r).to_json_obj()
