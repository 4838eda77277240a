"""The Raft quorum itself: leadership transfer, voter changes (KIP-853), the
answer of GET /v1/quorum/status (voters, elections, heartbeat gaps, HTTP
workers) and the probes' answers (/livez, /readyz).
"""

from __future__ import annotations

from pydantic import ConfigDict, Field

from .common import (
    CLUSTER_ID,
    NONE,
    BrokerId,
    ErrorFields,
    Int32,
    RequestModel,
    ResponseModel,
    StrictStr,
    example,
)

# ---------------------------------------------------------------- leadership transfer


class TransferLeadershipRequest(RequestModel):
    """POST /v1/quorum/transfer-leadership; an empty body means "any caught-up voter"."""

    model_config = example({"targetNodeId": 2}, {})

    target_node_id: BrokerId | None = Field(
        None, description="the voter to lead, or null for the most caught-up one"
    )


class TransferLeadershipResponse(ErrorFields):
    """Another voter leads now (200); or, with PREFERRED_LEADER_NOT_AVAILABLE
    (409), leadership did not move and ``leaderId`` leads ``term``."""

    model_config = example({**NONE, "leaderId": 2, "term": None})

    leader_id: int | None = Field(None, description="the new leader (409: the voter that leads)")
    term: int | None = Field(
        None, description="409 only: the Raft term that voter leads, taking writes"
    )


# ---------------------------------------------------------------- voter changes (KIP-853)


class AddVoterRequest(RequestModel):
    """POST /v1/quorum/add-voter (Kafka's AddRaftVoter): the node must be running,
    started with ``--raft-address`` = ``address``; its directory id comes from it."""

    model_config = example({"nodeId": 3, "address": "metaquorum-3.metaquorum:9093"})

    node_id: Int32 = Field(description="0 or more")
    address: StrictStr = Field(description='its Raft "host:port", as every voter will spell it')
    timeout_ms: int = Field(
        30_000, ge=1, le=600_000, description="how long it may take to connect and catch up"
    )


class RemoveVoterRequest(RequestModel):
    """POST /v1/quorum/remove-voter (Kafka's RemoveRaftVoter)."""

    model_config = example({"nodeId": 3})

    node_id: Int32 = Field(description="0 or more")


class KraftVersionRange(RequestModel):
    """The kraft.version range a voter supports (UpdateRaftVoter's KRaftVersionFeature)."""

    model_config = example({"minSupportedVersion": 0, "maxSupportedVersion": 1})

    min_supported_version: Int32 = Field(0, description="the lowest it supports")
    max_supported_version: Int32 = Field(1, description="the highest it supports")


class UpdateVoterRequest(RequestModel):
    """POST /v1/quorum/update-voter (Kafka's UpdateRaftVoter): voter ``nodeId``,
    voting with directory ``directoryId``, now listens at Raft ``raftAddress``;
    its directory id is kept. A voter restarted with a new ``--raft-address``
    sends this itself (over the Raft port) to the leader."""

    model_config = example(
        {
            "nodeId": 2,
            "directoryId": "vW3zN6m0TvG8l1s9dQ2aXw",
            "raftAddress": "metaquorum-2.metaquorum:9093",
        }
    )

    node_id: Int32 = Field(description="0 or more")
    directory_id: StrictStr = Field(description="the directory id the voter set names for it")
    raft_address: StrictStr = Field(
        description='its new Raft "host:port", as it calls itself (its --raft-address)'
    )
    kraft_version: KraftVersionRange = Field(
        default_factory=KraftVersionRange,
        description="the kraft.version range it supports (default 0-1, what this version does)",
    )


class VoterKeyOut(ResponseModel):
    """A voter as the voter set names it (KIP-853)."""

    node_id: int = Field(description="its node id")
    directory_id: str = Field(description="its data dir's id")
    raft_address: str = Field(description='its Raft "host:port"')


class VoterChangeResponse(ErrorFields):
    """The voter set after the change."""

    model_config = example(
        {
            **NONE,
            "changed": True,
            "voters": [
                {
                    "nodeId": n,
                    "directoryId": d,
                    "raftAddress": f"metaquorum-{n}.metaquorum:9093",
                }
                for n, d in (
                    (0, "pAld8JCtT4iS7drjR0nqtg"),
                    (1, "qJEhv4M4R0WfbNdgU117UQ"),
                    (2, "aF1lfbGsR_iypxeyBG0pWQ"),
                    (3, "DfVODN9gQgi1h2TznBKpAg"),
                )
            ],
        }
    )

    changed: bool = Field(
        description="false: nothing was left to do (a retried add that had finished)"
    )
    voters: list[VoterKeyOut] = Field(description="the voter set after the change")


# ---------------------------------------------------------------- reads: quorum status, probes


class VoterOut(ResponseModel):
    """A voter (or observer) as this node sees it."""

    node_id: int = Field(description="its node id")
    url: str | None = Field(description="its HTTP URL, when this node knows it")
    raft_address: str = Field(description='its Raft "host:port"')
    connected: bool = Field(description="this node has a Raft connection to it (true for itself)")
    lag_records: int | None = Field(
        description="Raft entries (batches) it is behind the leader's commit index; "
        "known on the leader (and for this node itself)"
    )
    last_caught_up_ms: int | None = Field(
        description="wall clock (ms) when this node last saw it fully caught up"
    )
    log_end_offset: int | None = Field(
        None,
        description="the record offset after the last entry the leader knows it holds "
        "(Kafka's LogEndOffset); known on the leader (and for this node itself)",
    )
    last_fetch_ms: int | None = Field(
        None,
        description="wall clock (ms) when the leader last heard it answer (Kafka's "
        "LastFetchTimestamp); known on the leader, null for a voter not heard since the election",
    )
    directory_id: str | None = Field(
        None,
        description="the directory id the voter set names for it (KIP-853); null before it is known",
    )
    connected_directory_id: str | None = Field(
        None, description="the directory id of the data dir now connected as this node"
    )
    role: str = Field(
        "unknown",
        examples=["voter", "observer", "replaced", "removed", "unknown"],
        description="voter: counts toward elections and commits; observer: a new data dir "
        "catching up (a joiner, or a voter whose disk was replaced), not yet named by the "
        "voter set; replaced: a data dir the voter set no longer names; removed: a node the "
        "voter set no longer names (as its log says, or as a voter told one that was down "
        "when it was removed); unknown: not heard from",
    )
    voter: bool = Field(True, description="named by the voter set (false: an observer/joiner)")


class HeartbeatGapsOut(ResponseModel):
    """Gaps between AppendEntries from one leader, as measured here."""

    # Absent counters are left out while nothing was measured.
    model_config = ConfigDict(json_schema_serialization_defaults_required=False)

    count: int = Field(description="gaps measured since this node started")
    p50_ms: float | None = Field(None, description="upper bound of the median's bucket")
    p99_ms: float | None = Field(None, description="upper bound of the 99th percentile's bucket")
    max_ms: float | None = Field(None, description="the longest gap")


class LeadershipWonOut(ResponseModel):
    """One leadership this voter won, as it knows it. The ``*Ms`` are
    milliseconds since the previous leader's last AppendEntries read here (since
    this voter stood, when it had heard no leader since it last led)."""

    at_ms: int = Field(description="when it won (ms since the epoch, this voter's clock)")
    term: int = Field(description="the Raft term (the controller epoch) it won")
    previous_leader_id: int | None = Field(
        description="the leader whose AppendEntries it read last; null if none since it last led"
    )
    cause: str | None = Field(
        description="why it stood: no_leader_yet, leader_silent, leader_connection_closed, "
        "transfer (electionsStarted's causes)"
    )
    silence_ms: float | None = Field(
        description="the previous leader's silence before this voter stood; null if none heard"
    )
    elected_ms: float = Field(description="to winning the election")
    active_ms: float | None = Field(
        description="to its LEADER_CHANGE applied: it takes writes from then; null until then"
    )
    first_write_ms: float | None = Field(
        description="to the first batch of its term beyond LEADER_CHANGE and NoOps applied: "
        "the write outage a client saw; null until a write came (a client still waiting on a "
        "hung old leader makes it late: activeMs says when writes could be taken)"
    )


class BeaconsOut(ResponseModel):
    """The leader's liveness beacons (UDP on the Raft port's number), as this
    voter sent and took them: a follower that receives none while it follows
    a leader has its UDP blocked (elections then go by AppendEntries alone)."""

    sent: int = Field(description="beacons this voter sent while it led (one per voter)")
    withheld: int = Field(
        description="periods it sent none because its Raft thread was stuck (then its "
        "followers may replace it)"
    )
    received: int = Field(description="beacons it took from a leader")
    dropped: int = Field(
        description="datagrams it dropped: not sealed with this cluster's Raft secret, or replayed"
    )


class ElectionsOut(ResponseModel):
    """This voter's election counters; only ``preVote`` when pre-vote is off."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=False)

    pre_vote: bool = Field(description="pre-vote and the leader lease on votes are on")
    pre_vote_rounds: int | None = Field(None, description="pre-vote rounds this voter started")
    pre_vote_rounds_won: int | None = Field(
        None, description="rounds a majority granted: this voter then stood for election"
    )
    pre_votes_granted: int | None = Field(None, description="pre-votes it granted to others")
    pre_votes_refused: int | None = Field(None, description="pre-votes it refused")
    votes_refused_in_lease: int | None = Field(
        None, description="vote requests it dropped while it heard a leader"
    )
    leader_connections_lost: int | None = Field(
        None,
        description="times the leader's connection closed under it (it then asked for a "
        "pre-vote within 0.3 s instead of at its election deadline)",
    )
    elections_started: dict[str, int] | None = Field(
        None,
        description="elections this voter started, by cause: no_leader_yet, leader_silent, "
        "leader_connection_closed, transfer",
    )
    leadership_lost: dict[str, int] | None = Field(
        None,
        description="leaderships this voter lost, by cause: check_quorum, term_ahead, "
        "transfer, disk_unwritable, higher_term",
    )
    leader_changes: int | None = Field(
        None, description="times the leader this node follows became another node"
    )
    heartbeat_gaps: HeartbeatGapsOut | None = Field(
        None, description="gaps between two AppendEntries from the same leader, as read here"
    )
    beacons: BeaconsOut | None = Field(
        None, description="the leader's liveness beacons (absent on a voter without them)"
    )
    leaderships_won: list[LeadershipWonOut] | None = Field(
        None,
        description="the last 8 leaderships this voter won, oldest first: from which leader, "
        "why, and how long until it took writes (metaquorum_leader_change_first_write_seconds)",
    )


class HttpWorkerOut(ResponseModel):
    """One HTTP worker process of this voter (``serve --http-workers``)."""

    index: int = Field(description="the worker's number, 0 to --http-workers - 1")
    pid: int = Field(description="its process id")
    alive: bool = Field(description="running, with its link to the core open")
    uptime_s: float = Field(description="seconds since this process of it started")
    restarts: int = Field(description="times this worker was started again after it died")
    requests: int = Field(
        description="writes, barriers and forwarded requests it sent to the core and the "
        "orderer (this process; its writes as far as the orderer last reported)"
    )
    image_rebases: int = Field(
        0,
        description="newer image files it took its partitions from (imageFile), as it last "
        "reported",
    )


class OrdererProcessOut(ResponseModel):
    """The process that orders this voter's writes, with HTTP workers
    (voter/orderer_process.py)."""

    pid: int = Field(description="its process id")
    alive: bool = Field(description="running, with its link to the serve process open")
    uptime_s: float = Field(description="seconds since this process of it started")
    restarts: int = Field(description="times it was started again after it died")
    image_rebases: int = Field(
        0, description="newer image files it took its partitions from (imageFile)"
    )


class ImageFileOut(ResponseModel):
    """The image file this voter's processes read their partitions from
    (voter/shared_image.py)."""

    offset: int | None = Field(description="the offset its image is at (null: none written yet)")
    bytes: int = Field(description="its size: the voter's one copy of the partitions")
    written: int = Field(description="image files written since the voter started")
    failed: int = Field(description="image files that could not be written (the log says why)")
    serve_rebases: int = Field(
        description="newer image files the serve process took its own partitions from"
    )


class QuorumStatusOut(ResponseModel):
    """This node's view of the quorum."""

    model_config = example(
        {
            "clusterId": CLUSTER_ID,
            "nodeId": 0,
            "directoryId": "pAld8JCtT4iS7drjR0nqtg",
            "role": "voter",
            "leaderId": 0,
            "leaderUrl": "http://metaquorum-0.metaquorum:8080",
            "controllerEpoch": 3,
            "raftTerm": 3,
            "highWatermark": 42,
            "lastAppliedOffset": 41,
            "metadataVersion": 12,
            "finalizedFeatures": {"eligible.leader.replicas.version": 1, "metadata.version": 12},
            "auth": "on",
            "active": True,
            "ready": True,
            "replaying": False,
            "queueDepth": 0,
            "raftCommitIndex": 37,
            "raftLastApplied": 37,
            "ignoredRecords": 0,
            "ignoredReasons": [],
            "observer": False,
            "observersConnected": 0,
            "imageDigest": None,
            "httpWorkers": [
                {
                    "index": 0,
                    "pid": 41,
                    "alive": True,
                    "uptimeS": 5230.4,
                    "restarts": 0,
                    "requests": 918274,
                    "imageRebases": 14,
                }
            ],
            "ordererProcess": {
                "pid": 40,
                "alive": True,
                "uptimeS": 5230.5,
                "restarts": 0,
                "imageRebases": 14,
            },
            "imageFile": {
                "offset": 750211,
                "bytes": 212480331,
                "written": 15,
                "failed": 0,
                "serveRebases": 15,
            },
            "elections": {
                "preVote": True,
                "preVoteRounds": 2,
                "preVoteRoundsWon": 2,
                "preVotesGranted": 0,
                "preVotesRefused": 0,
                "votesRefusedInLease": 0,
                "leaderConnectionsLost": 0,
                "beacons": {"sent": 209440, "withheld": 0, "received": 3120, "dropped": 0},
                "electionsStarted": {
                    "no_leader_yet": 1,
                    "leader_silent": 1,
                    "leader_connection_closed": 0,
                    "transfer": 0,
                },
                "leadershipLost": {
                    "check_quorum": 0,
                    "term_ahead": 0,
                    "transfer": 0,
                    "disk_unwritable": 0,
                    "higher_term": 0,
                },
                "leaderChanges": 2,
                "heartbeatGaps": {"count": 2610, "p50Ms": 100.0, "p99Ms": 150.0, "maxMs": 182.4},
                "leadershipsWon": [
                    {
                        "atMs": 1795000003912,
                        "term": 3,
                        "previousLeaderId": 2,
                        "cause": "leader_silent",
                        "silenceMs": 512.3,
                        "electedMs": 530.8,
                        "activeMs": 548.1,
                        "firstWriteMs": 561.7,
                    }
                ],
            },
            "voters": [
                {
                    "nodeId": n,
                    "url": f"http://metaquorum-{n}.metaquorum:8080",
                    "raftAddress": f"metaquorum-{n}.metaquorum:9093",
                    "connected": True,
                    "lagRecords": 0,
                    "lastCaughtUpMs": 1795000004100,
                    "logEndOffset": 42,
                    "lastFetchMs": 1795000004100,
                    "directoryId": d,
                    "connectedDirectoryId": d,
                    "role": "voter",
                    "voter": True,
                }
                for n, d in (
                    (0, "pAld8JCtT4iS7drjR0nqtg"),
                    (1, "qJEhv4M4R0WfbNdgU117UQ"),
                    (2, "aF1lfbGsR_iypxeyBG0pWQ"),
                )
            ],
        }
    )

    cluster_id: str = Field(description="the cluster id")
    node_id: int = Field(description="this node's id")
    directory_id: str | None = Field(None, description="this node's data dir (KIP-853)")
    role: str = Field("voter", description="this node's role, as in voters[].role")
    leader_id: int | None = Field(description="the Raft leader's node id, null if none known")
    leader_url: str | None = Field(
        description="the leader's HTTP URL, as its LEADER_CHANGE announced it (just after an "
        "election, before that applied here: as it announced it when it led before); null "
        "if not known. Writes sent here are redirected there (307)"
    )
    controller_epoch: int = Field(description="the controller epoch of the applied image")
    raft_term: int = Field(description="this node's Raft term")
    high_watermark: int = Field(description="the next offset this node will apply")
    last_applied_offset: int = Field(description="the last offset this node applied")
    metadata_version: int = Field(description="the finalized metadata.version level")
    finalized_features: dict[str, int] = Field(
        {},
        description="every finalized feature and its level (metadata.version, "
        "eligible.leader.replicas.version once set; a feature at 0 is absent)",
    )
    auth: str = Field(examples=["on", "off"], description="whether callers must authenticate")
    active: bool = Field(description="this node is the active controller")
    ready: bool = Field(description="as /readyz: replay done, a leader known, caught up")
    replaying: bool = Field(description="this node is still replaying its log")
    queue_depth: int = Field(description="requests waiting for the controller here")
    raft_commit_index: int = Field(description="Raft's commit index (entries, not records)")
    raft_last_applied: int = Field(description="Raft's last applied entry")
    ignored_records: int = Field(
        0, description="records of the log this node's image could not apply (0 in a healthy log)"
    )
    ignored_reasons: list[str] = Field(
        [],
        description="why replay ignored the last of them (at most 16, newest last; this "
        "node's own since it loaded its last snapshot: not replicated)",
    )
    observer: bool = Field(False, description="this node runs with serve --observer")
    observers_connected: int = Field(
        0, description="read-only followers (serve --observer) connected to this node"
    )
    image_digest: str | None = Field(
        None,
        description="SHA-256 of the image at lastAppliedOffset, with ?digest=true: "
        "voters at the same offset hold the same image exactly when these match",
    )
    elections: ElectionsOut | None = Field(
        None,
        description="this voter's pre-vote counters, elections and leaderships lost by cause, "
        "heartbeat gaps and the leaderships it won, since it started "
        "(quorum/raft/pre_vote.py, quorum/leadership_events.py)",
    )
    voters: list[VoterOut] = Field(description="the voters and observers this node knows")
    http_workers: list[HttpWorkerOut] = Field(
        [],
        description="this voter's HTTP worker processes (serve --http-workers); empty when "
        "one process serves HTTP",
    )
    orderer_process: OrdererProcessOut | None = Field(
        None,
        description="the process that orders this voter's writes when it has HTTP workers; "
        "null when the serve process orders them itself",
    )
    image_file: ImageFileOut | None = Field(
        None,
        description="with HTTP workers, the newest image file the workers and the orderer "
        "read their partitions from; null with one process (or the file switched off)",
    )


class HealthOut(ResponseModel):
    """A probe's answer."""

    model_config = example({"status": "ready", "reason": None}, {"status": "alive", "reason": None})

    status: str = Field(description='"alive", "dead", "ready" or "not ready"')
    reason: str | None = Field(
        None,
        description="why not, when it is not; on a node the voter set no longer names "
        "(removed while running or while down), that it was removed and what to do",
    )
