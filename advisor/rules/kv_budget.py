"""Rule ``kv_budget``: the memory budget the engine may claim (vLLM ``--gpu-memory-utilization``).

Raise: preemptions rose in the window while the budget is below ``raise_to`` (vLLM's default 0.9) — the GPU has
head-room the cache could use. Lower: one engine restarted ``max_restarts`` times or more in the window (counter
resets / a new ``process_start_time_seconds``) — the usual cause is an out-of-memory crash under activation spikes,
and a smaller budget leaves more room for them (vLLM docs, "Conserving memory"); resets more often than one per
:data:`MIN_SECONDS_PER_RESTART` are not restarts (unknown). Each predicted by the capacity pass with the budget
turned. No raise while another pool (a state pool, the slots) is the saturated one
(:func:`advisor.rules.common.kv_withheld`): its preemptions are not the KV pool's.
"""

from __future__ import annotations

import math
from typing import Any

from advisor import conventions as c
from advisor.capacity.engines import memory_budget
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import (
    BUDGET_FIELDS,
    Candidate,
    confidence,
    count,
    kv_withheld,
    pool_demand_factor,
    seconds,
    turn_proposal,
)
from advisor.rules.turns import turn

MIN_BUDGET = 0.5
TRANSIENT_PREEMPTIONS = 3
"""Preemptions in the window below which, with no request waiting, the raise does not hold: vLLM preempts the
newest sequence when a step cannot allocate a block, one at a time, and recomputes it as soon as blocks free; a
preemption or two over a window whose queue is empty is one peak of the batch, recovered, not a budget short of
the load (breaker 23: one preemption at 30 % KV opened "gpu_memory_utilization 0.5 → 0.9" and resolved 15 s later,
three times in four minutes on a bursty load). A queue beside them, or more of them, is the pressure the raise is
for."""

MIN_SECONDS_PER_RESTART = 10.0
"""Seconds an engine takes at least from one restart to the next serving one, below which counters going down are
not read as restarts: a restart reloads the weights, profiles and captures graphs before it counts a token again
(tens of seconds for vLLM and SGLang; a llama.cpp server that runs out of memory exits before it serves). Counters
that go backwards every few seconds are two engines' series interleaved behind one URL (a Service VIP, a load
balancer) or an exporter that resets them, not an out-of-memory crash loop (breaker 26: "15 restarts of one engine
in 29s" paged a critical budget cut on a replica running 20 requests at 50 % KV)."""


class KVBudgetRule:
    """Preemptions with head-room → raise the budget; repeated restarts → lower it."""

    id = c.RULE_KV_BUDGET
    problem = c.PROBLEM_SATURATION
    """Preemptions are the KV pool's pressure, the budget one of its dials: one incident with kv_saturation and the
    others (issue 13: the demo opened a second incident with the same ``gpu_memory_utilization`` turn)."""
    supersedes: tuple[str, ...] = ()

    def __init__(self, raise_to: float = 0.9, max_restarts: int = 2, lower_by: float = 0.05, for_seconds: float = 120):
        """``raise_to``: budget 0–1 to raise to; ``max_restarts``: restarts in the window that mean OOM."""
        self.raise_to = raise_to
        self.max_restarts = max_restarts
        self.lower_by = lower_by
        self._for = for_seconds

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def _reading(self, ev: Evaluation) -> tuple[str | None, str, dict[str, Any]]:
        s = ev.stats
        if s is None:
            return None, "no data", {}
        util = memory_budget(ev.ctx.inputs)
        unknown = sorted(ev.config_unmodelled.keys() & BUDGET_FIELDS)
        if unknown:
            return None, "; ".join(ev.config_unmodelled[k] for k in unknown), {}
        evidence = {
            "gpu_memory_utilization": util,
            "preemptions_increase": s.preemptions_increase,
            "counter_resets": s.counter_resets,
            "engine_restarts_max": s.engine_restarts_max,
            "window_seconds": s.window_seconds,
        }
        restarts = s.engine_restarts_max  # per engine: replicas restarted once each are not one engine crashing
        if restarts >= self.max_restarts and s.covered_seconds < restarts * MIN_SECONDS_PER_RESTART:
            return (
                None,
                (
                    f"the counters went down {restarts} times in {seconds(s.covered_seconds)}, faster than an engine "
                    "restarts: two engines behind one target URL, or an exporter that resets its counters — not read "
                    "as out-of-memory restarts"
                ),
                evidence,
            )
        if restarts >= self.max_restarts:
            if util - self.lower_by >= MIN_BUDGET:
                return "lower", f"{restarts} restarts of one engine in {seconds(s.covered_seconds)}", evidence
            # restarting at the floor already: never raise the budget of an engine that keeps crashing
            return "", f"{restarts} restarts of one engine at a budget of {util} (at the {MIN_BUDGET} floor)", evidence
        if s.preemptions_increase is None:
            return None, "preemption counter unknown", evidence
        transient = s.preemptions_increase < TRANSIENT_PREEMPTIONS and s.requests_waiting == 0
        if s.preemptions_increase > 0 and util < self.raise_to - 1e-9 and transient:
            return (
                "",
                f"{count(s.preemptions_increase)} preemption(s) in {seconds(s.covered_seconds)} with nothing waiting: "
                f"a peak recovered, not a budget short of the load (fewer than {TRANSIENT_PREEMPTIONS})",
                evidence,
            )
        if s.preemptions_increase > 0 and util < self.raise_to - 1e-9:
            withheld = kv_withheld(ev)
            if withheld:
                # the preemptions are another pool's (a state pool, the slots): more KV budget admits no one
                return "", withheld, {**evidence, "pool_usage": dict(ev.pool_usage)}
            return (
                "raise",
                f"{count(s.preemptions_increase)} preemptions in {seconds(s.covered_seconds)} with a budget of {util}",
                evidence,
            )
        restarted = f"{s.counter_resets} restarts" + (
            f" ({restarts} of one engine at most)" if s.counter_resets > restarts else ""
        )
        return "", f"budget {util}, {count(s.preemptions_increase)} preemptions, {restarted}", evidence

    def fires(self, ev: Evaluation) -> Condition:
        """Preemptions under a low budget, or repeated restarts."""
        what, reason, evidence = self._reading(ev)
        return Condition(None if what is None else bool(what), reason, evidence)

    def clears(self, ev: Evaluation) -> Condition:
        """Neither holds any more."""
        what, reason, evidence = self._reading(ev)
        return Condition(None if what is None else not what, reason, evidence)

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """The budget turn, predicted by the capacity pass."""
        what, reason, evidence = self._reading(ev)
        if not what:
            return []
        util = memory_budget(ev.ctx.inputs)
        new = self.raise_to if what == "raise" else round(util - self.lower_by, 2)
        t = turn(ev.ctx.inputs, c.DIAL_GPU_MEMORY_UTILIZATION, new)
        if t is None:
            return []
        if what == "raise":
            cand = Candidate(t, 1.0, "increase", "watch for OOM at activation peaks after raising the budget")
            situation = f"{reason}: the GPU has head-room the cache could use."
            headline = "preemptions under a low memory budget"
            severity = "warning"
        else:
            cand = Candidate(t, 1.0, "decrease", "a smaller pool is the price of surviving activation peaks")
            situation = f"{reason}: repeated restarts under load usually mean out-of-memory crashes."
            headline = "repeated restarts (likely OOM)"
            severity = "critical"
        return [
            turn_proposal(
                self.id,
                ev,
                cand,
                # a raise closes the gap only when it grows the pool to hold every running and waiting request
                # (unknown demand: it does not claim to); 0.886 → 0.9 (+1.6 %) never outranks a turn that does
                needed_factor=(pool_demand_factor(ev) or math.inf) if what == "raise" else None,
                severity=severity,
                confidence=confidence(ev, 0.75),
                evidence=evidence,
                headline=headline,
                situation=situation,
            )
        ]
