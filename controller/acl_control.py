"""CreateAcls and DeleteAcls (Kafka's ``AclControlManager``).

The image keeps the ACLs by id, each binding once. CreateAcls validates each
binding (``validateNewAcl``), answers one result per creation in order, and
writes an ``AccessControlEntryRecord`` under a new id for each binding that is
neither stored nor created earlier in the same request: an identical binding
succeeds and writes nothing. DeleteAcls answers, per filter, every stored
binding it matches (Kafka's filter semantics, ``metadata_records/acls.py``) and
writes one ``RemoveAccessControlEntryRecord`` per id however many filters match
it, a filter's matches in id order. Both cost what they create or match, not
every ACL stored: the view's ``AclsImage`` finds a binding, and the ACLs a
filter can match, by its indexes (decisions.md 139). Both are user
operations under Kafka's record cap (``controller/record_cap.py``): past it,
every entry carries the cap's error and nothing is written (decisions.md 104).
"""

from __future__ import annotations

from collections.abc import Callable

from metadata_records.acls import StandardAcl, acl_problem
from metadata_records.delta import ImageDelta
from metadata_records.errors import Errors
from metadata_records.records import Record, RemoveAccessControlEntryRecord

from .messages import (
    AclCreationResult,
    ControllerResult,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsFilterResult,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from .record_cap import TOO_MANY_RECORDS, over_cap


class AclControlManager:
    def __init__(self, view: Callable[[], ImageDelta], new_id: Callable[[], str]) -> None:
        self._view = view  # the controller's view (committed image + pending records)
        self._new_id = new_id  # the controller's id generator (topic ids' too)

    def create_acls(self, req: CreateAclsRequest, now_ms: int) -> ControllerResult:
        view = self._view()
        records: list[Record] = []
        results: list[AclCreationResult] = []
        created: dict[StandardAcl, str] = {}
        taken: set[str] = set()  # ids given in this request
        for acl in req.creations:
            problem = acl_problem(acl)
            if problem is not None:
                results.append(AclCreationResult(Errors.INVALID_REQUEST, problem, "acl.invalid"))
                continue
            if acl not in created and view.acl_id_of(acl) is None:
                acl_id = self._new_acl_id(taken)
                created[acl] = acl_id
                taken.add(acl_id)
                records.append(acl.to_record(acl_id))
                if over_cap(records):
                    return self._too_many(len(req.creations))
            results.append(AclCreationResult())
        return ControllerResult(tuple(records), CreateAclsResponse(tuple(results)))

    def _new_acl_id(self, taken: set[str]) -> str:
        """Kafka's newAclId: a random id no ACL has (nor one created just now)."""
        while True:
            acl_id = self._new_id()
            if acl_id not in taken and self._view().acl(acl_id) is None:
                return acl_id

    @staticmethod
    def _too_many(count: int) -> ControllerResult:
        error = AclCreationResult(
            TOO_MANY_RECORDS.error, TOO_MANY_RECORDS.message, TOO_MANY_RECORDS.rule
        )
        return ControllerResult((), CreateAclsResponse(tuple(error for _ in range(count))))

    def delete_acls(self, req: DeleteAclsRequest, now_ms: int) -> ControllerResult:
        acls = self._view().acls()
        removed: dict[str, None] = {}  # ids in the order first matched
        results: list[DeleteAclsFilterResult] = []
        for f in req.filters:
            unknown = f.unknown()
            if unknown is not None:
                results.append(
                    DeleteAclsFilterResult(
                        Errors.INVALID_REQUEST, unknown, rule="acl.filter-invalid"
                    )
                )
                continue
            matched = acls.matching(f)
            removed.update(dict.fromkeys(acl_id for acl_id, _ in matched))
            if over_cap(removed):
                failed = DeleteAclsFilterResult(
                    TOO_MANY_RECORDS.error, TOO_MANY_RECORDS.message, rule=TOO_MANY_RECORDS.rule
                )
                return ControllerResult((), DeleteAclsResponse(tuple(failed for _ in req.filters)))
            results.append(DeleteAclsFilterResult(matching_acls=tuple(acl for _, acl in matched)))
        records = tuple(RemoveAccessControlEntryRecord(id=acl_id) for acl_id in removed)
        return ControllerResult(records, DeleteAclsResponse(tuple(results)))
