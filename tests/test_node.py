"""A real voter in this process (pysyncobj, journal, snapshots): group commit,
restart and replay, compaction, corrupt data, admission control, stale batches."""

import asyncio
import os
from dataclasses import replace
from pathlib import Path

import pytest

from controller.messages import (
    AlterPartitionPartition,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    BrokerState,
    CreatableTopic,
    CreateTopicsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from metadata_records.errors import Errors
from metadata_records.records import Batch, Endpoint, FeatureRange, NoOpRecord
from metadata_records.snapshot import image_digest
from quorum.node_config import ConfigError, claim_data_dir
from quorum.node_errors import ThrottledError, UnavailableError
from quorum.raft import internals
from quorum.record_log import OffsetTooOld
from quorum.state_machine import STALE

from .harness import incarnation
from .nodes import build_node, run_with, single_voter_config, wait_until

MV = (FeatureRange("metadata.version", 6, 12),)


def register(node, broker_id, generation=0):
    return node.submit(
        BrokerRegistrationRequest(
            broker_id,
            node.cluster_id,
            incarnation(broker_id, generation),
            (Endpoint("PLAINTEXT", "localhost", 9092, 0),),
            MV,
        )
    )


async def active(node):
    """Active controller, with the bootstrap records of a new cluster applied."""
    await wait_until(
        lambda: node.active and node.image.metadata_version == 12 and node.queue_depth == 0,
        what="the node becoming active controller",
    )


def three_voters(
    tmp_path, fsync: bool, timeouts: tuple[float, float] = (0.4, 0.8), noop_ms: int = 0
) -> list:
    """Three voters in this process, built (not started) in this thread; with
    ``noop_ms`` 0 (the default) they write no periodic NoOpRecord, which would
    move the offsets these tests compare."""
    from quorum.node_config import NodeConfig

    from .nodes import free_port

    voters = {i: f"127.0.0.1:{free_port()}" for i in range(3)}
    return [
        build_node(
            NodeConfig(
                node_id=i,
                voters=voters,
                data_dir=str(tmp_path / f"v{i}"),
                advertised_url=f"http://127.0.0.1:{i + 1}",
                cluster_id="c",
                raft_secret="0123456789abcdef0123",
                fsync=fsync,
                raft_min_timeout=timeouts[0],
                raft_max_timeout=timeouts[1],
                metadata_max_idle_interval_ms=noop_ms,
            )
        )
        for i in range(3)
    ]


async def start_and_lead(nodes):
    """Starts ``nodes``; returns the active controller once it has bootstrapped
    and every voter follows it (a voter not yet connected could still stand
    for election and depose it)."""
    for n in nodes:
        await n.start()
    await wait_until(
        lambda: any(n.active and n.image.metadata_version == 12 for n in nodes),
        what="an active controller",
    )
    leader = next(n for n in nodes if n.active)
    await wait_until(
        lambda: all(n.raft_leader_id == leader.node_id for n in nodes),
        what="every voter following the leader",
    )
    return leader


def test_a_single_voter_leads_bootstraps_and_group_commits(tmp_path):
    node = build_node(single_voter_config(tmp_path))

    async def body(node):
        await active(node)
        image = node.image
        assert image.controller_epoch >= 1 and image.leader_id == 0
        await wait_until(lambda: node.image.metadata_version == 12, what="bootstrap")
        responses = await asyncio.gather(*(register(node, b) for b in range(1, 21)))
        assert all(r.error is Errors.NONE for r in responses)
        epochs = sorted(r.broker_epoch for r in responses)
        assert len(set(epochs)) == 20
        for r in responses:  # each epoch is the offset of its own record
            (entry,) = node.sm.log.read(r.broker_epoch, 1)
            assert entry.record.broker_epoch == r.broker_epoch
        # 20 requests arrived together: far fewer than 20 batches.
        assert node.stats.batches < 20
        return image_digest(node.image)

    run_with(node, body)


def test_batches_are_pipelined_and_each_is_decided_on_the_ones_in_flight(tmp_path):
    # Small batches and many requests: several batches are out at once, each
    # decided on top of the records of those before it (chained base offsets).
    node = build_node(single_voter_config(tmp_path, max_batch_records=5, max_batches_in_flight=2))

    async def body(node):
        await active(node)
        responses = await asyncio.gather(*(register(node, b) for b in range(1, 121)))
        assert all(r.error is Errors.NONE for r in responses), {r.error for r in responses}
        for r in responses:  # each epoch is the offset of its own record
            (entry,) = node.sm.log.read(r.broker_epoch, 1)
            assert entry.record.broker_epoch == r.broker_epoch
        assert node.stats.most_in_flight == node.config.max_batches_in_flight == 2
        assert node.sm.stale_batches == 0
        # A rejection decided while batches are in flight is answered only once
        # every batch decided before it has committed (Kafka's purgatory).
        earlier = [asyncio.ensure_future(register(node, b)) for b in range(600, 660)]
        await asyncio.sleep(0)  # they are queued first
        bad = node.submit(
            BrokerRegistrationRequest(
                700, "another-cluster", incarnation(700), (Endpoint("P", "h", 1, 0),), MV
            )
        )
        rejected = await bad
        assert rejected.error is Errors.INCONSISTENT_CLUSTER_ID
        assert set(range(600, 660)) <= node.image.brokers.keys()
        await asyncio.gather(*earlier)

    run_with(node, body)


def test_raft_entries_map_to_record_offsets_for_lag_in_records(tmp_path):
    node = build_node(single_voter_config(tmp_path))

    async def body(node):
        await active(node)
        await asyncio.gather(*(register(node, b) for b in range(1, 31)))
        sm, raft = node.sm, node.raft
        # Quiet: pysyncobj counts an entry applied only after apply_batch returns.
        await wait_until(
            lambda: (
                node.queue_depth == 0
                and sm.image.next_offset > 30
                and raft.last_applied == sm._entry_index[-1]
            )
        )
        last = raft.last_applied
        assert sm.next_offset_at(last) == sm.image.next_offset
        assert sm.next_offset_at(last + 1) is None  # not applied yet: unknown
        # Entries are batches: the records between two indexes are the offsets'
        # difference, more than the entries when requests were group committed.
        first = sm._entry_index[0]
        records = sm.next_offset_at(last) - sm.next_offset_at(first)
        assert records >= last - first
        assert records > 0

    run_with(node, body)


def test_restart_replays_the_journal_to_the_same_image(tmp_path):
    config = single_voter_config(tmp_path, fsync=True)
    node = build_node(config)

    async def write(node):
        await active(node)
        for b in range(1, 6):
            r = await register(node, b)
            await node.submit(BrokerHeartbeatRequest(b, r.broker_epoch, 10**6))
        res = await node.submit(CreateTopicsRequest((CreatableTopic("t", 8, 3),)))
        assert res.topics[0].error is Errors.NONE
        return image_digest(node.image), node.image.next_offset

    digest, next_offset = run_with(node, write)
    again = build_node(config)

    async def check(node):
        # Replay reaches the commit index found on disk (saved once a second by
        # pysyncobj); the rest of the journal commits with the first entry of
        # the new term.
        await wait_until(lambda: not node.replaying, what="replay")
        await active(node)
        assert node.image.next_offset > next_offset
        # The new term adds a LEADER_CHANGE; everything before it is identical.
        entries = node.sm.log.read(next_offset, 10)
        assert entries[0].record.TYPE == "LEADER_CHANGE"
        return node.image

    image = run_with(again, check)
    assert image.topic_by_name("t") is not None and len(image.brokers) == 5
    assert digest  # computed on the first run


def test_compaction_snapshot_and_restart(tmp_path):
    config = single_voter_config(tmp_path, compaction_entries=30)
    node = build_node(config)

    async def write(node):
        await active(node)
        r = await register(node, 1)
        for _ in range(60):  # sequential: one batch each
            await node.submit(BrokerHeartbeatRequest(1, r.broker_epoch, 10**6, want_fence=True))
            await node.submit(BrokerHeartbeatRequest(1, r.broker_epoch, 10**6))
        await wait_until(lambda: os.path.exists(config.dump_file), what="a snapshot file")
        return image_digest(node.image), node.image.next_offset

    digest, next_offset = run_with(node, write)
    again = build_node(config)

    async def check(node):
        await wait_until(lambda: node.image.next_offset >= next_offset, what="replay")
        # Records before the snapshot are gone from the log; the image is whole.
        assert node.sm.log.oldest_offset > 0
        with pytest.raises(OffsetTooOld):
            node.sm.log.read(0, 1)
        reg = node.image.brokers[1]
        assert not reg.fenced
        return node.image

    run_with(again, check)


def test_a_corrupt_snapshot_is_named_and_the_node_refuses_to_serve(tmp_path):
    config = single_voter_config(tmp_path, compaction_entries=10)
    node = build_node(config)

    async def write(node):
        await active(node)
        r = await register(node, 1)
        for _ in range(20):
            await node.submit(BrokerHeartbeatRequest(1, r.broker_epoch, 10**6, want_fence=True))
            await node.submit(BrokerHeartbeatRequest(1, r.broker_epoch, 10**6))
        await wait_until(lambda: os.path.exists(config.dump_file), what="a snapshot file")

    run_with(node, write)
    with open(config.dump_file, "r+b") as f:
        f.seek(-20, os.SEEK_END)
        f.write(b"garbage!garbage!garb")
    again = build_node(config)

    async def check(node):
        await wait_until(lambda: node.sm.fatal is not None, what="corruption detected")
        assert "does not match its checksum" in node.sm.fatal
        assert config.dump_file in node.sm.fatal
        assert not node.raft_alive and not node.ready
        with pytest.raises(UnavailableError, match="refuses to serve"):
            await node.submit(BrokerHeartbeatRequest(1, 1, 1))

    run_with(again, check)


def test_admission_control_refuses_at_once_and_writes_nothing(tmp_path):
    node = build_node(single_voter_config(tmp_path, max_queued_requests=5))

    async def body(node):
        await active(node)
        results = await asyncio.gather(
            *(register(node, b) for b in range(1, 200)), return_exceptions=True
        )
        refused = [r for r in results if isinstance(r, ThrottledError)]
        accepted = [r for r in results if not isinstance(r, Exception)]
        assert refused and accepted
        assert "nothing was written" in str(refused[0])
        assert len(node.image.brokers) == len(accepted)
        # The node keeps serving afterwards.
        assert (await register(node, 500)).error is Errors.NONE

    run_with(node, body)


def test_a_batch_from_an_older_epoch_or_offset_is_a_no_op(tmp_path):
    node = build_node(single_voter_config(tmp_path))

    async def body(node):
        await active(node)
        image = node.image
        stale = Batch(image.controller_epoch - 1, 0, (NoOpRecord(),))
        result, error = await node.propose(stale)
        assert result == STALE and node.image.next_offset == image.next_offset
        elsewhere = Batch(image.controller_epoch, 0, (NoOpRecord(),), image.next_offset + 5)
        result, error = await node.propose(elsewhere)
        assert result == STALE and node.image.next_offset == image.next_offset
        assert node.sm.stale_batches == 2
        # A read barrier commits through the log without taking an offset.
        offset = await node.barrier()
        assert offset == node.image.last_offset == image.last_offset

    run_with(node, body)


def test_a_read_never_uses_a_barrier_proposed_before_it_arrived(tmp_path):
    """On a follower, a barrier already in the log may come before a write the
    leader acknowledged since: a read that arrives while it is in flight
    waits for the next barrier (reads arriving together share one)."""
    node = build_node(single_voter_config(tmp_path))

    async def body(node):
        await active(node)
        proposed: list[asyncio.Future] = []

        def propose(batch, known=None):  # barriers that commit when the test says
            proposed.append(node.loop.create_future())
            return proposed[-1]

        node.propose = propose
        first = asyncio.ensure_future(node.barrier())
        await wait_until(lambda: len(proposed) == 1)
        later = [asyncio.ensure_future(node.barrier()) for _ in range(3)]
        await asyncio.sleep(0.05)
        assert len(proposed) == 1  # the later reads wait; none proposes yet
        proposed[0].set_result((0, 0))  # FAIL_REASON.SUCCESS
        assert await first == node.image.last_offset
        await wait_until(lambda: len(proposed) == 2)
        assert not any(r.done() for r in later)  # barrier 1 did not answer them
        proposed[1].set_result((0, 0))
        assert await asyncio.gather(*later) == [node.image.last_offset] * 3
        assert len(proposed) == 2  # the three shared barrier 2

    run_with(node, body)


def test_the_data_dir_remembers_its_node_and_cluster(tmp_path):
    config = single_voter_config(tmp_path, cluster_id="c1")
    first = claim_data_dir(config)
    assert first.cluster_id == "c1" and not first.formed
    # A restart keeps the directory id: it is this disk's identity.
    assert claim_data_dir(config).directory_id == first.directory_id
    with pytest.raises(ConfigError, match="--node-id 5 does not match"):
        claim_data_dir(replace(config, node_id=5, voters={5: "127.0.0.1:1"}))
    with pytest.raises(ConfigError, match="--cluster-id c2 does not match"):
        claim_data_dir(replace(config, cluster_id="c2"))
    other = tmp_path / "other"
    other.mkdir()
    (other / "stray").write_text("x")
    with pytest.raises(ConfigError, match="is not empty"):
        claim_data_dir(single_voter_config(other))


def test_a_deposed_leaders_batch_forwarded_to_the_new_leader_commits_nothing(tmp_path):
    """pysyncobj forwards a follower's (or a deposed leader's) proposals to the
    leader: a batch decided under an older controller epoch reaches the log,
    and every voter applies it as a no-op that takes no offsets."""
    nodes = three_voters(tmp_path, fsync=False)

    async def main():
        leader = await start_and_lead(nodes)
        try:
            follower = next(n for n in nodes if n is not leader)
            await register(leader, 1)
            await wait_until(
                lambda: all(n.image.next_offset == leader.image.next_offset for n in nodes),
                what="every voter applied",
            )
            before = leader.image
            # The follower proposes what a deposed leader would: a decision
            # made under the previous epoch, for the current offset.
            stale = Batch(before.controller_epoch - 1, 0, (NoOpRecord(),), before.next_offset)
            result, error = await follower.propose(stale)
            assert result == STALE
            await leader.barrier()
            for n in nodes:
                await n.barrier()
                assert n.image.next_offset == before.next_offset
                assert n.sm.stale_batches >= 1  # every voter saw it, and ignored it
            # The cluster keeps serving.
            assert (await register(leader, 2)).error is Errors.NONE
        finally:
            for n in nodes:
                await n.stop(transfer=False)

    asyncio.run(main())


def test_a_snapshot_newer_than_the_journal_start_does_not_drop_the_journal(tmp_path):
    """A snapshot renamed into place, then a stop before pysyncobj compacted the
    journal: pysyncobj would clear the journal down to the snapshot's two
    entries and lose everything written after it; metaquorum replays it."""
    from quorum.state_machine import write_snapshot_file

    config = single_voter_config(tmp_path, compaction_entries=100_000)
    node = build_node(config)

    async def write(node):
        await active(node)
        for b in range(1, 4):
            await register(node, b)
        journal = node.raft.journal
        applied = node.raft.last_applied
        base = journal[0][1]
        last, prev = journal[applied - base], journal[applied - base - 1]
        write_snapshot_file(config.dump_file, node.image, last, prev, [config.raft_address])
        for b in range(4, 7):  # written after the snapshot, only in the journal
            await register(node, b)
        await wait_until(lambda: node.queue_depth == 0)
        return node.image.next_offset

    next_offset = run_with(node, write)
    again = build_node(config)

    async def check(node):
        await wait_until(
            lambda: node.image.next_offset >= next_offset, what="replay past the snapshot"
        )
        assert sorted(node.image.brokers) == [1, 2, 3, 4, 5, 6]
        assert node.image.ignored_records == 0

    run_with(again, check)


@pytest.mark.parametrize("off_thread", [False, True], ids=["leader-syncs-inline", "off-thread"])
def test_with_fsync_no_voter_acknowledges_or_commits_an_unsynced_entry(
    tmp_path, monkeypatch, caplog, off_thread
):
    """fsync=always on three voters: whenever a follower answers an
    AppendEntries, its journal has nothing unsynced, and whenever a commit
    index moves, a majority of the voters hold it synced, the leader counted
    only once its own sync (on its sync thread) is done
    (quorum/raft/durability.py), the leader's sync on its Raft thread or on a
    thread of its own. One sync may cover many entries. And late
    answers never make the leader send entries again, so no follower
    truncates entries it already holds (raft_port.keep_next_index_forward)."""
    from pysyncobj.transport import TCPTransport

    from quorum.raft import durability
    from quorum.raft.durability import MetaquorumJournal, SyncStats

    monkeypatch.setattr(durability, "leader_sync_off_thread", off_thread)
    checks = {"acks": 0, "commits": 0}
    violations = []
    journals = {}  # transport -> its voter's journal
    real_send = TCPTransport.send

    def checked_send(self, node, message):
        if isinstance(message, dict) and message.get("type") == "next_node_idx":
            checks["acks"] += 1
            if journals[self]._dirty:
                violations.append(f"an answer sent with unsynced entries: {message}")
        return real_send(self, node, message)

    real_commit = MetaquorumJournal.setRaftCommitIndex

    def checked_commit(self, index):
        real_commit(self, index)
        checks["commits"] += 1
        committed = self.getRaftCommitIndex()
        # Synced indexes only grow here (no truncation): read after the fact,
        # they can only be higher than when the commit moved.
        held = sorted(j.durable_index for j in journals.values())[len(journals) // 2]
        if committed > held:
            violations.append(f"commit index {committed} set while a majority synced {held}")

    monkeypatch.setattr(TCPTransport, "send", checked_send)
    monkeypatch.setattr(MetaquorumJournal, "setRaftCommitIndex", checked_commit)
    nodes = three_voters(tmp_path, fsync=True)
    for n in nodes:
        journals[n.raft.transport] = n.raft.journal
    syncs_before = SyncStats.syncs

    async def main():
        leader = await start_and_lead(nodes)
        try:
            for wave in range(10):  # waves of concurrent writes, batches back to back
                responses = await asyncio.gather(
                    *(register(leader, b) for b in range(1 + 20 * wave, 21 + 20 * wave))
                )
                assert all(r.error is Errors.NONE for r in responses)
            await wait_until(
                lambda: all(n.image.next_offset == leader.image.next_offset for n in nodes),
                what="every voter applied",
            )
        finally:
            for n in nodes:
                await n.stop(transfer=False)

    with caplog.at_level("CRITICAL", logger=internals.SYNCOBJ_LOGGER):
        asyncio.run(main())
    assert violations == []
    assert checks["acks"] > 0 and checks["commits"] > 0
    assert not [r for r in caplog.records if "truncating" in r.getMessage()]
    assert SyncStats.syncs > syncs_before


def terms(nodes) -> list[int]:
    return [n.raft.term for n in nodes]


def run_without_elections(scenario, caplog) -> None:
    """Runs ``scenario()``; no voter may have stood for election meanwhile."""
    with caplog.at_level("WARNING", logger="quorum.raft.raft_port"):
        asyncio.run(scenario())
    assert not [r for r in caplog.records if "stands for election" in r.getMessage()]


def test_a_follower_held_up_past_its_election_deadline_hears_the_leader_first(tmp_path, caplog):
    """A follower's thread held up longer than any election timeout while it
    answers an AppendEntries (as by a process not scheduled on a loaded
    machine), the leader sending heartbeats meanwhile: it reads them before
    deciding the leader is gone, so no election deposes the healthy leader
    (raft_port.listen_before_electing)."""
    import threading
    import time

    nodes = three_voters(tmp_path, fsync=False)
    held = threading.Event()

    async def main():
        leader = await start_and_lead(nodes)
        try:
            follower = next(n for n in nodes if n is not leader)
            transport = follower.raft.transport
            before_ack = transport.before_ack

            def hold_once():
                if not held.is_set():
                    held.set()
                    time.sleep(1.5)  # past raft_max_timeout 0.8 s
                before_ack()

            before = terms(nodes)
            transport.before_ack = hold_once
            assert (await register(leader, 1)).error is Errors.NONE
            await wait_until(held.is_set, what="the follower's tick thread held")
            # Long enough for the held answer to go and any election to show.
            await asyncio.sleep(2.5)
            assert leader.active and terms(nodes) == before, (before, terms(nodes))
        finally:
            for n in nodes:
                await n.stop(transfer=False)

    run_without_elections(main, caplog)


def test_a_disk_stall_on_every_voter_at_once_does_not_depose_the_leader(tmp_path, caplog):
    """A shared disk stalls every voter's journal sync at the same moment: the
    followers sit 1.5 s in the sync before their answer, the leader 1.55 s in
    its own and sends no heartbeat meanwhile. The followers do not count their
    own stall against the leader (raft_port.excuse_own_stall): no election.
    The data dirs are in memory where there is a tmpfs: the stall is the one
    injected, not a loaded machine's disk on top of it (a 0.4 s meta-file
    store after the stall made the leader miss the followers' deadline)."""
    import shutil
    import tempfile
    import threading
    import time

    root = tmp_path
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        root = Path(tempfile.mkdtemp(prefix="disk-stall-", dir="/dev/shm"))
    nodes = three_voters(root, fsync=True, timeouts=(0.8, 1.2))
    armed = threading.Event()
    stalled = []

    def stall_first_sync(node, seconds):
        journal_file = node.raft.journal._file
        real_sync = journal_file.sync

        def sync():
            if armed.is_set() and node not in stalled:
                stalled.append(node)
                time.sleep(seconds)
            real_sync()

        journal_file.sync = sync

    async def main():
        leader = await start_and_lead(nodes)
        try:
            for n in nodes:
                stall_first_sync(n, 1.55 if n is leader else 1.5)
            before = terms(nodes)
            armed.set()
            response = await register(leader, 1)
            assert response.error is Errors.NONE
            await wait_until(lambda: len(stalled) == 3, what="every voter's sync stalled")
            await asyncio.sleep(2.0)
            assert leader.active and terms(nodes) == before, (before, terms(nodes))
        finally:
            for n in nodes:
                await n.stop(transfer=False)

    try:
        run_without_elections(main, caplog)
    finally:
        if root != tmp_path:
            shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("adopt_view", [True, False])
def test_the_leader_applies_its_controllers_registrations_and_every_voter_agrees(
    tmp_path, monkeypatch, adopt_view
):
    """The leader's own batches apply as its controller's view (ADOPT_VIEW:
    the view holds exactly the batch on top of the image) or, with the switch
    off, with the partition registrations its controller computed
    (ControllerResult.merged, identity-checked); followers merge the decoded
    records: after ISR shrinks and expands, with a partition twice in one
    request, every voter holds the same image."""
    import threading

    from metadata_records.delta import ImageDelta
    from quorum import state_machine

    monkeypatch.setattr(state_machine, "ADOPT_VIEW", adopt_view)
    adopted = []

    reused_on = []
    real = ImageDelta.replay_known_change

    def counting(self, record, before, after):
        done = real(self, record, before, after)
        if done:
            reused_on.append(threading.get_ident())
        return done

    monkeypatch.setattr(ImageDelta, "replay_known_change", counting)
    nodes = three_voters(tmp_path, fsync=False)

    async def main():
        leader = await start_and_lead(nodes)
        try:
            epochs = {}
            for b in (1, 2, 3):
                epochs[b] = (await register(leader, b)).broker_epoch
                await leader.submit(BrokerHeartbeatRequest(b, epochs[b], 10**6))
            created = await leader.submit(CreateTopicsRequest((CreatableTopic("t", 6, 3),)))
            topic_id = created.topics[0].topic_id
            for wave in range(4):
                by_leader = {}
                for pid in range(6):
                    part = leader.image.topics[topic_id].partitions[pid]
                    others = [b for b in part.replicas if b != part.leader]
                    isr = (part.leader, *others) if wave % 2 else (part.leader, others[0])
                    entry = AlterPartitionPartition(
                        pid,
                        part.leader_epoch,
                        part.partition_epoch,
                        new_isr_with_epochs=tuple(BrokerState(b, epochs[b]) for b in isr),
                    )
                    by_leader.setdefault(part.leader, []).append(entry)
                    if wave == 0 and pid == 0:  # the same partition twice
                        by_leader[part.leader].append(entry)
                responses = await asyncio.gather(
                    *(
                        leader.submit(
                            AlterPartitionRequest(
                                b, epochs[b], (AlterPartitionTopic(tuple(es), topic_id=topic_id),)
                            )
                        )
                        for b, es in by_leader.items()
                    )
                )
                for r in responses:
                    assert all(p.error is Errors.NONE for p in r.topics[0].partitions), r
            await wait_until(
                lambda: all(n.image.next_offset == leader.image.next_offset for n in nodes),
                what="every voter applied",
            )
            assert len({image_digest(n.image) for n in nodes}) == 1
            adopted.append(leader.sm.views_adopted)
        finally:
            for n in nodes:
                await n.stop(transfer=False)

    main_thread = threading.get_ident()
    asyncio.run(main())
    if adopt_view:
        # Every batch of the controller was applied as its view (the leader's
        # LEADER_CHANGE and the bootstrap are not the controller's).
        assert adopted[0] >= 4 + 3 * 2 + 1, adopted
        assert main_thread in reused_on
    else:
        # The controller (this thread) and the leader's apply (its Raft thread) both reused them.
        assert adopted == [0]
        assert main_thread in reused_on and any(t != main_thread for t in reused_on)


def test_a_leader_sends_a_moved_commit_index_with_its_next_batch_and_alone_only_when_idle(
    tmp_path,
):
    """After each commit pysyncobj's leader sent every follower an AppendEntries
    that carried only the new commit index; the next batch carries it anyway
    (raft_port.defer_commit_push). Over sequential writes the leader sends
    batches, not one lone commit index per batch; once it is idle the last
    commit index still reaches the followers, which apply the last write."""
    nodes = three_voters(tmp_path, fsync=False)
    writes = 20

    async def main():
        leader = await start_and_lead(nodes)
        try:
            # 50 ms instead of 2: a loaded machine rarely takes that long to
            # propose the next write once the last one is answered.
            leader.raft.defer_commit_push(0.05)
            transport = leader.raft.transport
            real_send = transport.send
            sent = {"batch": 0, "index only": 0}

            def counting_send(node, message):
                if isinstance(message, dict) and message.get("type") == "append_entries":
                    sent["batch" if message.get("entries") else "index only"] += 1
                return real_send(node, message)

            transport.send = counting_send
            for b in range(1, writes + 1):
                assert (await register(leader, b)).error is Errors.NONE
            counted = dict(sent)
            await wait_until(
                lambda: all(n.image.next_offset == leader.image.next_offset for n in nodes),
                what="every follower applying the last write",
            )
            # Two followers: 2 * writes batches; pysyncobj alone would also have
            # sent 2 * writes lone commit indexes.
            assert counted["batch"] >= 2 * writes, counted
            assert counted["index only"] < writes, counted
        finally:
            for n in nodes:
                await n.stop(transfer=False)

    asyncio.run(main())


def test_a_commit_index_waits_for_the_orderers_next_batch_and_goes_once_it_has_none(
    tmp_path, monkeypatch
):
    """After one of the orderer's batches commits, the leader holds the moved
    commit index for the orderer's next batch while the orderer decides it
    (here each decision takes 20 ms, ten times the push's usual 2 ms delay),
    and sends it alone ``delay_s`` after the orderer says it has nothing to
    propose (raft_port.defer_commit_push). Here the hold (80 ms) is close to
    the leader's heartbeat period (100 ms), so a push that waited for the
    hold or a heartbeat instead of the orderer's word would be late (these
    voters' 1 s election timeout gives that period: a tenth of it)."""
    import time

    from controller.controller import Controller

    nodes = three_voters(tmp_path, fsync=False, timeouts=(1.0, 1.6))
    rounds = 10
    deciding = []  # set while the controller decides (a test's slow decision)
    real_handle = Controller.handle

    def slow_handle(self, request, now):
        deciding.append(True)
        try:
            time.sleep(0.02)
            return real_handle(self, request, now)
        finally:
            deciding.pop()

    async def main():
        leader = await start_and_lead(nodes)
        try:
            leader.raft.defer_commit_push(
                0.002, 0.08, held_batches=lambda: leader.sm.record_batches
            )
            transport = leader.raft.transport
            real_send = transport.send
            lone = {"while deciding": 0}
            word_at: list[float] = []
            waits: list[float] = []  # from the orderer's word to the next lone push

            def counting_send(node, message):
                if (
                    isinstance(message, dict)
                    and message.get("type") == "append_entries"
                    and not message.get("entries")
                ):
                    if deciding:
                        lone["while deciding"] += 1
                    if word_at:
                        waits.append(time.monotonic() - word_at.pop())
                return real_send(node, message)

            real_word = leader.nothing_to_propose

            def word():
                word_at[:] = [time.monotonic()]
                real_word()

            transport.send = counting_send
            leader.nothing_to_propose = word
            monkeypatch.setattr(Controller, "handle", slow_handle)
            broker = 0
            for _ in range(rounds):
                # The first is decided and proposed at once; the other two
                # queue behind it and are decided when it commits.
                answers = await asyncio.gather(*(register(leader, broker + i) for i in (1, 2, 3)))
                assert all(a.error is Errors.NONE for a in answers)
                broker += 3
                await wait_until(
                    lambda: all(n.image.next_offset == leader.image.next_offset for n in nodes),
                    what="every follower applying the round's last write",
                )
            monkeypatch.setattr(Controller, "handle", real_handle)
            # Without the hold, each round's first commit went alone 2 ms into
            # the next decision, to both followers: 2 * rounds.
            assert lone["while deciding"] <= 2, lone
            # One lone push per round after the word (a heartbeat, 100 ms
            # after the last batch, is the only other): well under the hold.
            assert len(waits) >= rounds // 2, waits
            waits.sort()
            assert waits[len(waits) // 2] < 0.04, waits
        finally:
            for n in nodes:
                await n.stop(transfer=False)

    asyncio.run(main())


async def unfenced_brokers(node, *broker_ids: int) -> dict[int, int]:
    """Registers the brokers and unfences each with a caught-up heartbeat;
    their epochs."""
    epochs = {}
    for b in broker_ids:
        epochs[b] = (await register(node, b)).broker_epoch
        assert not (await node.submit(BrokerHeartbeatRequest(b, epochs[b], 10**6))).is_fenced
    return epochs


def test_the_active_controller_runs_the_unclean_election_sweep_when_it_is_due(tmp_path):
    """The periodic sweep (Kafka's maybeElectUncleanLeaders) runs from the
    node's timer, as the session fencer does: a partition a reassignment left
    leaderless on an unclean topic gets a leader without another request."""
    node = build_node(single_voter_config(tmp_path))
    node.controller_config = replace(node.controller_config, unclean_election_interval_ms=300)

    async def body(node):
        await active(node)
        epochs = await unfenced_brokers(node, 1, 2)
        created = await node.submit(
            CreateTopicsRequest(
                (
                    CreatableTopic(
                        "u",
                        assignments=((0, (1,)),),
                        configs=(("unclean.leader.election.enable", "true"),),
                    ),
                )
            )
        )
        topic_id = created.topics[0].topic_id
        await node.submit(BrokerHeartbeatRequest(1, epochs[1], 10**6, want_fence=True))
        moved = await node.submit(
            AlterPartitionReassignmentsRequest(
                (ReassignableTopic("u", (ReassignablePartition(0, (2,)),)),)
            )
        )
        assert moved.topics[0].partitions[0].error is Errors.NONE
        assert node.image.partition(topic_id, 0).leader == -1  # the move's election is ONLINE
        await wait_until(
            lambda: node.image.partition(topic_id, 0).leader == 2, what="the unclean election"
        )
        part = node.image.partition(topic_id, 0)
        assert part.isr == (2,) and part.leader_recovery_state == 1

    run_with(node, body)


def test_the_active_controller_elects_preferred_leaders_back_when_balancing_is_due(tmp_path):
    """Leader balancing (auto.leader.rebalance.enable) runs from the node's
    timer: once the preferred replica is back in the ISR, it leads again
    without another request, and the node counts the election."""
    node = build_node(single_voter_config(tmp_path, leader_imbalance_check_interval_ms=300))

    async def body(node):
        await active(node)
        epochs = await unfenced_brokers(node, 1, 2)
        created = await node.submit(
            CreateTopicsRequest((CreatableTopic("t", assignments=((0, (1, 2)),)),))
        )
        topic_id = created.topics[0].topic_id
        await node.submit(BrokerHeartbeatRequest(1, epochs[1], 10**6, want_fence=True))
        assert node.image.partition(topic_id, 0).leader == 2
        assert not (await node.submit(BrokerHeartbeatRequest(1, epochs[1], 10**6))).is_fenced
        part = node.image.partition(topic_id, 0)
        altered = await node.submit(
            AlterPartitionRequest(
                2,
                epochs[2],
                (
                    AlterPartitionTopic(
                        (
                            AlterPartitionPartition(
                                0,
                                part.leader_epoch,
                                part.partition_epoch,
                                new_isr_with_epochs=(
                                    BrokerState(2, epochs[2]),
                                    BrokerState(1, epochs[1]),
                                ),
                            ),
                        ),
                        topic_id=topic_id,
                    ),
                ),
            )
        )
        assert altered.topics[0].partitions[0].error is Errors.NONE
        await wait_until(
            lambda: node.image.partition(topic_id, 0).leader == 1, what="the preferred leader back"
        )
        await wait_until(lambda: node.stats.balance_elections == 1, what="counted")
        assert node.image.partition(topic_id, 0).isr == (2, 1)

    run_with(node, body)


# ------------------------------------------------------------ periodic NoOpRecord


def noop_batches(node, from_offset: int = 0) -> list:
    """(offset, batch timestamp, controller epoch) of every NoOpRecord in
    ``node``'s log from ``from_offset``."""
    return [
        (e.offset, e.timestamp_ms, e.controller_epoch)
        for e in node.sm.log.read(from_offset, 100_000)
        if type(e.record) is NoOpRecord
    ]


def test_an_idle_active_controller_writes_one_noop_per_interval_and_0_disables_it(tmp_path):
    """Kafka's metadata.max.idle.interval.ms: the active controller writes a
    NoOpRecord each interval, not more often; a node with the interval at 0,
    idle as long, writes none."""
    interval = 150
    node = build_node(single_voter_config(tmp_path / "on", metadata_max_idle_interval_ms=interval))
    off = build_node(single_voter_config(tmp_path / "off", metadata_max_idle_interval_ms=0))

    async def main():
        await node.start()
        await off.start()
        try:
            await active(node)
            await active(off)
            start, off_start = node.image.next_offset, off.image.next_offset
            await wait_until(lambda: len(noop_batches(node, start)) >= 5, what="five NoOps")
            # Idle: every record since the bootstrap is a NoOp, in a batch of its own.
            entries = node.sm.log.read(start, 100_000)
            assert entries and all(type(e.record) is NoOpRecord for e in entries)
            assert all(e.batch_offset == e.offset for e in entries)
            stamps = [e.timestamp_ms for e in entries]
            # Not more than one per interval: each is due an interval after the one
            # before was decided (the batch is stamped a little after its decision).
            assert all(b - a >= interval - 30 for a, b in zip(stamps, stamps[1:], strict=False))
            # The count is taken when the commit's callback runs, a loop turn
            # after the record is applied to the log: wait for them to agree.
            await wait_until(
                lambda: node.stats.noop_records == len(noop_batches(node)), what="counted"
            )
            # The node with 0 was idle as long and wrote nothing.
            assert off.image.next_offset == off_start and off.stats.noop_records == 0
            assert off.orderer._noop_due is None
        finally:
            await node.stop(transfer=False)
            await off.stop(transfer=False)

    asyncio.run(main())


def test_a_noop_decided_before_a_registration_in_one_batch_moves_its_epoch_too(tmp_path):
    """KIP-380 in KRaft: a broker's epoch is the offset of its own
    RegisterBrokerRecord, also when a periodic NoOpRecord goes first in the
    same batch (the nemesis found a registration one offset short)."""
    from quorum.orderer import _NOOP, _Pending

    node = build_node(single_voter_config(tmp_path, metadata_max_idle_interval_ms=0))

    async def main():
        await node.start()
        try:
            await active(node)
            start = node.image.next_offset
            node.orderer._queue.append(_Pending(_NOOP, None))  # due, not yet decided
            first = node.submit_future(
                BrokerRegistrationRequest(
                    1, node.cluster_id, incarnation(1), (Endpoint("PLAINTEXT", "h", 9092, 0),), MV
                ),
                pump=False,
            )
            second = node.submit_future(
                BrokerRegistrationRequest(
                    2, node.cluster_id, incarnation(2), (Endpoint("PLAINTEXT", "h", 9092, 0),), MV
                ),
                pump=False,
            )
            node.pump()
            epochs = [(await first).broker_epoch, (await second).broker_epoch]
            entries = node.sm.log.read(start, 100)
            assert [type(e.record).__name__ for e in entries] == [
                "NoOpRecord", "RegisterBrokerRecord", "RegisterBrokerRecord"
            ]  # fmt: skip
            assert {e.batch_offset for e in entries} == {start}  # one batch
            assert epochs == [start + 1, start + 2]
            assert [e.record.broker_epoch for e in entries[1:]] == epochs
            assert [node.image.brokers[b].epoch for b in (1, 2)] == epochs
        finally:
            await node.stop(transfer=False)

    asyncio.run(main())


def test_only_the_active_controller_writes_noops_and_it_stops_when_it_stops_leading(tmp_path):
    """Followers write none; once leadership moves, the old leader writes no
    more (Kafka cancels the event on renounce) and the new one takes over,
    under its own controller epoch."""
    nodes = three_voters(tmp_path, fsync=False, noop_ms=150)

    async def main():
        leader = await start_and_lead(nodes)
        try:
            await wait_until(lambda: len(noop_batches(leader)) >= 3, what="NoOps from the leader")
            for n in nodes:
                if n is not leader:
                    await wait_until(lambda n=n: len(noop_batches(n)) >= 3, what="applied")
                    assert n.stats.noop_records == 0 and n.orderer._noop_due is None
            target = next(n for n in nodes if n is not leader)
            assert await leader.transfer_leadership(target.node_id) == target.node_id
            await wait_until(lambda: target.active, what="the new active controller")
            assert not leader.active and leader.orderer._noop_due is None
            written = leader.stats.noop_records
            handover = target.image.next_offset
            # Counted when the commit's callback runs, a loop turn after the
            # record reaches the log.
            await wait_until(
                lambda: len(noop_batches(target, handover)) >= 3 and target.stats.noop_records >= 3,
                what="NoOps from the new leader",
            )
            assert leader.stats.noop_records == written
            assert {epoch for _, _, epoch in noop_batches(target, handover)} == {
                target.orderer.term
            }
        finally:
            for n in nodes:
                await n.stop(transfer=False)

    asyncio.run(main())


def test_a_negative_idle_interval_is_refused():
    with pytest.raises(ConfigError, match="--metadata-max-idle-interval-ms"):
        single_voter_config("/nonexistent", raft_port=1, metadata_max_idle_interval_ms=-1)


def test_a_voter_tells_its_leader_watchers_when_the_leader_it_knows_moves(tmp_path):
    """The HTTP workers and the orderer process redirect writes by the state
    the serve process pushes (voter/core_link.CoreLinks.push_state): pushed when
    the leader moves, not only at the next periodic look."""
    nodes = three_voters(tmp_path, fsync=False)

    async def main():
        leader = await start_and_lead(nodes)
        try:
            follower = next(n for n in nodes if n is not leader)
            target = next(n for n in nodes if n is not leader and n is not follower)
            heard: list[tuple[int | None, str | None]] = []
            follower.leader_watchers.append(
                lambda: heard.append((follower.raft_leader_id, follower.leader_url))
            )
            assert await leader.transfer_leadership(target.node_id) == target.node_id
            await wait_until(
                lambda: (target.node_id, f"http://127.0.0.1:{target.node_id + 1}") in heard,
                what="the follower's watcher hearing of the new leader and its URL",
            )
        finally:
            for n in nodes:
                await n.stop(transfer=False)

    asyncio.run(main())
