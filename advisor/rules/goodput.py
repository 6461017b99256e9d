"""Rule: goodput below the SLO's target ratio → replicas from the queueing model.

Goodput ratio: the fraction of requests meeting both TTFT and TPOT targets (DistServe, Zhong et al.,
OSDI 2024), estimated from the engine's two histograms (see :mod:`advisor.telemetry`). Fires when the
estimate stays below ``slo.target_ratio`` with at least ``min_requests`` finished in the window; clears
when it is back at or above the target.

Replicas needed: the arrival rate λ is the completion rate plus the growth of the in-flight population
(running + waiting) over the window (flow balance); the per-replica service rate μ is the observed
completion rate per replica, scaled up to the replica's concurrency ceiling when the replica was not full
(Little's law, L = λW: at a fixed time in the engine, completions grow with the requests held). Then
:func:`advisor.capacity.queueing.replicas_needed` picks the smallest count that keeps utilization under
``target_utilization`` (M/M/c, Erlang C).
"""

from __future__ import annotations

import math
from typing import Any

from advisor import conventions as c
from advisor.capacity.queueing import mean_queue_wait_seconds, replicas_needed
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.flags import flag_for
from advisor.rules.turns import effect


class GoodputRule:
    """Goodput below target for the for-duration → more replicas."""

    id = c.RULE_GOODPUT_BELOW_TARGET
    supersedes: tuple[str, ...] = ()

    def __init__(self, for_seconds: float = 120.0, min_requests: int = 20, target_utilization: float = 0.8):
        """``for_seconds``: for-duration (s); ``min_requests``: finished requests needed to judge;
        ``target_utilization``: the utilization (0–1) replica counts are sized for."""
        self._for = for_seconds
        self.min_requests = min_requests
        self.target_utilization = target_utilization

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def _ratio(self, ev: Evaluation) -> tuple[float | None, str, dict[str, Any]]:
        s = ev.stats
        g = ev.goodput
        count = s.ttft.count if s is not None and s.ttft is not None else None
        evidence: dict[str, Any] = {
            "goodput_ratio": g.ratio,
            "goodput_ratio_lower": g.lower,
            "goodput_ratio_upper": g.upper,
            "ttft_ok_ratio": g.ttft_ratio,
            "tpot_ok_ratio": g.tpot_ratio,
            "requests_observed": count,
            "target_ratio": ev.ctx.slo.target_ratio,
            "window_seconds": s.window_seconds if s is not None else None,
        }
        if g.ratio is None:
            return None, "no TTFT/TPOT observations in the window", evidence
        if count is None or count < self.min_requests:
            return None, f"only {count or 0:.0f} requests finished in the window (need {self.min_requests})", evidence
        return g.ratio, f"goodput {g.ratio:.1%} vs target {ev.ctx.slo.target_ratio:.0%}", evidence

    def fires(self, ev: Evaluation) -> Condition:
        """Goodput ratio < target with enough requests to judge."""
        ratio, reason, evidence = self._ratio(ev)
        if ratio is None:
            return Condition(None, reason, evidence)
        return Condition(ratio < ev.ctx.slo.target_ratio, reason, evidence)

    def clears(self, ev: Evaluation) -> Condition:
        """Goodput ratio ≥ target."""
        ratio, reason, evidence = self._ratio(ev)
        if ratio is None:
            return Condition(None, reason, evidence)
        return Condition(ratio >= ev.ctx.slo.target_ratio, reason, evidence)

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """One proposal: the replica count from the queueing model (empty when rates are unknown)."""
        s = ev.stats
        if s is None or not s.requests_finished_per_second or ev.replicas_up <= 0:
            return []
        ratio, _, evidence = self._ratio(ev)
        completion = s.requests_finished_per_second
        inflight_first = (s.requests_running_first or 0) + (s.requests_waiting_first or 0)
        inflight_last = (s.requests_running or 0) + (s.requests_waiting or 0)
        arrival = completion + max(0.0, inflight_last - inflight_first) / s.window_seconds
        per_replica = completion / ev.replicas_up
        running_per_replica = (s.requests_running or 0) / ev.replicas_up
        ceiling = min(float(ev.ctx.inputs.max_num_seqs), ev.ctx.capacity.max_concurrency)
        saturated = (s.requests_waiting or 0) > 0
        if not saturated and running_per_replica > 0:
            per_replica *= max(1.0, ceiling / running_per_replica)
        current = ev.ctx.replicas
        needed = max(current + 1, replicas_needed(arrival, per_replica, self.target_utilization))
        wait_before = mean_queue_wait_seconds(current, arrival, per_replica)
        wait_after = mean_queue_wait_seconds(needed, arrival, per_replica)
        evidence = {
            **evidence,
            "arrival_rate_per_second": round(arrival, 4),
            "completions_per_second": round(completion, 4),
            "service_rate_per_replica": round(per_replica, 4),
            "requests_running": s.requests_running,
            "requests_waiting": s.requests_waiting,
        }
        pe = {
            "replicas": effect(current, needed),
            "utilization": effect(arrival / (current * per_replica), arrival / (needed * per_replica)),
            "queue_wait_seconds": effect(_finite(wait_before), _finite(wait_after)),
        }
        worst = s.ttft is None or ratio is None or ratio < ev.ctx.slo.target_ratio * 0.8
        wait_txt = "unbounded (the queue grows)" if math.isinf(wait_before) else f"{wait_before:.2f}s"
        description = (
            f"Only {ratio:.1%} of requests met TTFT ≤ {ev.ctx.slo.ttft_seconds}s and TPOT ≤ "
            f"{ev.ctx.slo.tpot_seconds}s over the last {s.window_seconds:.0f}s (target "
            f"{ev.ctx.slo.target_ratio:.0%}). Requests arrive at ~{arrival:.2f}/s; one replica serves "
            f"~{per_replica:.2f}/s, so {current} replica(s) run at {arrival / (current * per_replica):.0%} "
            f"utilization with a mean queue wait of {wait_txt} (M/M/c). {needed} replicas bring "
            f"utilization to {arrival / (needed * per_replica):.0%}."
            if ratio is not None
            else "Goodput is below target."
        )
        return [
            Proposal(
                rule=self.id,
                dial=c.DIAL_REPLICAS,
                action="increase",
                current=current,
                suggested=needed,
                flag=flag_for(ev.ctx.engine, c.DIAL_REPLICAS, needed),
                severity="critical" if worst else "warning",
                confidence=round(ev.coverage() * 0.8, 3),
                summary=f"{ev.ctx.name}: goodput {ratio:.0%} below target — scale replicas {current} → {needed}"
                if ratio is not None
                else f"{ev.ctx.name}: scale replicas {current} → {needed}",
                description=description,
                predicted_effect=pe,
                evidence=evidence,
                score=1.0,
            )
        ]


def _finite(x: float) -> float | None:
    """JSON has no infinity: an unstable queue's wait is reported as null (unbounded)."""
    return None if math.isinf(x) or math.isnan(x) else x
