"""The image's ACLs (Kafka's ``AclsImage``), indexed so that CreateAcls,
DeleteAcls and DescribeAcls cost what they change or match, not what is stored.

Until this module the image kept a plain dict of ACLs by id, and every
CreateAcls rebuilt a binding -> id index from all of them, every DeleteAcls
filter and every DescribeAcls tried every ACL: with 50,000 ACLs stored, one
more binding held the decision loop, and so every broker's heartbeat, 1.9 s
(docs/decisions.md 139). Kafka's ``AclControlManager`` keeps timeline hash
maps and also scans every binding per DeleteAcls filter. Here each index is
a ``ChunkedMap``: immutable, and a change copies only the chunks it touches,
so an image and the delta built on it never copy what they did not change.

Indexes, each kept on every change:

* ``by id``: the Mapping this object is (``image.acls[acl_id]``);
* ``by binding``: the id of a binding (CreateAcls' "already exists", and
  replay's each-binding-once check);
* ``by resource``: (resource type, pattern type, name) -> the ACLs on it;
  a filter that names a resource looks up its exact name, the ``*``
  wildcard and every prefix of the name (MATCH), never the other resources;
* ``by principal``: a filter that names a principal but no resource reads
  that principal's ACLs.

A filter that names neither walks every ACL (it matches by type, operation,
permission or host only, and usually matches most of them). ``matching``
agrees with ``AclBindingFilter.matches`` over every ACL: its plain twin,
``matching_plain``, is that loop, and tests/test_acls_image.py checks both
with Hypothesis. A ChunkedMap's order follows hashes, which differ between
processes, so ``matching`` answers in id order: every voter decides and
answers the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from .acls import AclBindingFilter, AclResourceType, PatternType, StandardAcl
from .chunked_map import EMPTY, ChunkedMap

# The resource types a stored ACL may have (filter-only ANY and UNKNOWN excluded).
_STORED_TYPES = tuple(t for t in AclResourceType if t > AclResourceType.ANY)
_STORED_PATTERNS = (PatternType.LITERAL, PatternType.PREFIXED)
_WILDCARD = "*"

ResourceKey = tuple[int, int, str]  # resource type, pattern type, name


def _resource(acl: StandardAcl) -> ResourceKey:
    return (acl.resource_type, acl.pattern_type, acl.resource_name)


class AclsImage(Mapping):
    """Every ACL by id, immutable; ``with_changes`` makes the next one."""

    __slots__ = ("_by_id", "_by_binding", "_by_resource", "_by_principal")

    def __init__(self, acls: Mapping[str, StandardAcl] | None = None) -> None:
        """The ACLs of ``acls`` (ids to bindings); ValueError if a binding
        appears under two ids (an image holds each binding once)."""
        self._by_id: ChunkedMap = EMPTY
        self._by_binding: ChunkedMap = EMPTY
        self._by_resource: ChunkedMap = EMPTY
        self._by_principal: ChunkedMap = EMPTY
        if acls:
            built = self.with_changes(acls)
            if len(built._by_binding) != len(built._by_id):
                raise ValueError("a binding appears under two ACL ids")
            self._by_id, self._by_binding = built._by_id, built._by_binding
            self._by_resource, self._by_principal = built._by_resource, built._by_principal

    # ------------------------------------------------------------ Mapping

    def __getitem__(self, acl_id: str) -> StandardAcl:
        return self._by_id[acl_id]

    def get(self, acl_id: str, default=None):
        return self._by_id.get(acl_id, default)

    def __contains__(self, acl_id: object) -> bool:
        return acl_id in self._by_id

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def __repr__(self) -> str:
        return f"AclsImage({dict(self._by_id.items())!r})"

    # ------------------------------------------------------------ lookups

    def id_of(self, binding: StandardAcl) -> str | None:
        """The id of the ACL with exactly this binding (Kafka's existingAcls)."""
        return self._by_binding.get(binding)

    def matching(self, acl_filter: AclBindingFilter) -> list[tuple[str, StandardAcl]]:
        """Every (id, ACL) ``acl_filter`` matches, in id order; reads only the
        index entries the filter can match (the module docstring)."""
        found = [
            (acl_id, acl)
            for candidates in self._candidates(acl_filter)
            for acl_id, acl in candidates.items()
            if acl_filter.matches(acl)
        ]
        found.sort()
        return found

    def matching_plain(self, acl_filter: AclBindingFilter) -> list[tuple[str, StandardAcl]]:
        """``matching``'s plain twin: the filter tried on every ACL."""
        return sorted((i, acl) for i, acl in self._by_id.items() if acl_filter.matches(acl))

    def _candidates(self, f: AclBindingFilter) -> Iterable[Mapping[str, StandardAcl]]:
        """Maps of ACLs that hold every ACL ``f`` matches, none twice."""
        name = f.resource_name
        if name is None:
            if f.principal is not None:
                return (self._by_principal.get(f.principal, EMPTY),)
            return (self._by_id,)
        types = _STORED_TYPES if f.resource_type == AclResourceType.ANY else (f.resource_type,)
        if f.pattern_type == PatternType.MATCH:
            # The literal name, the literal wildcard, and every prefixed
            # pattern the name starts with (ResourcePatternFilter.matches).
            keys = [(t, PatternType.LITERAL, name) for t in types]
            if name != _WILDCARD:
                keys += [(t, PatternType.LITERAL, _WILDCARD) for t in types]
            keys += [
                (t, PatternType.PREFIXED, name[:n]) for t in types for n in range(len(name) + 1)
            ]
        elif f.pattern_type == PatternType.ANY:
            keys = [(t, p, name) for t in types for p in _STORED_PATTERNS]
        else:
            keys = [(t, f.pattern_type, name) for t in types]
        by_resource = self._by_resource
        return [found for key in keys if (found := by_resource.get(key)) is not None]

    # ------------------------------------------------------------ changes

    def with_changes(self, changes: Mapping[str, StandardAcl | None]) -> AclsImage:
        """This image with each id set to its ACL, or removed where it is
        None. The caller has checked the changes (replay's rules: each id and
        each binding at most once in the result). Removals first, so a
        binding that moved to another id is never dropped by the old id."""
        if not changes:
            return self
        by_id = self._by_id.mutate()
        by_binding = self._by_binding.mutate()
        by_resource = _Grouped(self._by_resource)
        by_principal = _Grouped(self._by_principal)
        for acl_id in changes:
            old = by_id.get(acl_id)
            if old is not None:
                del by_id[acl_id]
                del by_binding[old]
                by_resource.remove(_resource(old), acl_id)
                by_principal.remove(old.principal, acl_id)
        for acl_id, acl in changes.items():
            if acl is not None:
                by_id[acl_id] = acl
                by_binding[acl] = acl_id
                by_resource.add(_resource(acl), acl_id, acl)
                by_principal.add(acl.principal, acl_id, acl)
        new = AclsImage.__new__(AclsImage)
        new._by_id = by_id.finish()
        new._by_binding = by_binding.finish()
        new._by_resource = by_resource.finish()
        new._by_principal = by_principal.finish()
        return new


# A group (the ACLs of one resource or principal) is a plain dict up to this
# size, copied whole when it changes (most groups hold a few ACLs, and a dict
# costs a tenth of a ChunkedMap to make), and a ChunkedMap past it.
SMALL_GROUP = 64


class _Grouped:
    """Changes to an index of groups (a key -> the ACLs under it by id); each
    group is copied or given a builder once however many of its ACLs change."""

    __slots__ = ("_outer", "_groups")

    def __init__(self, index: ChunkedMap) -> None:
        self._outer = index.mutate()
        self._groups: dict = {}

    def _group(self, key):
        group = self._groups.get(key)
        if group is None:
            held = self._outer.get(key)
            if held is None:
                group = {}
            elif type(held) is dict:
                group = dict(held)
            else:
                group = held.mutate()
            self._groups[key] = group
        return group

    def add(self, key, acl_id: str, acl: StandardAcl) -> None:
        self._group(key)[acl_id] = acl

    def remove(self, key, acl_id: str) -> None:
        del self._group(key)[acl_id]

    def finish(self) -> ChunkedMap:
        outer = self._outer
        for key, group in self._groups.items():
            if type(group) is dict:
                done = group if len(group) <= SMALL_GROUP else ChunkedMap(group)
            else:
                done = group.finish()
            if done:
                outer[key] = done
            elif outer.get(key) is not None:
                del outer[key]
        return outer.finish()


EMPTY_ACLS = AclsImage()


def image_acls(image) -> AclsImage:
    """``image.acls`` as an AclsImage (an image built by hand may hold a dict)."""
    acls = image.acls
    return acls if type(acls) is AclsImage else AclsImage(acls)
