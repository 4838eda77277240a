"""The quick request parser and response builders: the fast twin of ``models.py``.

Shadows, for the three broker endpoints only (nearly all of a cluster's write
traffic):

* ``models.AlterPartitionRequest`` + its ``to_message(version)`` with
  ``quick_alter_partition_message``: jiter, then the controller's request
  built directly, for plainly valid bodies; anything else returns None and
  the caller takes the pydantic path, which accepts it or names the problem,
  so every 400 still comes from the models. Leader CPU per 100-partition
  request fell by about a quarter (3.9 -> 2.9 ms in-process), and the parse
  itself from 505 to 359 us with equal ISR lists built once (docs/decisions.md
  18 and 24).
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
off).
"""

from __future__ import annotations

from typing import Any

import jiter

from controller import messages as m
from metadata_records import limits
from metadata_records.uuids import InvalidUuid, parse_uuid

from . import models as M

# The one switch: False takes the plain pydantic models for every body and answer.
QUICK = True


# ---------------------------------------------------------------- responses


def _error_obj(r: Any) -> dict[str, Any]:
    """The error fields of a controller response (anything with ``error`` and
    ``error_message``) as JSON."""
    return {"errorCode": int(r.error), "errorName": r.error.name, "errorMessage": r.error_message}


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


# ---------------------------------------------------------------- AlterPartition bodies


_I8, _I32, _I64 = M.INT_KINDS["int8"], M.INT_KINDS["int32"], M.INT_KINDS["int64"]
_BROKER_IDS = (limits.BROKER_ID_MIN, limits.BROKER_ID_MAX)


class _NotPlain(Exception):
    """The body is not plainly valid: let pydantic say why (or accept it)."""


_REQUIRED = object()


def _plain_int(obj: Any, key: str, bounds: tuple[int, int], default: Any = _REQUIRED) -> Any:
    """``obj[key]`` if it is an int within ``bounds`` (``default`` if absent)."""
    if type(obj) is not dict:
        raise _NotPlain
    value = obj.get(key, default)
    if value is default and value is not _REQUIRED:
        return value
    if type(value) is not int or not bounds[0] <= value <= bounds[1]:
        raise _NotPlain
    return value


def _plain_list(obj: dict, key: str) -> list | None:
    value = obj.get(key)
    if value is not None and type(value) is not list:
        raise _NotPlain
    return value


def quick_alter_partition_message(body: bytes, version: int) -> m.AlterPartitionRequest | None:
    """The controller's request straight from a plainly valid body, or None.

    AlterPartition bodies carry hundreds of partitions; building pydantic
    models for each and converting them costs more than deciding the change.
    This accepts exactly the bodies that AlterPartitionRequest would accept and
    fit ``version``, and builds what its ``to_message`` would; for anything
    else (a wrong type, a range, a missing field, a field of another version,
    duplicate keys) it returns None and
    the caller takes the pydantic path, which names the problem.
    ``tests/test_api_models_fast.py`` checks the equivalence with Hypothesis."""
    try:
        obj = jiter.from_json(body, catch_duplicate_keys=True)
        if type(obj) is not dict:
            return None
        broker_id = _plain_int(obj, "brokerId", _BROKER_IDS)
        broker_epoch = _plain_int(obj, "brokerEpoch", _I64, -1)
        topics_in = _plain_list(obj, "topics")
        if topics_in is None or len(topics_in) > limits.MAX_TOPICS_PER_REQUEST:
            return None
        topics = []
        lo8, hi8 = _I8
        lo32, hi32 = _I32
        lo64, hi64 = _I64
        memo: dict[tuple, tuple[m.BrokerState, ...]] = {}
        for t in topics_in:
            if type(t) is not dict:
                return None
            name, topic_id = t.get("topicName"), t.get("topicId")
            if version >= 2:
                if name is not None or type(topic_id) is not str:
                    return None
                topic_id = parse_uuid(topic_id)
            elif topic_id is not None or type(name) is not str:
                return None
            partitions_in = _plain_list(t, "partitions")
            if partitions_in is None or len(partitions_in) > limits.MAX_PARTITIONS_PER_TOPIC_ENTRY:
                return None
            partitions = []
            for p in partitions_in:
                # _plain_int's checks, inlined: this loop runs for every partition.
                if type(p) is not dict:
                    return None
                index = p.get("partitionIndex")
                leader_epoch = p.get("leaderEpoch")
                partition_epoch = p.get("partitionEpoch")
                lrs = p.get("leaderRecoveryState")
                if (
                    type(index) is not int
                    or not lo32 <= index <= hi32
                    or type(leader_epoch) is not int
                    or not lo32 <= leader_epoch <= hi32
                    or type(partition_epoch) is not int
                    or not lo32 <= partition_epoch <= hi32
                    or (lrs is not None and (type(lrs) is not int or not lo8 <= lrs <= hi8))
                    or (version == 0 and lrs is not None)
                ):
                    return None
                isr, states = (), ()
                if version >= 3:
                    members = p.get("newIsrWithEpochs")
                    if (
                        type(members) is not list
                        or len(members) > limits.MAX_REPLICAS
                        or p.get("newIsr") is not None
                    ):
                        return None
                    pairs = []
                    for member in members:
                        if type(member) is not dict:
                            return None
                        b, e = member.get("brokerId"), member.get("brokerEpoch", -1)
                        if (
                            type(b) is not int
                            or not lo32 <= b <= hi32
                            or type(e) is not int
                            or not lo64 <= e <= hi64
                        ):
                            return None
                        pairs.append((b, e))
                    # The same members recur across partitions: built once.
                    key = tuple(pairs)
                    states = memo.get(key)
                    if states is None:
                        states = memo[key] = tuple([m.BrokerState(b, e) for b, e in pairs])
                else:
                    members = p.get("newIsr")
                    if (
                        type(members) is not list
                        or len(members) > limits.MAX_REPLICAS
                        or p.get("newIsrWithEpochs") is not None
                    ):
                        return None
                    for b in members:
                        if type(b) is not int or not lo32 <= b <= hi32:
                            return None
                    isr = tuple(members)
                partitions.append(
                    m.AlterPartitionPartition(
                        index, leader_epoch, partition_epoch, isr, states, lrs or 0
                    )
                )
            topics.append(
                m.AlterPartitionTopic(
                    partitions=tuple(partitions),
                    topic_name=name if version <= 1 else None,
                    topic_id=topic_id if version >= 2 else None,
                )
            )
        return m.AlterPartitionRequest(broker_id, broker_epoch, tuple(topics), version)
    except (_NotPlain, ValueError, InvalidUuid):  # jiter's errors are ValueErrors
        return None


# ---------------------------------------------------------------- what the app calls


def alter_partition_message(body: bytes, version: int) -> m.AlterPartitionRequest | None:
    """The quick parser's request, or None: the body is not plainly valid or
    QUICK is off, and the caller parses it with ``models.AlterPartitionRequest``."""
    return quick_alter_partition_message(body, version) if QUICK else None


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
