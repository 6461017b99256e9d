"""The daemon's garbage-collection policy: the cycle's old objects are frozen, so no collection rescans them.

CPython's cyclic collector scans its oldest generation whenever objects that survived into it since the last full
pass reach a quarter of it (``long_lived_pending > long_lived_total / 4``, Modules/gcmodule.c of 3.11). A daemon
that keeps every target's history renews that share every few cycles, and each full pass walks every history
point of every target while holding the GIL. Measured by replaying the parent's per-target work of
``run --workers 2`` (unpickle, observe, evaluate; vLLM 0.33 pages, 2,000 targets, 5 min window, 15 s interval;
issue 15): the collector took 0.33 of the 0.88 ms of CPU per target per cycle, 0.18 ms of it in full passes of
0.73 s each (two every four cycles, each inside a cycle); frozen after each cycle as below, 0.11 ms and no full
pass. At 10,000 targets a full pass would take about 3.6 s (extrapolated): half the 7.5 s a cycle may take.

The history is acyclic (frozen dataclasses referring to older ones and to plain values): dropped points are freed
by reference counting, frozen or not. So after each cycle (:meth:`CycleHeap.after_cycle`, on the cycle's thread,
once the cycle is published) the young generations are collected and everything alive is moved to the permanent
generation (:func:`gc.freeze`): later collections scan only what arrived since. A reference cycle that became
garbage after its objects reached the oldest generation is not found while frozen; every
:data:`FULL_COLLECT_EVERY_CYCLES` cycles the heap is unfrozen and collected whole, between two cycles (the pause
falls where the cycle thread is idle, not inside a cycle), which bounds what such garbage can hold.

Nothing the advisor computes depends on when objects are collected: results are unchanged.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Final

log = logging.getLogger(__name__)

FULL_COLLECT_EVERY_CYCLES: Final = 240
"""Cycles between two whole-heap collections: one hour at the default 15 s ``scrape_interval``."""


class CycleHeap:
    """Freeze the heap after each cycle; collect it whole every ``full_every`` cycles.

    Args:
        full_every: cycles between two whole-heap collections (≥ 1; :data:`FULL_COLLECT_EVERY_CYCLES`).

    Raises:
        ValueError: ``full_every`` < 1.
    """

    def __init__(self, full_every: int = FULL_COLLECT_EVERY_CYCLES) -> None:
        if full_every < 1:
            raise ValueError(f"full_every must be >= 1, got {full_every!r}")
        self.full_every = full_every
        self.cycles = 0
        self.full_collections = 0

    def after_cycle(self) -> float:
        """A cycle ended: collect the young generations (or, every :attr:`full_every` cycles, the whole heap),
        then freeze what is alive. Returns the seconds it took (wall clock)."""
        began = time.perf_counter()
        self.cycles += 1
        if self.cycles % self.full_every == 0:
            gc.unfreeze()
            found = gc.collect()
            self.full_collections += 1
            log.debug("heap: whole collection found %d unreachable object(s)", found)
        else:
            gc.collect(1)
        gc.freeze()
        return time.perf_counter() - began

    def close(self) -> None:
        """Give the frozen objects back to the collector (the daemon stops; an embedding process goes on)."""
        gc.unfreeze()
