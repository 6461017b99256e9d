"""Rule ``load_imbalance``: one replica (or data-parallel rank) strains while another idles — the router's doing.

sgl-project/sglang#15473 ("cache_aware in grpc inbalance forward"): the gRPC pipeline reported every worker's load
as zero, so the cache-aware policy "always selects the first worker"; "Instance B only receives health checks",
and throughput fell below the HTTP path's until the router was fixed. vllm-project/vllm#48808: a skewed data-parallel
balancer left ranks at 27 / 5 / 0 / 0 running. In both the fleet has the capacity; the router does not use it.

Fires while :func:`advisor.rules.common.uneven_engines` finds a busy engine (≥ 8 running) beside one at most a tenth
as busy, and the deployment strains: goodput below its target, requests waiting, or preemptions in the window
(unevenness with the SLO met pages no one). Every other rule's turns sized on the fleet's average are withheld then
(:func:`advisor.rules.common.load_balance`); this rule's proposal is the pseudo-dial ``load_balancer``
(:data:`advisor.conventions.DIAL_LOAD_BALANCER`): spread the requests, naming both engines and their loads. It is
not withheld by the gate (its figures are the engines' own readings). Its own problem
(:data:`advisor.conventions.PROBLEM_LOAD_IMBALANCE`): it waits its own for-duration rather than joining a saturation
incident the moment another rule's holds. A replica whose samples began more than half a window after the others'
(a scale-up's, a rollout's surge pod) is not judged (:func:`advisor.evaluate.running_load`).
"""

from __future__ import annotations

import math
from typing import Any, Final

from advisor import conventions as c
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import UNEVEN_IDLE_SHARE, UNEVEN_MIN_RUNNING, confidence, count, uneven_engines
from advisor.rules.turns import effect

CLEAR_IDLE_SHARE: Final = 2 * UNEVEN_IDLE_SHARE
"""The idlest engine's share of the busiest one's running requests (window means) it must pass before uneven loads
clear: twice the share that fires (:data:`advisor.rules.common.UNEVEN_IDLE_SHARE`), a hysteresis band (breaker 25:
a replica at 200 beside one at 20, exactly the 10 % line, resolved "within the router's usual spread" and reopened
under a new id 20 s later)."""

CLEAR_MARGIN = 0.02
"""How far above the SLO's target ratio goodput must be, the loads still uneven, for the incident to clear (the
hysteresis band between firing below the target and clearing above it)."""


class LoadImbalanceRule:
    """A busy engine beside an idle one while the deployment strains → spread the load (the router)."""

    id = c.RULE_LOAD_IMBALANCE
    problem = c.PROBLEM_LOAD_IMBALANCE
    supersedes: tuple[str, ...] = ()

    def __init__(self, for_seconds: float = 60.0) -> None:
        """``for_seconds``: for-duration.

        Raises:
            ValueError: a negative duration.
        """
        if for_seconds < 0:
            raise ValueError(f"for_seconds must not be negative, got {for_seconds}")
        self._for = for_seconds

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def _reading(self, ev: Evaluation) -> tuple[bool | None, str, dict[str, Any]]:
        s = ev.stats
        if s is None or not ev.requests_running_by_target:
            return None, "running requests by replica unknown", {}
        found = uneven_engines(ev)
        if found is None:
            return False, "the replicas' loads are within the router's usual spread (or one restarted)", {}
        (busy, busiest), (idle, idlest) = found
        loads = [v for _, v in ev.requests_running_by_target if math.isfinite(v)]
        evidence: dict[str, Any] = {
            "busiest": busy,
            "busiest_requests_running": busiest,
            "idlest": idle,
            "idlest_requests_running": idlest,
            "engines": len(loads),
            "goodput_ratio": ev.goodput.ratio,
            "requests_waiting": s.requests_waiting,
            "preemptions_increase": s.preemptions_increase,
        }
        strain: list[str] = []
        g = ev.goodput.ratio
        at_most = ev.goodput.upper if g is None else None  # one side unmeasured: a breach only when certain
        if g is not None and g < ev.ctx.slo.target_ratio:
            strain.append(f"goodput {g:.0%} below its {ev.ctx.slo.target_ratio:.0%} target")
        elif at_most is not None and at_most < ev.ctx.slo.target_ratio:
            strain.append(f"goodput at most {at_most:.0%}, below its {ev.ctx.slo.target_ratio:.0%} target")
        if s.requests_waiting:
            strain.append(f"{count(s.requests_waiting)} waiting")
        if s.preemptions_increase:
            strain.append(f"{count(s.preemptions_increase)} preemptions")
        uneven = f"{busy} runs {count(busiest)} requests while {idle} runs {count(idlest)}"
        if not strain:
            return False, f"{uneven}, but the SLO is met and nothing waits", evidence
        return True, f"{uneven}; {', '.join(strain)}", evidence

    def fires(self, ev: Evaluation) -> Condition:
        """A busy engine beside an idle one while the deployment strains."""
        holds, reason, evidence = self._reading(ev)
        return Condition(holds, reason, evidence)

    def clears(self, ev: Evaluation) -> Condition:
        """The loads evened out past :data:`CLEAR_IDLE_SHARE`, or the strain ended with goodput :data:`CLEAR_MARGIN`
        above its target: a goodput hovering at the target no longer opens and resolves the page every few evaluations
        (breaker 22: a straggler replica, 5 opens and 4 resolves in 100 s, one "resolved" at 89.6 % of a 90 %
        target), nor loads hovering at the firing line (breaker 25)."""
        holds, reason, evidence = self._reading(ev)
        if holds is None:
            return Condition(None, reason, evidence)
        if holds:
            return Condition(False, reason, evidence)
        g, bar = ev.goodput.ratio, min(1.0, ev.ctx.slo.target_ratio + CLEAR_MARGIN)
        band = _within_band(ev)
        if band is not None and (g is None or g < bar):  # the loads near the line and the strain not over
            return Condition(False, f"{reason}; not yet clear: {band}", evidence)
        if evidence.get("busiest") is not None and g is not None and g < bar:
            return Condition(False, f"{reason}; not yet clear: goodput {g:.1%} below {bar:.0%}", evidence)
        return Condition(True, reason, evidence)

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """Spread the requests over the engines (pseudo-dial ``load_balancer``)."""
        holds, reason, evidence = self._reading(ev)
        if not holds:
            return []
        loads = [v for _, v in ev.requests_running_by_target if math.isfinite(v)]
        even = sum(loads) / len(loads)
        busiest = float(evidence["busiest_requests_running"])
        return [
            Proposal(
                rule=self.id,
                dial=c.DIAL_LOAD_BALANCER,
                action="set",
                current="uneven",  # the live counts are in the description and evidence: a stable turn
                suggested="even",  # (the counts in these fields made the incident update every cycle)
                flag=None,
                severity="warning",
                confidence=confidence(ev, 0.8),
                summary=f"{ev.ctx.name}: the load is uneven across the replicas — spread it ({reason})",
                description=(
                    f"{reason}. The idle engine is capacity the router does not use: a balanced router puts about "
                    f"{count(even)} on each. Check the load balancer's policy and its view of the engines' load (a "
                    "cache-aware or session-affinity policy that sees every load as zero sends everything to one "
                    "engine, sgl-project/sglang#15473), and that the idle engine is in its endpoint list and passes "
                    "its readiness check. More replicas, more TP or lighter weights sized on the fleet's average are "
                    "withheld meanwhile: they would not reach the busy engine's queue."
                ),
                predicted_effect={"requests_running_busiest": effect(busiest, even)},
                evidence=evidence,
                score=1.0,
                sufficient=True,
                cost=1.0,
                gpus_added=0.0,
            )
        ]


def _within_band(ev: Evaluation) -> str | None:
    """Why loads no longer uneven by the firing line are not yet even (the busiest engine carries at least
    :data:`~advisor.rules.common.UNEVEN_MIN_RUNNING` and the idlest at most :data:`CLEAR_IDLE_SHARE` of it, over the
    window), or ``None``."""
    loads = [(e, v) for e, v in ev.requests_running_by_target if math.isfinite(v)]
    if len(loads) < 2 or (ev.stats is not None and ev.stats.counter_resets):
        return None
    busy = max(loads, key=lambda e: e[1])
    idle = min(loads, key=lambda e: e[1])
    if busy[1] < UNEVEN_MIN_RUNNING or idle[1] > CLEAR_IDLE_SHARE * busy[1]:
        return None
    return (
        f"{idle[0]} still runs {count(idle[1])} beside {busy[0]}'s {count(busy[1])}, at most {CLEAR_IDLE_SHARE:.0%} "
        "of it"
    )
