"""AlterUserScramCredentials (Kafka's ``ScramControlManager``, KIP-554).

A request holds deletions and upsertions; each user is decided once and
answered once. In Kafka's order: the deletions, then the upsertions; a user
named a second time (by either list) is refused DUPLICATE_RESOURCE and its
first alteration dropped; a user already refused is not looked at again.
Each alteration is checked (metadata.version at least 3.5-IV2, a user name,
a known mechanism; for a deletion, a credential that exists; for an
upsertion, iterations in [4096, 16384]). The answers are Kafka's: the
deleted users, then the upserted ones, then the refused ones, each in the
order it first appeared; the records of every accepted user commit
together (Kafka's ``atomicOf``).

Upsertions carry the client's salt and salted password; the controller
derives storedKey and serverKey (metadata_records/scram.py) and writes only
those, with the salt and the iterations. The salted password goes no
further than this module: no record, no answer, no log line holds it.

Departures (docs/kafka-conformance.md): an empty salted password, which
Kafka's HMAC refuses with UNKNOWN_SERVER_ERROR and no message, is refused
UNACCEPTABLE_CREDENTIAL with a reason here.
"""

from __future__ import annotations

from collections.abc import Callable

from metadata_records.delta import ImageDelta
from metadata_records.errors import ApiError, Errors
from metadata_records.features import SCRAM_MIN_METADATA_VERSION
from metadata_records.records import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from metadata_records.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, derived_keys

from .messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
    ControllerResult,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)

_TWICE = "A user credential cannot be altered twice in the same request"


class ScramControlManager:
    def __init__(self, view: Callable[[], ImageDelta]) -> None:
        self._view = view  # the controller's view (committed image + pending records)

    def alter_user_scram_credentials(
        self, req: AlterUserScramCredentialsRequest, now_ms: int
    ) -> ControllerResult:
        supported = self._view().image.metadata_version >= SCRAM_MIN_METADATA_VERSION
        deletions: dict[str, ScramCredentialDeletion] = {}
        upsertions: dict[str, ScramCredentialUpsertion] = {}
        refused: dict[str, ApiError] = {}
        for deletion in req.deletions:
            name = deletion.name
            if name in refused:
                continue
            if deletions.pop(name, None) is not None:
                refused[name] = ApiError(Errors.DUPLICATE_RESOURCE, _TWICE, "scram.user-twice")
            elif not supported:
                refused[name] = _unsupported()
            else:
                problem = self._deletion_problem(deletion)
                if problem is None:
                    deletions[name] = deletion
                else:
                    refused[name] = problem
        for upsertion in req.upsertions:
            name = upsertion.name
            if name in refused:
                continue
            if deletions.pop(name, None) is not None or upsertions.pop(name, None) is not None:
                refused[name] = ApiError(Errors.DUPLICATE_RESOURCE, _TWICE, "scram.user-twice")
            elif not supported:
                refused[name] = _unsupported()
            else:
                problem = _upsertion_problem(upsertion)
                if problem is None:
                    upsertions[name] = upsertion
                else:
                    refused[name] = problem
        records: list[UserScramCredentialRecord | RemoveUserScramCredentialRecord] = []
        results = []
        for name, deletion in deletions.items():
            results.append(AlterUserScramCredentialsResult(name))
            records.append(RemoveUserScramCredentialRecord(name=name, mechanism=deletion.mechanism))
        for name, upsertion in upsertions.items():
            stored_key, server_key = derived_keys(upsertion.mechanism, upsertion.salted_password)
            records.append(
                UserScramCredentialRecord(
                    name=name,
                    mechanism=upsertion.mechanism,
                    salt=upsertion.salt,
                    stored_key=stored_key,
                    server_key=server_key,
                    iterations=upsertion.iterations,
                )
            )
            results.append(AlterUserScramCredentialsResult(name))
        for name, error in refused.items():
            results.append(
                AlterUserScramCredentialsResult(name, error.error, error.message, error.rule)
            )
        return ControllerResult(tuple(records), AlterUserScramCredentialsResponse(tuple(results)))

    def _deletion_problem(self, deletion: ScramCredentialDeletion) -> ApiError | None:
        """Kafka's ``validateDeletion``."""
        problem = _user_and_mechanism_problem(deletion.name, deletion.mechanism)
        if problem is not None:
            return problem
        if deletion.mechanism not in self._view().scram_credentials(deletion.name):
            return ApiError(
                Errors.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
                "scram.credential-not-found",
            )
        return None


def _unsupported() -> ApiError:
    return ApiError(
        Errors.UNSUPPORTED_VERSION,
        "The current metadata.version does not support SCRAM",
        "scram.metadata-version-too-low",
    )


def _user_and_mechanism_problem(name: str, mechanism: int) -> ApiError | None:
    """Kafka's ``validateScramUsernameAndMechanism``."""
    if not name:
        return ApiError(
            Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty", "scram.user-empty"
        )
    if mechanism not in MECHANISMS:
        return ApiError(
            Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism", "scram.mechanism-unknown"
        )
    return None


def _upsertion_problem(upsertion: ScramCredentialUpsertion) -> ApiError | None:
    """Kafka's ``validateUpsertion``, then what its ``finishUpsertion``'s HMAC
    refuses (an empty key)."""
    problem = _user_and_mechanism_problem(upsertion.name, upsertion.mechanism)
    if problem is not None:
        return problem
    if upsertion.iterations < MIN_ITERATIONS:
        return ApiError(
            Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations", "scram.iterations-too-few"
        )
    if upsertion.iterations > MAX_ITERATIONS:
        return ApiError(
            Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations", "scram.iterations-too-many"
        )
    if not upsertion.salted_password:
        return ApiError(
            Errors.UNACCEPTABLE_CREDENTIAL,
            "The salted password must not be empty: send Hi(password, salt, iterations)",
            "scram.salted-password-empty",
        )
    return None
