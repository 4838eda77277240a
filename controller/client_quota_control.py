"""AlterClientQuotas (Kafka's ``ClientQuotaControlManager``).

Quotas are ``ClientQuotaRecord``s, one per key set or removed on one entity
(metadata_records/client_quotas.py holds the entity and key rules). Each
entity of a request is decided on its own and is all or nothing: one bad key
refuses the entity and none of its changes is written. A value equal to the
one set writes nothing, and so does removing a key that is not set (Kafka's
"only record the new value if it has changed"); removing the last key drops
the entity from the image.

Departures (docs/decisions.md 107, 108): an ip is a literal address, never
resolved; an entity named twice in one request is refused whole.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from metadata_records.client_quotas import (
    IP,
    Entity,
    entity_data,
    entity_key,
    entity_problem,
    entity_text,
    ip_problem,
    keys_for,
    value_problem,
)
from metadata_records.delta import ImageDelta
from metadata_records.errors import ApiError, Errors
from metadata_records.records import ClientQuotaRecord

from .messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    ClientQuotaAlteration,
    ClientQuotaEntryResponse,
    ControllerResult,
)
from .record_cap import TOO_MANY_RECORDS, over_cap


def _identity(entity: tuple[tuple[str, str | None], ...]) -> tuple:
    """What makes two entries name the same entity: the canonical form when
    the entity is valid, else the components as sent, in any order."""
    if entity_problem(entity) is None:
        return entity_key(entity)
    return tuple(sorted(entity, key=lambda c: (str(c[0]), c[1] is not None, c[1] or "")))


class ClientQuotaControlManager:
    def __init__(self, view: Callable[[], ImageDelta]) -> None:
        self._view = view  # the controller's view (committed image + pending records)

    def alter_client_quotas(self, req: AlterClientQuotasRequest, now_ms: int) -> ControllerResult:
        """One answer per entity, in the order each first appears; the records
        of every accepted entity commit together (Kafka's ``atomicOf``)."""
        counts = Counter(_identity(e.entity) for e in req.entries)
        records: list[ClientQuotaRecord] = []
        answers: list[ClientQuotaEntryResponse] = []
        answered: set[tuple] = set()
        for entry in req.entries:
            identity = _identity(entry.entity)
            if identity in answered:
                continue
            answered.add(identity)
            if counts[identity] > 1:
                refused = ApiError(
                    Errors.INVALID_REQUEST,
                    f"Ignoring duplicate entity {entity_text(entry.entity)}: "
                    "an entity may appear once in a request",
                    "quota.entity-duplicate",
                )
            else:
                refused = self._alter(entry, records)
            answers.append(
                ClientQuotaEntryResponse(
                    entry.entity,
                    Errors.NONE if refused is None else refused.error,
                    None if refused is None else refused.message,
                    None if refused is None else refused.rule,
                )
            )
            if over_cap(records):
                cap = TOO_MANY_RECORDS
                return ControllerResult(
                    (),
                    AlterClientQuotasResponse(
                        tuple(
                            ClientQuotaEntryResponse(e.entity, cap.error, cap.message, cap.rule)
                            for e in _first_of_each(req.entries)
                        )
                    ),
                )
        response = AlterClientQuotasResponse(tuple(answers))
        if req.validate_only:
            # Every check of a real request, the same answers, nothing written.
            return ControllerResult((), response)
        return ControllerResult(tuple(records), response)

    def _alter(self, entry: ClientQuotaAlteration, out: list[ClientQuotaRecord]) -> ApiError | None:
        """Kafka's ``alterClientQuotaEntity``: the entity's records appended
        to ``out``, or why it is refused (nothing appended)."""
        problem = entity_problem(entry.entity)
        if problem is None:
            problem = ip_problem(dict(entry.entity).get(IP))
        if problem is not None:
            return ApiError(Errors.INVALID_REQUEST, problem, "quota.entity-invalid")
        entity: Entity = entity_key(entry.entity)
        keys = keys_for(entity)
        twice = sorted(k for k, n in Counter(op.key for op in entry.ops).items() if n > 1)
        if twice:
            return ApiError(
                Errors.INVALID_REQUEST,
                f"Duplicate quota key {twice[0]} not updating quota for this entity "
                f"{entity_text(entity)}",
                "quota.key-duplicate",
            )
        current = self._view().client_quotas(entity)
        records = []
        for op in entry.ops:
            if op.remove:
                # Kafka checks no key on removal: removing what is not set is a no-op.
                if op.key in current:
                    records.append(_record(entity, op.key, 0.0, remove=True))
                continue
            problem = value_problem(keys, op.key, op.value)
            if problem is not None:
                return ApiError(Errors.INVALID_REQUEST, problem, "quota.value-invalid")
            if current.get(op.key) != op.value:
                records.append(_record(entity, op.key, op.value, remove=False))
        out += records
        return None


def _record(entity: Entity, key: str, value: float, remove: bool) -> ClientQuotaRecord:
    return ClientQuotaRecord(entity=entity_data(entity), key=key, value=value, remove=remove)


def _first_of_each(entries: tuple[ClientQuotaAlteration, ...]) -> list[ClientQuotaAlteration]:
    seen: dict[tuple, ClientQuotaAlteration] = {}
    for e in entries:
        seen.setdefault(_identity(e.entity), e)
    return list(seen.values())
