"""Shared pieces of the rule modules: observed demand, the pool-raising dial turns, and proposals built
from a turned capacity pass. Pure.

Every "after" number here is :func:`advisor.capacity.kv.capacity_pass` re-run with one dial turned
(:mod:`advisor.rules.turns`), the same numbers ``capacity-advisor plan`` prints for that configuration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from advisor import conventions as c
from advisor.capacity.kv import CapacityInputs
from advisor.rules.base import Evaluation, Proposal
from advisor.rules.flags import flag_for
from advisor.rules.turns import FIELD_FOR_DIAL, Turn, effect, turn

SAFE_GPU_MEMORY_UTILIZATION = 0.9
"""vLLM's default budget; raising a lower budget to it is the first step (docs "Conserving memory")."""
MAX_GPU_MEMORY_UTILIZATION = 0.95
"""Above this, activation spikes and CUDA-graph memory risk OOM; the advisor never suggests more."""
QUALITY_PENALTY = 1.25
"""Cost multiplier of a lossy turn (weight quantization): its quality delta must be measured on one's own
evals, so an equal-gain lossless turn ranks first."""
FP8_KV_PENALTY = 1.05
"""fp8 KV cache is close to lossless on most models but not free of risk: a small penalty."""


def count(v: float | None) -> str:
    """A count as text: ``1,234``, or ``unknown``."""
    return "unknown" if v is None else f"{v:,.0f}"


def data_parallel_ranks(ev: Evaluation) -> int:
    """Data-parallel ranks in one replica: the configured ``data_parallel_size``, or the ranks the engine
    reports (``Evaluation.kv_rank_capacity_tokens``) when it reports more.

    Per-rank dials (``max_num_seqs``, ``max_num_batched_tokens``: vLLM and SGLang apply them to each DP engine,
    ``vllm/config/scheduler.py``) are compared with per-rank quantities: a replica-wide count ÷ this, or the dial
    × this against a replica-wide count.
    """
    return max(1, ev.ctx.inputs.data_parallel_size, len(ev.kv_rank_capacity_tokens))


def gpus_per_replica(ev: Evaluation, inputs: CapacityInputs | None = None) -> int:
    """GPUs one replica occupies: tensor-parallel × pipeline-parallel × data-parallel ranks.

    ``inputs`` (default: the deployment's) gives TP and PP, so a turned pass can be priced; the DP ranks are
    :func:`data_parallel_ranks` (configured, or reported when more). Each DP rank is a whole TP × PP engine
    (``vllm/config/parallel.py``: ``world_size_across_dp = pipeline × tensor × data``).

    Example: TP 1, PP 1, ``data_parallel_size: 2`` → ``2``; the same with TP 2 → ``4``.
    """
    i = ev.ctx.inputs if inputs is None else inputs
    return i.tensor_parallel_size * i.pipeline_parallel_size * data_parallel_ranks(ev)


def rank_concurrency(ev: Evaluation) -> float:
    """Max-length sequences one data-parallel rank's pool holds, from the capacity pass (whose
    ``max_concurrency`` is summed over ranks when a max-length request fits one rank:
    :func:`advisor.capacity.kv.across_ranks`)."""
    cap = ev.ctx.capacity
    dp = max(1, cap.data_parallel_size)
    return cap.max_concurrency / dp if cap.max_concurrency >= 1 else cap.max_concurrency


def tokens_per_running_request(ev: Evaluation) -> float | None:
    """Mean KV tokens each running request holds, per replica: usage × pool ÷ running."""
    s = ev.stats
    if s is None or not s.requests_running or s.kv_cache_usage_ratio is None or not ev.kv_capacity_tokens:
        return None
    per_replica = s.requests_running / max(ev.replicas_up, 1)
    if per_replica <= 0:
        return None
    return s.kv_cache_usage_ratio * ev.kv_capacity_tokens / per_replica


def pool_demand_factor(ev: Evaluation) -> float | None:
    """How many times the pool would have to grow to hold every running and waiting request at once
    (``(running + waiting) ÷ running`` when the pool is full). ``None`` when unknown."""
    s = ev.stats
    if s is None or not s.requests_running or s.requests_waiting is None or s.kv_cache_usage_ratio is None:
        return None
    full = max(s.kv_cache_usage_ratio, 1e-9)
    return (s.requests_running + s.requests_waiting) / s.requests_running * full


@dataclass(frozen=True, slots=True)
class Candidate:
    """A turn with its GPU cost multiplier, the engine action, and one sentence of caveat."""

    turn: Turn
    cost: float
    action: str
    why: str


def pool_turns(ev: Evaluation, target_gpu_memory_utilization: float | None = None) -> list[Candidate]:
    """The turns that enlarge a replica's KV pool, each re-run through the capacity pass:

    ==========================  =============================================  ==========================
    dial                        turn                                           cost
    ==========================  =============================================  ==========================
    kv_cache_dtype              auto → fp8 (half the bytes per token)          ×1.05 (accuracy risk)
    gpu_memory_utilization      → 0.9 (the engine default), else → 0.95       ×1
    weight_quantization         none → fp8 (fp8-capable GPU) or awq            ×1.25 (quality delta)
    tensor_parallel_size        ×2                                             ×2 GPUs
    ==========================  =============================================  ==========================
    """
    inputs = ev.ctx.inputs
    out: list[Candidate] = []
    if not inputs.kv_cache_dtype.lower().startswith("fp8"):
        t = turn(inputs, c.DIAL_KV_CACHE_DTYPE, "fp8")
        if t and t.kv_gain_ratio() > 1:
            out.append(
                Candidate(t, FP8_KV_PENALTY, "set", "fp8 KV halves the bytes per token; check accuracy on your evals")
            )
    util = inputs.gpu_memory_utilization
    new_util = target_gpu_memory_utilization
    if new_util is None:
        new_util = (
            SAFE_GPU_MEMORY_UTILIZATION if util < SAFE_GPU_MEMORY_UTILIZATION - 1e-9 else MAX_GPU_MEMORY_UTILIZATION
        )
    if util < new_util - 1e-9:
        t = turn(inputs, c.DIAL_GPU_MEMORY_UTILIZATION, round(new_util, 2))
        if t and t.kv_gain_ratio() > 1:
            out.append(
                Candidate(t, 1.0, "increase", "a larger budget leaves more room for KV blocks; watch for OOM at peaks")
            )
    if inputs.quantization is None:
        q = "fp8" if ev.ctx.gpu is not None and ev.ctx.gpu.fp8_flops else "awq"
        t = turn(inputs, c.DIAL_WEIGHT_QUANTIZATION, q)
        if t and t.kv_gain_ratio() > 1:
            out.append(
                Candidate(
                    t,
                    QUALITY_PENALTY,
                    "set",
                    f"{q} weights free memory for the cache; the quality delta must be measured on your own evals",
                )
            )
    t = turn(inputs, c.DIAL_TENSOR_PARALLEL_SIZE, inputs.tensor_parallel_size * 2)
    if t and t.kv_gain_ratio() > 1:
        out.append(Candidate(t, 2.0, "increase", "twice the GPUs per replica; inter-GPU communication every layer"))
    return out


def turn_proposal(
    rule: str,
    ev: Evaluation,
    cand: Candidate,
    *,
    needed_factor: float | None,
    severity: str,
    confidence: float,
    evidence: dict[str, Any],
    headline: str,
    situation: str,
) -> Proposal:
    """A proposal from a capacity-pass turn.

    ``needed_factor``: how many times the pool must grow to close the gap (``None``: unknown, judged
    sufficient when it grows at all). ``headline`` starts the summary; ``situation`` the description.
    """
    t = cand.turn
    field = FIELD_FOR_DIAL[t.dial]
    current = getattr(t.before_inputs, field)
    suggested = getattr(t.after_inputs, field)
    per_request = tokens_per_running_request(ev)
    pe: dict[str, dict[str, Any]] = {
        "kv_cache_tokens": effect(t.before.kv_cache_tokens, t.after.kv_cache_tokens),
        "max_concurrency": effect(t.before.max_concurrency, t.after.max_concurrency),
    }
    if per_request:
        pe["concurrency_ceiling"] = effect(
            t.before.kv_cache_tokens / per_request, t.after.kv_cache_tokens / per_request
        )
    if t.dial == c.DIAL_TENSOR_PARALLEL_SIZE:
        pe["gpus_per_replica"] = effect(gpus_per_replica(ev, t.before_inputs), gpus_per_replica(ev, t.after_inputs))
    gain = t.kv_gain_ratio()
    sufficient = needed_factor is None or gain >= needed_factor
    summary = (
        f"{ev.ctx.name}: {headline} — set {t.dial} {current} → {suggested} "
        f"({t.before.kv_cache_tokens:,} → {t.after.kv_cache_tokens:,} KV tokens per replica)"
    )
    description = (
        f"{situation} Turning {t.dial} from {current} to {suggested} changes the pool from "
        f"{t.before.kv_cache_tokens:,} to {t.after.kv_cache_tokens:,} tokens per replica (×{gain:.2f}); the ceiling at "
        f"max-model-len {t.before.max_model_len:,} goes from {t.before.max_concurrency:.2f} to "
        f"{t.after.max_concurrency:.2f} sequences"
    )
    if per_request:
        description += (
            f", and at the observed ~{per_request:,.0f} tokens per request from "
            f"{t.before.kv_cache_tokens / per_request:.1f} to {t.after.kv_cache_tokens / per_request:.1f}"
        )
    description += "."
    if needed_factor is not None and not sufficient:
        description += f" Alone it is not enough: holding the current demand needs ×{needed_factor:.2f}."
    description += f" Note: {cand.why}."
    return Proposal(
        rule=rule,
        dial=t.dial,
        action=cand.action,
        current=current,
        suggested=suggested,
        flag=flag_for(ev.ctx.engine, t.dial, suggested),
        severity=severity,
        confidence=confidence,
        summary=summary,
        description=description,
        predicted_effect=pe,
        evidence=evidence,
        score=gain / cand.cost,
        sufficient=sufficient,
        cost=cand.cost,
    )


def replicas_proposal(
    rule: str,
    ev: Evaluation,
    needed: int,
    *,
    severity: str,
    confidence: float,
    evidence: dict[str, Any],
    summary: str,
    description: str,
    extra_effects: dict[str, dict[str, Any]] | None = None,
) -> Proposal:
    """Scale replicas from the configured count to ``needed`` (cost: the replica ratio)."""
    current = ev.ctx.replicas
    pe: dict[str, dict[str, Any]] = {
        "replicas": effect(current, needed),
        "kv_cache_tokens_total": effect(
            ev.ctx.capacity.kv_cache_tokens * current, ev.ctx.capacity.kv_cache_tokens * needed
        ),
    }
    if extra_effects:
        pe.update(extra_effects)
    return Proposal(
        rule=rule,
        dial=c.DIAL_REPLICAS,
        action="increase" if needed > current else "decrease",
        current=current,
        suggested=needed,
        flag=flag_for(ev.ctx.engine, c.DIAL_REPLICAS, needed),
        severity=severity,
        confidence=confidence,
        summary=summary,
        description=description,
        predicted_effect=pe,
        evidence=evidence,
        score=1.0,
        sufficient=True,
        cost=max(needed / max(current, 1), 1.0),
    )


def confidence(ev: Evaluation, base: float) -> float:
    """Confidence 0–1 from the amount and freshness of the evidence, as the Kubernetes VPA recommender
    scales its bounds by history length: ``base`` × the fraction of the window's expected scrapes that
    arrived × (1 if the engine reports its own pool, else 0.85 since the pool is then the model's guess)
    × the fraction of data-parallel ranks that could be read (``ev.rank_coverage``: a rank left out for an
    impossible value leaves the decision to the others, with less certainty)."""
    pool = 1.0 if ev.kv_capacity_source == "engine" else 0.85
    return round(max(0.0, min(1.0, base * ev.coverage() * pool * ev.rank_coverage)), 3)


OTHER_POOL_SATURATED = 0.9
"""A pool other than the KV pool at or above this usage (0–1) is saturated (the KV-saturation default)."""

POOL_MEANING = {
    "swa": "the sliding-window KV pool (hybrid SWA model): a sliding-window share, not the full-attention pool",
    "mamba": "the Mamba/linear-attention state pool: one state per running request, sized by its own flag "
    "(SGLang --max-mamba-cache-size / --mamba-full-memory-ratio), not by KV tokens",
    "slots": "the request slots (llama.cpp --parallel): every slot busy, so requests wait whatever the KV cache holds",
}
"""What each pool's saturation means, for the reasons the rules give."""


def saturated_pools(ev: Evaluation, threshold: float = OTHER_POOL_SATURATED) -> list[tuple[str, float]]:
    """Pools other than the KV pool at or above ``threshold``, highest first: ``[("mamba", 0.98)]``."""
    out = [(p, u) for p, u in ev.pool_usage.items() if u is not None and u >= threshold]
    return sorted(out, key=lambda pu: -pu[1])


def kv_withheld(ev: Evaluation, threshold: float = OTHER_POOL_SATURATED) -> str | None:
    """Why a KV-pool turn must not be proposed, or ``None``: another pool (a state pool, the slots) is the
    saturated one while the KV pool is not (KV usage below ``threshold``, or unknown). Then the queue and
    preemptions are that pool's, and growing the KV pool (fp8 KV, a larger budget, a shorter context) does
    not admit one more request.

    Example: ``pool_usage {"mamba": 0.98}``, KV usage 0.31 → ``"the mamba pool is saturated (98%) while the
    KV pool is not (31%): …"``.
    """
    hot = saturated_pools(ev, threshold)
    if not hot:
        return None
    kv = ev.stats.kv_cache_usage_ratio if ev.stats is not None else None
    if kv is not None and kv >= threshold:
        return None
    pool, usage = hot[0]
    kv_text = "unknown" if kv is None else f"{kv:.0%}"
    return (
        f"withheld: the {pool} pool is saturated ({usage:.0%}) while the KV pool is not (KV usage {kv_text}); "
        f"{POOL_MEANING.get(pool, 'a pool other than the KV pool')}. A KV-pool turn would not admit one more request"
    )


def whole(x: float) -> int:
    """Round up to a whole count (replicas, sequences)."""
    return max(1, math.ceil(x - 1e-9))
