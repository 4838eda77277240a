"""The partition and topic commands a Kafka operator runs with Kafka's own
tools, as metaquorum commands over the HTTP API:

* ``reassignments list|execute|cancel`` (kafka-reassign-partitions --list,
  --execute, --cancel; the same reassignment JSON file);
* ``elect-leaders`` (kafka-leader-election);
* ``delete-topics NAME...`` (kafka-topics --delete, several at once);
* ``describe-features`` (kafka-features describe).

Each prints what Kafka's tool prints, in words, or the answer with ``--json``;
a write that refused any entry exits 1 (docs/cli.md). Their entries go into
the command table as they are (metaquorum/ops.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson
from rich.console import Console
from rich.markup import escape

from brokers.client import MetaquorumClient
from brokers.tls import ClientTls

from .ops_command import WRITE_EXITS, OpCommand, fail
from .ops_render import dump

ELECTION_TYPES = {"preferred": 0, "unclean": 1}
NOT_NEEDED = "ELECTION_NOT_NEEDED"


def _replicas(replicas: list[int]) -> str:
    return ",".join(map(str, replicas))


# ---------------------------------------------------------------- reassignments


def _reassignments_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        choices=("list", "execute", "cancel"),
        help="list the reassignments in progress; execute or cancel those of a file",
    )
    p.add_argument(
        "file",
        nargs="?",
        type=Path,
        metavar="FILE",
        help='execute/cancel: kafka-reassign-partitions\' JSON: {"version": 1, "partitions": '
        '[{"topic": "orders", "partition": 0, "replicas": [2, 3, 4]}]} (cancel reads only '
        "topic and partition)",
    )
    p.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="NAME[:P,P]",
        help="list: only this topic (or these partitions of it); repeat it for several",
    )


def read_reassignment_file(path: Path, cancel: bool) -> list[dict]:
    """The file's partitions as the request's topics (each with its target
    replicas, or null to cancel). ValueError names what is wrong."""
    try:
        data = orjson.loads(path.read_bytes())
    except OSError as e:
        raise ValueError(f"{path}: cannot read it ({e.strerror})") from None
    except orjson.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("partitions"), list):
        raise ValueError(f'{path}: no "partitions" list (kafka-reassign-partitions\' format)')
    if data.get("version", 1) != 1:
        raise ValueError(f"{path}: version {data.get('version')!r}; only version 1 is known")
    topics: dict[str, list[dict]] = {}
    for i, entry in enumerate(data["partitions"]):
        where = f"{path}: partitions[{i}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{where} is not an object")
        topic, partition = entry.get("topic"), entry.get("partition")
        if not isinstance(topic, str) or not topic:
            raise ValueError(f'{where}: "topic" must be a topic name')
        if type(partition) is not int or partition < 0:
            raise ValueError(f'{where}: "partition" must be a number from 0')
        replicas = None
        if not cancel:
            replicas = entry.get("replicas")
            if (
                not isinstance(replicas, list)
                or not replicas
                or not all(type(r) is int and r >= 0 for r in replicas)
            ):
                raise ValueError(f'{where}: "replicas" must be a list of broker ids')
        topics.setdefault(topic, []).append({"partitionIndex": partition, "replicas": replicas})
    if not topics:
        raise ValueError(f"{path}: no partitions in it")
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]


async def _reassignments(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    if args.action == "list":
        if args.file is not None:
            raise ValueError("list takes no FILE (give --topic NAME[:P,P] to narrow it)")
        return await _list_reassignments(client, args, console)
    if args.file is None:
        raise ValueError(f"{args.action} needs the reassignment FILE")
    if args.topic:
        raise ValueError(f"--topic is for list; {args.action} takes the partitions from FILE")
    cancel = args.action == "cancel"
    answer = await client.reassign(read_reassignment_file(args.file, cancel))
    if args.json:
        dump(answer.body)
    if not answer.ok:
        return fail(f"{answer.error_name}: {answer.error_message}")
    done, refused = [], []
    for topic in answer.body["responses"]:
        for p in topic["partitions"]:
            name = f"{topic['name']}-{p['partitionIndex']}"
            if p["errorCode"]:
                refused.append(f"{name}: {p['errorName']}: {p['errorMessage']}")
            else:
                done.append(name)
    if not args.json:
        verb = "cancelled" if cancel else "started"
        if done:
            console.print(
                f"Successfully {verb} partition reassignments for {escape(', '.join(done))}"
            )
        for line in refused:
            console.print(f"Error reassigning partition {escape(line)}")
    return fail(f"{len(refused)} partition(s) refused") if refused else 0


async def _list_reassignments(
    client: MetaquorumClient, args: argparse.Namespace, console: Console
) -> int:
    answer = await client.list_reassignments(args.topic or None)
    if args.json:
        dump(answer.body)
    if not answer.ok:
        return fail(f"{answer.error_name}: {answer.error_message}")
    if not args.json:
        body = answer.body
        lines = [
            f"{t['name']}-{p['partitionIndex']}: replicas: {_replicas(p['replicas'])}. "
            f"adding: {_replicas(p['addingReplicas'])}. "
            f"removing: {_replicas(p['removingReplicas'])}."
            for t in body["topics"]
            for p in t["partitions"]
        ]
        if lines:
            console.print("Current partition reassignments:")
            for line in lines:
                console.print(escape(line))
        else:
            console.print("No partition reassignments found.")
        if body["notFound"]:
            console.print(f"Not found: {escape(', '.join(body['notFound']))}")
    return 0


# ---------------------------------------------------------------- elect-leaders


def _elect_leaders_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--election-type",
        choices=tuple(ELECTION_TYPES),
        required=True,
        help="preferred: the first replica leads again where it is in the ISR; unclean: "
        "a replica outside the ISR may lead a partition that has no leader (may lose data)",
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--topic",
        action="append",
        metavar="NAME:P,P",
        help="these partitions of a topic; repeat it for several topics",
    )
    which.add_argument(
        "--all-topic-partitions", action="store_true", help="every partition of every topic"
    )


def parse_topic_partitions(values: list[str]) -> list[dict]:
    """``orders:0,1`` -> the request's topicPartitions entry."""
    topics: dict[str, list[int]] = {}
    for value in values:
        name, sep, rest = value.partition(":")
        try:
            partitions = [int(p) for p in rest.split(",")] if sep else []
        except ValueError:
            partitions = []
        if not name or not partitions or any(p < 0 for p in partitions):
            raise ValueError(f"--topic {value!r}: write NAME:PARTITION,PARTITION")
        topics.setdefault(name, []).extend(partitions)
    return [{"topic": name, "partitions": parts} for name, parts in topics.items()]


async def _elect_leaders(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    wanted = None if args.all_topic_partitions else parse_topic_partitions(args.topic)
    answer = await client.elect_leaders(ELECTION_TYPES[args.election_type], wanted)
    if args.json:
        dump(answer.body)
    if not answer.ok:
        return fail(f"{answer.error_name}: {answer.error_message}")
    elected, not_needed, failed = [], [], []
    for topic in answer.body["replicaElectionResults"]:
        for p in topic["partitionResult"]:
            name = f"{topic['topic']}-{p['partitionId']}"
            if not p["errorCode"]:
                elected.append(name)
            elif p["errorName"] == NOT_NEEDED:
                not_needed.append(name)
            else:
                failed.append(f"{name}: {p['errorName']}: {p['errorMessage']}")
    if not args.json:
        kind = args.election_type.upper()
        if elected:
            console.print(
                f"Successfully completed leader election ({kind}) for partitions "
                f"{escape(', '.join(elected))}"
            )
        if not_needed:
            console.print(
                f"Valid replica already elected for partitions {escape(', '.join(not_needed))}"
            )
        if not (elected or not_needed or failed):
            console.print("No partition needed an election.")
        for line in failed:
            console.print(f"Election failed for {escape(line)}")
    return fail(f"the election failed for {len(failed)} partition(s)") if failed else 0


# ---------------------------------------------------------------- delete-topics


def _delete_topics_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("names", nargs="+", metavar="NAME", help="the topics to delete")


async def _delete_topics(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    answer = await client.delete_topics(args.names)
    if args.json:
        dump(answer.body)
    if not answer.ok:
        return fail(f"{answer.error_name}: {answer.error_message}")
    refused = 0
    for t in answer.body["responses"]:
        if t["errorCode"]:
            refused += 1
            if not args.json:
                console.print(
                    f"not deleted {escape(t['name'])}: {t['errorName']}: {escape(t['errorMessage'] or '')}"
                )
        elif not args.json:
            console.print(f"deleted topic [bold]{escape(t['name'])}[/] ({t['topicId']})")
    return fail(f"{refused} of {len(args.names)} topic(s) not deleted") if refused else 0


# ---------------------------------------------------------------- describe-features


def _describe_features_flags(p: argparse.ArgumentParser) -> None:
    pass


async def _describe_features(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    answer = await client.describe_features()
    if args.json:
        dump(answer.body)
    if not answer.ok:
        return fail(f"{answer.error_name}: {answer.error_message}")
    if not args.json:
        epoch = answer.body["finalizedFeaturesEpoch"]
        for f in answer.body["features"]:  # tab-separated, as Kafka's tool: plain print
            print(
                f"Feature: {f['name']}\tSupportedMinVersion: {f['supportedMinVersionName']}\t"
                f"SupportedMaxVersion: {f['supportedMaxVersionName']}\t"
                f"FinalizedVersionLevel: {f['finalizedVersionLevelName']}\tEpoch: {epoch}"
            )
    return 0


PARTITION_COMMANDS = {
    "reassignments": OpCommand(
        "list the partition reassignments in progress, or execute or cancel those of a "
        "kafka-reassign-partitions JSON file (Kafka's ListPartitionReassignments and "
        "AlterPartitionReassignments)",
        _reassignments_flags,
        _reassignments,
        WRITE_EXITS + " 1 also when any partition was refused (each is named).",
    ),
    "elect-leaders": OpCommand(
        "elect the preferred or an unclean leader (like kafka-leader-election); a "
        "partition already led by its preferred replica is not a failure",
        _elect_leaders_flags,
        _elect_leaders,
        WRITE_EXITS + " 1 also when the election failed for any partition (each is named).",
    ),
    "delete-topics": OpCommand(
        "delete topics by name (Kafka's DeleteTopics): each one's outcome; the ones that "
        "can go are deleted together",
        _delete_topics_flags,
        _delete_topics,
        WRITE_EXITS + " 1 also when any topic was not deleted (each is named).",
    ),
    "describe-features": OpCommand(
        "each feature's supported range and finalized level, as kafka-features describe "
        "prints them (metadata.version by release: 3.6-IV0)",
        _describe_features_flags,
        _describe_features,
    ),
}
