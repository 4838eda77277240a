"""metadata_records/fast_init.py: the quicker __init__ builds exactly what the
dataclass's own would (positional, keyword, defaults), the instance stays
frozen and hashable, and unsupported dataclasses are refused."""

import dataclasses

import pytest

from controller import messages as m
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
