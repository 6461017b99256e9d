"""Issue 14, acceptance 3: what one target's history costs in memory when every scrape moves, as a serving
engine's page does (counters, every histogram bucket, sum and count change between scrapes).

At 2,000 targets the history is most of the advisor's memory: ~12 snapshots per target (a 5 min window of 15 s
scrapes thinned by :func:`advisor.tracker.record`), each with the TTFT, TPOT and queue-time histograms of ~20
buckets. The figures are allocations counted by ``tracemalloc`` (deterministic for one Python build), not
timings. The pages come from the simulator's vLLM 0.33 renderer (:mod:`advisor.sim.exposition`), a busy
replica advanced 15 simulated seconds between scrapes.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
import tracemalloc
from collections import deque

import pytest

from advisor.domain import EngineSnapshot, Histogram, TimedSnapshot
from advisor.engines import get_adapter
from advisor.observe import observe
from advisor.sim.exposition import VLLMCollector, render
from advisor.sim.fleet import Fleet
from advisor.sim.metrics import VLLMMetrics
from advisor.sim.traffic import LognormalLengths, Poisson, TrafficProfile
from advisor.tracker import record
from tests.sim.conftest import MODEL, llama_engine

INF = float("inf")


def _moving_pages(n: int) -> list[str]:
    cfg = llama_engine()
    fleet = Fleet(
        cfg,
        TrafficProfile(Poisson(3.0), LognormalLengths(1500, 0.5, 300, 1.0)),
        seed=7,
        observers=lambda i: [VLLMMetrics(cfg.max_model_len)],
    )
    replica = fleet.replicas[0]
    (metrics,) = replica.observers
    assert isinstance(metrics, VLLMMetrics)
    pages = []
    for k in range(n):
        fleet.advance(30.0 + 15.0 * k)
        pages.append(render(VLLMCollector(replica, metrics, created=1.7e9)).decode())
    return pages


def _snapshots(pages: list[str]) -> list[EngineSnapshot]:
    adapter = get_adapter("vllm")
    out = []
    for page in pages:
        seen = observe(page, adapter, None, configured_model=MODEL, strict=True)
        assert seen.snapshot is not None, seen.error_message
        out.append(seen.snapshot)
    return out


def test_every_histogram_of_a_moving_page_changes_between_scrapes() -> None:
    """The premise of the figures below: nothing is shared between two scrapes' histograms by equality."""
    a, b = _snapshots(_moving_pages(2))
    for name in ("ttft", "tpot", "queue_time"):
        ha, hb = getattr(a, name), getattr(b, name)
        assert ha is not None and hb is not None, name
        assert hb.count > ha.count and hb.buckets != ha.buckets, name


def test_a_history_point_of_a_moving_vllm_page_costs_under_3_kib() -> None:
    """12 points (one target's steady state at 15 s / 5 min) cost 6.9 KiB each with a tuple and a float object
    per bucket (83 KiB per target, 166 MB at 2,000 targets; measured on 0c7e936); packed, 2.2 KiB."""
    pages = _moving_pages(14)
    adapter = get_adapter("vllm")
    history: deque[TimedSnapshot] = deque()

    def scrape(k: int) -> None:  # what the daemon does per scrape: observe the page, record the snapshot
        seen = observe(pages[k], adapter, None, configured_model=MODEL, strict=True)
        assert seen.snapshot is not None, seen.error_message
        record(history, TimedSnapshot("t", 40.0 * k, seen.snapshot), 300.0)

    scrape(0)
    scrape(1)  # the first points: nothing before them to share, and the newest keeps its e2e histogram
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for k in range(2, 14):
            scrape(k)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(history) == 14  # 40 s apart over a 300 s window: nothing thinned
    per_point = kept / 12
    assert per_point < 3 * 1024, f"{per_point / 1024:.1f} KiB per history point"


def test_histograms_of_one_bucket_layout_share_one_bounds_tuple() -> None:
    a, b = _snapshots(_moving_pages(2))
    assert a.ttft is not None and b.ttft is not None
    assert a.ttft.bounds() is b.ttft.bounds()


def test_a_packed_histogram_is_the_value_it_was() -> None:
    """Built, compared, hashed, copied, pickled and seen by ``dataclasses`` as the frozen dataclass it was."""
    h = Histogram(buckets=((0.1, 3.0), (0.5, 6.0), (INF, 8.0)), count=8.0, sum=2.5)
    assert h.buckets == ((0.1, 3.0), (0.5, 6.0), (INF, 8.0))
    assert h.bounds() == (0.1, 0.5, INF) and list(h.counts()) == [3.0, 6.0, 8.0]
    same = Histogram(buckets=[(0.1, 3), (0.5, 6), (INF, 8)], count=8.0, sum=2.5)
    assert h == same and hash(h) == hash(same) and len({h, same}) == 1
    assert h != Histogram(buckets=((0.1, 3.0), (0.5, 7.0), (INF, 8.0)), count=8.0, sum=2.5)
    assert dataclasses.is_dataclass(h)
    assert dataclasses.asdict(h) == {"buckets": ((0.1, 3.0), (0.5, 6.0), (INF, 8.0)), "count": 8.0, "sum": 2.5}
    moved = dataclasses.replace(h, count=9.0)
    assert moved.count == 9.0 and moved.buckets == h.buckets
    assert pickle.loads(pickle.dumps(h)) == h and copy.deepcopy(h) == h
    with pytest.raises(dataclasses.FrozenInstanceError):
        h.count = 1.0  # type: ignore[misc]
    assert repr(h) == "Histogram(buckets=((0.1, 3.0), (0.5, 6.0), (inf, 8.0)), count=8.0, sum=2.5)"
    assert Histogram.merge([h]) is h
    two = Histogram.merge([h, same])
    assert two is not None and two.buckets == ((0.1, 6.0), (0.5, 12.0), (INF, 16.0)) and two.count == 16.0
