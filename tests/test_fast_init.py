"""The seam between metadata_records/fast_init.py and the __init__ dataclasses
generate: the quicker __init__ builds exactly what the dataclass's own would
(positional, keyword, defaults) or fails with the same TypeError, for every
record and controller message; the instance stays frozen and hashable;
unsupported dataclasses are refused; the switch off leaves the plain one."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller import messages as m
from metadata_records import fast_init
from metadata_records.fast_init import fast_frozen_init
from metadata_records.records import RECORD_TYPES


@dataclasses.dataclass(frozen=True, slots=True)
class Plain:
    a: int
    b: tuple = ()
    c: str | None = None


Fast = fast_frozen_init(
    dataclasses.make_dataclass(
        "Fast", [("a", int), ("b", tuple, ()), ("c", str | None, None)], frozen=True, slots=True
    )
)


@pytest.mark.parametrize(
    "args,kwargs", [((1,), {}), ((1, (2,)), {}), ((1,), {"c": "x"}), ((), {"a": 1, "b": (3,)})]
)
def test_it_builds_what_the_dataclass_init_builds(args, kwargs):
    plain, fast = Plain(*args, **kwargs), Fast(*args, **kwargs)
    assert dataclasses.astuple(plain) == dataclasses.astuple(fast)
    assert fast == Fast(*args, **kwargs) and hash(fast) == hash(Fast(*args, **kwargs))
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.a = 2
    with pytest.raises(TypeError):
        Fast(*args, **kwargs, unknown=1)
    assert dataclasses.replace(fast, a=7).a == 7


def test_records_and_messages_use_it_and_keep_their_defaults():
    for cls in [*RECORD_TYPES.values(), m.AlterPartitionPartition, m.BrokerState]:
        assert cls.__init__.__qualname__ == f"{cls.__qualname__}.__init__"
        required = [f for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING]
        with pytest.raises(TypeError):
            cls(*[None] * (len(required) - 1)) if required else cls(*[None] * 99)
    assert m.BrokerState(5) == m.BrokerState(5, -1)


def test_unsupported_dataclasses_are_refused():
    @dataclasses.dataclass(frozen=True, slots=True)
    class WithFactory:
        a: list = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(slots=True)
    class NotFrozen:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class WithPostInit:
        a: int

        def __post_init__(self):
            pass

    for cls in (WithFactory, NotFrozen, WithPostInit):
        with pytest.raises(TypeError):
            fast_frozen_init(cls)


# ---------------------------------------------------------------- agreement with the plain __init__

SPED_UP = sorted(
    {
        *RECORD_TYPES.values(),
        *(
            cls
            for cls in vars(m).values()
            if isinstance(cls, type) and hasattr(cls.__init__, "plain_init")
        ),
    },
    key=lambda cls: cls.__qualname__,
)


def built(init, cls, args, kwargs):
    """What ``init`` makes of the arguments: every field's value, or the
    error's class and message."""
    obj = object.__new__(cls)
    try:
        init(obj, *args, **kwargs)
    except TypeError as e:
        return ("error", type(e), str(e))
    return ("ok", tuple((f.name, repr(getattr(obj, f.name))) for f in dataclasses.fields(cls)))


values = st.one_of(st.none(), st.integers(), st.text(max_size=3), st.tuples(st.integers()))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SPED_UP), st.data())
def test_the_quick_init_builds_what_the_plain_init_builds_or_fails_alike(cls, data):
    """Positional and keyword arguments, too few, too many, unknown and
    repeated names: the same fields or the same TypeError message."""
    names = [f.name for f in dataclasses.fields(cls)]
    args = data.draw(st.lists(values, max_size=len(names) + 1))
    kwargs = data.draw(
        st.dictionaries(st.sampled_from([*names, "version", "unknown"]), values, max_size=3)
    )
    quick = built(cls.__init__, cls, args, kwargs)
    plain = built(cls.__init__.plain_init, cls, args, kwargs)
    assert quick == plain


def test_every_record_and_controller_message_is_sped_up():
    assert len(SPED_UP) >= len(RECORD_TYPES) + 10
    for cls in SPED_UP:
        assert hasattr(cls.__init__, "plain_init"), cls


def test_the_switch_off_leaves_the_dataclass_its_own_init(monkeypatch):
    monkeypatch.setattr(fast_init, "ENABLED", False)
    cls = dataclasses.make_dataclass("Kept", [("a", int)], frozen=True, slots=True)
    own = cls.__init__
    assert fast_frozen_init(cls) is cls and cls.__init__ is own
    with pytest.raises(TypeError):  # misuse is refused either way
        fast_frozen_init(dataclasses.make_dataclass("Loose", [("a", int)], slots=True))
