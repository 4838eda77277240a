"""The Kubernetes preStop hook, ``metaquorum transfer-leadership --if-leader``:
before a voter's pod stops, the leadership leaves it, once, for the voter the
rolling restart reaches last.

What it keeps true during a rolling restart: a follower's hook never moves
anyone's leadership (it asks only the voter at its own ``--url`` and never
follows a redirect), so only the leader's restart costs an election; the
leader hands over to a voter already updated (a StatefulSet goes from the
highest ordinal down) and caught up, so the leadership moves once per rollout
rather than at every restart; and a hook that cannot hand over only says why
(``serve`` hands over on SIGTERM too). docs/kubernetes.md.
"""

from __future__ import annotations

from brokers.tls import ClientTls

from .ops_command import EXIT_NO_ANSWER, EXIT_UNKNOWN_OUTCOME, fail

# A voter this close to the leader catches up within the transfer (the leader
# pauses new batches meanwhile); the same bound as readiness (NodeConfig).
READY_LAG_ENTRIES = 100


async def transfer_if_leader(
    url: str, token: str | None, target: int | None, tls: ClientTls | None = None
) -> int:
    """The preStop hook: if the voter at ``url`` (this pod) leads, hand
    leadership over; if it does not, there is nothing to do.

    Never follows a redirect: a follower's hook must not move the leadership
    of another voter (it could even pick the voter that is about to stop)."""
    if "," in url:
        raise ValueError("--if-leader takes one --url: the voter that is about to stop")
    headers = {"authorization": f"Bearer {token}"} if token else {}
    base = url.rstrip("/")
    import httpx  # noqa: PLC0415 - only this path talks HTTP without the client

    from brokers.tls import explain  # noqa: PLC0415

    verify = tls.context if tls is not None else True
    async with httpx.AsyncClient(
        timeout=15.0, headers=headers, follow_redirects=False, verify=verify
    ) as http:
        try:
            r = await http.get(base + "/v1/quorum/status")
            status = r.json()
        except (httpx.HTTPError, ValueError) as e:
            tls_problem = explain(e, base)
            if tls_problem is not None:
                return fail(tls_problem, EXIT_NO_ANSWER)
            return fail(f"UNAVAILABLE: cannot read {base}/v1/quorum/status ({e!r})", EXIT_NO_ANSWER)
        if r.status_code != 200:
            return fail(
                f"{status.get('errorName', 'ERROR')}: {status.get('errorMessage')} "
                f"(HTTP {r.status_code} from {base}/v1/quorum/status; check --token-file)"
            )
        me, leader = status.get("nodeId"), status.get("leaderId")
        if me is None or leader != me:
            print(f"node {me} is not the leader (leader: {leader}): nothing to transfer")
            return 0
        if len([v for v in status.get("voters", []) if v.get("voter", True)]) < 2:
            print(f"node {me} is the only voter: nothing to transfer")
            return 0
        if target is None:
            target = rollout_target(me, status.get("voters", []))
        body = {} if target is None else {"targetNodeId": target}
        try:
            r = await http.post(base + "/v1/quorum/transfer-leadership", json=body)
        except httpx.HTTPError as e:
            sent = not isinstance(e, httpx.ConnectError | httpx.ConnectTimeout)
            return fail(
                f"{'UNKNOWN_OUTCOME' if sent else 'UNAVAILABLE'}: {base}: {e!r} "
                "(the node hands over on SIGTERM too)",
                EXIT_UNKNOWN_OUTCOME if sent else EXIT_NO_ANSWER,
            )
        answer = (
            r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
        )
        if r.status_code == 307:
            print(f"node {me} stopped leading before the transfer: nothing to transfer")
            return 0
        if r.status_code != 200 or answer.get("errorCode", 0) != 0:
            return fail(
                f"{answer.get('errorName', 'ERROR')}: {answer.get('errorMessage', r.text)} "
                f"(HTTP {r.status_code}; the node hands over on SIGTERM too)"
            )
        print(f"leadership moved from node {me} to node {answer.get('leaderId')}")
        return 0


def rollout_target(me: int, voters: list[dict]) -> int | None:
    """The voter a StatefulSet rolling update restarts last, among those
    connected and caught up: it goes from the highest ordinal down, so a
    higher ordinal than ours is already updated (take the highest), else the
    lowest is updated last. None: let the leader pick the most caught up."""
    ready = [
        v["nodeId"]
        for v in voters
        if v.get("nodeId") != me
        and v.get("voter", True)  # a joiner streamed to is listed, but cannot lead
        and v.get("connected")
        and v.get("lagRecords") is not None
        and v["lagRecords"] <= READY_LAG_ENTRIES
    ]
    if not ready:
        return None
    higher = [n for n in ready if n > me]
    return max(higher) if higher else min(ready)
