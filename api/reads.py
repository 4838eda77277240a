"""What the GET endpoints show, built from one immutable image (no locks needed).

Plain dicts with the camelCase names of the response models in ``models/``
(built directly: a topic list can hold a million partitions).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import islice
from typing import Any

import orjson

from metadata_records.acls import ACL_ENUMS, AclBindingFilter, acl_obj, parse_enum
from metadata_records.acls_image import image_acls
from metadata_records.client_quotas import FilterComponent, describe, entity_data, sort_key
from metadata_records.codec import log_record_to_obj
from metadata_records.config_schema import ConfigEntry, is_sensitive
from metadata_records.delegation_tokens import record_of as token_record
from metadata_records.errors import ApiError
from metadata_records.features import (
    KRAFT_VERSION,
    METADATA_VERSION,
    SUPPORTED_FEATURES,
    SUPPORTED_KRAFT_VERSIONS,
    elr_enabled,
    kraft_version,
    level_name,
    register_broker_record_version,
)
from metadata_records.image import (
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from metadata_records.records import (
    BROKER_RESOURCE,
    IN_CONTROLLED_SHUTDOWN,
    NO_CHANGE,
    TOPIC_RESOURCE,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    FeatureLevelRecord,
    LeaderChangeRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
    UserScramCredentialRecord,
    VotersRecord,
)
from metadata_records.redaction import redacted
from quorum.node import QuorumNode


def now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------- brokers and topics


def broker_obj(b: BrokerRegistration) -> dict[str, Any]:
    return {
        "brokerId": b.broker_id,
        "brokerEpoch": b.epoch,
        "incarnationId": b.incarnation_id,
        "fenced": b.fenced,
        "inControlledShutdown": b.in_controlled_shutdown,
        "rack": b.rack,
        "listeners": [
            {
                "name": e.name,
                "host": e.host,
                "port": e.port,
                "securityProtocol": e.security_protocol,
            }
            for e in b.listeners
        ],
        "features": [
            {
                "name": f.name,
                "minSupportedVersion": f.min_supported_version,
                "maxSupportedVersion": f.max_supported_version,
            }
            for f in b.features
        ],
        "registrationOffset": b.registration_offset,
    }


def brokers_obj(image: MetadataImage) -> dict[str, Any]:
    return {"brokers": [broker_obj(b) for _, b in sorted(image.brokers.items())]}


def partition_obj(pid: int, p: PartitionRegistration) -> dict[str, Any]:
    return {
        "partitionIndex": pid,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "leader": p.leader,
        "leaderEpoch": p.leader_epoch,
        "partitionEpoch": p.partition_epoch,
        "leaderRecoveryState": p.leader_recovery_state,
        "addingReplicas": list(p.adding_replicas),
        "removingReplicas": list(p.removing_replicas),
        "eligibleLeaderReplicas": list(p.elr),
        "lastKnownElr": list(p.last_known_elr),
    }


def topic_obj(t: TopicImage) -> dict[str, Any]:
    return {
        "name": t.name,
        "topicId": t.topic_id,
        "configs": [
            {"name": k, "value": None if is_sensitive(TOPIC_RESOURCE, k) else v}
            for k, v in sorted(t.configs.items())
        ],
        "partitions": [partition_obj(pid, p) for pid, p in sorted(t.partitions.items())],
    }


# ---------------------------------------------------------------- configs


def configs_obj(
    resource_type: int,
    resource_name: str,
    entries: list[ConfigEntry],
    include_synonyms: bool,
    keys: list[str] | None,
) -> dict[str, Any]:
    """DescribeConfigs' answer for one resource (``keys``: only these names).
    A sensitive config shows null for its value and every synonym's, whoever
    asks (Kafka's ConfigHelper: ``value = if (isSensitive) null``)."""
    wanted = None if not keys else set(keys)
    return {
        "resourceType": resource_type,
        "resourceName": resource_name,
        "configs": [
            {
                "name": e.name,
                "value": None if e.sensitive else e.value,
                "readOnly": e.read_only,
                "configSource": int(e.source),
                "configSourceName": e.source.name,
                "isSensitive": e.sensitive,
                "configType": int(e.type),
                "configTypeName": e.type.name,
                "documentation": e.doc,
                "synonyms": [
                    {
                        "name": n,
                        "value": None if e.sensitive else v,
                        "source": int(src),
                        "sourceName": src.name,
                    }
                    for src, n, v in e.synonyms
                ]
                if include_synonyms
                else [],
            }
            for e in entries
            if wanted is None or e.name in wanted
        ],
    }


# ---------------------------------------------------------------- client quotas

_NO_ERROR = {"errorCode": 0, "errorName": "NONE", "errorMessage": None}


def client_quotas_obj(
    image: MetadataImage, components: list[FilterComponent], strict: bool
) -> dict[str, Any] | ApiError:
    """DescribeClientQuotas' answer from ``image``, or the filter's error."""
    found = describe(image.client_quotas, components, strict)
    if isinstance(found, ApiError):
        return found
    return {
        **_NO_ERROR,
        "throttleTimeMs": 0,
        "entries": [
            {
                "entity": [{"entityType": t, "entityName": n} for t, n in entity],
                "values": [{"key": k, "value": v} for k, v in values.items()],
            }
            for entity, values in found
        ],
    }


# ---------------------------------------------------------------- ACLs


def acl_filter_from_query(
    resource_type: str | None,
    resource_name: str | None,
    pattern_type: str | None,
    principal: str | None,
    host: str | None,
    operation: str | None,
    permission_type: str | None,
) -> AclBindingFilter:
    """DescribeAcls' filter from query values (absent: any); ValueError names a
    value that is not one of Kafka's names, or an UNKNOWN (Kafka's
    DescribeAclsRequest refuses those)."""
    codes = {}
    for field, value in (
        ("resourceType", resource_type),
        ("patternType", pattern_type),
        ("operation", operation),
        ("permissionType", permission_type),
    ):
        member = (
            ACL_ENUMS[field].ANY if value is None else parse_enum(ACL_ENUMS[field], field, value)
        )
        if member.name == "UNKNOWN":
            raise ValueError(f"{field} UNKNOWN matches nothing: name a value or leave it out")
        codes[field] = int(member)
    return AclBindingFilter(
        codes["resourceType"], resource_name, codes["patternType"], principal, host,
        codes["operation"], codes["permissionType"],
    )  # fmt: skip


def acls_obj(image: MetadataImage, acl_filter: AclBindingFilter) -> dict[str, Any]:
    """DescribeAcls' answer: the matching bindings grouped by resource pattern,
    sorted by resource type, name and pattern type, then by entry."""
    by_resource: dict[tuple, list] = {}
    for acl in sorted(acl for _, acl in image_acls(image).matching(acl_filter)):
        key = (acl.resource_type, acl.pattern_type, acl.resource_name)
        by_resource.setdefault(key, []).append(acl_obj(acl))
    resources = []
    for entries in by_resource.values():
        head = entries[0]
        resources.append(
            {
                "resourceType": head["resourceType"],
                "resourceName": head["resourceName"],
                "patternType": head["patternType"],
                "acls": [
                    {k: e[k] for k in ("principal", "host", "operation", "permissionType")}
                    for e in entries
                ],
            }
        )
    return {**_NO_ERROR, "throttleTimeMs": 0, "resources": resources}


# ---------------------------------------------------------------- snapshot


def snapshot_record_iter(image: MetadataImage) -> Iterator[Record]:
    """Records that recreate ``image`` when replayed on an empty one, one at a
    time (2,000,000 partitions are as many records: never all at once).

    Order: the controller's LEADER_CHANGE, the voter set (KRAFT_VOTERS),
    feature levels (metadata.version decides record versions), brokers, the
    next producer id block (broker -1, epoch -1, as Kafka's snapshots), the
    ACLs (AccessControlEntryRecords by id), the brokers' dynamic configs
    (the cluster default first), the client quotas (by entity, then key), then per
    topic its TopicRecord, ConfigRecords and PartitionRecords (v2 while ELR is
    on). What replay cannot reproduce: each
    broker's ``registrationOffset`` (it becomes the record's position, as in
    Kafka, where snapshot records take the snapshot's offset) and the count of
    ignored records."""
    elr = elr_enabled(image.features)  # KIP-966: PartitionRecord v2
    if image.leader_id >= 0 and image.controller_epoch > 0:
        yield (
            LeaderChangeRecord(
                controller_epoch=image.controller_epoch,
                leader_id=image.leader_id,
                leader_url=image.leader_url or "",
            )
        )
    if image.voters:
        yield (VotersRecord(voters=image.voters))
    for name, level in sorted(image.features.items()):
        yield (FeatureLevelRecord(name=name, feature_level=level))
    version = register_broker_record_version(image.metadata_version)
    for _, b in sorted(image.brokers.items()):
        yield (
            RegisterBrokerRecord(
                broker_id=b.broker_id,
                incarnation_id=b.incarnation_id,
                broker_epoch=b.epoch,
                end_points=b.listeners,
                features=b.features,
                rack=b.rack,
                fenced=b.fenced,
                in_controlled_shutdown=b.in_controlled_shutdown if version >= 1 else False,
                version=version,
            )
        )
        if b.in_controlled_shutdown and version == 0:
            yield (
                BrokerRegistrationChangeRecord(
                    broker_id=b.broker_id,
                    broker_epoch=b.epoch,
                    fenced=NO_CHANGE,
                    in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN,
                    version=1,
                )
            )
    if image.next_producer_id:
        yield (
            ProducerIdsRecord(
                broker_id=-1, broker_epoch=-1, next_producer_id=image.next_producer_id
            )
        )
    for acl_id, acl in sorted(image.acls.items()):
        yield (acl.to_record(acl_id))
    for resource, configs in sorted(image.broker_configs.items()):
        for name, value in sorted(configs.items()):
            yield (
                ConfigRecord(
                    resource_type=BROKER_RESOURCE, resource_name=resource, name=name, value=value
                )
            )
    for entity, quotas in sorted(image.client_quotas.items(), key=lambda e: sort_key(e[0])):
        for key, value in sorted(quotas.items()):
            yield (
                ClientQuotaRecord(entity=entity_data(entity), key=key, value=value, remove=False)
            )
    for user, credentials in sorted(image.scram.items()):
        for mechanism, c in sorted(credentials.items()):
            yield (
                UserScramCredentialRecord(
                    name=user,
                    mechanism=mechanism,
                    salt=c.salt,
                    stored_key=c.stored_key,
                    server_key=c.server_key,
                    iterations=c.iterations,
                )
            )
    for token_id, token in sorted(image.delegation_tokens.items()):
        yield (token_record(token_id, token))
    for t in sorted(image.topics.values(), key=lambda t: t.name):
        yield (TopicRecord(name=t.name, topic_id=t.topic_id))
        for name, value in sorted(t.configs.items()):
            yield (
                ConfigRecord(
                    resource_type=TOPIC_RESOURCE, resource_name=t.name, name=name, value=value
                )
            )
        for pid, p in sorted(t.partitions.items()):
            yield (p.to_record(t.topic_id, pid, elr))


def snapshot_records(image: MetadataImage) -> list[Record]:
    """``snapshot_record_iter``'s records, all of them."""
    return list(snapshot_record_iter(image))


def snapshot_record_objs(
    image: MetadataImage, timestamp_ms: int, sensitive: bool = True
) -> list[dict[str, Any]]:
    """The snapshot records in the log's shape; each carries ``offset`` = the
    image's last offset (the offset the snapshot is at), and so ``batchOffset``:
    the snapshot restates the image as one unit, at one offset, and every
    record of it holds only together with the others. ``sensitive`` False:
    sensitive config values as the marker; SCRAM secrets are hidden either
    way (metadata_records.redaction)."""
    offset = image.last_offset
    epoch = image.controller_epoch
    records = [redacted(r, sensitive) for r in snapshot_record_iter(image)]
    return [log_record_to_obj(offset, timestamp_ms, epoch, r, offset) for r in records]


SNAPSHOT_PIECE = 4_096  # records a piece of GET /v1/snapshot's streamed body


def snapshot_pieces(
    image: MetadataImage, timestamp_ms: int, sensitive: bool = True, ndjson: bool = False
) -> Iterator[bytes]:
    """GET /v1/snapshot's body, ``SNAPSHOT_PIECE`` records a piece: the
    records of ``snapshot_record_objs`` as one JSON object (``offset``,
    ``nextOffset``, ``records``) or one per line. Only a piece's records
    exist at a time: at 2,000,000 partitions the whole answer was about a
    gigabyte of objects and a body of 600 MB built before the first byte."""
    offset, epoch = image.last_offset, image.controller_epoch
    records = snapshot_record_iter(image)
    if not ndjson:
        yield b'{"offset":%d,"nextOffset":%d,"records":[' % (offset, image.next_offset)
    first = True
    while piece := list(islice(records, SNAPSHOT_PIECE)):
        objs = (
            orjson.dumps(
                log_record_to_obj(offset, timestamp_ms, epoch, redacted(r, sensitive), offset)
            )
            for r in piece
        )
        if ndjson:
            yield b"".join(o + b"\n" for o in objs)
        else:
            yield (b"" if first else b",") + b",".join(objs)
        first = False
    if not ndjson:
        yield b"]}"


def snapshot_timestamp(node: QuorumNode, image: MetadataImage) -> int:
    """The timestamp of the image's last record if the log still holds it, else now."""
    if image.next_offset > 0:
        try:
            entries = node.sm.log.read(image.last_offset, 1)
        except LookupError:
            entries = []
        if entries and entries[0].offset == image.last_offset:
            return entries[0].timestamp_ms
    return now_ms()


# ---------------------------------------------------------------- readiness and status


def not_ready_reason(node: QuorumNode) -> str | None:
    """Why the node is not ready (/readyz and reads), or None if it is."""
    explain = getattr(node, "explain_not_ready", None)  # an HTTP worker (voter/worker_node.py)
    if explain is not None:
        return explain()
    if (removed := node.guard.removed_reason()) is not None:
        return removed
    if node.ready:
        return None
    if node.sm.fatal is not None:
        return f"this node refuses to serve: {node.sm.fatal}"
    if (disk := node.disk.reason()) is not None:
        return f"this voter cannot write to its disk: {disk}"
    if not node.raft_alive:
        return "the Raft tick thread is not running"
    if node.replaying:
        return "this node is still replaying its log"
    if (moved := node.guard.moved()) is not None:
        return (
            f"this voter is at {moved[1]} (its --raft-address) but the voter set names it at "
            f"{moved[0]}: it counts for nothing until the leader has moved it, which it asks "
            "for once a second (metaquorum update-voter; docs/durability.md)"
        )
    if node.raft_leader_id is None:
        return "no leader is known"
    if not node.caught_up:
        raft = node.status()
        return (
            f"this node is behind the leader (applied Raft entry "
            f"{raft.last_applied} of {raft.commit_index})"
        )
    if (starting := node.http_starting()) is not None:
        return starting
    return "this node is shutting down"


class VoterTracker:
    """When each voter was last seen fully caught up (wall clock ms).

    Sampled whenever the status, /readyz or /metrics is asked for: pysyncobj
    keeps no such history."""

    def __init__(self) -> None:
        self.last_caught_up: dict[int, int] = {}

    def sample(self, node: QuorumNode, raft: dict[str, Any]) -> dict[int, dict[str, Any]]:
        now = now_ms()
        is_leader = raft.get("state") == 2
        status = node.status()
        commit = raft.get("commit_idx", status.commit_index)
        applied = raft.get("last_applied", status.last_applied)
        out: dict[int, dict[str, Any]] = {}
        voters = node.voter_addresses()
        # Joiners the leader streams to, and a voter being removed, listed too
        # (as kafka-metadata-quorum describe --replication lists observers).
        listed = {**node.guard.learners, **voters}
        if node.config.raft_address is not None:  # a joiner shows itself; an observer not
            listed.setdefault(node.node_id, node.config.raft_address)
        # Kafka's LastFetchTimestamp: when the leader last heard each follower.
        ages = node.answer_ages() if is_leader else {}
        for node_id, address in sorted(listed.items()):
            end = fetched = None
            if node_id == node.node_id:
                connected = True
                lag = records_between(node, applied, commit)
                end = node.image.next_offset
                fetched = now if is_leader else None  # as Kafka shows its leader
            else:
                connected = (
                    raft.get(f"partner_node_status_server_{address}") == 2
                    or raft.get(f"readonly_node_status_server_{address}") == 2
                )
                match = raft.get(f"match_idx_server_{address}")
                if not node.guard.counts(node_id):  # an observer: pysyncobj keeps no match
                    match = node.guard.progress.get(node_id, match)
                lag = (
                    records_between(node, match, commit)
                    if is_leader and match is not None
                    else None
                )
                if is_leader and match is not None:
                    end = node.sm.next_offset_at(match)
                if address in ages:
                    fetched = now - round(ages[address] * 1000)
            if lag == 0:
                self.last_caught_up[node_id] = now
            out[node_id] = {
                "voter": node_id in voters,
                "address": address,
                "connected": connected,
                "lag": lag,
                "lastCaughtUpMs": self.last_caught_up.get(node_id),
                "logEndOffset": end,
                "lastFetchMs": fetched,
            }
        return out


def records_between(node: QuorumNode, behind: int, ahead: int) -> int:
    """Metadata records in Raft entries (behind, ahead]: a voter's lag in records
    (KIP-836). Entries are batches; when the records of an entry are no longer
    known (compacted, or older than what is kept), the count of entries."""
    if ahead <= behind:
        return 0
    hi = node.sm.next_offset_at(ahead)
    lo = node.sm.next_offset_at(behind)
    if hi is None or lo is None:
        return ahead - behind
    return max(0, hi - lo)


def observers_connected(raft: dict[str, Any], known: set[str]) -> int:
    prefix = "readonly_node_status_server_"
    return sum(
        1
        for k, v in raft.items()
        if k.startswith(prefix) and v == 2 and k.removeprefix(prefix) not in known
    )


def voter_url(node: QuorumNode, node_id: int) -> str | None:
    if node_id == node.node_id:
        return node.config.advertised_url
    image = node.image
    if image.leader_id == node_id:
        return image.leader_url
    return None


def quorum_status_obj(node: QuorumNode, tracker: VoterTracker, auth_on: bool) -> dict[str, Any]:
    raft = node.raft_status()
    status = node.status()
    image = node.image
    voters = tracker.sample(node, raft)
    guard = node.guard
    voter_set = guard.voter_set()
    return {
        "clusterId": node.cluster_id,
        "nodeId": node.node_id,
        "directoryId": guard.directory_id,
        "role": guard.role(),
        "leaderId": node.raft_leader_id,
        "leaderUrl": node.leader_url,
        "controllerEpoch": image.controller_epoch,
        "raftTerm": raft.get("raft_term", status.term),
        "highWatermark": image.next_offset,
        "lastAppliedOffset": image.last_offset,
        "metadataVersion": image.metadata_version,
        "finalizedFeatures": dict(sorted(image.features.items())),
        "auth": "on" if auth_on else "off",
        "active": node.active,
        "ready": node.ready,
        "replaying": node.replaying,
        "queueDepth": node.queue_depth,
        "raftCommitIndex": raft.get("commit_idx", status.commit_index),
        "raftLastApplied": raft.get("last_applied", status.last_applied),
        "ignoredRecords": image.ignored_records,
        "ignoredReasons": list(image.ignored_reasons),
        "elections": {
            **(
                {"preVote": False}
                if node.pre_vote is None
                else {"preVote": True, **node.pre_vote.stats.as_dict()}
            ),
            **node.leadership.as_dict(),
        },
        "observer": node.config.observer,
        # Read-only followers (serve --observer) connected to this node: not the
        # nodes pysyncobj lists as read-only because they are known by address
        # (learners, voters a catching-up node heard of).
        "observersConnected": observers_connected(raft, set(guard.addresses.values())),
        "voters": [
            {
                "nodeId": node_id,
                "url": voter_url(node, node_id),
                "raftAddress": v["address"],
                "connected": v["connected"],
                "lagRecords": v["lag"],
                "lastCaughtUpMs": v["lastCaughtUpMs"],
                "logEndOffset": v["logEndOffset"],
                "lastFetchMs": v["lastFetchMs"],
                "directoryId": voter_set.get(node_id),
                "connectedDirectoryId": guard.directory_of(node_id),
                "role": guard.role(node_id),
                "voter": v["voter"],
            }
            for node_id, v in voters.items()
        ],
    }


# ---------------------------------------------------------------- reassignments


def reassignments_obj(
    image: MetadataImage, wanted: list[tuple[str, tuple[int, ...] | None]] | None
) -> dict[str, Any]:
    """ListPartitionReassignments: the partitions with replicas being added or
    removed (Kafka's ``isReassigning``), of every topic (``wanted`` None) or of
    the topics and partitions asked for (None: all of that topic's). Kafka
    leaves out what does not exist or is not reassigning; ``notFound`` names
    what does not exist, so a typo is not read as "nothing in progress"."""
    topics: list[dict[str, Any]] = []
    not_found: list[str] = []
    if wanted is None:
        asked = [(t, None) for t in sorted(image.topics.values(), key=lambda t: t.name)]
    else:
        asked = []
        for name, partitions in wanted:
            topic = image.topic_by_name(name)
            if topic is None:
                not_found.append(name)
            else:
                asked.append((topic, partitions))
    for topic, partitions in asked:
        ongoing = []
        for pid in sorted(topic.partitions) if partitions is None else partitions:
            p = topic.partitions.get(pid)
            if p is None:
                not_found.append(f"{topic.name}:{pid}")
            elif p.adding_replicas or p.removing_replicas:
                ongoing.append(
                    {
                        "partitionIndex": pid,
                        "replicas": list(p.replicas),
                        "addingReplicas": list(p.adding_replicas),
                        "removingReplicas": list(p.removing_replicas),
                    }
                )
        if ongoing:
            topics.append({"name": topic.name, "topicId": topic.topic_id, "partitions": ongoing})
    return {"offset": image.last_offset, "topics": topics, "notFound": not_found}


# ---------------------------------------------------------------- features


def features_obj(image: MetadataImage) -> dict[str, Any]:
    """DescribeFeatures (what ``kafka-features describe`` prints): each feature
    this controller supports, its range and its finalized level, by number and
    by Kafka's name. The epoch is the image's offset, as Kafka's
    finalizedFeaturesEpoch is the committed offset it was read at."""
    finalized = {**image.features, METADATA_VERSION: image.metadata_version}
    finalized[KRAFT_VERSION] = kraft_version(bool(image.voters))
    supported = {**SUPPORTED_FEATURES, KRAFT_VERSION: SUPPORTED_KRAFT_VERSIONS}
    features = []
    for name in sorted(supported.keys() | finalized.keys()):
        low, high = supported.get(name, (0, 0))
        level = finalized.get(name, 0)  # a feature never finalized is at level 0
        features.append(
            {
                "name": name,
                "supportedMinVersion": low,
                "supportedMaxVersion": high,
                "finalizedVersionLevel": level,
                "supportedMinVersionName": level_name(name, low),
                "supportedMaxVersionName": level_name(name, high),
                "finalizedVersionLevelName": level_name(name, level),
            }
        )
    return {"finalizedFeaturesEpoch": image.last_offset, "features": features}
