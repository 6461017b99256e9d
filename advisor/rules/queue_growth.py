"""Rule ``queue_growth``: requests arrive faster than the replicas complete them.

Arrival rate λ = completion rate + growth of the waiting queue over the window (flow balance: what
arrives either completes or is still waiting). Fires when the queue grows by at least
``min_growth_per_second`` and λ exceeds the completion rate. With a saturated replica the completion
rate per replica is its service rate μ; :func:`advisor.capacity.queueing.replicas_needed` then gives the
fewest replicas that keep utilization λ ÷ (c·μ) under ``target_utilization`` (M/M/c, Erlang C; Little's
law L = λW gives the wait the queue already costs). No per-replica dial closes a gap of many times μ, so
this rule's replica count is the answer; it never proposes more concurrent sequences or speculative
decoding (neither adds service rate to a saturated replica).
"""

from __future__ import annotations

import math
from typing import Any

from advisor import conventions as c
from advisor.capacity.queueing import mean_queue_wait_seconds, replicas_needed
from advisor.errors import CapacityError
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import confidence, count, replicas_proposal
from advisor.rules.turns import effect


class QueueGrowthRule:
    """Arrival rate above service rate → replicas from the queueing model."""

    id = c.RULE_QUEUE_GROWTH
    problem = c.PROBLEM_SATURATION
    supersedes: tuple[str, ...] = ()

    def __init__(self, min_growth_per_second: float = 0.05, target_utilization: float = 0.8, for_seconds: float = 120):
        """``min_growth_per_second``: waiting-queue growth that counts (requests/s)."""
        self.min_growth = min_growth_per_second
        self.target_utilization = target_utilization
        self._for = for_seconds

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def _rates(self, ev: Evaluation) -> tuple[float, float] | None:
        """(arrival, completion) in requests/s, or None when unknown."""
        s = ev.stats
        if s is None or s.requests_waiting is None or s.requests_waiting_first is None:
            return None
        if s.requests_finished_per_second is None or s.window_seconds <= 0:
            return None
        span = s.span_seconds or s.window_seconds
        growth = (s.requests_waiting - s.requests_waiting_first) / span
        running_growth = ((s.requests_running or 0) - (s.requests_running_first or 0)) / span
        arrival = s.requests_finished_per_second + growth + running_growth
        return arrival, s.requests_finished_per_second

    def _evidence(self, ev: Evaluation, rates: tuple[float, float] | None) -> dict[str, Any]:
        s = ev.stats
        return {
            "requests_waiting_first": s.requests_waiting_first if s else None,
            "requests_waiting": s.requests_waiting if s else None,
            "requests_running": s.requests_running if s else None,
            "completions_per_second": round(rates[1], 4) if rates else None,
            "arrival_rate_per_second": round(rates[0], 4) if rates else None,
            "window_seconds": s.window_seconds if s else None,
        }

    def fires(self, ev: Evaluation) -> Condition:
        """The queue grows and arrivals outpace completions."""
        rates = self._rates(ev)
        evidence = self._evidence(ev, rates)
        if rates is None:
            return Condition(None, "waiting queue or completion counter unknown", evidence)
        s = ev.stats
        assert s is not None
        span = s.span_seconds or s.window_seconds
        growth = ((s.requests_waiting or 0) - (s.requests_waiting_first or 0)) / span
        arrival, done = rates
        holds = growth >= self.min_growth and arrival > done and (s.requests_waiting or 0) > 0
        return Condition(
            holds,
            f"waiting {count(s.requests_waiting_first)} → {count(s.requests_waiting)} ({growth:+.2f}/s); "
            f"~{arrival:.2f} requests/s arrive, {done:.2f}/s complete",
            evidence,
        )

    def clears(self, ev: Evaluation) -> Condition:
        """The queue stopped growing (or emptied)."""
        rates = self._rates(ev)
        evidence = self._evidence(ev, rates)
        s = ev.stats
        if rates is None or s is None:
            return Condition(None, "waiting queue or completion counter unknown", evidence)
        span = s.span_seconds or s.window_seconds
        growth = ((s.requests_waiting or 0) - (s.requests_waiting_first or 0)) / span
        return Condition(
            growth <= 0 or (s.requests_waiting or 0) == 0,
            f"the queue stopped growing: waiting {count(s.requests_waiting_first)} → {count(s.requests_waiting)}",
            evidence,
        )

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """Replicas so that λ ÷ (c·μ) ≤ target utilization."""
        rates = self._rates(ev)
        s = ev.stats
        if rates is None or s is None or ev.replicas_up <= 0:
            return []
        arrival, done = rates
        if done <= 0:
            return []
        mu = done / ev.replicas_up
        current = ev.ctx.replicas
        try:
            needed = max(current + 1, replicas_needed(arrival, mu, self.target_utilization))
        except CapacityError:
            return []
        wait_before = mean_queue_wait_seconds(current, arrival, mu)
        wait_after = mean_queue_wait_seconds(needed, arrival, mu)
        backlog = (s.requests_waiting or 0) / max(needed * mu - arrival, 1e-9)
        evidence = {**self._evidence(ev, rates), "service_rate_per_replica": round(mu, 4)}
        ratio = arrival / (current * mu)
        description = (
            f"Requests arrive at ~{arrival:,.2f}/s; each replica completes ~{mu:,.2f}/s, so {current} replica(s) "
            f"run at {ratio:.0%} of capacity and the queue grew from {count(s.requests_waiting_first)} to "
            f"{count(s.requests_waiting)} in {s.window_seconds:.0f}s. No per-replica dial closes a ×{ratio:.1f} gap. "
            f"{needed} replicas run at {arrival / (needed * mu):.0%} (target {self.target_utilization:.0%}); the "
            f"current backlog then drains in ~{backlog:,.0f}s."
        )
        return [
            replicas_proposal(
                self.id,
                ev,
                needed,
                severity="critical",
                confidence=confidence(ev, 0.85),
                evidence=evidence,
                summary=f"{ev.ctx.name}: arrivals outpace service ×{ratio:.1f} — scale replicas {current} → {needed}",
                description=description,
                extra_effects={
                    "utilization": effect(ratio, arrival / (needed * mu)),
                    "queue_wait_seconds": effect(_finite(wait_before), _finite(wait_after)),
                },
            )
        ]


def _finite(x: float) -> float | None:
    return None if math.isinf(x) or math.isnan(x) else x
