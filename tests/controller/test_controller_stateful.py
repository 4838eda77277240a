"""Hypothesis stateful tests: random sequences of broker and admin requests
against the pure controller, with the invariants checked after every step.

Invariants:
- no fenced or in-controlled-shutdown broker is ever added to an ISR (KIP-841);
- every leader is in its ISR and active, or -1; the ISR is never empty and is a
  duplicate-free subset of the replicas;
- every change record adds exactly 1 to the partition epoch, leader epochs
  never decrease;
- broker epochs are unique, each the offset of a RegisterBrokerRecord, and grow
  per broker;
- every record the controller writes applies (no ignored records), and
  replaying the log from an empty image gives the same image;
- the leader-side brokers-to-ISR index matches a fresh build;
- the unclean-election sweep (issue 18) elects only on topics that allow it (their own
  unclean.leader.election.enable, else the cluster default's);
- an unregistered broker (issue 21) leads nothing, is in no ISR of more than
  one broker, and has no session: it is never fenced, nor refused as a
  duplicate, afterwards;
- ACLs (issue 21): the image's ACLs are the model's (every valid creation
  added, every binding a valid filter matches removed, by the test's own
  reading of Kafka's matching), no binding is stored twice, and none is invalid;
- sessions (issue 18): no broker is fenced by the timer within a session
  timeout of its last contact or of the session a new leader granted it, and a
  new incarnation is refused as a duplicate only within one session timeout of
  its old incarnation's last contact (a heartbeat with its epoch, a
  registration), whatever the log says about controlled shutdown and across
  failovers;
- ELR (KIP-966, issue 21 item 7; the enable_elr rule turns it on in some
  walks, min.insync.replicas varies): the ELR and the ISR never share a
  member; every member a record puts in an ELR was in the partition's ISR or
  ELR just before; no leader is elected outside the ISR and the ELR unless
  unclean election is allowed (the topic's config, else the cluster default,
  or an explicit unclean ElectLeaders); a broker that re-registers after an
  unclean shutdown is in no ELR and no ISR; an ISR is empty only with ELR on.
"""

from collections import Counter

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from api.reads import reassignments_obj
from controller.isr_index import BrokersToIsrs
from controller.messages import (
    PREFERRED,
    UNCLEAN,
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
    BrokerState,
    ClientQuotaAlteration,
    ClientQuotaOp,
    CreatableTopic,
    CreateAclsRequest,
    CreateDelegationTokenRequest,
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
from metadata_records.acls import AclBindingFilter, StandardAcl, acl_problem
from metadata_records.config_schema import UNCLEAN_LEADER_ELECTION_ENABLE as UNCLEAN_LEADER_ELECTION
from metadata_records.config_schema import OpType
from metadata_records.delegation_tokens import token_hmac
from metadata_records.errors import Errors
from metadata_records.records import (
    BROKER_RESOURCE,
    FENCE,
    IN_CONTROLLED_SHUTDOWN,
    TOPIC_RESOURCE,
    UNFENCE,
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)
from metadata_records.scram import derived_keys
from tests.controller.test_alter_partition_fused import decide_both
from tests.harness import ELR_FEATURES, ControllerHarness

TOKEN_SECRET = "stateful-test-delegation-token-secret"
# Who asks for a token: two users, and an unauthenticated caller (None).
PRINCIPALS = st.sampled_from(["User:a", "User:b", None])

BROKERS = st.integers(1, 4)
RARELY = st.sampled_from([False, False, False, False, True])
TOPICS = st.sampled_from(["a", "b", "c"])
# Client quota entities (a few invalid: a repeated type, ip with user, a host
# name), keys (one unknown) and values (None removes; some refused).
QUOTA_ENTITIES = [
    (("user", "u1"),),
    (("user", None),),
    (("client-id", "c1"),),
    (("user", "u1"), ("client-id", None)),
    (("client-id", "c1"), ("user", None)),
    (("ip", "10.0.0.1"),),
    (("ip", None),),
    (("user", "u1"), ("user", "u2")),
    (("user", "u1"), ("ip", "10.0.0.1")),
    (("ip", "not-an-ip"),),
]
QUOTA_USER_KEYS = {
    "producer_byte_rate": "LONG",
    "consumer_byte_rate": "LONG",
    "request_percentage": "DOUBLE",
    "controller_mutation_rate": "DOUBLE",
}
QUOTA_IP_KEYS = {"connection_creation_rate": "INT"}
QUOTA_KEYS = [*QUOTA_USER_KEYS, *QUOTA_IP_KEYS, "not.a.quota"]
QUOTA_VALUES = [None, None, 1024.0, 2048.0, 12.5, 0.0, -1.0]


# ACL bindings from a small space, so that creations repeat and filters match;
# ANY (1), MATCH (2) and a principal without a colon are invalid creations.
ACLS = st.builds(
    StandardAcl,
    resource_type=st.sampled_from([1, 2, 2, 3]),
    resource_name=st.sampled_from(["t", "to", "*"]),
    pattern_type=st.sampled_from([2, 3, 3, 4]),
    principal=st.sampled_from(["User:a", "User:*", "a"]),
    host=st.sampled_from(["*", "h"]),
    operation=st.sampled_from([2, 3]),
    permission_type=st.sampled_from([2, 3]),
)
ACL_FILTERS = st.builds(
    AclBindingFilter,
    resource_type=st.sampled_from([0, 1, 1, 2, 3]),
    resource_name=st.sampled_from([None, "t", "top", "*"]),
    pattern_type=st.sampled_from([0, 1, 2, 3, 4]),
    principal=st.sampled_from([None, "User:a"]),
    host=st.sampled_from([None, "*"]),
    operation=st.sampled_from([1, 2, 3]),
    permission_type=st.sampled_from([1, 2, 3]),
)


def _acl_is_valid(acl) -> bool:
    return acl.resource_type != 1 and acl.pattern_type in (3, 4) and ":" in acl.principal


def _filter_matches(f, acl) -> bool:
    """Kafka's ResourcePatternFilter and AccessControlEntryFilter, read again."""
    if f.resource_type not in (1, acl.resource_type):
        return False
    if f.pattern_type not in (1, 2, acl.pattern_type):
        return False
    if f.resource_name is not None:
        if f.pattern_type in (1, acl.pattern_type):
            if f.resource_name != acl.resource_name:
                return False
        elif acl.pattern_type == 3:  # MATCH against a literal ACL
            if acl.resource_name not in (f.resource_name, "*"):
                return False
        elif not f.resource_name.startswith(acl.resource_name):  # MATCH, prefixed ACL
            return False
    return (
        f.principal in (None, acl.principal)
        and f.host in (None, acl.host)
        and f.operation in (1, acl.operation)
        and f.permission_type in (1, acl.permission_type)
    )


ELR = "eligible.leader.replicas.version"


class ControllerMachine(RuleBasedStateMachine):
    metadata_version = 12  # 3.6-IV0, where new clusters start
    elr_from_the_start = False  # else only the enable_elr rule turns ELR on

    def __init__(self):
        super().__init__()
        self.h = ControllerHarness(
            metadata_version=self.metadata_version,
            session_timeout_ms=5000,
            # Short, so that random walks reach the sweep.
            config_options={
                "unclean_election_interval_ms": 2000,
                "leader_imbalance_check_interval_ms": 2000,
                "delegation_token_secret": TOKEN_SECRET,
                "delegation_token_max_lifetime_ms": 20_000,
                "delegation_token_expiry_time_ms": 5_000,
                "delegation_token_expiry_check_interval_ms": 2_000,
            },
            broker_features=ELR_FEATURES,
        )
        self.generation = Counter()
        # The cluster default's unclean.leader.election.enable (None: not set).
        self.cluster_unclean: str | None = None
        # (start, length) of every producer id block granted, in order.
        self.producer_blocks: list[tuple[int, int]] = []
        # The client quotas the test expects: frozenset of components -> {key: value}.
        self.quota_model: dict[frozenset, dict[str, float]] = {}
        # The SCRAM credentials the test expects: user -> {mechanism: iterations}.
        self.scram_model: dict[str, dict[int, int]] = {}
        # The delegation tokens the test expects: id -> (owner, renewers, max, expiry).
        self.token_model: dict[str, tuple[str, tuple[str, ...], int, int]] = {}
        # The ACL bindings the test expects the image to hold.
        self.acl_model: set[StandardAcl] = set()
        self.epoch_history: dict[int, list[int]] = {}
        self.checked_log = len(self.h.log)
        self.before = self.h.image
        # When the controller last heard from each broker (its monotonic clock),
        # or granted it a session (registration, failover): none may be fenced
        # by the timer before its session timeout has passed since.
        self.heard: dict[int, int] = {}
        # When each broker's current incarnation last really reached a
        # controller (a failover grants a session but is no contact).
        self.contact: dict[int, int] = {}
        # An unclean ElectLeaders was asked for in this step (it may elect
        # outside the ISR and the ELR whatever the topic's config).
        self.explicit_unclean = False

    def elr_on(self) -> bool:
        return self.h.image.features.get(ELR, 0) >= 1

    def check_unclean_re_registration(self, broker: int, previous_epoch: int, old_epoch) -> None:
        """KIP-966: a new incarnation whose previousBrokerEpoch is not its old
        epoch shut down uncleanly: with ELR on it is in no ELR and no ISR."""
        if not self.elr_on() or previous_epoch == old_epoch:
            return
        for topic in self.h.image.topics.values():
            for part in topic.partitions.values():
                assert broker not in part.elr and broker not in part.isr, (broker, part)

    def hear(self, *brokers: int) -> None:
        for b in brokers:
            self.heard[b] = self.contact[b] = self.h.now_ms

    def check_duplicate(self, broker: int, error: Errors) -> None:
        """A new incarnation registers within one session timeout of its old
        incarnation's last contact."""
        if error is Errors.DUPLICATE_BROKER_REGISTRATION:
            silent = self.h.now_ms - self.contact.get(broker, -(2**62))
            assert silent <= self.h.session_timeout_ms, (
                f"broker {broker}'s new incarnation refused as a duplicate {silent} ms after "
                "its old incarnation last reached a controller"
            )

    @initialize(brokers=st.integers(0, 4), partitions=st.integers(1, 4))
    def a_running_cluster(self, brokers, partitions):
        """Most runs start from live brokers and a topic, so that short random
        walks reach the interesting states."""
        ids = list(range(1, brokers + 1))
        if self.elr_from_the_start:
            assert self.h.run(UpdateFeaturesRequest(ELR, 1)).error is Errors.NONE
        if ids:
            self.h.start_brokers(*ids)
            self.hear(*ids)
            self.h.run(CreateTopicsRequest((CreatableTopic("a", partitions, min(3, brokers)),)))
        # Invariants compare each step with the state before it; this is step 0.
        self.before = self.h.image
        self.checked_log = len(self.h.log)

    # ------------------------------------------------------------ helpers

    def topics(self):
        return sorted(self.h.image.topic_ids)

    def commit_results(self, results):
        self.h.commit([r for res in results for r in res.records])

    # ------------------------------------------------------------ brokers

    @rule(broker=BROKERS, new_incarnation=RARELY)
    def register(self, broker, new_incarnation):
        new = new_incarnation or broker not in self.h.epochs
        if new:
            self.generation[broker] += 1
        old = self.h.image.brokers.get(broker)
        resp = self.h.register(broker, generation=self.generation[broker])
        self.check_duplicate(broker, resp.error)
        if resp.error is Errors.DUPLICATE_BROKER_REGISTRATION:
            self.generation[broker] -= 1
        else:
            assert resp.error is Errors.NONE, resp
            if new:
                self.check_unclean_re_registration(broker, -1, old and old.epoch)
            # A new incarnation gets a new session; the same one re-registering
            # is contact (Kafka's registerBroker touches the session).
            self.hear(broker)

    @rule(
        broker=BROKERS,
        want_fence=RARELY,
        want_shut_down=RARELY,
        lag=st.sampled_from([0, 0, 0, 1, 5]),
        stale=RARELY,
    )
    def heartbeat(self, broker, want_fence, want_shut_down, lag, stale):
        epoch = self.h.epochs.get(broker, -1) - (1 if stale else 0)
        resp = self.h.heartbeat(
            broker,
            epoch=epoch,
            offset=max(self.h.image.next_offset - lag, 0),
            want_fence=want_fence and not lag,
            want_shut_down=want_shut_down,
        )
        registered = self.h.image.brokers.get(broker)
        if registered is None or stale:
            assert resp.error is Errors.STALE_BROKER_EPOCH
        else:
            assert resp.error is Errors.NONE
            self.hear(broker)
            assert resp.is_fenced == registered.fenced
            if resp.should_shut_down:
                assert registered.fenced

    @precondition(lambda self: self.h.image.brokers)
    @rule(data=st.data())
    def a_broker_asks_to_be_fenced(self, data):
        """wantFence: the broker leaves every ISR (into the ELR, with ELR on,
        where the ISR falls below min ISR); its next heartbeat unfences it."""
        broker = data.draw(st.sampled_from(sorted(self.h.image.brokers)))
        resp = self.h.heartbeat(broker, want_fence=True)
        assert resp.error is Errors.NONE
        self.hear(broker)

    @rule(brokers=st.lists(BROKERS, min_size=2, max_size=4, unique=True))
    def group_commit_heartbeats(self, brokers):
        """Several heartbeats decided into one batch, then committed together."""
        c = self.h.controller
        results = []
        for b in brokers:
            if b in self.h.epochs:
                results.append(
                    c.handle(
                        BrokerHeartbeatRequest(b, self.h.epochs[b], c.view.next_offset),
                        self.h.now_ms,
                    )
                )
                self.hear(b)
        self.commit_results(results)

    @rule(broker=BROKERS, clean=st.booleans())
    def broker_crashes_and_restarts(self, broker, clean):
        """A new incarnation once the old session has expired, fenced or not:
        after a crash (previousBrokerEpoch -1), or a clean stop (its epoch)."""
        self.h.advance(self.h.session_timeout_ms + 1)
        self.generation[broker] += 1
        old = self.h.image.brokers.get(broker)
        previous = old.epoch if clean and old is not None else -1
        resp = self.h.register(
            broker, generation=self.generation[broker], previous_broker_epoch=previous
        )
        assert resp.error is Errors.NONE
        self.check_unclean_re_registration(broker, previous, old and old.epoch)
        self.hear(broker)

    @rule(broker=BROKERS, group_with_heartbeats=RARELY)
    def unregister_broker(self, broker, group_with_heartbeats):
        """Kafka's UnregisterBroker, in whatever state the broker is (Kafka
        refuses none); sometimes decided in one batch with heartbeats."""
        registered = broker in self.h.image.brokers
        c = self.h.controller
        results = [c.handle(UnregisterBrokerRequest(broker), self.h.now_ms)]
        if group_with_heartbeats:
            for b in sorted(self.h.epochs):
                hb = BrokerHeartbeatRequest(b, self.h.epochs[b], c.view.next_offset)
                results.append(c.handle(hb, self.h.now_ms))
                if b != broker and b in self.h.image.brokers:
                    self.hear(b)
        self.commit_results(results)
        resp = results[0].response
        if registered:
            assert resp.error is Errors.NONE, resp
            assert broker not in self.h.image.brokers
            assert isinstance(results[0].records[-1], UnregisterBrokerRecord)
            self.heard.pop(broker, None)
            self.contact.pop(broker, None)
        else:
            assert resp.error is Errors.BROKER_ID_NOT_REGISTERED and results[0].records == ()

    @rule(ms=st.sampled_from([100, 1000, 3000, 6000]))
    def time_passes(self, ms):
        self.h.advance(ms)

    @rule(hours=st.sampled_from([-1, 1]))
    def the_wall_clock_steps(self, hours):
        """NTP steps the wall clock: it stamps batches only, and moves no session."""
        self.h.step_wall_clock(hours * 3_600_000)

    @rule()
    def fence_stale_brokers(self):
        while (result := self.h.controller.maybe_fence_stale_broker(self.h.now_ms)) is not None:
            broker = result.response
            silent = self.h.now_ms - self.heard.get(broker, -(2**62))
            assert silent > self.h.session_timeout_ms, (
                f"broker {broker} fenced {silent} ms after it was last heard from"
            )
            self.h.commit(result.records)

    @rule()
    def failover(self):
        self.h.new_leader()
        # A new leader grants every broker a session, on trust: no contact.
        for b in self.h.image.brokers:
            self.heard[b] = self.h.now_ms

    @precondition(lambda self: self.h.image.brokers)
    @rule(data=st.data(), silent_ms=st.sampled_from([0, 100, 3000, 6000]))
    def a_broker_goes_silent_in_controlled_shutdown_then_fails_over_then_restarts(
        self, data, silent_ms
    ):
        """What wedged the main job (issue 18): a broker asks to shut down and
        its process dies before it is let go; the controller fails over (the
        quorum restarts); then the broker comes back as a new incarnation."""
        broker = data.draw(st.sampled_from(sorted(self.h.image.brokers)))
        resp = self.h.heartbeat(broker, want_shut_down=True)
        assert resp.error is Errors.NONE
        self.hear(broker)
        self.h.advance(silent_ms)
        self.failover()
        self.h.advance(data.draw(st.sampled_from([0, 100, 1000])))
        self.generation[broker] += 1
        resp = self.h.register(broker, generation=self.generation[broker])
        self.check_duplicate(broker, resp.error)
        assert resp.error is Errors.NONE, resp.error_message
        self.hear(broker)
        assert not self.h.image.brokers[broker].in_controlled_shutdown

    # ------------------------------------------------------------ topics

    @rule(name=TOPICS, partitions=st.integers(1, 4), rf=st.integers(1, 3), unclean=RARELY)
    def create_topic(self, name, partitions, rf, unclean):
        configs = ((UNCLEAN_LEADER_ELECTION, "true"),) if unclean else ()
        self.h.run(CreateTopicsRequest((CreatableTopic(name, partitions, rf, configs=configs),)))

    @rule(
        name=TOPICS,
        replicas=st.lists(BROKERS, min_size=1, max_size=3, unique=True),
        unclean=RARELY,
    )
    def create_topic_manually(self, name, replicas, unclean):
        configs = ((UNCLEAN_LEADER_ELECTION, "true"),) if unclean else ()
        self.h.run(
            CreateTopicsRequest(
                (CreatableTopic(name, assignments=((0, tuple(replicas)),), configs=configs),)
            )
        )

    @precondition(lambda self: self.h.image.topic_ids)
    @rule(data=st.data())
    def delete_topic(self, data):
        name = data.draw(st.sampled_from(self.topics()))
        self.h.run(DeleteTopicsRequest((name,)))

    # ------------------------------------------------------------ AlterPartition

    @precondition(lambda self: self.h.image.topic_ids)
    @rule(data=st.data(), version=st.integers(0, 3))
    def alter_partition(self, data, version):
        h = self.h
        name = data.draw(st.sampled_from(self.topics()))
        topic_id = h.topic_id(name)
        pids = h.image.topics[topic_id].partitions
        count = data.draw(st.integers(1, 2))
        entries = []
        for _ in range(count):
            pid = data.draw(st.sampled_from(sorted(pids)))
            part = h.image.partition(topic_id, pid)
            members = data.draw(st.lists(st.sampled_from(part.replicas), unique=True, max_size=4))
            if part.leader >= 0 and part.leader not in members and data.draw(st.booleans()):
                members.insert(0, part.leader)
            epochs = [
                data.draw(
                    st.sampled_from(
                        [h.epochs.get(b, -1), -1, h.epochs.get(b, -1), h.epochs.get(b, 0) + 7]
                    )
                )
                for b in members
            ]
            entries.append(
                AlterPartitionPartition(
                    pid,
                    part.leader_epoch + data.draw(st.sampled_from([0, 0, 0, -1, 1])),
                    part.partition_epoch + data.draw(st.sampled_from([0, 0, 0, -1, 1])),
                    new_isr=tuple(members) if version < 3 else (),
                    new_isr_with_epochs=tuple(
                        BrokerState(b, e) for b, e in zip(members, epochs, strict=True)
                    )
                    if version == 3
                    else (),
                    leader_recovery_state=data.draw(st.sampled_from([0, 0, 0, 1])),
                )
            )
        requester = data.draw(
            st.sampled_from([h.image.partition(topic_id, entries[0].partition_index).leader, 1, 2])
        )
        topic = (
            AlterPartitionTopic(tuple(entries), topic_id=topic_id)
            if version > 1
            else AlterPartitionTopic(tuple(entries), topic_name=name)
        )
        request = AlterPartitionRequest(requester, h.epochs.get(requester, -1), (topic,), version)
        self.check_fused_alter_partition_agrees(request)
        resp = h.run(request)
        if resp.error is Errors.NONE:
            for entry, result in zip(entries, resp.topics[0].partitions, strict=True):
                if result.error is Errors.NONE and len(entries) == 1:
                    part = h.image.partition(topic_id, entry.partition_index)
                    assert result.isr == part.isr
                    assert result.partition_epoch == part.partition_epoch
                    assert result.leader_epoch == part.leader_epoch

    def check_fused_alter_partition_agrees(self, request: AlterPartitionRequest) -> None:
        """The speed trick (replication_control.FUSED_ALTER_PARTITION) and its
        plain twin decide ``request`` alike (deciding does not change the
        view; Controller.handle replays)."""
        plain, fused = decide_both(self.h, request)
        assert fused == plain, request

    @precondition(lambda self: self.h.image.topic_ids)
    @rule(
        data=st.data(),
        replicas=st.one_of(st.none(), st.lists(BROKERS, min_size=1, max_size=3, unique=True)),
    )
    def reassign(self, data, replicas):
        name = data.draw(st.sampled_from(self.topics()))
        self.h.run(
            AlterPartitionReassignmentsRequest(
                (
                    ReassignableTopic(
                        name,
                        (ReassignablePartition(0, None if replicas is None else tuple(replicas)),),
                    ),
                )
            )
        )

    @rule(kind=st.sampled_from([PREFERRED, UNCLEAN]))
    def elect(self, kind):
        self.explicit_unclean = kind == UNCLEAN
        self.h.run(ElectLeadersRequest(kind, None))

    @rule()
    def unclean_sweep(self):
        """The periodic sweep, when it is due: it elects only on topics whose
        unclean.leader.election.enable is true, and only leaderless partitions."""
        h = self.h
        result = h.controller.maybe_elect_unclean_leaders(h.now_ms)
        if result is None:
            return
        for record in result.records:
            assert self.unclean_allowed(record.topic_id)
            assert h.image.partition(record.topic_id, record.partition_id).leader == -1
        h.commit(result.records)

    def unclean_allowed(self, topic_id: str) -> bool:
        """The topic's own unclean.leader.election.enable, else the cluster
        default's (the model's), else false."""
        own = self.h.image.topics[topic_id].configs.get(UNCLEAN_LEADER_ELECTION)
        return (own if own is not None else self.cluster_unclean) == "true"

    @rule(
        data=st.data(),
        value=st.sampled_from(["true", "false", None]),
        validate_only=RARELY,
    )
    def alter_unclean_config(self, data, value, validate_only):
        """IncrementalAlterConfigs of unclean.leader.election.enable on a
        topic or the cluster default (None: DELETE)."""
        h = self.h
        name = data.draw(st.sampled_from(["", *self.topics()]))
        op = OpType.DELETE if value is None else OpType.SET
        resource = AlterConfigsResource(
            BROKER_RESOURCE if name == "" else TOPIC_RESOURCE,
            name,
            (AlterableConfig(UNCLEAN_LEADER_ELECTION, op, value),),
        )
        (answer,) = h.run(IncrementalAlterConfigsRequest((resource,), validate_only)).responses
        assert answer.error is Errors.NONE, answer
        if validate_only:
            assert h.last.records == ()
        elif name == "":
            self.cluster_unclean = value

    # ------------------------------------------------------------ client quotas

    @rule(
        entity=st.sampled_from(QUOTA_ENTITIES),
        ops=st.lists(
            st.tuples(st.sampled_from(QUOTA_KEYS), st.sampled_from(QUOTA_VALUES)),
            min_size=1,
            max_size=3,
        ),
        validate_only=RARELY,
    )
    def alter_client_quotas(self, entity, ops, validate_only):
        """AlterClientQuotas of one entity (a value None removes the key),
        against a model of Kafka's rules kept here."""
        h = self.h
        alteration = ClientQuotaAlteration(
            entity,
            tuple(
                ClientQuotaOp(k, 0.0, True) if v is None else ClientQuotaOp(k, v) for k, v in ops
            ),
        )
        (answer,) = h.run(AlterClientQuotasRequest((alteration,), validate_only)).entries
        types = [t for t, _ in entity]
        ip = types == ["ip"]
        allowed = QUOTA_IP_KEYS if ip else QUOTA_USER_KEYS
        valid = (
            len(set(types)) == len(types)
            and (ip or "ip" not in types)
            and all(name != "not-an-ip" for _, name in entity)
            and len({k for k, _ in ops}) == len(ops)
            and all(
                v is None or (k in allowed and v > 0 and (allowed[k] == "DOUBLE" or v == int(v)))
                for k, v in ops
            )
        )
        if not valid:
            assert answer.error is Errors.INVALID_REQUEST and h.last.records == (), answer
            return
        assert answer.error is Errors.NONE, answer
        if validate_only:
            assert h.last.records == ()
            return
        quotas = dict(self.quota_model.get(frozenset(entity), {}))
        for k, v in ops:
            if v is None:
                quotas.pop(k, None)
            else:
                quotas[k] = v
        self.quota_model[frozenset(entity)] = quotas
        if not quotas:
            del self.quota_model[frozenset(entity)]

    @invariant()
    def client_quotas_are_the_models(self):
        """The image holds exactly the quotas set and not removed, and no
        entity without a quota."""
        image = self.h.image.client_quotas
        assert all(image.values())
        assert {frozenset(e): q for e, q in image.items()} == self.quota_model

    # ------------------------------------------------------------ SCRAM credentials

    @rule(
        alterations=st.lists(
            st.tuples(
                st.booleans(),  # True: a deletion
                st.sampled_from(["alice", "bob", ""]),
                st.sampled_from([1, 2, 1, 2, 0]),
                st.sampled_from([4096, 8192, 16384, 4095, 16385]),
            ),
            max_size=4,
        )
    )
    def alter_user_scram_credentials(self, alterations):
        """AlterUserScramCredentials against a model of Kafka's rules: a
        user's first alteration (deletions before upsertions) decides it; a
        second one, after an accepted first, refuses it DUPLICATE_RESOURCE."""
        h = self.h
        deletions = tuple(
            ScramCredentialDeletion(u, m) for delete, u, m, _ in alterations if delete
        )
        upsertions = tuple(
            ScramCredentialUpsertion(u, m, i, b"salt", b"salted")
            for delete, u, m, i in alterations
            if not delete
        )
        answers = {
            r.user: r.error
            for r in h.run(AlterUserScramCredentialsRequest(deletions, upsertions)).results
        }
        supported = h.image.metadata_version >= 11
        expected: dict[str, Errors] = {}
        model = {u: dict(c) for u, c in self.scram_model.items()}
        for user in {a.name for a in deletions + upsertions}:
            mine = [a for a in deletions + upsertions if a.name == user]
            first = mine[0]
            if not supported:
                error = Errors.UNSUPPORTED_VERSION
            elif not user:
                error = Errors.UNACCEPTABLE_CREDENTIAL
            elif first.mechanism not in (1, 2):
                error = Errors.UNSUPPORTED_SASL_MECHANISM
            elif isinstance(first, ScramCredentialDeletion):
                found = first.mechanism in self.scram_model.get(user, {})
                error = Errors.NONE if found else Errors.RESOURCE_NOT_FOUND
            else:
                ok = 4096 <= first.iterations <= 16384
                error = Errors.NONE if ok else Errors.UNACCEPTABLE_CREDENTIAL
            if error is Errors.NONE and len(mine) > 1:
                error = Errors.DUPLICATE_RESOURCE
            expected[user] = error
            if error is Errors.NONE:
                credentials = model.setdefault(user, {})
                if isinstance(first, ScramCredentialDeletion):
                    del credentials[first.mechanism]
                else:
                    credentials[first.mechanism] = first.iterations
        assert answers == expected
        self.scram_model = {u: c for u, c in model.items() if c}

    @invariant()
    def scram_credentials_are_the_models(self):
        """The image holds exactly the credentials set and not deleted, with
        the keys derived from what was sent, and no user without one."""
        image = self.h.image.scram
        assert {u: {m: c.iterations for m, c in cs.items()} for u, cs in image.items()} == (
            self.scram_model
        )
        for credentials in image.values():
            for mechanism, c in credentials.items():
                assert (c.stored_key, c.server_key) == derived_keys(mechanism, b"salted")

    # ------------------------------------------------------------ delegation tokens

    def _token_refusal(self, requester: str | None) -> Errors | None:
        if requester is None:
            return Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        if self.h.image.metadata_version < 12:
            return Errors.UNSUPPORTED_VERSION
        return None

    @rule(
        requester=PRINCIPALS,
        renewers=st.lists(st.sampled_from(["User:a", "User:b", "Group:g"]), max_size=2),
        max_lifetime_ms=st.sampled_from([-1, 1000, 8000, 50_000]),
        owner=st.sampled_from([None, "User:c"]),
    )
    def create_delegation_token(self, requester, renewers, max_lifetime_ms, owner):
        """CreateDelegationToken against a model of Kafka's rules and times."""
        h = self.h
        now = h.wall_ms
        pairs = tuple(tuple(r.split(":")) for r in renewers)
        owner_type, owner_name = owner.split(":") if owner else (None, None)
        r = h.run(
            CreateDelegationTokenRequest(
                requester, now, pairs, max_lifetime_ms, owner_type, owner_name
            )
        )
        error = self._token_refusal(requester)
        if error is None and any(not p.startswith("User:") for p in renewers):
            error = Errors.INVALID_PRINCIPAL_TYPE
        assert r.error is (error or Errors.NONE), r
        if error is not None:
            assert h.last.records == ()
            return
        lifetime = 20_000 if max_lifetime_ms <= 0 else min(20_000, max_lifetime_ms)
        expected = (owner or requester, tuple(renewers), now + lifetime, now + min(lifetime, 5000))
        assert (r.max_timestamp_ms, r.expiry_timestamp_ms) == expected[2:]
        assert r.hmac == token_hmac(TOKEN_SECRET, r.token_id)
        self.token_model[r.token_id] = expected

    @rule(
        data=st.data(),
        requester=PRINCIPALS,
        expire=st.booleans(),
        period=st.sampled_from([-1, 0, 1000, 100_000]),
    )
    def renew_or_expire_delegation_token(self, data, requester, expire, period):
        """Renew or Expire, by a known token's HMAC or one of no token."""
        h = self.h
        now = h.wall_ms
        token_id = data.draw(st.sampled_from([None, *sorted(self.token_model)]))
        hmac = token_hmac(TOKEN_SECRET, token_id or "no such token")
        kind = ExpireDelegationTokenRequest if expire else RenewDelegationTokenRequest
        r = h.run(kind(requester, now, hmac, period))
        error = self._token_refusal(requester)
        if error is None:
            if token_id is None:
                error = Errors.DELEGATION_TOKEN_NOT_FOUND
            else:
                owner, renewers, max_ts, expiry = self.token_model[token_id]
                if max_ts < now or expiry < now:
                    error = Errors.DELEGATION_TOKEN_EXPIRED
                elif requester != owner and requester not in renewers:
                    error = Errors.DELEGATION_TOKEN_OWNER_MISMATCH
        assert r.error is (error or Errors.NONE), r
        if error is not None:
            assert h.last.records == ()
            return
        owner, renewers, max_ts, _ = self.token_model[token_id]
        if expire and period < 0:
            assert r.expiry_timestamp_ms == period
            del self.token_model[token_id]
            return
        if expire:
            new_expiry = min(max_ts, now + period)
        else:
            new_expiry = min(max_ts, now + (min(5000, period) if period > 0 else 5000))
        assert r.expiry_timestamp_ms == new_expiry
        self.token_model[token_id] = (owner, renewers, max_ts, new_expiry)

    @rule()
    def sweep_expired_delegation_tokens(self):
        """The controller's sweep, when due by its monotonic clock, removes
        exactly the tokens expired by the wall clock."""
        h = self.h
        due = h.controller.next_token_sweep_ms()
        result = h.controller.maybe_sweep_delegation_tokens(h.now_ms, h.wall_ms)
        if due is None or h.now_ms < due:
            assert result is None
            return
        expired = {
            t for t, (_, _, max_ts, expiry) in self.token_model.items()
            if max_ts < h.wall_ms or expiry < h.wall_ms
        }  # fmt: skip
        assert {r.token_id for r in result.records} == expired
        h.commit(result.records)
        for token_id in expired:
            del self.token_model[token_id]

    @invariant()
    def delegation_tokens_are_the_models(self):
        image = self.h.image.delegation_tokens
        assert {
            t: (x.owner, x.renewers, x.max_timestamp, x.expiration_timestamp)
            for t, x in image.items()
        } == self.token_model
        assert all(x.expiration_timestamp <= x.max_timestamp for x in image.values())
        # While tokens exist (and the secret is set), a sweep is always due.
        if image:
            assert self.h.controller.next_token_sweep_ms() is not None

    @rule(validate_only=RARELY)
    def enable_elr(self, validate_only):
        """UpdateFeatures eligible.leader.replicas.version=1 (KIP-966): it
        needs metadata.version 12 (decisions.md 110), where it passes."""
        h = self.h
        resp = h.run(UpdateFeaturesRequest(ELR, 1, validate_only=validate_only))
        if h.image.metadata_version < 12:
            assert resp.error is Errors.INVALID_UPDATE_VERSION and h.last.records == ()
            return
        assert resp.error is Errors.NONE, resp
        assert h.image.features.get(ELR) == (None if validate_only and not self.elr_on() else 1)

    @rule(data=st.data(), value=st.sampled_from(["1", "2", "3", None]))
    def alter_min_isr(self, data, value):
        """min.insync.replicas on a topic or the cluster default (None: DELETE):
        what the ELR is kept against."""
        h = self.h
        name = data.draw(st.sampled_from(["", *self.topics()]))
        op = OpType.DELETE if value is None else OpType.SET
        resource = AlterConfigsResource(
            BROKER_RESOURCE if name == "" else TOPIC_RESOURCE,
            name,
            (AlterableConfig("min.insync.replicas", op, value),),
        )
        (answer,) = h.run(IncrementalAlterConfigsRequest((resource,))).responses
        assert answer.error is Errors.NONE, answer

    @rule(data=st.data())
    def preferred_replica_back_in_the_isr(self, data):
        """A partition's leader takes its preferred replica, active again, back
        into the ISR (so that leader balancing has something to elect)."""
        h = self.h
        candidates = [
            (topic_id, pid, part)
            for topic_id, topic in sorted(h.image.topics.items())
            for pid, part in sorted(topic.partitions.items())
            if part.leader >= 0
            and part.replicas[0] != part.leader
            and part.replicas[0] not in part.isr
            and part.replicas[0] in h.image.brokers
            and h.image.brokers[part.replicas[0]].active
        ]
        if not candidates:
            return
        topic_id, pid, part = data.draw(st.sampled_from(candidates))
        isr = (*part.isr, part.replicas[0])
        entry = AlterPartitionPartition(
            pid,
            part.leader_epoch,
            part.partition_epoch,
            new_isr_with_epochs=tuple(BrokerState(b, h.epochs.get(b, -1)) for b in isr),
        )
        h.run(
            AlterPartitionRequest(
                part.leader,
                h.epochs.get(part.leader, -1),
                (AlterPartitionTopic((entry,), topic_id=topic_id),),
            )
        )

    @rule()
    def balance_leaders(self):
        """Leader balancing, once it is due: each election changes the
        leader, to an ISR member that may lead (unfenced; not shutting down,
        where the metadata.version records it). That is the preferred replica
        whenever it may lead; a leaderless partition whose preferred replica
        may not gets another (Kafka's electPreferredLeader); a partition with
        a leader keeps it. As in Kafka, any build also completes a
        reassignment whose new replicas are all in the ISR, with a new leader
        or without one, and clears an ELR below min.insync.replicas."""
        h = self.h
        due = h.controller.next_balance_ms()
        if due is None:
            return
        h.advance(max(0, due - h.now_ms))  # time passes until the run is due
        result = h.controller.maybe_balance_partition_leaders(h.now_ms)

        def may_lead(broker: int, part) -> bool:
            # With ELR on, a partition whose ISR is empty may take an ELR member.
            reg = h.image.brokers.get(broker)
            return broker in (part.isr or part.elr) and reg is not None and reg.active

        for record in result.records:
            before = h.image.partition(record.topic_id, record.partition_id)
            if record.leader == -2 and record.replicas is None:
                # ELR on: the preferred replica may not lead, but the change
                # clears an ELR that min.insync.replicas, lowered since, no
                # longer keeps (Kafka's maybePopulateTargetElr in every build).
                assert record.eligible_leader_replicas == () and before.elr, (record, before)
                assert record.isr is None, record
                continue
            # Elected from the ELR, the new leader becomes the ISR.
            from_elr = not before.isr and record.isr == (record.leader,)
            replicas = before.replicas
            if record.replicas is not None:
                # Kafka's builder completes a reassignment in any change whose
                # ISR, less the removed replicas, holds every replica that stays
                # (None in a record: unchanged).
                removing = set(before.removing_replicas)
                assert before.adding_replicas or removing, (record, before)
                replicas = tuple(r for r in before.replicas if r not in removing)
                assert record.replicas == replicas, (record, before)
                for field in ("removing_replicas", "adding_replicas"):
                    after = getattr(record, field)
                    assert (getattr(before, field) if after is None else after) == (), record
                assert set(record.isr or before.isr) <= set(replicas), (record, before)
            else:
                assert record.isr is None or from_elr, record
            if record.leader in (-2, before.leader):
                # Only a reassignment completed (the leader named again, to
                # bump its epoch): the election found no replica to take.
                assert record.replicas is not None, (record, before)
                assert before.leader == replicas[0] or not may_lead(replicas[0], before), (
                    record,
                    before,
                )
                if before.leader == -1:
                    assert not any(may_lead(r, before) for r in replicas), (record, before)
                continue
            assert may_lead(record.leader, before), (record, before)
            if may_lead(replicas[0], before):
                assert record.leader == replicas[0], (record, before)
            else:
                assert before.leader == -1, (record, before)
        h.commit(result.records)

    # ------------------------------------------------------------ invariants

    @invariant()
    def partitions_are_sound(self):
        image = self.h.image
        before = self.before
        new_records = self.h.log[self.checked_log :]
        changes = Counter(
            (r.topic_id, r.partition_id)
            for r in new_records
            if isinstance(r, PartitionChangeRecord)
        )
        for topic_id, topic in image.topics.items():
            for pid, part in topic.partitions.items():
                assert part.isr or self.elr_on(), (topic.name, pid, part)
                assert not set(part.isr) & set(part.elr), part
                assert part.elr == () or self.elr_on() or old_elr_kept(before, topic_id, pid)
                assert len(set(part.isr)) == len(part.isr)
                assert set(part.isr) <= set(part.replicas), part
                if part.leader != -1:
                    assert part.leader in part.isr, part
                    assert image.brokers[part.leader].active, (part, image.brokers[part.leader])
                old = before.partition(topic_id, pid)
                if old is not None:
                    assert part.partition_epoch == old.partition_epoch + changes[(topic_id, pid)]
                    assert part.leader_epoch >= old.leader_epoch
        # Not "added members are still active": the fencer runs until no stale
        # broker is left, so an unclean election may make one broker the ISR
        # and a later fence in the same step leave it there, leaderless.
        self.check_isr_members_were_active_when_added()
        self.check_elr_records()
        self.explicit_unclean = False

    def check_elr_records(self):
        """KIP-966, record by record through the step's records: an ELR
        member was in the ISR or the ELR just before; a leader from outside
        both is an unclean election, and only where one is allowed."""
        before = self.before
        state: dict[tuple[str, int], object] = {}
        for record in self.h.log[self.checked_log :]:
            if isinstance(record, PartitionRecord):
                state[(record.topic_id, record.partition_id)] = None
                continue
            if not isinstance(record, PartitionChangeRecord):
                continue
            key = (record.topic_id, record.partition_id)
            old = state[key] if key in state else before.partition(*key)
            if old is None:  # created in this step: its first ISR is checked elsewhere
                continue
            if record.eligible_leader_replicas is not None:
                joined = set(record.eligible_leader_replicas) - set(old.isr) - set(old.elr)
                assert not joined, (record, old)
            if (
                record.leader >= 0
                and record.leader != old.leader
                and record.replicas is None  # a completed reassignment elects from its new ISR
                and record.leader not in (*old.isr, *old.elr)
            ):
                assert self.explicit_unclean or self.unclean_allowed(record.topic_id), (
                    record,
                    old,
                )
            state[key] = old.merge(record)

    def check_isr_members_were_active_when_added(self):
        """KIP-841, record by record through the step's records: a broker joins
        an ISR only while active, counting a broker unfenced earlier in the
        same batch (Kafka's handleBrokerUnfenced writes the unfence record,
        then the elections that may make it the leader, uncleanly included)."""
        before = self.before
        active = {b for b, reg in before.brokers.items() if reg.active}
        shutting_down = {b for b, reg in before.brokers.items() if reg.in_controlled_shutdown}
        isrs: dict[tuple[str, int], tuple[int, ...]] = {}
        for record in self.h.log[self.checked_log :]:
            if isinstance(record, UnregisterBrokerRecord):
                active.discard(record.broker_id)
                shutting_down.discard(record.broker_id)
            elif isinstance(record, RegisterBrokerRecord):
                shutting_down.discard(record.broker_id)
                if record.in_controlled_shutdown:
                    shutting_down.add(record.broker_id)
                if record.fenced or record.in_controlled_shutdown:
                    active.discard(record.broker_id)
                else:
                    active.add(record.broker_id)
            elif isinstance(record, BrokerRegistrationChangeRecord):
                if record.in_controlled_shutdown == IN_CONTROLLED_SHUTDOWN:
                    shutting_down.add(record.broker_id)
                    active.discard(record.broker_id)
                if record.fenced == FENCE:
                    active.discard(record.broker_id)
                elif record.fenced == UNFENCE and record.broker_id not in shutting_down:
                    active.add(record.broker_id)
            elif isinstance(record, PartitionRecord):
                isrs[(record.topic_id, record.partition_id)] = record.isr
                assert set(record.isr) <= active, (record, active)
            elif isinstance(record, PartitionChangeRecord) and record.isr is not None:
                key = (record.topic_id, record.partition_id)
                if key not in isrs:
                    old = before.partition(*key)
                    isrs[key] = old.isr if old is not None else ()
                added = set(record.isr) - set(isrs[key])
                # Cancelling a reassignment whose ISR holds only added replicas
                # (an unclean revert, Kafka's PartitionReassignmentRevert) makes
                # the first original replica the ISR, active or not: the one
                # record that may add an inactive broker (with a single
                # original replica there is no other choice).
                unclean_revert = (
                    record.adding_replicas == ()
                    and record.replicas is not None
                    and tuple(record.isr) == tuple(record.replicas[:1])
                    and not set(isrs[key]) & set(record.replicas)
                )
                assert unclean_revert or added <= active, (record, added, active)
                isrs[key] = record.isr

    @invariant()
    def listed_reassignments_are_the_partitions_changing_replicas(self):
        """ListPartitionReassignments over the image (api/reads.py), all topics
        or each by name: exactly the partitions with replicas being added or
        removed, the adding ones among the replicas, the removing ones too."""
        image = self.h.image
        listed = reassignments_obj(image, None)
        ongoing = {
            (t["name"], p["partitionIndex"]): p for t in listed["topics"] for p in t["partitions"]
        }
        expected = {
            (topic.name, pid)
            for topic in image.topics.values()
            for pid, part in topic.partitions.items()
            if part.adding_replicas or part.removing_replicas
        }
        assert ongoing.keys() == expected
        for p in ongoing.values():
            assert set(p["addingReplicas"]) | set(p["removingReplicas"]) <= set(p["replicas"])
            assert not set(p["addingReplicas"]) & set(p["removingReplicas"])
        # Asked by name in the listing's order (names sorted): the answer
        # follows the order asked, and the image's topics are in no order.
        names = sorted(t.name for t in image.topics.values())
        by_name = reassignments_obj(image, [(name, None) for name in names])
        assert by_name["topics"] == listed["topics"] and by_name["notFound"] == []

    @invariant()
    def unregistered_brokers_lead_nothing_and_hold_no_session(self):
        image = self.h.image
        for topic in image.topics.values():
            for part in topic.partitions.values():
                assert part.leader == -1 or part.leader in image.brokers, part
                if len(part.isr) > 1:
                    assert set(part.isr) <= image.brokers.keys(), part
        assert self.h.controller.heartbeats.sessions.keys() <= image.brokers.keys()

    @invariant()
    def broker_epochs_are_offsets_and_grow(self):
        offsets = {}
        for offset, record in enumerate(self.h.log):
            if isinstance(record, RegisterBrokerRecord):
                offsets[offset] = record
        epochs = {}
        for broker_id, reg in self.h.image.brokers.items():
            assert reg.epoch in offsets and offsets[reg.epoch].broker_id == broker_id
            history = self.epoch_history.setdefault(broker_id, [])
            if not history or history[-1] != reg.epoch:
                assert not history or reg.epoch > history[-1]
                history.append(reg.epoch)
            epochs[reg.epoch] = broker_id
        assert len(epochs) == len(self.h.image.brokers)

    @rule(broker=BROKERS, stale=RARELY)
    def allocate_producer_ids(self, broker, stale):
        h = self.h
        epoch = h.epochs.get(broker, -1) + (1 if stale else 0)
        r = h.run(AllocateProducerIdsRequest(broker, epoch))
        registered = h.image.brokers.get(broker)
        if registered is None or registered.epoch != epoch:
            assert r.error is Errors.STALE_BROKER_EPOCH and h.last.records == ()
            return
        assert r.error is Errors.NONE
        self.producer_blocks.append((r.producer_id_start, r.producer_id_len))

    @invariant()
    def producer_id_blocks_never_overlap(self):
        """Each block starts where the one before ended, failovers included."""
        expected = 0
        for start, length in self.producer_blocks:
            assert start == expected and length == 1000
            expected = start + length
        assert self.h.image.next_producer_id == expected

    @rule(acls=st.lists(ACLS, min_size=1, max_size=4))
    def create_acls(self, acls):
        r = self.h.run(CreateAclsRequest(tuple(acls)))
        assert len(r.results) == len(acls)
        for acl, result in zip(acls, r.results, strict=True):
            valid = _acl_is_valid(acl)
            assert (result.error is Errors.NONE) == valid, (acl, result)
            if valid:
                self.acl_model.add(acl)

    @rule(filters=st.lists(ACL_FILTERS, min_size=1, max_size=3))
    def delete_acls(self, filters):
        before = set(self.acl_model)
        r = self.h.run(DeleteAclsRequest(tuple(filters)))
        for f, result in zip(filters, r.filter_results, strict=True):
            if f.resource_type == 0 or f.pattern_type == 0:
                assert result.error is Errors.INVALID_REQUEST
                continue
            matched = {acl for acl in before if _filter_matches(f, acl)}
            assert set(result.matching_acls) == matched
            self.acl_model -= matched
        assert len(self.h.last.records) == len(before) - len(self.acl_model)

    @invariant()
    def the_acls_are_the_model_each_binding_once(self):
        stored = list(self.h.image.acls.values())
        assert len(stored) == len(set(stored))
        assert set(stored) == self.acl_model
        assert all(acl_problem(acl) is None for acl in stored)

    @invariant()
    def the_cluster_default_is_what_was_set(self):
        default = self.h.image.broker_configs.get("", {})
        assert default.get(UNCLEAN_LEADER_ELECTION) == self.cluster_unclean

    @invariant()
    def the_log_replays_to_the_image(self):
        assert self.h.image.ignored_records == 0
        assert self.h.replayed() == self.h.image
        self.checked_log = len(self.h.log)
        self.before = self.h.image

    @invariant()
    def the_index_matches_a_fresh_build(self):
        c = self.h.controller
        if c._index is None:
            return
        fresh = BrokersToIsrs.build(c.view)
        for broker in [-1, *range(1, 5)]:
            assert c.index.partitions_with_broker_in_isr(
                broker
            ) == fresh.partitions_with_broker_in_isr(broker)
            assert c.index.partitions_led_by(broker) == fresh.partitions_led_by(broker)
            assert c.index.partitions_with_broker_in_elr(
                broker
            ) == fresh.partitions_with_broker_in_elr(broker)
        assert c.index.imbalanced_partitions() == fresh.imbalanced_partitions()
        assert c.index.imbalanced_count == fresh.imbalanced_count


def old_elr_kept(before, topic_id: str, pid: int) -> bool:
    """With ELR off a partition has no ELR, unless it kept one from when ELR
    was on (never in these walks: nothing turns ELR off)."""
    old = before.partition(topic_id, pid)
    return old is not None and bool(old.elr)


class ControllerMachineMV6(ControllerMachine):
    """3.3-IV2: controlled shutdown is soft state, and an ISR shrink bumps the
    leader epoch (KAFKA-15021's old rule)."""

    metadata_version = 6


class ControllerMachineELR(ControllerMachine):
    """ELR on from the first step, so that every walk exercises KIP-966."""

    elr_from_the_start = True


SETTINGS = settings(
    max_examples=100,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestController = ControllerMachine.TestCase
TestController.settings = SETTINGS
TestControllerMV6 = ControllerMachineMV6.TestCase
TestControllerMV6.settings = SETTINGS
TestControllerELR = ControllerMachineELR.TestCase
TestControllerELR.settings = SETTINGS
