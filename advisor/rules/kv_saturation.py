"""Rule: the KV pool is saturated and requests queue or get preempted.

Fires when KV-cache usage is at or above ``usage_threshold`` and requests are waiting or preemptions
rose in the window. (vLLM preempts running sequences by recompute when no free block is left —
``vllm/v1/core/sched/scheduler.py``, ``_preempt_request`` — so preemptions with a full pool mean the
concurrency ceiling, not compute, bounds the batch.) Clears when usage falls below ``resolve_below``
or when nothing waits and nothing is preempted over the window.

Proposes the dial turns that raise the ceiling, each predicted by re-running the capacity pass with the
dial turned, ranked by pool gain per unit of GPU cost:

======================  ==========================================  ===============
dial                    turn                                        GPU cost
======================  ==========================================  ===============
kv_cache_dtype          auto → fp8 (halves KV bytes per token)     ×1
gpu_memory_utilization  +0.05, at most 0.95                        ×1
weight_quantization     none → fp8 (fp8-capable GPU) or awq        ×1 (quality ×0.8)
tensor_parallel_size    ×2                                         ×2
replicas                enough to hold running + waiting           ×replicas ratio
======================  ==========================================  ===============
"""

from __future__ import annotations

import math
from typing import Any

from advisor import conventions as c
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.flags import flag_for
from advisor.rules.turns import FIELD_FOR_DIAL, Turn, effect, turn

MAX_SAFE_GPU_MEMORY_UTILIZATION = 0.95
"""Above this, activation spikes and CUDA-graph memory risk OOM (vLLM docs, "Conserving memory")."""

QUANTIZATION_QUALITY_FACTOR = 0.8
"""Weight quantization ranks below equal-gain turns: its quality delta must be measured on one's own evals."""


def _count(v: float | None) -> str:
    """A count as text: ``12``, or ``unknown``."""
    return "unknown" if v is None else f"{v:,.0f}"


def _fmt_tokens(n: float) -> str:
    return f"{n:,.0f}"


class KVSaturationRule:
    """KV pool saturation with queueing or preemption → raise the concurrency ceiling."""

    id = c.RULE_KV_SATURATION

    def __init__(self, usage_threshold: float = 0.9, resolve_below: float = 0.8, for_seconds: float = 60.0):
        """Thresholds: usage ratios 0–1; ``for_seconds`` the for-duration in seconds."""
        self.usage_threshold = usage_threshold
        self.resolve_below = resolve_below
        self._for = for_seconds

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def _pressure(self, ev: Evaluation) -> tuple[bool | None, dict[str, Any]]:
        s = ev.stats
        assert s is not None
        waiting = s.requests_waiting
        preempt = s.preemptions_increase
        evidence = {
            "kv_cache_usage_ratio": s.kv_cache_usage_ratio,
            "requests_running": s.requests_running,
            "requests_waiting": waiting,
            "preemptions_increase": preempt,
            "preemptions_per_second": s.preemptions_per_second,
            "window_seconds": s.window_seconds,
        }
        if waiting is None and preempt is None:
            return None, evidence
        return bool((waiting or 0) > 0 or (preempt or 0) > 0), evidence

    def fires(self, ev: Evaluation) -> Condition:
        """Usage ≥ threshold and (waiting > 0 or preemptions rose)."""
        if ev.stats is None or ev.stats.kv_cache_usage_ratio is None:
            return Condition(None, "KV-cache usage unknown")
        usage = ev.stats.kv_cache_usage_ratio
        pressure, evidence = self._pressure(ev)
        if pressure is None:
            return Condition(None, "waiting requests and preemptions unknown", evidence)
        holds = usage >= self.usage_threshold and pressure
        reason = (
            f"KV usage {usage:.1%} (threshold {self.usage_threshold:.0%}), {_count(evidence['requests_waiting'])} "
            f"waiting, {_count(evidence['preemptions_increase'])} preemptions in the last "
            f"{ev.stats.window_seconds:.0f}s"
        )
        return Condition(holds, reason, evidence)

    def clears(self, ev: Evaluation) -> Condition:
        """Usage < resolve_below, or no queue and no preemption."""
        if ev.stats is None or ev.stats.kv_cache_usage_ratio is None:
            return Condition(None, "KV-cache usage unknown")
        pressure, evidence = self._pressure(ev)
        usage = ev.stats.kv_cache_usage_ratio
        holds = usage < self.resolve_below or pressure is False
        return Condition(
            holds,
            f"KV usage {usage:.1%} (resolves below {self.resolve_below:.0%}), "
            f"{_count(evidence['requests_waiting'])} waiting, {_count(evidence['preemptions_increase'])} preemptions",
            evidence,
        )

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """The ceiling-raising turns, each with its predicted effect (best first)."""
        s = ev.stats
        if s is None:
            return []
        inputs = ev.ctx.inputs
        _, evidence = self._pressure(ev)
        evidence = {
            **evidence,
            "kv_cache_capacity_tokens": ev.kv_capacity_tokens,
            "kv_cache_capacity_source": ev.kv_capacity_source,
            "replicas_up": ev.replicas_up,
        }
        tokens_per_request = self._tokens_per_running_request(ev)
        critical = (s.preemptions_increase or 0) > 0 and (s.requests_waiting or 0) > (s.requests_waiting_first or 0)
        severity = "critical" if critical else "warning"
        confidence = round(ev.coverage() * (0.9 if ev.kv_capacity_source == "engine" else 0.75), 3)

        candidates: list[tuple[Turn, float, str, str]] = []  # turn, cost, action, why
        kv = inputs.kv_cache_dtype.lower()
        if not kv.startswith("fp8"):
            t = turn(inputs, c.DIAL_KV_CACHE_DTYPE, "fp8")
            if t:
                candidates.append(
                    (
                        t,
                        1.0,
                        "set",
                        "storing the KV cache in fp8 halves its bytes per token; "
                        "measure the accuracy delta on your own evals",
                    )
                )
        util = inputs.gpu_memory_utilization
        if util < MAX_SAFE_GPU_MEMORY_UTILIZATION - 1e-9:
            new_util = round(min(MAX_SAFE_GPU_MEMORY_UTILIZATION, util + 0.05), 2)
            t = turn(inputs, c.DIAL_GPU_MEMORY_UTILIZATION, new_util)
            if t:
                candidates.append(
                    (
                        t,
                        1.0,
                        "increase",
                        "a larger memory budget leaves more room for KV blocks; watch for OOM under activation spikes",
                    )
                )
        if inputs.quantization is None:
            q = "fp8" if ev.ctx.gpu is not None and ev.ctx.gpu.fp8_flops else "awq"
            t = turn(inputs, c.DIAL_WEIGHT_QUANTIZATION, q)
            if t:
                candidates.append(
                    (
                        t,
                        1.0 / QUANTIZATION_QUALITY_FACTOR,
                        "set",
                        f"{q} weights free memory for the cache; the quality delta must be measured on your own evals",
                    )
                )
        tp = inputs.tensor_parallel_size
        t = turn(inputs, c.DIAL_TENSOR_PARALLEL_SIZE, tp * 2)
        if t:
            candidates.append(
                (
                    t,
                    2.0,
                    "increase",
                    "sharding over twice the GPUs doubles the memory per "
                    "replica; it adds inter-GPU communication every layer",
                )
            )

        proposals = [
            self._proposal(ev, t, cost, action, why, tokens_per_request, severity, confidence, evidence)
            for t, cost, action, why in candidates
        ]
        replicas = self._replicas_proposal(ev, tokens_per_request, severity, confidence, evidence)
        if replicas is not None:
            proposals.append(replicas)
        proposals.sort(key=lambda p: -p.score)
        return proposals

    @staticmethod
    def _tokens_per_running_request(ev: Evaluation) -> float | None:
        """Mean KV tokens each running request holds: usage × pool ÷ running (per replica)."""
        s = ev.stats
        if s is None or not s.requests_running or s.kv_cache_usage_ratio is None or not ev.kv_capacity_tokens:
            return None
        per_replica_running = s.requests_running / max(ev.replicas_up, 1)
        if per_replica_running <= 0:
            return None
        return s.kv_cache_usage_ratio * ev.kv_capacity_tokens / per_replica_running

    def _proposal(
        self,
        ev: Evaluation,
        t: Turn,
        cost: float,
        action: str,
        why: str,
        tokens_per_request: float | None,
        severity: str,
        confidence: float,
        evidence: dict[str, Any],
    ) -> Proposal:
        current = getattr(t.before_inputs, FIELD_FOR_DIAL[t.dial])
        suggested = getattr(t.after_inputs, FIELD_FOR_DIAL[t.dial])
        pe: dict[str, dict[str, Any]] = {
            "kv_cache_tokens": effect(t.before.kv_cache_tokens, t.after.kv_cache_tokens),
            "max_concurrency": effect(t.before.max_concurrency, t.after.max_concurrency),
        }
        if tokens_per_request:
            pe["concurrency_ceiling"] = effect(
                t.before.kv_cache_tokens / tokens_per_request, t.after.kv_cache_tokens / tokens_per_request
            )
        if t.dial == c.DIAL_TENSOR_PARALLEL_SIZE:
            pe["gpus_per_replica"] = effect(t.before.tensor_parallel_size, t.after.tensor_parallel_size)
        gain = t.kv_gain_ratio()
        s = ev.stats
        assert s is not None
        summary = (
            f"{ev.ctx.name}: KV pool saturated — set {t.dial} {current} → {suggested} "
            f"({_fmt_tokens(t.before.kv_cache_tokens)} → {_fmt_tokens(t.after.kv_cache_tokens)} KV tokens per replica)"
        )
        ctx_txt = f" at the observed ~{tokens_per_request:,.0f} tokens per request" if tokens_per_request else ""
        description = (
            f"KV-cache usage is {s.kv_cache_usage_ratio:.1%} with {_count(s.requests_running)} running, "
            f"{_count(s.requests_waiting)} waiting and {_count(s.preemptions_increase)} preemptions over the last "
            f"{s.window_seconds:.0f}s: the pool, not compute, bounds the batch. Turning {t.dial} from "
            f"{current} to {suggested} changes the pool from {_fmt_tokens(t.before.kv_cache_tokens)} to "
            f"{_fmt_tokens(t.after.kv_cache_tokens)} tokens per replica (×{gain:.2f}); the ceiling "
            f"at max-model-len {t.before.max_model_len} goes from {t.before.max_concurrency:.2f} to "
            f"{t.after.max_concurrency:.2f} sequences"
        )
        if tokens_per_request:
            description += (
                f", and{ctx_txt} from {t.before.kv_cache_tokens / tokens_per_request:.1f} to "
                f"{t.after.kv_cache_tokens / tokens_per_request:.1f}"
            )
        description += f". Note: {why}."
        return Proposal(
            rule=self.id,
            dial=t.dial,
            action=action,
            current=current,
            suggested=suggested,
            flag=flag_for(ev.ctx.engine, t.dial, suggested),
            severity=severity,
            confidence=confidence,
            summary=summary,
            description=description,
            predicted_effect=pe,
            evidence=evidence,
            score=gain / cost,
        )

    def _replicas_proposal(
        self,
        ev: Evaluation,
        tokens_per_request: float | None,
        severity: str,
        confidence: float,
        evidence: dict[str, Any],
    ) -> Proposal | None:
        s = ev.stats
        if s is None or not s.requests_running or s.requests_waiting is None:
            return None
        current = ev.ctx.replicas
        per_replica = s.requests_running / max(ev.replicas_up, 1)
        demand = s.requests_running + s.requests_waiting
        needed = max(current + 1, math.ceil(demand / per_replica)) if per_replica > 0 else current + 1
        pe: dict[str, dict[str, Any]] = {
            "replicas": effect(current, needed),
            "kv_cache_tokens_total": effect(
                ev.ctx.capacity.kv_cache_tokens * current, ev.ctx.capacity.kv_cache_tokens * needed
            ),
            "concurrency_ceiling": effect(per_replica * current, per_replica * needed),
        }
        gain = needed / current
        return Proposal(
            rule=self.id,
            dial=c.DIAL_REPLICAS,
            action="increase",
            current=current,
            suggested=needed,
            flag=flag_for(ev.ctx.engine, c.DIAL_REPLICAS, needed),
            severity=severity,
            confidence=confidence,
            summary=f"{ev.ctx.name}: KV pool saturated — scale replicas {current} → {needed}",
            description=(
                f"{s.requests_running:.0f} requests run (~{per_replica:.0f} per replica, the pool's ceiling at "
                f"the observed lengths) and {s.requests_waiting:.0f} wait. Holding all {demand:.0f} at once "
                f"takes {needed} replicas. Each replica costs its GPUs; prefer the per-replica turns above "
                "when they suffice."
            ),
            predicted_effect=pe,
            evidence=evidence,
            score=gain / (needed / current) * 0.99,  # same gain per GPU; ranks after free turns of equal gain
        )
