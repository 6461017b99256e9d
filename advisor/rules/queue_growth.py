"""Rule ``queue_growth``: requests arrive faster than the replicas complete them.

Arrival rate λ = completion rate + growth of the in-flight population (running + waiting) over the window
(flow balance: what arrives either completes or is still in flight; :func:`advisor.rules.replicas.arrival_rate`).
Fires when the waiting queue grows by at least ``min_growth_per_second`` and λ exceeds the completion rate.
The replica count is :func:`advisor.rules.replicas.size_replicas`, the one queueing model every rule that
proposes replicas uses (λ against the per-replica capacity at the SLO, plus a drain term when
``rules.replicas.drain_seconds`` is set); when that count is not above the current one (a burst the replicas
absorb) it proposes nothing. No per-replica dial closes a gap of many times μ, so this rule never proposes more
concurrent sequences or speculative decoding (neither adds service rate to a saturated replica).

Resolves when the cause is gone, not when the derivative flattens: the backlog drained (at most
``resolve_waiting_per_replica`` waiting per answering replica) and KV usage below ``resolve_below`` (when
known). A queue that stopped growing at 105 waiting is still an incident.
"""

from __future__ import annotations

from typing import Any

from advisor import conventions as c
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import confidence, count, replicas_proposal
from advisor.rules.replicas import MIN_ARRIVAL_SPAN_SECONDS, arrival_rate, size_replicas


class QueueGrowthRule:
    """Arrival rate above service rate → replicas from the queueing model."""

    id = c.RULE_QUEUE_GROWTH
    problem = c.PROBLEM_SATURATION
    supersedes: tuple[str, ...] = ()

    def __init__(
        self,
        min_growth_per_second: float = 0.05,
        target_utilization: float = 0.8,
        for_seconds: float = 120,
        *,
        drain_seconds: float | None = None,
        min_history_seconds: float = MIN_ARRIVAL_SPAN_SECONDS,
        resolve_waiting_per_replica: float = 1.0,
        resolve_below: float = 0.8,
    ):
        """``min_growth_per_second``: waiting-queue growth that counts (requests/s); ``drain_seconds``: the
        backlog must clear within this (``rules.replicas.drain_seconds``; ``None`` off); resolves with at most
        ``resolve_waiting_per_replica`` waiting per replica and KV usage below ``resolve_below`` (0–1).
        ``target_utilization`` is kept for configuration compatibility: the count is
        :func:`advisor.rules.replicas.size_replicas`'s, the same for every rule."""
        self.min_growth = min_growth_per_second
        self.target_utilization = target_utilization
        self._for = for_seconds
        self.drain_seconds = drain_seconds
        self.min_history_seconds = min_history_seconds  # rules.replicas.min_history: shortest history sized
        self.resolve_waiting = resolve_waiting_per_replica
        self.resolve_below = resolve_below

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def _evidence(self, ev: Evaluation, rates: tuple[float, float, float] | None) -> dict[str, Any]:
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
        rates = arrival_rate(ev.stats)
        evidence = self._evidence(ev, rates)
        s = ev.stats
        if rates is None or s is None:
            return Condition(None, "waiting queue or completion counter unknown", evidence)
        span = s.covered_seconds
        growth = ((s.requests_waiting or 0) - (s.requests_waiting_first or 0)) / span
        arrival, done, _ = rates
        holds = growth >= self.min_growth and arrival > done and (s.requests_waiting or 0) > 0
        return Condition(
            holds,
            f"waiting {count(s.requests_waiting_first)} → {count(s.requests_waiting)} ({growth:+.2f}/s); "
            f"~{arrival:.2f} requests/s arrive, {done:.2f}/s complete",
            evidence,
        )

    def clears(self, ev: Evaluation) -> Condition:
        """The cause is gone: the backlog drained (≤ ``resolve_waiting_per_replica`` waiting per replica) and KV
        usage is below ``resolve_below`` (or unknown). A queue that merely stopped growing does not clear."""
        rates = arrival_rate(ev.stats)
        evidence = self._evidence(ev, rates)
        s = ev.stats
        if s is None or s.requests_waiting is None:
            return Condition(None, "waiting queue unknown", evidence)
        limit = self.resolve_waiting * max(ev.replicas_up, 1)
        usage = s.kv_cache_usage_ratio
        drained = s.requests_waiting <= limit
        cool = usage is None or usage < self.resolve_below
        usage_txt = "unknown" if usage is None else f"{usage:.1%}"
        if drained and cool:
            reason = (
                f"the backlog drained: {count(s.requests_waiting)} waiting (≤ {limit:g}), KV usage {usage_txt} "
                f"(below {self.resolve_below:.0%})"
            )
        else:
            reason = (
                f"still {count(s.requests_waiting)} waiting (resolves at ≤ {limit:g}), KV usage {usage_txt} "
                f"(resolves below {self.resolve_below:.0%})"
            )
        return Condition(drained and cool, reason, evidence)

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """Replicas from :func:`advisor.rules.replicas.size_replicas`, when more than configured."""
        s = ev.stats
        sizing = size_replicas(ev, self.drain_seconds, min_history_seconds=self.min_history_seconds)
        if sizing is None or s is None:
            return []
        current = ev.ctx.replicas
        needed = sizing.replicas
        if needed <= current:
            return []
        ratio = sizing.utilization
        evidence = {**self._evidence(ev, arrival_rate(s)), **sizing.evidence()}
        description = (
            f"The queue grew from {count(s.requests_waiting_first)} to {count(s.requests_waiting)} in "
            f"{s.covered_seconds:.0f}s. {sizing.explanation} No per-replica dial closes a ×{ratio:.1f} gap."
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
                extra_effects=sizing.effects(),
                withheld=sizing.withheld,
            )
        ]
