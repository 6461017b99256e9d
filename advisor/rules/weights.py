"""Rule ``weights_crowd``: the weights take most of the GPU and leave a small pool.

Fires when weights per GPU take at least ``min_weight_share`` of the memory budget (GPU memory ×
gpu-memory-utilization) and the pool holds fewer than ``max_ceiling`` sequences at max-model-len, while
requests run. Proposes quantized weights (fp8 on GPUs with fp8 tensor cores, else AWQ int4) — reminding
that the quality delta must be measured on one's own evals — or twice the tensor-parallel degree, each
predicted by the capacity pass.

Checked against its evidence (issue 13): both are KV-pool turns, so they are withheld while a pool other than the
KV pool (a state pool, the slots) is the saturated one and the KV pool is not
(:func:`advisor.rules.common.kv_withheld`), and while the KV pool is plainly not the constraint: its usage stayed
below :data:`KV_POOL_BUSY` over the window with nothing preempted (a prefill worker whose pool sits at 18 %), or,
however full, nothing waited for it and nothing was preempted (:func:`kv_idle`). A larger KV pool admits no one
then.
"""

from __future__ import annotations

from advisor import conventions as c
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import (
    confidence,
    count,
    engine_pool_scale,
    kv_withheld,
    other_model,
    pool_pressure,
    pool_turns,
    turn_proposal,
)

_DIALS = (c.DIAL_WEIGHT_QUANTIZATION, c.DIAL_TENSOR_PARALLEL_SIZE)

KV_POOL_BUSY = 0.8
"""KV usage (0–1, the window's highest) below which the KV pool is not what limits the deployment: the
``kv_saturation`` rule's default ``resolve_below``, where the advisor already calls the pool not saturated."""


def kv_idle(ev: Evaluation) -> str | None:
    """Why a KV-pool turn is contradicted by a pool that is not the constraint, or ``None``: KV usage (the window's
    highest, else the newest) below :data:`KV_POOL_BUSY` with no preemption in the window; or, however full, the
    pool turned no one away — nothing waits for it and nothing was preempted over the window
    (:func:`advisor.rules.common.pool_pressure` ``False``: sgl-project/sglang#2746, two runaway generations of
    ~153,000 tokens each held a DeepSeek-V3 pool at 100 % with nothing queued, and TP 16 → 32 was proposed for a
    benchmark whose requests need 2,048 tokens). Unknown usage and pressure → ``None``."""
    s = ev.stats
    if s is None:
        return None
    usage = s.kv_cache_usage_ratio_max if s.kv_cache_usage_ratio_max is not None else s.kv_cache_usage_ratio
    if usage is not None and usage < KV_POOL_BUSY and (s.preemptions_increase or 0) <= 0:
        return (
            f"withheld: the KV pool is not the constraint: KV usage at most {usage:.0%} over the last "
            f"{s.covered_seconds:.0f}s (below {KV_POOL_BUSY:.0%}) and nothing preempted; a larger pool admits no one "
            "now"
        )
    waiting = ev.queues.get("waiting_capacity", s.requests_waiting)
    if pool_pressure(ev, waiting) is False:
        used = "unknown" if usage is None else f"{usage:.0%}"
        return (
            f"withheld: the KV pool turns no one away: nothing waits for it and nothing was preempted over the last "
            f"{s.covered_seconds:.0f}s (KV usage at most {used}, held by {count(s.requests_running)} running); a "
            "larger pool admits no one now"
        )
    return None


class WeightsCrowdRule:
    """Weights crowd out the cache → quantize weights or raise TP."""

    id = c.RULE_WEIGHTS_CROWD
    supersedes: tuple[str, ...] = ()

    def __init__(self, min_weight_share: float = 0.6, max_ceiling: float = 8, for_seconds: float = 300.0):
        """``min_weight_share``: weights ÷ budget; ``max_ceiling``: sequences at max-model-len."""
        self.min_share = min_weight_share
        self.max_ceiling = max_ceiling
        self._for = for_seconds

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def _share(self, ev: Evaluation) -> float:
        inputs = ev.ctx.inputs
        budget = inputs.gpu_memory_bytes * inputs.gpu_memory_utilization
        return ev.ctx.capacity.weights_bytes_per_gpu / budget

    def fires(self, ev: Evaluation) -> Condition:
        """Weights ≥ share of the budget, ceiling below ``max_ceiling``, requests running."""
        s = ev.stats
        if s is None or s.requests_running is None:
            return Condition(None, "running requests unknown")
        other = other_model(ev)
        if other is not None:
            return Condition(None, other)
        share = self._share(ev)
        ceiling = _ceiling(ev)
        holds = share >= self.min_share and ceiling < self.max_ceiling and s.requests_running > 0
        return Condition(
            holds,
            f"weights take {share:.0%} of the budget; the pool holds {ceiling:.2f} max-length sequences",
            {"weights_share_of_budget": round(share, 4), "max_concurrency": ceiling},
        )

    def clears(self, ev: Evaluation) -> Condition:
        """The configuration changed so that the fire side no longer holds."""
        cond = self.fires(ev)
        return Condition(None if cond.holds is None else not cond.holds, cond.reason, cond.evidence)

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """Quantized weights or TP × 2."""
        share = self._share(ev)
        w = ev.ctx.capacity.weights_bytes_per_gpu / 2**30
        situation = (
            f"The weights take {w:.1f} GiB per GPU, {share:.0%} of the budget, leaving a pool of "
            f"{_pool_tokens(ev):,.0f} tokens ({_ceiling(ev):.2f} sequences at "
            f"max-model-len {ev.ctx.capacity.max_model_len:,})."
        )
        other_pool = kv_withheld(ev) or kv_idle(ev)
        return [
            turn_proposal(
                self.id,
                ev,
                cand,
                needed_factor=None,
                severity="warning",
                confidence=confidence(ev, 0.7),
                evidence={"weights_share_of_budget": round(share, 4), "weights_gib_per_gpu": round(w, 2)},
                headline="weights crowd out the KV cache",
                situation=situation,
                withheld=other_pool,
            )
            for cand in pool_turns(ev)
            if cand.turn.dial in _DIALS
        ]


def _pool_tokens(ev: Evaluation) -> float:
    """The pool per replica in tokens: the engine's when it reports it, else the capacity pass's."""
    k = engine_pool_scale(ev)
    return ev.ctx.capacity.kv_cache_tokens * k if k is not None else float(ev.ctx.capacity.kv_cache_tokens)


def _ceiling(ev: Evaluation) -> float:
    """Max-length sequences the pool holds, on the engine's pool when it reports one (the figure ``pool_context``
    states; walkthrough: one ``once`` said 23.26 there and 19.69 here for one pool)."""
    k = engine_pool_scale(ev)
    return ev.ctx.capacity.max_concurrency * k if k is not None else ev.ctx.capacity.max_concurrency
