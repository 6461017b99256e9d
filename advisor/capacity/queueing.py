"""Queueing: how many replicas an arrival rate needs (M/M/c, Erlang C, Little's law).

Each replica is modelled as one server completing ``service_rate_per_replica`` requests per second at its
operating batch (requests/s = decode tokens/s ÷ mean output tokens, from :mod:`advisor.capacity.perf`).
Arrivals are Poisson at ``arrival_rate`` requests/s. Formulas (Kleinrock, *Queueing Systems* vol. 1, 1975,
§3.5; Gross & Harris, *Fundamentals of Queueing Theory*, M/M/c):

* offered load ``a = λ / μ`` (Erlangs); utilization ``ρ = a / c``; stable only when ``a < c``.
* Erlang B by the stable recursion ``B(0) = 1, B(k) = a·B(k−1) / (k + a·B(k−1))``.
* Erlang C (probability an arrival waits) ``C = c·B / (c − a·(1 − B))``.
* mean wait in queue ``Wq = C / (c·μ − λ)``; by Little's law (Little, Operations Research 1961) the mean
  queue length is ``Lq = λ·Wq``.

Textbook check: c = 2, a = 1 → C = 1/3; c = 1 reduces to M/M/1 (C = ρ, Wq = ρ / (μ − λ)).
"""

from __future__ import annotations

import math

from advisor.errors import CapacityError

__all__ = ["erlang_b", "erlang_c", "mean_queue_length", "mean_queue_wait_seconds", "replicas_needed"]

_MAX_REPLICAS = 100_000


def erlang_b(servers: int, offered_load: float) -> float:
    """Blocking probability of M/M/c/c (Erlang B), by the numerically stable recursion. Dimensionless.

    Raises:
        CapacityError: ``servers`` < 1 or ``offered_load`` negative/not finite.
    """
    if servers < 1:
        raise CapacityError(f"servers must be ≥ 1, got {servers}")
    if not math.isfinite(offered_load) or offered_load < 0:
        raise CapacityError(f"offered_load must be a finite number ≥ 0, got {offered_load}")
    b = 1.0
    for k in range(1, servers + 1):
        b = offered_load * b / (k + offered_load * b)
    return b


def erlang_c(servers: int, offered_load: float) -> float:
    """Probability that an arrival waits in M/M/c (Erlang C). Dimensionless, in [0, 1].

    ``offered_load`` is λ/μ in Erlangs. Returns 1.0 when ``offered_load ≥ servers`` (the queue grows
    without bound, so every arrival waits). Example: ``erlang_c(2, 1.0) == 1/3``.

    Raises:
        CapacityError: ``servers`` < 1 or ``offered_load`` negative/not finite.
    """
    b = erlang_b(servers, offered_load)
    if offered_load >= servers:
        return 1.0
    return servers * b / (servers - offered_load * (1.0 - b))


def _check_rates(arrival_rate: float, service_rate: float) -> None:
    if not math.isfinite(arrival_rate) or arrival_rate < 0:
        raise CapacityError(f"arrival_rate must be a finite number ≥ 0 (requests/s), got {arrival_rate}")
    if not math.isfinite(service_rate) or service_rate <= 0:
        raise CapacityError(f"service rate must be a finite number > 0 (requests/s), got {service_rate}")


def mean_queue_wait_seconds(servers: int, arrival_rate: float, service_rate_per_server: float) -> float:
    """Mean time an arrival spends queued before service in M/M/c, seconds: ``C / (c·μ − λ)``.

    Rates are requests per second. Returns ``math.inf`` when unstable (λ ≥ c·μ).

    Raises:
        CapacityError: ``servers`` < 1, a negative arrival rate or a non-positive service rate.
    """
    _check_rates(arrival_rate, service_rate_per_server)
    if servers < 1:
        raise CapacityError(f"servers must be ≥ 1, got {servers}")
    capacity = servers * service_rate_per_server
    if arrival_rate >= capacity:
        return math.inf
    c = erlang_c(servers, arrival_rate / service_rate_per_server)
    return c / (capacity - arrival_rate)


def mean_queue_length(servers: int, arrival_rate: float, service_rate_per_server: float) -> float:
    """Mean number of requests waiting (Little's law: ``Lq = λ·Wq``); ``math.inf`` when unstable."""
    wait = mean_queue_wait_seconds(servers, arrival_rate, service_rate_per_server)
    return math.inf if math.isinf(wait) else arrival_rate * wait


def replicas_needed(
    arrival_rate: float,
    service_rate_per_replica: float,
    target_utilization: float = 0.8,
    max_wait_seconds: float | None = None,
) -> int:
    """The fewest replicas (≥ 1) that keep utilization ``λ / (c·μ)`` at or below ``target_utilization``
    and, when ``max_wait_seconds`` is given, the M/M/c mean queue wait at or below it.

    Rates are requests per second. Example: 10 req/s at 3 req/s per replica and 0.8 target → 5 replicas
    (10 / (5 × 3) = 0.67; 4 replicas would run at 0.83).

    Raises:
        CapacityError: non-positive service rate, negative arrival rate, ``target_utilization`` outside
            (0, 1], a negative ``max_wait_seconds``, or no answer below 100,000 replicas.
    """
    _check_rates(arrival_rate, service_rate_per_replica)
    if not 0.0 < target_utilization <= 1.0:
        raise CapacityError(f"target_utilization must be in (0, 1], got {target_utilization}")
    if max_wait_seconds is not None and (math.isnan(max_wait_seconds) or max_wait_seconds < 0):
        raise CapacityError(f"max_wait_seconds must be ≥ 0, got {max_wait_seconds}")
    if max_wait_seconds == 0 and arrival_rate > 0:
        raise CapacityError("max_wait_seconds=0 cannot be met with arrivals: M/M/c always has some wait")
    offered = arrival_rate / service_rate_per_replica
    c = max(1, math.ceil(offered / target_utilization - 1e-12))
    while c <= _MAX_REPLICAS:
        stable = offered < c or arrival_rate == 0
        if stable and (
            max_wait_seconds is None
            or mean_queue_wait_seconds(c, arrival_rate, service_rate_per_replica) <= max_wait_seconds
        ):
            return c
        c += 1
    raise CapacityError(
        f"no replica count up to {_MAX_REPLICAS} meets the targets for {arrival_rate} req/s at "
        f"{service_rate_per_replica} req/s per replica"
    )
