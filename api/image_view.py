"""What ``GET /v1/image`` and ``GET /v1/image/diff`` show of an image.

An image is shown as its parts (``PARTS``): brokers and topics as
``GET /v1/brokers`` and ``GET /v1/topics`` show them, the dynamic configs of
topics, brokers and the cluster default, ACL bindings (with their ids),
client quotas, SCRAM credentials (each user's mechanisms and iterations:
never a salt or a key, whoever asks), finalized features and the Raft voters. A sensitive config's
value is `(redacted)` unless the caller's role sees it (as ``GET /v1/log``
and ``GET /v1/snapshot`` do); a topic's own ``configs`` stay as
``GET /v1/topics`` shows them (null for a sensitive one, whoever asks).

``image_chunks`` writes the answer in pieces (one a topic), so a million
partitions stream instead of sitting in memory as one object. ``diff``
compares two images entity by entity, skipping what they share by identity
(untouched topics, partition chunks, brokers), so it costs what changed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from metadata_records.acls import acl_obj
from metadata_records.client_quotas import sort_key
from metadata_records.config_schema import is_sensitive
from metadata_records.delegation_tokens import DelegationToken
from metadata_records.image import MetadataImage, TopicImage
from metadata_records.partition_map import PartitionMap
from metadata_records.partition_states import PartitionStates
from metadata_records.records import BROKER_RESOURCE, TOPIC_RESOURCE
from metadata_records.redaction import REDACTED

from .reads import broker_obj, partition_obj, topic_obj

PARTS = (
    "brokers",
    "topics",
    "configs",
    "acls",
    "clientQuotas",
    "scram",
    "delegationTokens",
    "features",
    "voters",
)


def parse_parts(only: str | None) -> tuple[str, ...]:
    """``?only=`` as parts; ValueError names an unknown one."""
    if not only:
        return PARTS
    wanted = tuple(p.strip() for p in only.split(",") if p.strip())
    unknown = [p for p in wanted if p not in PARTS]
    if unknown:
        raise ValueError(f"only={','.join(unknown)}: the parts are {', '.join(PARTS)}")
    return wanted


def _value(resource_type: int, name: str, value: str, sensitive: bool) -> str:
    return REDACTED if not sensitive and is_sensitive(resource_type, name) else value


def configs_objs(image: MetadataImage, sensitive: bool) -> list[dict[str, Any]]:
    """Every resource with a dynamic config set: topics by name, then brokers
    (the cluster default is resourceName "")."""
    out = []
    for topic in sorted(image.topics.values(), key=lambda t: t.name):
        if topic.configs:
            out.append(_config_obj(TOPIC_RESOURCE, topic.name, topic.configs, sensitive))
    for name, configs in sorted(image.broker_configs.items()):
        out.append(_config_obj(BROKER_RESOURCE, name, configs, sensitive))
    return out


def _config_obj(kind: int, name: str, configs: dict[str, str], sensitive: bool) -> dict:
    return {
        "resourceType": kind,
        "resourceName": name,
        "configs": {k: _value(kind, k, v, sensitive) for k, v in sorted(configs.items())},
    }


def acls_objs(image: MetadataImage) -> list[dict[str, Any]]:
    return [{"id": i, **acl_obj(a)} for i, a in sorted(image.acls.items())]


def quotas_objs(image: MetadataImage) -> list[dict[str, Any]]:
    return [
        {
            "entity": [{"entityType": t, "entityName": n} for t, n in entity],
            "values": dict(sorted(values.items())),
        }
        for entity, values in sorted(image.client_quotas.items(), key=lambda kv: sort_key(kv[0]))
    ]


def scram_objs(image: MetadataImage) -> list[dict[str, Any]]:
    """Each user's credentials as DescribeUserScramCredentials shows them."""
    return [_scram_obj(user, credentials) for user, credentials in sorted(image.scram.items())]


def token_objs(image: MetadataImage) -> list[dict[str, Any]]:
    """Every delegation token, by id: never its HMAC (no image holds one)."""
    return [_token_obj(i, t) for i, t in sorted(image.delegation_tokens.items())]


def _token_obj(token_id: str, t: DelegationToken) -> dict[str, Any]:
    return {
        "tokenId": token_id,
        "owner": t.owner,
        "requester": t.requester,
        "renewers": list(t.renewers),
        "issueTimestamp": t.issue_timestamp,
        "expiryTimestamp": t.expiration_timestamp,
        "maxTimestamp": t.max_timestamp,
    }


def _scram_obj(user: str, credentials: dict) -> dict[str, Any]:
    return {
        "user": user,
        "credentialInfos": [
            {"mechanism": m, "iterations": c.iterations} for m, c in sorted(credentials.items())
        ],
    }


def voters_objs(image: MetadataImage) -> list[dict[str, Any]]:
    return [
        {"voterId": v.voter_id, "directoryId": v.voter_directory_id, "host": v.host, "port": v.port}
        for v in image.voters
    ]


def image_chunks(
    image: MetadataImage,
    head: dict[str, Any],
    parts: tuple[str, ...],
    topics: set[str] | None,
    sensitive: bool,
) -> Iterator[bytes]:
    """The answer's JSON object in pieces: ``head``, then each part asked for
    (``topics``: only these topics, in topics and configs)."""
    yield orjson.dumps(head)[:-1]
    comma = bool(head)
    for part in parts:
        yield (b',"' if comma else b'"') + part.encode() + b'":'
        comma = True
        if part == "topics":
            yield b"["
            first = True
            for t in sorted(image.topics.values(), key=lambda t: t.name):
                if topics is None or t.name in topics:
                    yield (b"" if first else b",") + orjson.dumps(topic_obj(t))
                    first = False
            yield b"]"
        elif part == "brokers":
            yield orjson.dumps([broker_obj(b) for _, b in sorted(image.brokers.items())])
        elif part == "configs":
            objs = configs_objs(image, sensitive)
            if topics is not None:
                objs = [
                    c
                    for c in objs
                    if c["resourceType"] != TOPIC_RESOURCE or c["resourceName"] in topics
                ]
            yield orjson.dumps(objs)
        elif part == "acls":
            yield orjson.dumps(acls_objs(image))
        elif part == "clientQuotas":
            yield orjson.dumps(quotas_objs(image))
        elif part == "scram":
            yield orjson.dumps(scram_objs(image))
        elif part == "delegationTokens":
            yield orjson.dumps(token_objs(image))
        elif part == "features":
            yield orjson.dumps(dict(sorted(image.features.items())))
        else:
            yield orjson.dumps(voters_objs(image))
    yield b"}"


# ---------------------------------------------------------------- diff


def diff(a: MetadataImage, b: MetadataImage, sensitive: bool) -> list[dict[str, Any]]:
    """Every entity that differs between ``a`` and ``b``, with its value in
    each (null: absent), in PARTS order; within a kind, by key."""
    changes: list[dict[str, Any]] = []

    def change(kind: str, key: dict, before: Any, after: Any) -> None:
        if before != after:
            changes.append({"kind": kind, "key": key, "before": before, "after": after})

    if a.brokers is not b.brokers:
        for bid in sorted(a.brokers.keys() | b.brokers.keys()):
            x, y = a.brokers.get(bid), b.brokers.get(bid)
            if x is not y:
                change(
                    "broker", {"brokerId": bid}, _or_none(broker_obj, x), _or_none(broker_obj, y)
                )
    if a.topics is not b.topics:
        _diff_topics(a, b, change, sensitive)
    if a.broker_configs is not b.broker_configs:
        for name in sorted(a.broker_configs.keys() | b.broker_configs.keys()):
            _diff_configs(
                change, BROKER_RESOURCE, name, a.broker_configs.get(name), b.broker_configs.get(name),
                sensitive,
            )  # fmt: skip
    if a.acls is not b.acls:
        for acl_id in sorted(a.acls.keys() | b.acls.keys()):
            x, y = a.acls.get(acl_id), b.acls.get(acl_id)
            change("acl", {"id": acl_id}, _or_none(acl_obj, x), _or_none(acl_obj, y))
    if a.client_quotas is not b.client_quotas:
        for entity in sorted(a.client_quotas.keys() | b.client_quotas.keys(), key=sort_key):
            key = {"entity": [{"entityType": t, "entityName": n} for t, n in entity]}
            change("clientQuota", key, a.client_quotas.get(entity), b.client_quotas.get(entity))
    if a.scram is not b.scram:
        # What changes of a credential a reader may see: its iterations (a new
        # salt or key with the same iterations shows as no change).
        for user in sorted(a.scram.keys() | b.scram.keys()):
            x, y = a.scram.get(user), b.scram.get(user)
            change("scram", {"user": user}, _or_none(lambda c, u=user: _scram_obj(u, c), x),
                   _or_none(lambda c, u=user: _scram_obj(u, c), y))  # fmt: skip
    if a.delegation_tokens is not b.delegation_tokens:
        for token_id in sorted(a.delegation_tokens.keys() | b.delegation_tokens.keys()):
            x, y = a.delegation_tokens.get(token_id), b.delegation_tokens.get(token_id)
            change("delegationToken", {"tokenId": token_id},
                   _or_none(lambda t, i=token_id: _token_obj(i, t), x),
                   _or_none(lambda t, i=token_id: _token_obj(i, t), y))  # fmt: skip
    for name in sorted(a.features.keys() | b.features.keys()):
        change("feature", {"name": name}, a.features.get(name), b.features.get(name))
    if a.voters != b.voters:
        change("voters", {}, voters_objs(a), voters_objs(b))
    return changes


def _or_none(render, value):
    return None if value is None else render(value)


def _topic_head(t: TopicImage | None) -> dict[str, Any] | None:
    return None if t is None else {"name": t.name, "topicId": t.topic_id}


def _diff_topics(a: MetadataImage, b: MetadataImage, change, sensitive: bool) -> None:
    names = sorted(a.topic_ids.keys() | b.topic_ids.keys())
    for name in names:
        x, y = a.topic_by_name(name), b.topic_by_name(name)
        if x is y:
            continue
        change("topic", {"topic": name}, _topic_head(x), _topic_head(y))
        if x is not None and y is not None and x.topic_id == y.topic_id:
            pids = sorted(_differing(x.partitions, y.partitions))
        else:  # created, deleted or recreated: every partition of either
            pids = sorted(
                set(() if x is None else x.partitions) | set(() if y is None else y.partitions)
            )
        for pid in pids:
            before = None if x is None else x.partitions.get(pid)
            after = None if y is None else y.partitions.get(pid)
            change(
                "partition", {"topic": name, "partition": pid},
                _or_none(lambda p, pid=pid: partition_obj(pid, p), before),
                _or_none(lambda p, pid=pid: partition_obj(pid, p), after),
            )  # fmt: skip
        _diff_configs(
            change, TOPIC_RESOURCE, name, None if x is None else x.configs,
            None if y is None else y.configs, sensitive,
        )  # fmt: skip


def _differing(x, y):
    if isinstance(x, PartitionMap | PartitionStates):
        return x.differing(y)
    return {pid for pid in x.keys() | y.keys() if x.get(pid) != y.get(pid)}


def _diff_configs(change, kind: int, name: str, x, y, sensitive: bool) -> None:
    if x is y:
        return
    x, y = x or {}, y or {}
    for key in sorted(x.keys() | y.keys()):
        before, after = x.get(key), y.get(key)
        if before != after:
            change(
                "config", {"resourceType": kind, "resourceName": name, "name": key},
                None if before is None else _value(kind, key, before, sensitive),
                None if after is None else _value(kind, key, after, sensitive),
            )  # fmt: skip
