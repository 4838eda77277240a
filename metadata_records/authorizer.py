"""An authorizer over the image's ACLs, with Kafka's ``StandardAuthorizer``
rules, for a broker to keep from its metadata cache.

Build it from an image (``from_image``) or keep it current record by record
(``replay``: AccessControlEntryRecord / RemoveAccessControlEntryRecord, as
Kafka's ``StandardAuthorizer`` follows ``AclsDelta``). ``authorize`` answers
ALLOWED or DENIED as ``StandardAuthorizerData.authorize`` does:

1. a super user (``super.users``, principals as ``Type:name``) may do everything;
2. the ACLs that apply are those on the resource's type whose pattern covers
   the name: LITERAL equal to it, LITERAL ``*``, or PREFIXED a prefix of it;
   of those, the ones for the principal or ``User:*`` and for the host or ``*``;
3. DENY wins over ALLOW: a DENY for the operation (or ALL) denies;
4. else an ALLOW for the operation allows; ALL implies every operation, and
   an ALLOW of READ, WRITE, DELETE or ALTER implies DESCRIBE, of ALTER_CONFIGS
   DESCRIBE_CONFIGS (a DENY implies nothing but itself, or everything if ALL);
5. else: when no ACL at all is on the resource (whoever it names),
   ``allow.everyone.if.no.acl.found`` decides (default false: DENIED); when
   some is, DENIED.

Pure: no I/O, no clock. Not thread-safe for concurrent replay and authorize;
a caller that does both from several threads holds its own lock.
"""

from __future__ import annotations

from enum import Enum

from .acls import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclOperation,
    AclPermissionType,
    PatternType,
    StandardAcl,
    acl_problem,
)
from .image import MetadataImage
from .records import AccessControlEntryRecord, RemoveAccessControlEntryRecord


class AuthorizationResult(Enum):
    ALLOWED = "ALLOWED"
    DENIED = "DENIED"


ALLOWED = AuthorizationResult.ALLOWED
DENIED = AuthorizationResult.DENIED

_IMPLIES_DESCRIBE = frozenset(
    {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
     AclOperation.ALTER}
)  # fmt: skip
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


def _result(acl: StandardAcl, principals: tuple[str, str], host: str, op: int):
    """StandardAuthorizerData.findResult: this ACL's say on the action, or None."""
    if acl.principal not in principals:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation != AclOperation.ALL:
        if acl.permission_type == AclPermissionType.ALLOW:
            if op == AclOperation.DESCRIBE:
                if acl.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif op == AclOperation.DESCRIBE_CONFIGS:
                if acl.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif op != acl.operation:
                return None
        elif op != acl.operation:
            return None
    return ALLOWED if acl.permission_type == AclPermissionType.ALLOW else DENIED


class _TypeAcls:
    """One resource type's ACLs, indexed as the authorizer looks them up."""

    __slots__ = ("literal", "prefixed")

    def __init__(self) -> None:
        self.literal: dict[str, dict[str, StandardAcl]] = {}  # name ("*" too) -> id -> ACL
        self.prefixed: dict[str, dict[str, StandardAcl]] = {}  # prefix -> id -> ACL

    def table(self, pattern_type: int) -> dict[str, dict[str, StandardAcl]]:
        return self.literal if pattern_type == PatternType.LITERAL else self.prefixed


class StandardAuthorizer:
    def __init__(
        self,
        super_users: frozenset[str] | set[str] = frozenset(),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._by_id: dict[str, StandardAcl] = {}
        self._by_type: dict[int, _TypeAcls] = {}

    @classmethod
    def from_image(cls, image: MetadataImage, **options) -> StandardAuthorizer:
        authorizer = cls(**options)
        authorizer.load(image)
        return authorizer

    def load(self, image: MetadataImage) -> None:
        """Every ACL of ``image``, replacing what was held (a snapshot load)."""
        self._by_id = {}
        self._by_type = {}
        for acl_id, acl in image.acls.items():
            self.add_acl(acl_id, acl)

    # ------------------------------------------------------------ changes

    def add_acl(self, acl_id: str, acl: StandardAcl) -> bool:
        """Adds ``acl`` under ``acl_id``; False (nothing done) for an invalid
        ACL or an id already held, as the image's replay refuses them."""
        if acl_problem(acl) is not None or acl_id in self._by_id:
            return False
        self._by_id[acl_id] = acl
        typed = self._by_type.setdefault(acl.resource_type, _TypeAcls())
        typed.table(acl.pattern_type).setdefault(acl.resource_name, {})[acl_id] = acl
        return True

    def remove_acl(self, acl_id: str) -> bool:
        acl = self._by_id.pop(acl_id, None)
        if acl is None:
            return False
        table = self._by_type[acl.resource_type].table(acl.pattern_type)
        held = table[acl.resource_name]
        del held[acl_id]
        if not held:
            del table[acl.resource_name]
        return True

    def replay(self, record: object) -> None:
        """Follows one metadata record; records of other types change nothing."""
        if type(record) is AccessControlEntryRecord:
            self.add_acl(record.id, StandardAcl.from_record(record))
        elif type(record) is RemoveAccessControlEntryRecord:
            self.remove_acl(record.id)

    def acl_count(self) -> int:
        return len(self._by_id)

    # ------------------------------------------------------------ deciding

    def authorize(
        self, principal: str, host: str, operation: int, resource_type: int, resource_name: str
    ) -> AuthorizationResult:
        """May ``principal`` (``Type:name``) from ``host`` do ``operation`` on the
        literal resource (``resource_type``, ``resource_name``)?"""
        if principal in self.super_users:
            return ALLOWED
        typed = self._by_type.get(resource_type)
        if typed is None:
            return self._no_acl()
        principals = (principal, WILDCARD_PRINCIPAL)
        found_acl = False
        allowed = False
        for acls in self._applying(typed, resource_name):
            for acl in acls.values():
                found_acl = True
                result = _result(acl, principals, host, operation)
                if result is DENIED:
                    return DENIED
                if result is ALLOWED:
                    allowed = True
        if allowed:
            return ALLOWED
        return DENIED if found_acl else self._no_acl()

    @staticmethod
    def _applying(typed: _TypeAcls, name: str):
        """The ACL groups whose pattern covers ``name``."""
        exact = typed.literal.get(name)
        if exact is not None:
            yield exact
        if name != WILDCARD:
            wildcard = typed.literal.get(WILDCARD)
            if wildcard is not None:
                yield wildcard
        prefixed = typed.prefixed
        if prefixed:
            for end in range(1, len(name) + 1):
                group = prefixed.get(name[:end])
                if group is not None:
                    yield group

    def _no_acl(self) -> AuthorizationResult:
        return ALLOWED if self.allow_everyone_if_no_acl_found else DENIED
