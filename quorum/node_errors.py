"""What a voter answers instead of a response: each kind maps to an HTTP
status (api/errors.py), and crosses the HTTP workers' link spelled out
(api/worker_link.encode_error)."""

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
