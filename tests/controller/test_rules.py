"""controller/rules.py: every refusal names a rule of the table, and every
rule of the table is walked here with a request that hits it."""

from __future__ import annotations

import ast
import pathlib

import pytest

from controller.messages import (
    SAFE_DOWNGRADE,
    UNCLEAN,
    UPGRADE,
    AllocateProducerIdsRequest,
    AlterableConfig,
    AlterClientQuotasRequest,
    AlterConfigsResource,
    AlterPartitionPartition,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    AlterPartitionTopic,
    AlterUserScramCredentialsRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    BrokerState,
    ClientQuotaAlteration,
    ClientQuotaOp,
    CreatableTopic,
    CreateAclsRequest,
    CreateDelegationTokenRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteTopicsRequest,
    ElectLeadersRequest,
    ExpireDelegationTokenRequest,
    IncrementalAlterConfigsRequest,
    ReassignablePartition,
    ReassignableTopic,
    RenewDelegationTokenRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
    UnregisterBrokerRequest,
    UpdateFeaturesRequest,
)
from controller.record_cap import MAX_RECORDS_PER_USER_OP
from controller.refusals import refusals_of
from controller.rules import RULES
from metadata_records.acls import AclBindingFilter, StandardAcl
from metadata_records.acls import AclOperation as Op
from metadata_records.acls import AclPermissionType as Perm
from metadata_records.acls import AclResourceType as RT
from metadata_records.acls import PatternType as PT
from metadata_records.errors import Errors
from metadata_records.log_invariants import RULES as INVARIANTS
from metadata_records.records import (
    Endpoint,
    FeatureRange,
    ProducerIdsRecord,
)
from quorum.callers import CONTROLLER_WORK
from tests.harness import CLUSTER_ID, ELR_FEATURES, ControllerHarness, incarnation

CONTROLLER = pathlib.Path(__file__).resolve().parents[2] / "controller"
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
ACL = StandardAcl(RT.TOPIC, "*", PT.LITERAL, "User:*", "*", Op.ALTER, Perm.ALLOW)
LONG_MAX = 2**63 - 1


def harness(**kw) -> ControllerHarness:
    """Brokers 1-4 active; topic p: one partition on 1, 2, 3 led by 1."""
    h = ControllerHarness(**kw)
    h.start_brokers(1, 2, 3, 4)
    assert h.create_topic("p", assignments=((0, (1, 2, 3)),)).error is Errors.NONE
    return h


def alter(h, isr, **kw):
    request_kw = {k: kw.pop(k) for k in ("broker_id",) if k in kw}
    part = h.partition("p", 0)
    broker = request_kw.get("broker_id", part.leader)
    data = AlterPartitionPartition(
        0,
        kw.pop("leader_epoch", part.leader_epoch),
        kw.pop("partition_epoch", part.partition_epoch),
        new_isr_with_epochs=tuple(
            BrokerState(b, kw.get("epochs", {}).get(b, h.epochs.get(b, -1))) for b in isr
        ),
        leader_recovery_state=kw.pop("lrs", 0),
    )
    topic = AlterPartitionTopic((data,), topic_id=kw.pop("topic_id", h.topic_id("p")))
    return AlterPartitionRequest(broker, h.epochs.get(broker, -1), (topic,))


def topics(*ts):
    return CreateTopicsRequest(tuple(ts))


def configs(*resources):
    return IncrementalAlterConfigsRequest(
        tuple(
            AlterConfigsResource(t, n, tuple(AlterableConfig(*c) for c in cs))
            for t, n, cs in resources
        )
    )


def quotas(*entries):
    return AlterClientQuotasRequest(
        tuple(ClientQuotaAlteration(e, tuple(ClientQuotaOp(*o) for o in ops)) for e, ops in entries)
    )


def scram(deletions=(), upsertions=()):
    return AlterUserScramCredentialsRequest(
        tuple(ScramCredentialDeletion(*d) for d in deletions),
        tuple(ScramCredentialUpsertion(n, m, i, b"salt", p) for n, m, i, p in upsertions),
    )


def elect(kind, topic, *pids):
    return ElectLeadersRequest(kind, ((topic, pids),))


def reassign(topic, pid, replicas):
    return AlterPartitionReassignmentsRequest(
        (ReassignableTopic(topic, (ReassignablePartition(pid, replicas),)),)
    )


def register(h, broker_id, **kw):

    return BrokerRegistrationRequest(
        broker_id,
        kw.pop("cluster_id", CLUSTER_ID),
        kw.pop("incarnation_id", incarnation(broker_id, 0)),
        listeners=kw.pop("listeners", (Endpoint("PLAINTEXT", "localhost", 9100, 0),)),
        features=kw.pop("features", h.broker_features),
        **kw,
    )


# ---------------------------------------------------------------- the cases
# rule -> (setup(h) -> request), run on a fresh harness(); a case may set up
# with h.run/h.commit before returning the request that must be refused.


def _fenced(*brokers):
    def setup(h):
        for b in brokers:
            h.heartbeat(b, want_fence=True)

    return setup


def _producer_ids_exhausted(h):
    h.commit([ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=LONG_MAX - 10)])
    return AllocateProducerIdsRequest(1, h.epochs[1])


def _in_controlled_shutdown(h):
    # Broker 3 leads s-0, so asking to shut down leaves it in controlled shutdown.
    h.create_topic("s", assignments=((0, (3, 1)),))
    h.heartbeat(3, want_shut_down=True)
    assert h.image.brokers[3].in_controlled_shutdown
    return alter(h, [1, 2, 3])


def _replica_not_registered(h):
    h.create_topic("q", assignments=((0, (1, 4)),))
    h.unregister(4)
    part = h.partition("q", 0)
    data = AlterPartitionPartition(
        0,
        part.leader_epoch,
        part.partition_epoch,
        new_isr_with_epochs=(BrokerState(1, h.epochs[1]), BrokerState(4, -1)),
    )
    return AlterPartitionRequest(
        1, h.epochs[1], (AlterPartitionTopic((data,), topic_id=h.topic_id("q")),)
    )


def _new_leader_elected(h):
    h.run(reassign("p", 0, (2, 3, 4)))
    return alter(h, [1, 2, 3, 4])


def _revert_unclean(h):
    h.create_topic("r", assignments=((0, (1, 2)),))
    h.run(reassign("r", 0, (3, 4)))
    part = h.partition("r", 0)
    data = AlterPartitionPartition(
        0,
        part.leader_epoch,
        part.partition_epoch,
        new_isr_with_epochs=(BrokerState(1, h.epochs[1]), BrokerState(3, h.epochs[3])),
    )
    h.run(
        AlterPartitionRequest(
            1, h.epochs[1], (AlterPartitionTopic((data,), topic_id=h.topic_id("r")),)
        )
    )
    h.heartbeat(1, want_fence=True)
    return reassign("r", 0, None)


def _preferred_unavailable(h):
    h.create_topic("e", assignments=((0, (4, 1)),))
    h.heartbeat(4, want_fence=True)
    return elect(0, "e", 0)


def _no_eligible_leader(h):
    h.create_topic("u", assignments=((0, (4,)),))
    h.heartbeat(4, want_fence=True)
    return elect(UNCLEAN, "u", 0)


def _all_replicas_inactive(h):
    h.heartbeat(4, want_fence=True)
    return topics(CreatableTopic("t", assignments=((0, (4,)),)))


def _name_collides(h):
    h.create_topic("a.b")
    return topics(CreatableTopic("a_b"))


def _expired_heartbeat(h):
    return ("expire", BrokerHeartbeatRequest(1, h.epochs[1], h.image.next_offset))


CASES = {
    "registration.cluster-id-mismatch": lambda h: register(h, 9, cluster_id="other"),
    "registration.session-still-valid": lambda h: register(h, 1, incarnation_id="x" * 22),
    "registration.zk-broker": lambda h: register(h, 9, is_migrating_zk_broker=True),
    "registration.listener-protocol-unknown": lambda h: register(
        h, 9, listeners=(Endpoint("X", "h", 1, 99),)
    ),
    "registration.listener-name-duplicate": lambda h: register(
        h, 9, listeners=(Endpoint("X", "h", 1, 0), Endpoint("X", "h", 2, 0))
    ),
    "registration.feature-unsupported": lambda h: register(
        h, 9, features=(FeatureRange("metadata.version", 1, 1),)
    ),
    "kip-380.broker-not-registered": lambda h: AllocateProducerIdsRequest(99, 1),
    "kip-380.broker-epoch-mismatch": lambda h: AllocateProducerIdsRequest(1, 12345),
    "heartbeat.broker-not-registered": lambda h: BrokerHeartbeatRequest(99, 1, 0),
    "heartbeat.expired-in-queue": _expired_heartbeat,
    "unregister.broker-not-registered": lambda h: UnregisterBrokerRequest(99),
    "producer-ids.exhausted": _producer_ids_exhausted,
    "alter-partition.topic-unknown": lambda h: alter(h, [1, 2, 3], topic_id=ZERO_UUID),
    "alter-partition.partition-unknown": lambda h: AlterPartitionRequest(
        1,
        h.epochs[1],
        (AlterPartitionTopic((AlterPartitionPartition(7, 0, 0),), topic_id=h.topic_id("p")),),
    ),
    "kip-497.leader-epoch-newer": lambda h: alter(h, [1, 2, 3], leader_epoch=5),
    "kip-497.partition-epoch-newer": lambda h: alter(h, [1, 2, 3], partition_epoch=5),
    "kip-497.leader-epoch-stale": lambda h: alter(h, [1, 2, 3], leader_epoch=-1),
    "kip-497.not-leader": lambda h: alter(h, [1, 2, 3], broker_id=2),
    "kip-497.partition-epoch-stale": lambda h: alter(h, [1, 2, 3], partition_epoch=-1),
    "alter-partition.isr-invalid": lambda h: alter(h, [1, 1]),
    "alter-partition.isr-without-leader": lambda h: alter(h, [2, 3]),
    "kip-704.recovery-state-invalid": lambda h: alter(h, [1], lrs=5),
    "kip-704.recovering-isr-not-single": lambda h: alter(h, [1, 2], lrs=1),
    "kip-704.recovered-to-recovering": lambda h: alter(h, [1], lrs=1),
    "kip-841.replica-not-registered": _replica_not_registered,
    "kip-841.replica-in-controlled-shutdown": _in_controlled_shutdown,
    "kip-841.replica-fenced": lambda h: (_fenced(3)(h), alter(h, [1, 2, 3]))[1],
    "kip-903.stale-broker-epoch": lambda h: alter(h, [1, 2, 3], epochs={3: 1}),
    "alter-partition.new-leader-elected": _new_leader_elected,
    "user-op.too-many-records": lambda h: CreateAclsRequest(
        tuple(ACL._replace(resource_name=f"t{i}") for i in range(MAX_RECORDS_PER_USER_OP + 1))
    ),
    "topic.too-many-partitions": lambda h: topics(CreatableTopic("big", 20_000, 1)),
    "topic.name-duplicate": lambda h: topics(CreatableTopic("d"), CreatableTopic("d")),
    "topic.name-invalid": lambda h: topics(CreatableTopic("a/b")),
    "topic.already-exists": lambda h: topics(CreatableTopic("p")),
    "topic.name-collides": _name_collides,
    "topic.config-invalid": lambda h: topics(
        CreatableTopic("c", configs=(("min.insync.replicas", "x"),))
    ),
    "topic.unknown": lambda h: DeleteTopicsRequest(("nope",)),
    "partition.unknown": lambda h: elect(0, "p", 9),
    "assignment.replication-factor-set": lambda h: topics(CreatableTopic("t", -1, 1, ((0, (1,)),))),
    "assignment.num-partitions-set": lambda h: topics(CreatableTopic("t", 2, -1, ((0, (1,)),))),
    "assignment.partition-repeated": lambda h: topics(
        CreatableTopic("t", assignments=((0, (1,)), (0, (2,))))
    ),
    "assignment.not-consecutive": lambda h: topics(CreatableTopic("t", assignments=((1, (1,)),))),
    "assignment.empty": lambda h: topics(CreatableTopic("t", assignments=((0, ()),))),
    "assignment.broker-not-registered": lambda h: topics(
        CreatableTopic("t", assignments=((0, (99,)),))
    ),
    "assignment.broker-repeated": lambda h: topics(CreatableTopic("t", assignments=((0, (1, 1)),))),
    "assignment.replication-factor-inconsistent": lambda h: topics(
        CreatableTopic("t", assignments=((0, (1,)), (1, (1, 2))))
    ),
    "assignment.all-replicas-inactive": _all_replicas_inactive,
    "assignment.count-mismatch": lambda h: CreatePartitionsRequest("p", 3, ((1, 2, 3),)),
    "placement.replication-factor-invalid": lambda h: topics(CreatableTopic("t", 1, 0)),
    "placement.partitions-invalid": lambda h: topics(CreatableTopic("t", 0)),
    "placement.not-enough-brokers": lambda h: topics(CreatableTopic("t", 1, 5)),
    "partitions.not-an-increase": lambda h: CreatePartitionsRequest("p", 1),
    "reassignment.none-in-progress": lambda h: reassign("p", 0, None),
    "reassignment.revert-unclean": _revert_unclean,
    "election.type-unknown": lambda h: ElectLeadersRequest(5),
    "election.not-needed": lambda h: elect(0, "p", 0),
    "election.preferred-unavailable": _preferred_unavailable,
    "election.no-eligible-leader": _no_eligible_leader,
    "config.resource-duplicate": lambda h: configs((2, "p", ()), (2, "p", ())),
    "config.key-duplicate": lambda h: configs(
        (2, "p", (("retention.ms", 0, "1"), ("retention.ms", 0, "2")))
    ),
    "config.value-null": lambda h: configs((2, "p", (("retention.ms", 0, None),))),
    "config.value-invalid": lambda h: configs((2, "p", (("min.insync.replicas", 0, "x"),))),
    "config.default-topic": lambda h: configs((2, "", ())),
    "config.broker-name-invalid": lambda h: configs((4, "007", ())),
    "config.broker-id-negative": lambda h: configs((4, "-1", ())),
    "config.broker-logger": lambda h: configs((8, "1", ())),
    "config.resource-type-unknown": lambda h: configs((99, "x", ())),
    "config.not-list": lambda h: configs((2, "p", (("min.insync.replicas", 2, "2"),))),
    "config.op-unknown": lambda h: configs((2, "p", (("retention.ms", 7, "1"),))),
    "feature.upgrade-type-unknown": lambda h: UpdateFeaturesRequest("metadata.version", 12, 9),
    "feature.level-negative": lambda h: UpdateFeaturesRequest("metadata.version", -1),
    "feature.level-unsupported": lambda h: UpdateFeaturesRequest("metadata.version", 999),
    "feature.downgrade-without-type": lambda h: UpdateFeaturesRequest(
        "metadata.version", 11, UPGRADE
    ),
    "feature.unknown": lambda h: UpdateFeaturesRequest("no.such.feature", 0),
    "metadata-version.downgrade-lossy": lambda h: UpdateFeaturesRequest(
        "metadata.version", 6, SAFE_DOWNGRADE
    ),
    "quota.entity-duplicate": lambda h: quotas(
        ((("user", "a"),), (("producer_byte_rate", 1.0),)),
        ((("user", "a"),), (("producer_byte_rate", 2.0),)),
    ),
    "quota.entity-invalid": lambda h: quotas(((("nope", "a"),), (("producer_byte_rate", 1.0),))),
    "quota.key-duplicate": lambda h: quotas(
        ((("user", "a"),), (("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)))
    ),
    "quota.value-invalid": lambda h: quotas(((("user", "a"),), (("producer_byte_rate", 1.5),))),
    "scram.user-twice": lambda h: scram(upsertions=[("u", 1, 4096, b"p"), ("u", 2, 4096, b"p")]),
    "scram.user-empty": lambda h: scram([("", 1)]),
    "scram.mechanism-unknown": lambda h: scram([("u", 0)]),
    "scram.credential-not-found": lambda h: scram([("u", 1)]),
    "scram.iterations-too-few": lambda h: scram(upsertions=[("u", 1, 4095, b"p")]),
    "scram.iterations-too-many": lambda h: scram(upsertions=[("u", 1, 16385, b"p")]),
    "scram.salted-password-empty": lambda h: scram(upsertions=[("u", 1, 4096, b"")]),
    "acl.invalid": lambda h: CreateAclsRequest((ACL._replace(host=""),)),
    "acl.filter-invalid": lambda h: DeleteAclsRequest(
        (AclBindingFilter(RT.UNKNOWN, None, PT.LITERAL),)
    ),
}

# Rules that need a cluster other than harness()'s: walked by their own tests below.
SPECIAL = {
    "placement.no-brokers": "test_with_no_broker_registered_nothing_can_be_placed",
    "kip-966.feature-dependency": "test_elr_needs_a_newer_metadata_version",
    "feature.downgrade-to-newer": "test_a_downgrade_to_a_newer_level_is_refused",
    "scram.metadata-version-too-low": "test_scram_needs_metadata_version_3_5_iv2",
    **{
        rule: "test_delegation_token_rules"
        for rule in (
            "delegation-token.request-not-allowed",
            "delegation-token.auth-disabled",
            "delegation-token.metadata-version-too-low",
            "delegation-token.renewer-not-user",
            "delegation-token.not-found",
            "delegation-token.expired",
            "delegation-token.owner-mismatch",
        )
    },
}

# The quorum's own refusals (update-voter, quorum/membership.py check_update):
# no controller request reaches them; tests/test_membership_rules.py walks each.
SPECIAL |= {
    rule: "tests/test_membership_rules.py (test_update_voter_*)"
    for rule in RULES
    if rule.startswith("kip-853.")
}

# Rules kept as Kafka keeps them that no request reaches here, and why.
UNREACHABLE = {
    # The placer takes unfenced brokers first and refuses when every usable one
    # is fenced (placement.not-enough-brokers), so a placed partition always has
    # an active replica; Kafka's createTopic checks it all the same.
    "placement.all-brokers-inactive",
}


def _decided_rules(h, request) -> set[str | None]:
    if isinstance(request, tuple) and request[0] == "expire":
        request = request[1]
        response = h.controller.expire_heartbeat(request, h.now_ms).response
    else:
        response = h.run(request)
    return {r.rule for r in refusals_of(request, response, 0, lambda _: None)}


def test_every_rule_of_the_table_has_a_case():
    assert set(CASES) | set(SPECIAL) | UNREACHABLE == set(RULES)


@pytest.mark.parametrize("rule", sorted(CASES))
def test_the_case_is_refused_by_its_rule(rule):
    h = harness()
    request = CASES[rule](h)
    rules = _decided_rules(h, request)
    assert rule in rules, rules
    assert rules <= set(RULES), f"refused by a rule not in the table: {rules - set(RULES)}"


def test_with_no_broker_registered_nothing_can_be_placed():
    rules = _decided_rules(ControllerHarness(), topics(CreatableTopic("t")))
    assert rules == {"placement.no-brokers"}


def test_elr_needs_a_newer_metadata_version():
    h = harness(broker_features=ELR_FEATURES, metadata_version=7)
    rules = _decided_rules(h, UpdateFeaturesRequest("eligible.leader.replicas.version", 1))
    assert rules == {"kip-966.feature-dependency"}


def test_a_downgrade_to_a_newer_level_is_refused():
    h = harness(metadata_version=11)
    rules = _decided_rules(h, UpdateFeaturesRequest("metadata.version", 12, SAFE_DOWNGRADE))
    assert rules == {"feature.downgrade-to-newer"}


def test_scram_needs_metadata_version_3_5_iv2():
    rules = _decided_rules(harness(metadata_version=10), scram([("u", 1)]))
    assert rules == {"scram.metadata-version-too-low"}


def test_delegation_token_rules():
    """The token rules need a secret (or its absence) and a token to refer to."""
    secret = {"delegation_token_secret": "s" * 32}
    h = harness(config_options=secret)
    wall = h.wall_ms

    def create(requester="User:a", renewers=()):
        return CreateDelegationTokenRequest(requester, h.wall_ms, renewers, 1000)

    made = h.run(create())
    cases = [
        ("delegation-token.request-not-allowed", h, create(None)),
        ("delegation-token.auth-disabled", harness(), create()),
        (
            "delegation-token.metadata-version-too-low",
            harness(metadata_version=11, config_options=secret),
            create(),
        ),
        ("delegation-token.renewer-not-user", h, create(renewers=(("Group", "g"),))),
        ("delegation-token.not-found", h, RenewDelegationTokenRequest("User:a", wall, b"no")),
        (
            "delegation-token.owner-mismatch",
            h,
            ExpireDelegationTokenRequest("User:b", wall, made.hmac),
        ),
        (
            "delegation-token.expired",
            h,
            RenewDelegationTokenRequest("User:a", wall + 1001, made.hmac),
        ),
    ]
    for rule, on, request in cases:
        assert _decided_rules(on, request) == {rule}, rule


def test_each_rule_names_known_codes_and_invariants():
    for rule_id, rule in RULES.items():
        assert rule_id == rule_id.lower() and "." in rule_id, rule_id
        assert rule.codes and rule.checks and rule.source, rule_id
        assert rule.guards is None or rule.guards in INVARIANTS, (rule_id, rule.guards)


def test_every_rule_id_in_the_controller_is_in_the_table_and_used():
    """The ids written in controller/*.py (and the quorum's membership rules,
    quorum/membership.py): each in the table, each of the table used."""
    used = set()
    membership = CONTROLLER.parent / "quorum" / "membership.py"
    for path in [*CONTROLLER.glob("*.py"), membership]:
        if path.name == "rules.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                value = node.value
                if value in RULES:
                    used.add(value)
                elif value in INVARIANTS:
                    continue  # the same id space: an invariant named in the controller
                elif (
                    "." in value
                    and value.replace(".", "").replace("-", "").isalnum()
                    and value.split(".")[0] in {r.split(".")[0] for r in RULES}
                ):
                    raise AssertionError(f"{path.name}: rule id {value!r} is not in the table")
    assert used == set(RULES), set(RULES) - used


def _docs_tables() -> tuple[list[list[str]], list[list[str]]]:
    """docs/rules.md's rows as cells: the refusals' table, the invariants'."""
    text = (CONTROLLER.parent / "docs" / "rules.md").read_text()
    refusals, invariants = text.split("\n## Log invariants\n")

    def rows(part: str) -> list[list[str]]:
        lines = [line for line in part.splitlines() if line.startswith("| `")]
        return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]

    return rows(refusals), rows(invariants)


def _ids(cell: str) -> list[str]:
    """The ids of a cell such as "`a`, `b`" (none for an empty one)."""
    return [part.strip().strip("`") for part in cell.split(",") if part.strip()]


def test_docs_rules_md_lists_every_rule():
    """docs/rules.md is the table for people: one row per id, in the table's order,
    with the invariant it guards."""
    rows, _ = _docs_tables()
    assert [_ids(row[0]) for row in rows] == [[rule] for rule in RULES]
    guards = {_ids(row[0])[0]: _ids(row[4]) for row in rows}
    assert guards == {k: [r.guards] if r.guards else [] for k, r in RULES.items()}


def test_docs_rules_md_lists_every_invariant_and_what_guards_it():
    """The invariants' table: one row per log_invariants.RULES id, in its order, with
    where it holds, what holds, its Kafka source and every refusal whose guards name it."""
    _, rows = _docs_tables()
    assert [_ids(row[0]) for row in rows] == [[rule] for rule in INVARIANTS]
    for row in rows:
        invariant = _ids(row[0])[0]
        rule = INVARIANTS[invariant]
        assert row[1:4] == [rule.at, rule.holds, f"`{rule.source}`"], invariant
        guarded_by = [r for r, refusal in RULES.items() if refusal.guards == invariant]
        assert _ids(row[4]) == guarded_by, invariant


def test_refusals_and_invariants_share_one_id_space_without_sharing_an_id():
    """One scheme for both tables, and no id meaning two things: nor one of the
    rules the controller acts by on its own (the who of its batches)."""
    assert not set(RULES) & set(INVARIANTS)
    acting = {caller[4] for caller in CONTROLLER_WORK}  # asked_by(...)'s rule
    assert not (set(RULES) | set(INVARIANTS)) & acting
    for rule_id in INVARIANTS:
        source, _, what = rule_id.partition(".")
        assert rule_id == rule_id.lower() and source and what and "." not in what, rule_id
