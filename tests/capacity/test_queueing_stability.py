"""``is_stable`` answers exactly what ``predict_service(...).stable`` answers, without the quantiles.

The replica-sizing rule bisects for the largest arrival rate a full batch keeps up with: 50 steps, each a full
``predict_service`` (TTFT quantiles by bisection over the wait distribution) before — about 0.3 s per sizing of a
saturated deployment, per tick (cProfile of ``tests/test_window_incremental.py``'s tick test: 18 of 23 s in
``max_stable_rate``). The check it needs is two inequalities (prefill ρ_p < 1, λ·S(cap) < cap)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.capacity.queueing import SLO, ReplicaService, Workload, is_stable, max_stable_rate, predict_service
from advisor.errors import CapacityError


def _service(cap: int, prefill: float, base: float, per_seq: float) -> ReplicaService:
    return ReplicaService(batch_cap=cap, prefill_seconds=prefill, decode_step=lambda b: base + per_seq * b)


@settings(max_examples=300, deadline=None)
@given(
    rate=st.floats(0.0, 200.0),
    prompt=st.floats(1.0, 32_000.0),
    output=st.floats(1.0, 4_000.0),
    cap=st.integers(1, 512),
    prefill=st.floats(0.0, 2.0),
    base=st.floats(1e-4, 0.05),
    per_seq=st.floats(0.0, 1e-3),
    replicas=st.integers(1, 16),
)
def test_is_stable_agrees_with_predict_service(
    rate: float, prompt: float, output: float, cap: int, prefill: float, base: float, per_seq: float, replicas: int
) -> None:
    w = Workload(arrival_rate=rate, prompt_tokens=prompt, output_tokens=output)
    svc = _service(cap, prefill, base, per_seq)
    assert is_stable(w, svc, replicas) == predict_service(w, svc, replicas, SLO(2.0, 0.05, 0.9)).stable


def test_the_boundary_is_where_the_slots_saturate() -> None:
    """Batch 4, no prefill, a 10 ms step, 100 output tokens: a request holds a slot 1 s, so 4 requests/s fill the
    slots exactly — stable just below, unstable at it."""
    svc = _service(4, 0.0, 0.01, 0.0)
    below = Workload(arrival_rate=3.99, prompt_tokens=10, output_tokens=100)
    assert is_stable(below, svc, 1)
    assert not is_stable(dataclasses.replace(below, arrival_rate=4.0), svc, 1)
    assert is_stable(dataclasses.replace(below, arrival_rate=7.9), svc, 2)  # two replicas split the stream


def test_max_stable_rate_is_the_slot_bound() -> None:
    """Same replica: the largest stable rate is 4 requests/s (cap ÷ service time), to the bisection's precision."""
    svc = _service(4, 0.0, 0.01, 0.0)
    assert max_stable_rate(Workload(arrival_rate=1.0, prompt_tokens=10, output_tokens=100), svc) == pytest.approx(
        4.0, rel=1e-9
    )


def test_bad_input_is_refused_as_predict_service_refuses_it() -> None:
    w = Workload(arrival_rate=1.0, prompt_tokens=10, output_tokens=10)
    with pytest.raises(CapacityError, match="replicas"):
        is_stable(w, _service(4, 0.0, 0.01, 0.0), 0)
    with pytest.raises(CapacityError, match="prefill_seconds"):
        is_stable(w, _service(4, -1.0, 0.01, 0.0), 1)
