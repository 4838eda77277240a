"""After a leader change (issue 42), on three real voters in this process: the
new leader records how it won and when its first write applied
(quorum/leadership_events.py), and a follower that knows the new leader
redirects a write there at once, before the new LEADER_CHANGE applied on it
(QuorumNode._leader_url_of)."""

from __future__ import annotations

import asyncio

from metadata_records.errors import Errors
from quorum.node_errors import NodeError, NotControllerError

from .nodes import wait_until
from .test_node import register, start_and_lead, three_voters


def url(node) -> str:
    return node.config.advertised_url


def test_a_follower_redirects_to_a_new_leader_at_once_and_the_leader_times_its_failover(
    tmp_path,
):
    nodes = three_voters(tmp_path, fsync=False)

    async def main():
        a = await start_and_lead(nodes)
        try:
            b, f = (n for n in nodes if n is not a)

            async def move(target):
                """Hands leadership to ``target`` (again, if another voter won
                on a loaded machine); returns the leader it took over from."""
                for _ in range(5):
                    await wait_until(lambda: any(n.active for n in nodes), what="a leader")
                    source = next(n for n in nodes if n.active)
                    moved = await source.transfer_leadership(target.node_id, timeout_s=20)
                    if moved == target.node_id:
                        await wait_until(
                            lambda: target.active and f.image.leader_id == target.node_id,
                            what=f"node {target.node_id} active, its LEADER_CHANGE applied on f",
                        )
                        return source
                raise AssertionError(f"leadership never moved to node {target.node_id}")

            await move(b)  # f has now seen both lead, and their URLs
            await move(a)
            # What f answers a write each time the leader it knows moves: with the
            # new leader's LEADER_CHANGE not applied here yet, as well as after.
            answers: list[tuple[int, NodeError]] = []

            def answer() -> None:
                leader = f.raft_leader_id
                if leader is not None and leader != f.node_id:
                    answers.append((leader, f.not_controller("a write reached a follower")))

            f.leader_watchers.append(answer)
            before = await move(b)
            assert answers, "f's watcher never ran"
            for leader, error in answers:
                assert isinstance(error, NotControllerError), (leader, error)
                assert error.leader_url == url(nodes[leader]), (leader, error.leader_url)

            # The new leader names the leader it took over from, why, and its write outage.
            response = await register(b, 1)
            assert response.error is Errors.NONE
            await wait_until(
                lambda: b.leadership.awaiting_term is None, what="b timing its first write"
            )
            won = b.leadership.as_dict()["leadershipsWon"][-1]
            assert won["term"] == b.raft.term and won["previousLeaderId"] == before.node_id, won
            assert won["cause"] == "transfer", won
            assert 0 <= won["silenceMs"] <= won["electedMs"] <= won["activeMs"], won
            assert won["activeMs"] <= won["firstWriteMs"], won
            assert sum(b.leadership.first_write_counts) >= 1

            # The leader stops without handing over: another voter takes over from it.
            await b.stop(transfer=False)
            survivors = [a, f]
            await wait_until(lambda: any(n.active for n in survivors), what="a new leader")
            new = next(n for n in survivors if n.active)
            assert (await register(new, 2)).error is Errors.NONE
            await wait_until(
                lambda: new.leadership.awaiting_term is None, what="the new leader's first write"
            )
            won = new.leadership.as_dict()["leadershipsWon"][-1]
            assert won["previousLeaderId"] == b.node_id, won
            assert won["cause"] in ("leader_silent", "leader_connection_closed"), won
            assert won["firstWriteMs"] >= won["activeMs"] >= won["electedMs"], won
        finally:
            for n in nodes:
                await n.stop(transfer=False)

    asyncio.run(main())
