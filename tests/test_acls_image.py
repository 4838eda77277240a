"""metadata_records/acls_image.py and chunked_map.py: the indexed ACLs agree
with a plain dict and with every filter tried on every ACL, and a lookup or
a filter that names a resource or principal reads only what it can match."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given, settings

from metadata_records.acls import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclResourceType,
    PatternType,
    StandardAcl,
)
from metadata_records.acls_image import SMALL_GROUP, AclsImage
from metadata_records.chunked_map import ChunkedMap, chunked_with

NAMES = ["*", "t", "to", "top", "topic", "topic-1", "other", ""]
PRINCIPALS = ["User:a", "User:b", "User:*", "Group:x"]

stored_acls = st.builds(
    StandardAcl,
    st.sampled_from([t for t in AclResourceType if t > AclResourceType.ANY]),
    st.sampled_from(NAMES[:-1]),
    st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    st.sampled_from(PRINCIPALS),
    st.sampled_from(["*", "10.0.0.1"]),
    st.sampled_from([o for o in AclOperation if o > AclOperation.ANY]),
    st.sampled_from([AclPermissionType.DENY, AclPermissionType.ALLOW]),
)
filters = st.builds(
    AclBindingFilter,
    st.sampled_from(list(AclResourceType)),
    st.one_of(st.none(), st.sampled_from(NAMES)),
    st.sampled_from(list(PatternType)),
    st.one_of(st.none(), st.sampled_from(PRINCIPALS)),
    st.one_of(st.none(), st.sampled_from(["*", "10.0.0.1"])),
    st.sampled_from(list(AclOperation)),
    st.sampled_from(list(AclPermissionType)),
)
# Changes: an id (from a small pool, so ids are replaced and removed) and an
# ACL or None (remove).
changes = st.lists(
    st.tuples(st.sampled_from([f"id{i}" for i in range(12)]), st.one_of(st.none(), stored_acls)),
    max_size=30,
)


def apply_plain(acls: dict, batch: list) -> dict:
    """Replay's rules on a dict: a new binding under a free id, or a removal."""
    acls = dict(acls)
    for acl_id, acl in batch:
        if acl is None:
            acls.pop(acl_id, None)
        elif acl_id not in acls and acl not in acls.values():
            acls[acl_id] = acl
    return acls


def delta_of(before: dict, after: dict) -> dict:
    changed = {i: None for i in before if i not in after or after[i] != before[i]}
    changed.update({i: a for i, a in after.items() if before.get(i) != a})
    return changed


def check_indexes(image: AclsImage, plain: dict) -> None:
    assert dict(image.items()) == plain and len(image) == len(plain)
    for acl_id, acl in plain.items():
        assert image[acl_id] == acl and acl_id in image and image.id_of(acl) == acl_id


@settings(max_examples=300, deadline=None)
@given(st.lists(changes, min_size=1, max_size=5), st.lists(filters, max_size=8))
def test_matching_agrees_with_every_filter_on_every_acl(batches, tried) -> None:
    image, plain = AclsImage(), {}
    for batch in batches:
        after = apply_plain(plain, batch)
        image = image.with_changes(delta_of(plain, after))
        plain = after
        check_indexes(image, plain)
        for f in tried:
            expected = sorted((i, a) for i, a in plain.items() if f.matches(a))
            assert image.matching(f) == expected == image.matching_plain(f)


def test_an_image_is_never_changed_by_the_next() -> None:
    acls = {f"id{i}": StandardAcl(2, f"t{i % 3}", 3, f"User:{i}", "*", 3, 3) for i in range(200)}
    before = AclsImage(acls)
    after = before.with_changes({"id1": None, "new": StandardAcl(2, "x", 3, "User:n", "*", 3, 3)})
    check_indexes(before, acls)
    assert "new" not in before and "id1" not in after and len(after) == 200


def test_a_binding_under_two_ids_is_refused() -> None:
    acl = StandardAcl(2, "t", 3, "User:a", "*", 3, 3)
    try:
        AclsImage({"a": acl, "b": acl})
    except ValueError as e:
        assert "two ACL ids" in str(e)
    else:
        raise AssertionError("a binding under two ids was taken")


def test_a_binding_moved_to_another_id_in_one_change_is_kept() -> None:
    acl = StandardAcl(2, "t", 3, "User:a", "*", 3, 3)
    image = AclsImage({"b": StandardAcl(2, "u", 3, "User:b", "*", 3, 3), "a": acl})
    # The new id comes first in the changes: the removal must still go first.
    moved = image.with_changes({"z": acl, "a": None})
    assert moved.id_of(acl) == "z" and "a" not in moved


def test_a_group_grows_past_a_dict_and_shrinks_back() -> None:
    acls = {f"id{i:04}": StandardAcl(2, "big", 3, f"User:{i}", "*", 3, 3) for i in range(300)}
    image = AclsImage()
    for start in range(0, 300, 50):
        image = image.with_changes({i: acls[i] for i in list(acls)[start : start + 50]})
    assert len(image.matching(AclBindingFilter(resource_name="big"))) == 300
    assert len(image.matching(AclBindingFilter(resource_name="big"))) > SMALL_GROUP
    image = image.with_changes(dict.fromkeys(list(acls)[:299]))
    assert image.matching(AclBindingFilter(resource_name="big")) == [("id0299", acls["id0299"])]
    image = image.with_changes({"id0299": None})
    assert len(image) == 0 and image.matching(AclBindingFilter()) == []


class CountingFilter(AclBindingFilter):
    tried = 0

    def matches(self, acl) -> bool:
        CountingFilter.tried += 1
        return super().matches(acl)


def test_a_filter_that_names_a_resource_or_principal_reads_only_those_acls() -> None:
    acls = {
        f"id{i}": StandardAcl(2, f"topic-{i % 1000}", 3, f"User:u{i}", "*", 3, 3)
        for i in range(20_000)
    }
    image = AclsImage(acls)
    for f, expected in (
        (CountingFilter(resource_name="topic-7"), 20),
        (CountingFilter(resource_name="topic-7", pattern_type=PatternType.MATCH), 20),
        (CountingFilter(principal="User:u7"), 1),
    ):
        CountingFilter.tried = 0
        assert len(image.matching(f)) == expected
        assert CountingFilter.tried == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3000), st.one_of(st.none(), st.integers())), max_size=60))
def test_a_chunked_map_agrees_with_a_dict(ops) -> None:
    plain: dict = {}
    chunked = ChunkedMap()
    older = []
    for start in range(0, len(ops), 7):
        builder = chunked.mutate()
        for key, value in ops[start : start + 7]:
            if value is None:
                if key in plain:
                    del plain[key]
                    del builder[key]
            else:
                plain[key] = value
                builder[key] = value
        older.append((chunked, dict(chunked.items())))
        chunked = builder.finish()
        assert dict(chunked.items()) == plain and len(chunked) == len(plain)
        assert sorted(chunked) == sorted(plain) and sorted(chunked.values()) == sorted(
            plain.values()
        )
        for key in plain:
            assert chunked[key] == plain[key] and chunked.get(key) == plain[key] and key in chunked
    for kept, contents in older:  # a builder never changed the map it started from
        assert dict(kept.items()) == contents
        # Equality by chunks agrees with equality of contents, either way round.
        assert (kept == chunked) == (contents == plain) == (chunked == ChunkedMap(contents))
        assert kept == contents and contents == kept and kept == ChunkedMap(contents)
    assert chunked_with(ChunkedMap(), plain) == plain == chunked
    assert chunked_with(chunked, dict.fromkeys(plain)) == {}  # None removes every key
