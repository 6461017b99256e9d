"""Erlang C and replica sizing against textbook values and an independent closed form."""

from __future__ import annotations

import math

import pytest

from advisor.capacity.queueing import (
    erlang_c,
    mean_queue_length,
    mean_queue_wait_seconds,
    replicas_needed,
)
from advisor.errors import CapacityError


def _erlang_c_closed_form(c: int, a: float) -> float:
    """C(c, a) = [a^c/c! · c/(c−a)] / [Σ_{k<c} a^k/k! + a^c/c! · c/(c−a)] (Kleinrock 1975)."""
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


def test_two_servers_at_one_erlang_wait_one_third_of_the_time() -> None:
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)


def test_one_server_reduces_to_m_m_1() -> None:
    assert erlang_c(1, 0.5) == pytest.approx(0.5)
    # M/M/1: Wq = ρ / (μ − λ) = 0.5 / (1 − 0.5) = 1 s; Lq = ρ² / (1 − ρ) = 0.5
    assert mean_queue_wait_seconds(1, 0.5, 1.0) == pytest.approx(1.0)
    assert mean_queue_length(1, 0.5, 1.0) == pytest.approx(0.5)


@pytest.mark.parametrize(("c", "a"), [(3, 2.0), (5, 4.5), (10, 8.0), (20, 15.3), (50, 45.0)])
def test_erlang_c_matches_the_closed_form(c: int, a: float) -> None:
    assert erlang_c(c, a) == pytest.approx(_erlang_c_closed_form(c, a), rel=1e-9)


def test_overload_means_everyone_waits_forever() -> None:
    assert erlang_c(2, 2.0) == 1.0
    assert erlang_c(2, 3.5) == 1.0
    assert math.isinf(mean_queue_wait_seconds(2, 2.0, 1.0))


def test_replicas_needed_meets_the_utilization_target() -> None:
    # 10 req/s, 3 req/s per replica: 4 replicas run at 0.83 > 0.8, 5 at 0.67.
    assert replicas_needed(10, 3, target_utilization=0.8) == 5
    assert replicas_needed(0, 3) == 1
    assert replicas_needed(2.9, 3, target_utilization=1.0) == 1
    assert replicas_needed(3.0, 3, target_utilization=1.0) == 2  # ρ = 1 is unstable


def test_a_wait_target_can_only_add_replicas() -> None:
    loose = replicas_needed(10, 3, target_utilization=1.0)
    tight = replicas_needed(10, 3, target_utilization=1.0, max_wait_seconds=0.01)
    assert loose == 4
    assert tight >= loose
    assert mean_queue_wait_seconds(tight, 10, 3) <= 0.01
    assert mean_queue_wait_seconds(tight - 1, 10, 3) > 0.01


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(CapacityError):
        erlang_c(0, 1.0)
    with pytest.raises(CapacityError):
        replicas_needed(1, 0)
    with pytest.raises(CapacityError):
        replicas_needed(1, 1, target_utilization=1.5)
    with pytest.raises(CapacityError):
        replicas_needed(1, 1, max_wait_seconds=0)
