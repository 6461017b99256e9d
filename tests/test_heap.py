"""The daemon's garbage-collection policy (:mod:`advisor.heap`): after each cycle what is alive is frozen, so no
collection rescans the histories; every ``full_every`` cycles the heap is collected whole, so a reference cycle that
became garbage while frozen is freed then, never kept for good."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from advisor.heap import CycleHeap


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture(autouse=True)
def _thawed() -> Iterator[None]:
    """Leave the test process's collector as it was found (nothing frozen)."""
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_after_a_cycle_what_is_alive_is_frozen_and_close_thaws_it() -> None:
    heap = CycleHeap(full_every=10)
    kept = [_Node() for _ in range(100)]
    heap.after_cycle()
    assert gc.get_freeze_count() >= len(kept)
    assert all(not any(o is n for o in gc.get_objects()) for n in kept[:3])  # no generation holds them
    heap.close()
    assert gc.get_freeze_count() == 0


def test_a_cycle_that_became_garbage_while_frozen_is_freed_by_the_next_whole_collection() -> None:
    heap = CycleHeap(full_every=3)
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    heap.after_cycle()  # cycle 1: a and b are frozen
    del a, b  # now garbage, but only a collection of the frozen objects would see it
    heap.after_cycle()  # cycle 2: young generations only
    assert gone() is not None
    heap.after_cycle()  # cycle 3: the whole heap
    assert gone() is None
    assert heap.full_collections == 1


def test_acyclic_garbage_is_freed_at_once_though_frozen() -> None:
    heap = CycleHeap(full_every=100)
    node = _Node()
    gone = weakref.ref(node)
    heap.after_cycle()
    del node
    assert gone() is None


def test_a_policy_without_whole_collections_is_refused() -> None:
    with pytest.raises(ValueError, match="full_every must be >= 1, got 0"):
        CycleHeap(full_every=0)
