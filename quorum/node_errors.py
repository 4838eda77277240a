"""What a voter answers instead of a response: each kind maps to an HTTP
status (api/errors.py), and crosses the HTTP workers' link spelled out
(voter/link.encode_error)."""

from __future__ import annotations

from metadata_records.errors import ApiError


class NodeError(Exception):
    """A request this node cannot take; the API maps each kind to a status."""


class NotControllerError(NodeError):
    """Not the active controller; ``leader_url`` says where to go, if known."""

    def __init__(self, leader_id: int | None, leader_url: str | None, why: str) -> None:
        super().__init__(why)
        self.leader_id = leader_id
        self.leader_url = leader_url


class UnavailableError(NodeError):
    """No leader known yet, still replaying, or shutting down: retry later."""

    def __init__(self, why: str, retry_after_s: float = 1.0) -> None:
        super().__init__(why)
        self.retry_after_s = retry_after_s


class TransferNotWon(UnavailableError):
    """A leadership handover that did not move leadership: the target did not
    win (or did not stand), and ``leader_id`` leads in ``term`` and takes
    writes. Nothing is held back; asking again is the remedy."""

    def __init__(self, why: str, leader_id: int, term: int) -> None:
        super().__init__(why, 0.0)
        self.leader_id = leader_id
        self.term = term


class ThrottledError(NodeError):
    """Admission control: too much is queued; nothing was written."""

    def __init__(self, why: str, retry_after_s: float = 0.5) -> None:
        super().__init__(why)
        self.retry_after_s = retry_after_s


class OutcomeUnknownError(NodeError):
    """The write may or may not commit (timeout, leadership lost mid-flight)."""


class MembershipRefused(NodeError):
    """A voter change the active controller refuses as things stand (quorum/membership.py)."""

    def __init__(self, refusal: ApiError) -> None:
        super().__init__(refusal.message)
        self.error = refusal.error
        self.rule = refusal.rule  # an id of controller/rules.py, or None


def refusal(fatal: str | None, replaying: bool, disk: str | None) -> NodeError | None:
    """Why a voter takes no write at all now (``disk``: the refusal of a voter
    that cannot write its disk, QuorumNode.disk_refusal), or None."""
    if fatal is not None:
        return UnavailableError(f"this node refuses to serve: {fatal}", 30.0)
    if replaying:
        return UnavailableError("this node is still replaying its log", 1.0)
    if disk is not None:
        return UnavailableError(disk, 1.0)
    return None


def not_controller(
    why: str, stopping: bool, node_id: int, leader_id: int | None, leader_url: str | None
) -> NodeError:
    """The answer to a write sent to a voter that does not order writes now."""
    if stopping:
        return UnavailableError("this node is shutting down", 1.0)
    if leader_id is None:
        return UnavailableError(
            f"no active controller is known: no leader is known ({why}); an election is "
            "under way, or a majority of voters is unreachable from this one; retry "
            "after Retry-After",
            0.25,
        )
    if leader_id == node_id:
        return UnavailableError(
            f"this voter was just elected and is not the active controller yet: its "
            f"LEADER_CHANGE is being committed ({why}); retry after Retry-After",
            0.25,
        )
    if leader_url is None:
        return UnavailableError(
            f"no active controller is known yet: the leader is node {leader_id}, whose URL "
            "this voter has not learned (its LEADER_CHANGE has not applied here, and this "
            f"voter has not seen it lead before) ({why}); retry after Retry-After",
            0.25,
        )
    return NotControllerError(leader_id, leader_url, why)
