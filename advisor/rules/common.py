"""Shared pieces of the rule modules: observed demand, the pool-raising dial turns, and proposals built
from a turned capacity pass. Pure.

Every "after" number here is :func:`advisor.capacity.kv.capacity_pass` re-run with one dial turned
(:mod:`advisor.rules.turns`), the same numbers ``capacity-advisor plan`` prints for that configuration.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from advisor import conventions as c
from advisor.capacity.calibration import LatencyModel
from advisor.capacity.engines import memory_budget
from advisor.capacity.fixes import POOL_BYTES_STEP
from advisor.capacity.generation import kv_cache_dtype_turn_problems
from advisor.capacity.hardware import fp8_kv_emulated, tensor_parallel_span
from advisor.capacity.kv import CapacityInputs, capacity_pass
from advisor.capacity.model_label import ModelLabelMismatch
from advisor.capacity.perf import INTERNODE_ALLREDUCE_LATENCY_SECONDS
from advisor.engines.catalog import exposes, reserves_max_length_at_admission
from advisor.errors import CapacityError
from advisor.rules.base import Evaluation, Proposal
from advisor.rules.flags import flag_for, token_pin_flag
from advisor.rules.turns import Turn, effect, token_pin_turn, turn
from advisor.telemetry import summarize

SAFE_GPU_MEMORY_UTILIZATION = 0.9
"""vLLM's default budget; raising a lower budget to it is the first step (docs "Conserving memory")."""
MAX_GPU_MEMORY_UTILIZATION = 0.95
"""Above this, activation spikes and CUDA-graph memory risk OOM; the advisor never suggests more."""
QUALITY_PENALTY = 1.25
"""Cost multiplier of a lossy turn (weight quantization): its quality delta must be measured on one's own
evals, so an equal-gain lossless turn ranks first."""
FP8_KV_PENALTY = 1.05
"""fp8 KV cache is close to lossless on most models but not free of risk: a small penalty."""
SMALL_STEP_BUDGET_TOKENS = 2048
"""The step budget (``max_num_batched_tokens``) a larger stated one is turned down to, to give its start-up profiling
activation back to the KV pool: vLLM's smallest default budget with chunked prefill (the OpenAI server's,
``vllm/engine/arg_utils.py``), and the value two operators measured against a larger one at the same throughput
(vllm-project/vllm#48322: 8,192 → 2,048, the pool 36,720 → 40,464 tokens; MiaAI-Lab/DeepSeek-v4-Flash-One-DGX-Spark#3:
8,224 → 2,048, the peak activation 5.30 → 1.39 GiB, prefill 997 → 1,013 tokens/s)."""
STEP_BUDGET_PENALTY = 1.1
"""Cost multiplier of a smaller step budget: long prompts then prefill in more steps (more decode interference)."""


def count(v: float | None) -> str:
    """A count as text: ``1,234``, or ``unknown``."""
    return "unknown" if v is None else f"{v:,.0f}"


def percent(ratio: float) -> str:
    """A ratio as a percentage that reads 0 % only at 0: ``104%``, ``12%``, ``2.6%``, ``0.26%`` (two significant
    digits below 10 %), so a small load is not printed as none."""
    if ratio == 0 or abs(ratio) >= 0.1:
        return f"{ratio:.0%}"
    return f"{ratio * 100:.2g}%"


CEILING_SHARE: Final = "share of the ceiling"
"""The over-provisioned measure's name in text: running requests per replica ÷ the replica's concurrency ceiling
(its max-num-seqs, or fewer when its KV pool holds fewer requests of the observed length), as a percentage. The
JSON keeps the key ``load_ratio`` (evidence and predicted effect) for the same ratio."""

EFFECT_LABELS: Final = {
    "max_concurrency": "sequences at max-model-len",
    "concurrency_ceiling": "sequences at the observed length",
    "load_ratio": f"{CEILING_SHARE} (running per replica ÷ ceiling)",
}
"""Text for predicted-effect keys whose names alone are ambiguous (both ``max_concurrency`` and
``concurrency_ceiling`` are concurrency ceilings; ``load_ratio`` is :data:`CEILING_SHARE`); any other key is said as
its name with spaces."""


def effect_label(key: str) -> str:
    """How a predicted-effect (or evidence) key is said in the console and on the status page
    (:data:`EFFECT_LABELS`)."""
    return EFFECT_LABELS.get(key, key.replace("_", " "))


def pool_pressure(ev: Evaluation, waiting: float | None) -> bool | None:
    """Whether the KV pool turns work away: ``waiting`` requests queue (> 0) or preemptions rose over the window
    (``ev.stats.preemptions_increase`` > 0). ``True`` when either is seen; ``False`` when nothing waits and nothing
    was preempted; ``None`` when the answer hangs on an unknown — the queue, or the preemption count of an engine
    that has a preemption counter but whose window cannot count it yet (one scrape after a restart). An engine
    that exposes no preemption counter at all (:func:`advisor.engines.catalog.exposes`: TGI, TensorRT-LLM) is
    judged on its queue alone, else it could never be read as clear.

    Example: 0 waiting, preemptions unknown on vLLM → ``None``; the same on TGI → ``False``; 3 waiting,
    preemptions unknown → ``True``.
    """
    preempt = ev.stats.preemptions_increase if ev.stats is not None else None
    if (waiting is not None and waiting > 0) or (preempt is not None and preempt > 0):
        return True
    if preempt is None and exposes(ev.ctx.engine, "preemptions_total") is False:
        preempt = 0.0
    if waiting is None or preempt is None:
        return None
    return False


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


SEQ_CAP_ENGINES: Final = frozenset({"vllm", "sglang"})
"""Engines whose ``max_num_seqs`` (``--max-num-seqs``, ``--max-running-requests``) caps the running batch per
data-parallel rank whatever the pool holds, as :func:`pool_demand_factor` reads it."""


def pool_demand_factor(ev: Evaluation) -> float | None:
    """How many times the pool would have to grow to hold every running and waiting request at once
    (``(running + waiting) ÷ running`` when the pool is full); ``math.inf`` when they are more than the sequence cap
    admits (``max_num_seqs`` × replicas up × ranks, on :data:`SEQ_CAP_ENGINES`): no pool alone runs them. ``None``
    when unknown."""
    s = ev.stats
    if s is None or not s.requests_running or s.requests_waiting is None or s.kv_cache_usage_ratio is None:
        return None
    full = max(s.kv_cache_usage_ratio, 1e-9)
    if seq_cap_exceeded(ev) is not None:
        # more requests than the sequence cap admits: no pool, however large, runs them all at once (breaker 22:
        # fp8 KV "closes the gap" at 243-256 running of max_num_seqs 256 with a queue; a second replica did)
        return math.inf
    return (s.requests_running + s.requests_waiting) / s.requests_running * full


def seq_cap_exceeded(ev: Evaluation) -> str | None:
    """Why no pool alone holds the demand — the running and waiting requests exceed what ``max_num_seqs`` admits
    over the replicas up and their ranks, on :data:`SEQ_CAP_ENGINES` — in words; ``None`` when they do not (or are
    unknown)."""
    s = ev.stats
    if s is None or s.requests_running is None or s.requests_waiting is None or ev.ctx.engine not in SEQ_CAP_ENGINES:
        return None
    demand = s.requests_running + s.requests_waiting
    cap = ev.ctx.inputs.max_num_seqs * max(ev.replicas_up, 1) * data_parallel_ranks(ev)
    if demand <= cap:
        return None
    return f"{count(demand)} running and waiting exceed the {cap:,} sequences max_num_seqs admits, whatever the pool"


MODEL_DISAGREEMENT_CONFIDENCE = 0.5
"""Confidence multiplier of a proposal whose pool effects are scaled from the engine's pool while the capacity
pass misses that pool by more than ``Evaluation.capacity_model_error_bound``: the direction of the turn still
comes from the model (after ÷ before), but a model that far off may also be wrong about the ratio."""


def engine_pool_scale(ev: Evaluation) -> float | None:
    """Engine's pool ÷ the capacity pass's pool, per replica (``ev.kv_capacity_tokens ÷
    ev.ctx.capacity.kv_cache_tokens``), when the engine reports its pool (``kv_capacity_source == "engine"``);
    ``None`` otherwise (the model's figure is then the only one).

    Example: engine 443,910 tokens, model 4,394,709 → ``0.101``.
    """
    model = ev.ctx.capacity.kv_cache_tokens
    if ev.kv_capacity_source != "engine" or not ev.kv_capacity_tokens or not model:
        return None
    return ev.kv_capacity_tokens / model


def pool_effect(ev: Evaluation, model_before: float | None, model_after: float | None) -> dict[str, float | None]:
    """The predicted effect on a quantity proportional to the KV pool (``kv_cache_tokens``, ``max_concurrency``,
    ``concurrency_ceiling``, ``kv_cache_tokens_total`` …), anchored on the engine (issue 13).

    Every pool-derived effect a rule reports is built here. When the engine reports its pool, ``before`` is the
    engine's figure (the model's figure × engine pool ÷ model pool, :func:`engine_pool_scale`) and ``after`` is
    that figure × (model after ÷ model before): the capacity pass gives the turn's ratio, the engine the level.
    The capacity pass's own numbers stay beside them as ``model_before`` / ``model_after`` (what
    ``capacity-advisor plan`` prints). Without an engine figure it is :func:`advisor.rules.turns.effect` of the
    model's numbers.

    Example: engine pool 443,910, model 4,394,709 → 8,789,418 (fp8 KV): ``{"before": 443910, "after": 887820,
    "model_before": 4394709, "model_after": 8789418}``.
    """
    k = engine_pool_scale(ev)
    if k is None or model_before is None or model_after is None:
        return effect(model_before, model_after)
    before = model_before * k
    after = before * (model_after / model_before) if model_before else model_after * k
    out = effect(before, after)
    model = effect(model_before, model_after)
    out["model_before"] = model["before"]
    out["model_after"] = model["after"]
    return out


MODEL_POOL_QUANTITIES = frozenset({"kv_cache_tokens", "kv_cache_tokens_total", "max_concurrency"})
"""Effects that are always capacity-pass figures proportional to the pool; :func:`anchored` anchors any of them a
rule (a plugin, say) built with plain :func:`advisor.rules.turns.effect`. (``concurrency_ceiling`` is not among
them: some rules derive it from observed running requests, which need no anchoring.)"""


POOL_CHANGE_TOLERANCE = 0.01
"""A turn whose capacity-pass pool changes by at most this fraction (a context cap: the profile run moves it a
little) is not a pool turn: its predicted gain does not come from the model's pool, so a model far from the engine
does not lower its confidence."""


def anchored(ev: Evaluation, p: Proposal) -> Proposal:
    """``p`` with its pool effects anchored on the engine and its confidence and description adjusted (issue 13).

    Effects in :data:`MODEL_POOL_QUANTITIES` not yet anchored are re-built with :func:`pool_effect`. When the turn
    changes the pool (``kv_cache_tokens`` model after ÷ before off 1 by more than :data:`POOL_CHANGE_TOLERANCE`: its
    gain is the capacity pass's prediction) and the capacity pass misses the engine's pool by more than
    ``ev.capacity_model_error_bound``
    (``|ev.running_model_error_ratio|``, the miss of the pass on the settings the engine reports — the figure
    ``model_drift`` prints for that comparison; computed from the two pools when there is none), confidence ×
    :data:`MODEL_DISAGREEMENT_CONFIDENCE` and the description says so in numbers (``The capacity pass predicts
    4,394,709 KV tokens per replica, the engine reports 443,910 (+890%, beyond the ±15% bound): effects scaled
    from the engine's figure; confidence lowered (×0.5).``). Without an engine figure ``p`` is returned unchanged.
    Idempotent, so it may be applied again to every rule's proposals (the lifecycle may, for plugins).
    """
    k = engine_pool_scale(ev)
    if k is None or not ev.kv_capacity_tokens:
        return p
    pe = {key: dict(v) for key, v in p.predicted_effect.items()}
    for key in MODEL_POOL_QUANTITIES & pe.keys():
        v = pe[key]
        if (
            "model_before" not in v
            and isinstance(v.get("before"), int | float)
            and isinstance(v.get("after"), int | float)
        ):
            pe[key] = pool_effect(ev, float(v["before"]), float(v["after"]))
    if not any("model_before" in v for v in pe.values()):
        return p
    kv = pe.get("kv_cache_tokens") or {}
    model_before, model_after = kv.get("model_before"), kv.get("model_after")
    if not model_before or model_after is None or abs(model_after / model_before - 1) <= POOL_CHANGE_TOLERANCE:
        # the turn leaves the pool as it is (a context cap, replicas): its effects are the engine's figure times
        # plain arithmetic, which the model's miss does not touch
        return dataclasses.replace(p, predicted_effect=pe)
    confidence, description = p.confidence, p.description
    # the miss of the pass the turn was computed from, the pass on what the engine runs with: the one figure
    # evaluate wrote (``ev.running_model_error_ratio``, which model_drift's reason prints too); an Evaluation built
    # without it (a plugin's test) gets the same quotient from the pools
    error = ev.running_model_error_ratio
    if error is None:
        error = 1 / k - 1
    if abs(error) > ev.capacity_model_error_bound and "effects scaled from the engine's figure" not in description:
        description += (
            f" The capacity pass predicts {ev.ctx.capacity.kv_cache_tokens:,} KV tokens per replica, the engine "
            f"reports {ev.kv_capacity_tokens:,.0f} ({error:+.0%}, beyond the ±{ev.capacity_model_error_bound:.0%} "
            f"bound): effects scaled from the engine's figure; confidence lowered (×{MODEL_DISAGREEMENT_CONFIDENCE:g})."
        )
        confidence = round(confidence * MODEL_DISAGREEMENT_CONFIDENCE, 3)
    return dataclasses.replace(p, predicted_effect=pe, confidence=confidence, description=description)


def turn_gpus_added(ev: Evaluation, after: CapacityInputs) -> float:
    """GPUs a per-replica turn adds to the deployment: (GPUs per replica after − before) × configured replicas
    (:func:`gpus_per_replica`, TP × PP × DP). TP 1 → 2 on 3 replicas → 3; a turn that keeps the GPUs → 0."""
    return float(max(0, gpus_per_replica(ev, after) - gpus_per_replica(ev)) * max(ev.ctx.replicas, 1))


UNIFIED_CELLS_FILL_MAX: Final = 0.9
"""The share of a llama.cpp unified cache (``--kv-unified``) that ``--parallel`` slots may fill at the longest
sequence measured: ``pool_context`` reads the slots' oversubscription as no incident while slots × longest stays
within it, and ``seq_cap`` never raises the slots past it, so neither rule's turn makes the other fire (breaker 11:
--parallel 61 proposed on 131,072 cells, then 'cap each request at 2,048' at 61). llama.cpp aborts running
generations when unified cells run out (``tools/server/server.cpp``), so the cells keep a tenth spare."""
CAP_TAIL_FACTOR = 8.0
"""How far above the observed mean request length a *preventive* context cap (``pool_context``: reject what the
pool can never hold) may sit before the observed traffic contradicts it. Request lengths are long-tailed and the
advisor sees only means (token counters ÷ completions, KV ÷ running); a cap within 8× the mean may still cut the
tail, so it stands. Far beyond that nothing observed comes near it and the cap frees nothing (an assumption, not a
measured quantile: the engines export no per-request length the advisor reads)."""


def tokens_per_finished_request(ev: Evaluation) -> float | None:
    """Mean prompt + generation tokens per completed request over the window: the longer of (prompt + generation
    tokens/s) ÷ completions/s from the engine's counters (``WindowStats``) and the mean of the engines' per-request
    length histograms (:attr:`Evaluation.window_tokens_per_request_from_histograms`: vLLM, TGI); either alone where
    the other is unknown. ``None`` when neither is known or nothing finished.

    Why the longer: each errs short where the other does not. The counters count a request's prompt when its prefill
    completes (vLLM V1 once per request, ``vllm/v1/core/sched/scheduler.py``), so long requests that finish in the
    window after a prefill before it read as their few generated tokens; vLLM's histograms observe only the
    requests that finish (``request_success``), so the long requests clients give up on under a thrash are missing
    from them (``abort_requests`` records no finished stats). The caller holds a context cap against this figure:
    read short, a cap would reject the traffic it was not shown. On a prefill/decode-disaggregated decode node the
    prompt counter stands still (the prefill ran elsewhere), so the counters' figure is a lower bound there.

    Example: 1,500 prompt + 400 generation tokens/s, 1 request/s → 1,900; with histograms averaging 30,000 → 30,000.
    """
    counted: float | None = None
    s = ev.stats
    if (
        s is not None
        and s.requests_finished_per_second
        and s.requests_finished_per_second > 0
        and s.prompt_tokens_per_second is not None
        and s.generation_tokens_per_second is not None
    ):
        length = (s.prompt_tokens_per_second + s.generation_tokens_per_second) / s.requests_finished_per_second
        counted = length if length > 0 else None
    lazy = ev.window_tokens_per_request_from_histograms
    known = [v for v in (counted, lazy() if lazy is not None else None) if v is not None]
    return max(known) if known else None


def observed_request_tokens(ev: Evaluation) -> tuple[float | None, str]:
    """The longest observed measure of request length, tokens, and how it was measured: the larger of
    :func:`tokens_per_finished_request` and :func:`tokens_per_running_request` (KV usage × pool ÷ running).

    On a hybrid model (``ev.kv_cache_hybrid``) the per-running figure is whole pages per KV group, not length
    (vLLM raises the attention page to the Mamba page's size), so only the finished requests' counters count.
    ``(None, "…unknown…")`` when neither is known.
    """
    parts: list[tuple[float, str]] = []
    finished = tokens_per_finished_request(ev)
    if finished is not None:
        parts.append((finished, f"finished requests average {finished:,.0f} tokens (prompt + generation)"))
    running = tokens_per_running_request(ev)
    if running is not None and not ev.kv_cache_hybrid:
        parts.append((running, f"running requests hold {running:,.0f} KV tokens each"))
    if not parts:
        return None, "observed request length unknown"
    return max(parts)[0], "; ".join(text for _, text in parts)


def context_cap_withheld(ev: Evaluation, cap: float, *, tail: float = 1.0) -> str | None:
    """Why a context cap at ``cap`` tokens must be withheld, or ``None``.

    The diagnosis behind a cap is that long contexts are the pool's consumer. Its falsifying measurement is the
    observed request length (:func:`observed_request_tokens`): when ``length × tail`` is below the cap, the
    requests that hold the pool are shorter than the cap and capping frees nothing. ``tail`` 1 for a cap that is
    to free the pool now (``admission_thrash``), :data:`CAP_TAIL_FACTOR` for a preventive cap (``pool_context``).
    Unknown length → ``None`` (nothing contradicts the diagnosis).

    Example: finished requests average 1,900 tokens, cap 131,072, tail 8 → ``"withheld: … 1.4% of the cap …"``.
    """
    length, how = observed_request_tokens(ev)
    if length is None or cap <= 0 or length * tail >= cap:
        return None
    margin = f" (×{tail:g} for the long tail: {length * tail:,.0f})" if tail != 1 else ""
    return (
        f"withheld: {how}, {length / cap:.1%} of the proposed cap of {cap:,.0f} tokens{margin}; the requests that "
        "hold the pool are shorter than the cap, so long contexts are not its consumer and the cap frees nothing"
    )


def context_cap_rejects_traffic(ev: Evaluation, cap: float) -> str | None:
    """Why a context cap at ``cap`` tokens must be withheld because it would reject the observed traffic, or
    ``None``.

    A cap that frees the pool from "a few long requests" (``admission_thrash``) rests on those requests being few:
    the traffic as a whole is shorter than the cap. Its falsifying measurement is the mean length of the finished
    requests (:func:`tokens_per_finished_request`, prompt + generation tokens ÷ completions): when that mean is at
    or above the cap, the typical request does not fit under it and the cap rejects the traffic instead of a tail
    (a mean at or above the cap means requests above it carry most of the tokens). On a prefill/decode decode node
    the mean is a lower bound, so the check only errs towards keeping the cap. Nothing finished in the window (the
    thrash this rule is for may finish nothing): the mean request since the engines started
    (:attr:`Evaluation.lifetime_tokens_per_finished_request`: vLLM's and TGI's per-request length histograms, SGLang's
    and TensorRT-LLM's counters); neither known → ``None``. A field state, TGI 2.4 in
    huggingface/text-generation-inference#2744, whose window finishes nothing, got a 3,072-token cap under
    6,000-token prompts before the histograms were read.

    Example: two 120,000-token prompts that keep being preempted, finished requests average 145,576 tokens, cap
    23,552 → ``"withheld: finished requests average 145,576 tokens … 6.2× the proposed cap of 23,552 …"``.
    """
    finished = tokens_per_finished_request(ev)
    since = ""
    if finished is None:
        # nothing finished in the window: the engines' lifetime figures still say how long the traffic is
        finished = ev.lifetime_tokens_per_finished_request
        since = " since the engines started"
    if finished is None or cap <= 0 or finished < cap:
        return None
    return (
        f"withheld: finished requests{since} average {finished:,.0f} tokens (prompt + generation), "
        f"{finished / cap:.1f}× the proposed cap of {cap:,.0f} tokens; the cap would reject the typical request, not "
        "a few long ones"
    )


@dataclass(frozen=True, slots=True)
class Candidate:
    """A turn with its GPU cost multiplier, the engine action, and one sentence of caveat."""

    turn: Turn
    cost: float
    action: str
    why: str
    flag: str | None = None
    """The exact change, where the dial's flag table cannot say it (:func:`advisor.rules.flags.token_pin_flag`)."""


BUDGET_FIELDS: Final = frozenset({"gpu_memory_utilization", "kv_cache_memory_bytes", "num_gpu_blocks_override"})
"""The reported settings that size the pool together: when any is unusable (``Evaluation.config_unmodelled``) the
budget's effect is unknown, and no budget turn is proposed."""


def pool_turns(ev: Evaluation, target_gpu_memory_utilization: float | None = None) -> list[Candidate]:
    """The turns that enlarge a replica's KV pool, each re-run through the capacity pass:

    ==========================  =============================================  ==========================
    dial                        turn                                           cost
    ==========================  =============================================  ==========================
    kv_cache_dtype              auto → fp8 (half the bytes per token)          ×1.05 (accuracy risk)
    gpu_memory_utilization      → 0.9 (the engine default), else → 0.95       ×1
    kv_cache_memory_bytes       pinned → the pool max(util, 0.9) would give    ×1
    max_num_batched_tokens      vLLM, stated above 2,048 → 2,048 (when the     ×1.1 (more prefill steps)
                                forward at it, not the sampler, sets the
                                profile peak)
    weight_quantization         none → fp8 (fp8-capable GPU) or awq            ×1.25 (quality delta)
    tensor_parallel_size        ×2                                             ×2 GPUs
    ==========================  =============================================  ==========================

    A dial whose engine-reported value cannot be used (``ev.config_unmodelled``) has no known current value: its
    turn is left out (the KV dtype; the budget when any of :data:`BUDGET_FIELDS` is unusable).

    vLLM's ``--kv-cache-memory-bytes`` replaces the utilization budget (the utilization turn then changes nothing and
    drops out): its turn raises the pinned bytes to the pool the operator's utilization, at least the engine default
    0.9 (or ``target_gpu_memory_utilization``), would give without the pin, whole MiB (:func:`unpinned_pool_bytes`),
    when that is larger.
    """
    inputs = ev.ctx.inputs
    out: list[Candidate] = []
    unknown = ev.config_unmodelled  # dials whose current value the engine reports unusably: no turn of them
    budget_unknown = bool(unknown.keys() & BUDGET_FIELDS)
    if (
        "kv_cache_dtype" not in unknown
        and not inputs.kv_cache_dtype.lower().startswith("fp8")
        and not kv_cache_dtype_turn_problems("fp8", inputs.compute_capability, inputs.engine_version, inputs.engine)
        and not fp8_kv_emulated(ev.ctx.gpu)
    ):
        t = turn(inputs, c.DIAL_KV_CACHE_DTYPE, "fp8")
        if t and t.kv_gain_ratio() > 1:
            out.append(
                Candidate(t, FP8_KV_PENALTY, "set", "fp8 KV halves the bytes per token; check accuracy on your evals")
            )
    util = memory_budget(inputs)  # TensorRT-LLM: its free-memory fraction
    new_util = target_gpu_memory_utilization
    if new_util is None:
        new_util = (
            SAFE_GPU_MEMORY_UTILIZATION if util < SAFE_GPU_MEMORY_UTILIZATION - 1e-9 else MAX_GPU_MEMORY_UTILIZATION
        )
    if util < new_util - 1e-9 and not budget_unknown:
        t = turn(inputs, c.DIAL_GPU_MEMORY_UTILIZATION, round(new_util, 2))
        if t and t.kv_gain_ratio() > 1:
            out.append(
                Candidate(t, 1.0, "increase", "a larger budget leaves more room for KV blocks; watch for OOM at peaks")
            )
    pinned = inputs.kv_cache_memory_bytes
    if pinned is not None and not budget_unknown:
        budget = max(util, target_gpu_memory_utilization or SAFE_GPU_MEMORY_UTILIZATION)
        room = unpinned_pool_bytes(inputs, budget)
        if room is None and budget > util:  # memory others hold: the operator's own budget may still start
            budget = util
            room = unpinned_pool_bytes(inputs, budget)
        if room is not None and room > pinned:
            t = turn(inputs, c.DIAL_KV_CACHE_MEMORY_BYTES, room)
            if t and t.kv_gain_ratio() > 1:
                out.append(
                    Candidate(
                        t,
                        1.0,
                        "increase",
                        f"--kv-cache-memory-bytes pins the pool at {_shown(c.DIAL_KV_CACHE_MEMORY_BYTES, pinned)} "
                        f"per GPU and overrides --gpu-memory-utilization; "
                        f"{_shown(c.DIAL_KV_CACHE_MEMORY_BYTES, room)} is what a {budget:.2f} "
                        "budget would give. Raise it only if nothing else shares the GPU (that is what the setting "
                        "is for); watch for OOM at peaks",
                    )
                )
    if not budget_unknown:
        out += _token_pin_candidates(ev)
    budget_tokens = inputs.max_num_batched_tokens
    if (
        ev.ctx.engine == "vllm"
        and budget_tokens is not None
        and budget_tokens > SMALL_STEP_BUDGET_TOKENS
        and "max_num_batched_tokens" not in unknown
    ):
        t = turn(inputs, c.DIAL_MAX_NUM_BATCHED_TOKENS, SMALL_STEP_BUDGET_TOKENS)
        if t and t.kv_gain_ratio() > 1:
            out.append(
                Candidate(
                    t,
                    STEP_BUDGET_PENALTY,
                    "decrease",
                    f"vLLM profiles its start-up forward pass at max_num_batched_tokens ({budget_tokens:,}) and "
                    "charges that activation to the pool; a smaller step budget gives it back "
                    "(vllm-project/vllm#48322: 8,192 → 2,048 returned 10 % of the pool at the same throughput), at the "
                    "cost of long prompts prefilling in more steps",
                )
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
    tp = inputs.tensor_parallel_size * 2
    t = turn(inputs, c.DIAL_TENSOR_PARALLEL_SIZE, tp)
    if t and t.kv_gain_ratio() > 1:
        why = "twice the GPUs per replica; inter-GPU communication every layer"
        span = tensor_parallel_span(ev.ctx.gpu, tp)
        if span is not None:
            why += (
                f". {span}: every layer's all-reduces then cross the network (NCCL, about "
                f"{INTERNODE_ALLREDUCE_LATENCY_SECONDS * 1e6:.0f} µs each against a few µs in a node), and vLLM "
                "and TensorRT-LLM recommend tensor parallelism within a node and pipeline parallelism across nodes"
            )
        out.append(Candidate(t, 2.0, "increase", why))
    return out


def _token_pin_candidates(ev: Evaluation) -> list[Candidate]:
    """TensorRT-LLM's pool pinned in tokens (``kv_cache_config.max_tokens``; the Triton backend's
    ``max_tokens_in_paged_kv_cache``) below what its memory fraction gives: lift the pin (:func:`token_pin_turn`).
    While the pin binds, no other pool turn adds a token (the pool is the smaller of the two), so this is the turn
    (triton-inference-server/tensorrtllm_backend#453: "It does become much faster after deleting this field")."""
    t = token_pin_turn(ev.ctx.inputs)
    if t is None or not t.kv_gain_ratio() > 1:
        return []
    pin = ev.ctx.inputs.engine_settings.max_tokens
    tokens = int(t.after.kv_cache_tokens)
    flag = token_pin_flag(ev.ctx.engine, tokens)
    return [
        Candidate(
            t,
            1.0,
            "increase",
            f"the pool is pinned at {pin:,} tokens while the memory fraction would give ~{tokens:,}; the engine uses "
            "the smaller. Lifting the pin spends only the memory the fraction already budgets; keep it only if "
            "something else must use that memory",
            flag=flag,
        )
    ]


def _shown(dial: str, value: object) -> str:
    """A dial value as a sentence shows it: a byte budget in GiB with its exact bytes, others as they are."""
    if dial == c.DIAL_KV_CACHE_MEMORY_BYTES and isinstance(value, int):
        return f"{value / 2**30:.{1 if value >= 2**30 else 3}f} GiB ({value:,} bytes)"
    return str(value)


def unpinned_pool_bytes(inputs: CapacityInputs, gpu_memory_utilization: float) -> int | None:
    """The KV pool per GPU, bytes (a whole number of MiB, ``advisor.capacity.fixes.POOL_BYTES_STEP``), the capacity
    pass gives ``inputs`` without ``--kv-cache-memory-bytes`` at ``gpu_memory_utilization`` (0–1); None when that
    deployment does not start (the weights and overheads exceed the budget) or the pool is pinned in blocks
    (``num_gpu_blocks_override``)."""
    if inputs.num_gpu_blocks_override is not None:
        return None
    try:
        free = capacity_pass(
            dataclasses.replace(inputs, kv_cache_memory_bytes=None, gpu_memory_utilization=gpu_memory_utilization)
        )
    except CapacityError:
        return None
    pool = free.kv_pool_bytes_per_gpu // POOL_BYTES_STEP * POOL_BYTES_STEP
    return pool if pool > 0 else None


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
    withheld: str | None = None,
    alone: str | None = None,
) -> Proposal:
    """A proposal from a capacity-pass turn.

    ``needed_factor``: how many times the pool must grow to close the gap (``None``: unknown, judged
    sufficient when it grows at all). ``headline`` starts the summary; ``situation`` the description.
    ``withheld``: the reason, in numbers, the rule's evidence contradicts the turn (``Proposal.withheld``).
    ``alone``: why no pool closes the gap by itself, said when ``needed_factor`` is ``math.inf`` (else the sequence cap
    when it binds, :func:`seq_cap_exceeded`, or that the demand is unknown).
    Pool effects are anchored on the engine's pool when it reports one (:func:`pool_effect`, :func:`anchored`);
    ``gpus_added`` is :func:`turn_gpus_added` (TP × 2 on N replicas adds N × TP × PP × DP).
    """
    t = cand.turn
    current, suggested = t.values()
    per_request = tokens_per_running_request(ev)
    kv = pool_effect(ev, t.before.kv_cache_tokens, t.after.kv_cache_tokens)
    seqs = pool_effect(ev, t.before.max_concurrency, t.after.max_concurrency)
    pe: dict[str, dict[str, Any]] = {"kv_cache_tokens": kv, "max_concurrency": seqs}
    if per_request:
        pe["concurrency_ceiling"] = pool_effect(
            ev, t.before.kv_cache_tokens / per_request, t.after.kv_cache_tokens / per_request
        )
    if t.dial == c.DIAL_TENSOR_PARALLEL_SIZE:
        pe["gpus_per_replica"] = effect(gpus_per_replica(ev, t.before_inputs), gpus_per_replica(ev, t.after_inputs))
    gain = t.kv_gain_ratio()
    sufficient = needed_factor is None or gain >= needed_factor
    kb, ka = kv["before"] or 0.0, kv["after"] or 0.0
    source = "engine-reported, scaled by the capacity pass" if "model_before" in kv else "capacity pass"
    shown_now, shown_next = _shown(t.dial, current), _shown(t.dial, suggested)
    summary = (
        f"{ev.ctx.name}: {headline} — set {t.dial} {shown_now} → {shown_next} "
        f"({kb:,.0f} → {ka:,.0f} KV tokens per replica)"
    )
    description = (
        f"{situation} Turning {t.dial} from {shown_now} to {shown_next} changes the pool from "
        f"{kb:,.0f} to {ka:,.0f} tokens per replica (×{gain:.2f}, {source}); the ceiling at "
        f"max-model-len {t.before.max_model_len:,} goes from {seqs['before'] or 0:.2f} to "
        f"{seqs['after'] or 0:.2f} sequences"
    )
    if per_request:
        ceiling = pe["concurrency_ceiling"]
        description += (
            f", and at the observed ~{per_request:,.0f} tokens per request from "
            f"{ceiling['before'] or 0:.1f} to {ceiling['after'] or 0:.1f}"
        )
    description += "."
    if needed_factor is not None and not sufficient:
        if math.isfinite(needed_factor):
            description += f" Alone it is not enough: holding the current demand needs ×{needed_factor:.2f}."
            evidence = {**evidence, c.EVIDENCE_POOL_FACTOR_NEEDED: round(needed_factor, 2)}
        elif (why := alone or seq_cap_exceeded(ev)) is not None:  # no pool alone closes it, for that reason
            description += f" Alone it is not enough: {why}."
        else:  # unknown demand (no running count): the turn does not claim to close the gap
            description += " Whether that holds the current demand is unknown: the engine reports no running requests."
    description += f" Note: {cand.why}."
    return anchored(
        ev,
        Proposal(
            rule=rule,
            dial=t.dial,
            action=cand.action,
            current=current,
            suggested=suggested,
            flag=cand.flag or flag_for(ev.ctx.engine, t.dial, suggested, ev.ctx.inputs.engine_version),
            severity=severity,
            confidence=confidence,
            summary=summary,
            description=description,
            predicted_effect=pe,
            evidence=evidence,
            score=gain / cand.cost,
            sufficient=sufficient,
            cost=cand.cost,
            withheld=withheld,
            gpus_added=turn_gpus_added(ev, t.after_inputs),
        ),
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
    withheld: str | None = None,
) -> Proposal:
    """Scale replicas from the configured count to ``needed`` (cost: the replica ratio).

    ``withheld``: why the count must not be suggested (``ReplicaSizing.withheld``: too short a history), in
    numbers (``Proposal.withheld``).

    ``kv_cache_tokens_total`` is anchored on the engine's pool when it reports one (:func:`pool_effect`);
    ``gpus_added`` = the replicas added × GPUs per replica (:func:`gpus_per_replica`), 0 for a scale-down.
    """
    current = ev.ctx.replicas
    pe: dict[str, dict[str, Any]] = {
        "replicas": effect(current, needed),
        "kv_cache_tokens_total": pool_effect(
            ev, ev.ctx.capacity.kv_cache_tokens * current, ev.ctx.capacity.kv_cache_tokens * needed
        ),
    }
    if extra_effects:
        pe.update(extra_effects)
    proposal = Proposal(
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
        gpus_added=float(max(0, needed - current) * gpus_per_replica(ev)),
        withheld=withheld,
    )
    return anchored(ev, proposal)


DUPLICATE_SERIES_CONFIDENCE = 0.5
"""Confidence factor when a newest page repeated a series (``Evaluation.duplicate_series``): the page contradicts
itself (two exporters writing one registry, a proxy concatenating pages), and the first sample, which the advisor
keeps as Prometheus does, is only as likely as the other to be the engine's."""


LOAD_READINGS: Final = (
    c.RULE_ADMISSION_THRASH,
    c.RULE_QUEUE_GROWTH,
    c.RULE_KV_SATURATION,
    c.RULE_GOODPUT_BELOW_TARGET,
    c.RULE_SPECULATIVE_DECODING,
    c.RULE_KV_BUDGET,
    c.RULE_OVER_PROVISIONED,
    c.RULE_HOST_OR_BUY,
    c.RULE_SEQ_CAP,
)
"""The rules that read an engine's gauges as load. While an engine is hung or admits nothing, its gauges describe
that, not the load: queue growth (arrivals piling up behind it), goodput (nothing finishes) and the
over-provisioning reading (nothing runs) would each advise a capacity turn that cannot help, so ``stalled`` and
``admission_wedged`` supersede them. ``pool_context`` is configuration truth and stays."""


def restart_flag(what: str) -> str:
    """The restart pseudo-dial's "flag": what to restart and what to save first, for ``what`` ("behind chat-8b",
    "serving <target> rank 5")."""
    return (
        f"restart the engine process {what} (e.g. kubectl delete pod <pod>, or systemctl restart <unit>); first save "
        "a stack dump of its processes (py-spy dump --pid <pid>) and its log"
    )


def confidence(ev: Evaluation, base: float) -> float:
    """Confidence 0–1 from the amount and freshness of the evidence, as the Kubernetes VPA recommender
    scales its bounds by history length: ``base`` × the fraction of the window's expected scrapes that
    arrived × (1 if the engine reports its own pool, else 0.85 since the pool is then the model's guess)
    × the fraction of data-parallel ranks that could be read (``ev.rank_coverage``: a rank left out for an
    impossible value leaves the decision to the others, with less certainty). A page that repeated a series
    lowers every proposal further, whichever rule made it (:func:`page_quality`)."""
    pool = 1.0 if ev.kv_capacity_source == "engine" else 0.85
    return round(max(0.0, min(1.0, base * ev.coverage() * pool * ev.rank_coverage)), 3)


def page_quality(ev: Evaluation, proposals: Sequence[Proposal]) -> list[Proposal]:
    """``proposals`` with confidence × :data:`DUPLICATE_SERIES_CONFIDENCE` and the reason in their evidence when the
    answering targets' newest pages repeated a series (``ev.duplicate_series`` > 0); unchanged otherwise. The
    lifecycle applies it to every rule's proposals (plugins' too); idempotent (a proposal whose evidence already
    has ``duplicate_series`` is left as it is).

    Example: confidence 0.9, 55 repeated samples → 0.45 and evidence ``duplicate_series: 55``,
    ``confidence_lowered: "the scraped page repeated 55 sample(s) of series already on it (…): ×0.5"``.
    """
    if not ev.duplicate_series:
        return list(proposals)
    why = (
        f"the scraped page repeated {ev.duplicate_series} sample(s) of series already on it (the first of each "
        f"kept, as Prometheus keeps it; the deployment's missing list names the families): the page contradicts "
        f"itself, confidence ×{DUPLICATE_SERIES_CONFIDENCE:g}"
    )
    out: list[Proposal] = []
    for p in proposals:
        if "duplicate_series" in p.evidence:
            out.append(p)
            continue
        evidence = {**p.evidence, "duplicate_series": ev.duplicate_series, "confidence_lowered": why}
        confidence = round(p.confidence * DUPLICATE_SERIES_CONFIDENCE, 3)
        out.append(dataclasses.replace(p, confidence=confidence, evidence=evidence))
    return out


LATENCY_MODEL_CONFIDENCE = 0.5
"""Confidence multiplier of every proposal of a deployment whose latency model missed its last window's TPOT or TTFT
by more than :data:`advisor.capacity.calibration.MODEL_ERROR_BOUND` (before calibrating on it): replica counts,
TPOT and TTFT effects all come from that model, and even the turns that do not (a pool turn) are ranked against
them. Halved, as a pool model beyond its bound halves a pool turn's (:data:`MODEL_DISAGREEMENT_CONFIDENCE`)."""


def seconds(value: float) -> str:
    """A duration for a reason's text: whole seconds from 10 s, one decimal below (``"285s"``, ``"0.4s"``), never
    ``"0s"`` for a window that covered a fraction of one (breaker 18: ``once --interval 0.4``)."""
    return f"{value:.0f}s" if value >= 10 else f"{value:.1f}s"


def latency_model(ev: Evaluation) -> LatencyModel:
    """The latency model every rule computes TPOT, TTFT, prefill, throughput and replica effects with: the
    deployment's online calibration (``ev.latency``, :mod:`advisor.online_calibration`), else the prior for its
    engine (:meth:`advisor.capacity.calibration.LatencyModel.prior`: the published calibration, or the factors its
    context pins, :attr:`~advisor.rules.base.DeploymentContext.perf_assumptions`)."""
    if ev.latency is not None:
        return ev.latency.model
    return LatencyModel.prior(ev.ctx.engine, ev.ctx.perf_assumptions)


@dataclass(frozen=True, slots=True)
class TpotKnee:
    """Where one engine's decode batch stands against the TPOT target, in the latency model (:func:`tpot_knee`).

    Attributes:
        batch: sequences decoding together per engine now (running ÷ replicas up ÷ data-parallel ranks).
        context: tokens per running request (KV usage × pool ÷ running; half of max-model-len when unknown).
        knee: the largest batch ≤ ``batch`` whose modelled TPOT meets the target; ``None`` when even 1 misses.
        tpot_seconds: the modelled TPOT at ``batch`` (seconds per output token).
        model: the latency model (:func:`latency_model`).
        ranks: data-parallel ranks per replica.
    """

    batch: float
    context: float
    knee: int | None
    tpot_seconds: float
    model: LatencyModel
    ranks: int

    @property
    def past(self) -> bool:
        """The batch is past the knee: every extra sequence slows the others beyond the target."""
        return self.knee is not None and self.knee < self.batch


def knee_batch(
    model: LatencyModel, inputs: CapacityInputs, gpu: Any, context: float, target: float, upto: int
) -> int | None:
    """The largest batch ≤ ``upto`` whose (calibrated, ``model``) roofline TPOT meets ``target`` seconds (None if even
    batch 1 misses). Bisection: TPOT grows with the batch in the roofline (``advisor.capacity.perf``)."""
    best = None
    lo, hi = 1, max(upto, 1)
    while lo <= hi:
        mid = (lo + hi) // 2
        if model.tpot_seconds(inputs, gpu, mid, context) <= target:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def generated_tokens_per_request(ev: Evaluation) -> float | None:
    """Mean generated tokens of a request over the window: the finished requests' own mean where the engines
    histogram it (:attr:`Evaluation.window_generation_tokens_per_request`), else generated tokens ÷ completions (the
    counters; they hold the running requests' tokens too, so while the batch grows they read long: breaker 25, 538
    tokens a request for 300). ``None`` when neither is known. At least 1."""
    lazy = ev.window_generation_tokens_per_request
    measured = lazy() if lazy is not None else None
    if measured is not None and measured >= 1:
        return measured
    s = ev.stats
    done = s.requests_finished_per_second if s is not None else None
    if s is None or not done or done <= 0 or s.generation_tokens_per_second is None:
        return None
    return max(1.0, s.generation_tokens_per_second / done)


def tpot_knee(ev: Evaluation) -> TpotKnee | None:
    """The decode batch against the TPOT target (:class:`TpotKnee`), or ``None`` when no GPU, no running requests
    or the model cannot price the batch. The batch and ``max_num_seqs`` are per data-parallel rank."""
    s = ev.stats
    gpu = ev.ctx.gpu
    if s is None or gpu is None or not s.requests_running:
        return None
    inputs = ev.ctx.inputs
    ranks = data_parallel_ranks(ev)
    batch = s.requests_running / max(ev.replicas_up, 1) / ranks
    context = tokens_per_running_request(ev) or float(inputs.max_model_len or 2048) / 2
    model = latency_model(ev)
    try:
        now = model.tpot_seconds(inputs, gpu, batch, context)
        knee = knee_batch(model, inputs, gpu, context, ev.ctx.slo.tpot_seconds, max(1, math.ceil(batch)))
    except (CapacityError, ValueError):
        return None
    return TpotKnee(batch, context, knee, now, model, ranks)


ENGINE_FIGURES_ONLY_DIALS: Final = frozenset({c.DIAL_ADMISSION_POLICY, c.DIAL_ENGINE_PROCESS, c.DIAL_LOAD_BALANCER})
"""Dials whose proposals predict from the engine's reported numbers alone (``admission_thrash``'s admission policy:
preemptions → 0; ``engine_stalled``'s restart): a model mismatch does not touch them. Every other proposal's effect
or suggested value comes from the capacity pass or the latency model sized from the config's model."""


def other_model(ev: Evaluation) -> str | None:
    """Why a condition computed from the config's model cannot be judged: the engine definitely serves another
    (``ev.model_mismatch``), named with the config field to set; ``None`` otherwise. Rules whose fire side is the
    capacity pass's own figures (the weights' share, the model's token-metered offers) are unknown then, not
    judged on the wrong model (breaker, 2026-12-03: weights_crowd's and host_or_buy's status named the config's
    model while the engine served another)."""
    m = ev.model_mismatch
    if m is None or not m.definite:
        return None
    if m.beside is not None:
        return f"{_beside(m)} (see model_drift)"
    return (
        f"the engine serves {m.label!r}, not the config's {m.configured!r} (set deployments[].model; see model_drift)"
    )


def _beside(m: ModelLabelMismatch) -> str:
    """Some targets serve another model beside replicas of the configured one (:attr:`ModelLabelMismatch.beside`),
    in a clause naming the config field to set."""
    some, answering = m.beside or (0, 0)
    return (
        f"{some} of {answering} targets serve {m.label!r}, not the config's {m.configured!r} (keep only its replicas "
        "in deployments[].targets)"
    )


POOL_SPREAD_MAX: Final = 1.5
"""Largest ratio of the largest to the smallest KV pool among one deployment's replicas that is still one set of
settings (a driver's or a profile's few percent, the CUDA-graph memory of a restarted replica): beyond it one
replica runs with other flags, and a pool turn sized on their mean fits neither."""


def pools_disagree(ev: Evaluation) -> str | None:
    """Why turns sized on the deployment's pool are withheld: its replicas report pools more than
    :data:`POOL_SPREAD_MAX` apart (``ev.pool_spread``), in words; ``None`` otherwise (breaker 28: one replica's
    144-token pool beside another's 449,920 got "gpu_memory_utilization 0.9 → 0.95 (225,040 → 241,262 KV tokens
    per replica)", the mean of the two, as a fleet-wide turn)."""
    spread = ev.pool_spread
    if spread is None:
        return None
    small_at, small, large_at, large = spread
    if small > 0 and large / small <= POOL_SPREAD_MAX:
        return None
    return (
        f"the replicas' KV pools differ: {small:,.0f} tokens at {small_at}, {large:,.0f} at {large_at}: one runs "
        "with other settings (flags, GPU, or another process holding its memory), and a turn sized on their mean fits "
        "neither — start it as its siblings are"
    )


def model_quality(ev: Evaluation, proposals: Sequence[Proposal]) -> list[Proposal]:
    """``proposals`` with every prediction built from the config's model withheld when the engine serves another
    (``ev.model_mismatch``): each proposal but ``model_drift``'s and those of :data:`ENGINE_FIGURES_ONLY_DIALS` gets
    ``withheld`` naming both models and its predicted effect emptied, so no recommendation carries a number
    computed from the wrong model. The lifecycle applies it to every rule's proposals (plugins' too); idempotent.
    Unchanged without a mismatch.

    Example: the engine serves meta-llama/Llama-3.1-8B-Instruct, the config says Qwen/Qwen2.5-14B-Instruct →
    ``kv_budget``'s gpu_memory_utilization turn withheld: ``"withheld: the engine serves
    'meta-llama/Llama-3.1-8B-Instruct', the config says 'Qwen/Qwen2.5-14B-Instruct' …"``.
    """
    m = ev.model_mismatch
    if m is None or not m.definite:
        apart = pools_disagree(ev)
        # replicas that disagree withhold what no other reason withholds; a wrong model overrides every reason
        return list(proposals) if apart is None else _withheld_all(proposals, f"withheld: {apart}", keep_own=True)
    why = (
        f"withheld: {_beside(m)}: the capacity pass sums their engines with the config's model's, so this prediction "
        "would be wrong (see model_drift)"
        if m.beside is not None
        else f"withheld: the engine serves {m.label!r}, the config says {m.configured!r}: the capacity pass sizes the "
        "config's model, so this prediction would be the wrong model's (set deployments[].model; see model_drift)"
    )
    return _withheld_all(proposals, why, keep_own=False)


def _withheld_all(proposals: Sequence[Proposal], why: str, *, keep_own: bool) -> list[Proposal]:
    """``proposals`` with ``why`` as the withheld reason and no predicted effect, but ``model_drift``'s, those of
    :data:`ENGINE_FIGURES_ONLY_DIALS`, those already withheld for ``why``, and (``keep_own``) those withheld for a
    reason of their own."""
    return [
        p
        if p.rule == c.RULE_MODEL_DRIFT
        or p.dial in ENGINE_FIGURES_ONLY_DIALS
        or p.withheld == why
        or (keep_own and p.withheld is not None)
        else dataclasses.replace(p, withheld=why, predicted_effect={})
        for p in proposals
    ]


UNEVEN_MIN_RUNNING: Final = 8.0
"""Running requests (window mean) the busiest replica must carry before an idle one beside it reads as uneven
routing: below it, a few requests land where they land."""

UNEVEN_IDLE_SHARE: Final = 0.1
"""A replica running at most this share of the busiest one's requests (window means) is idle beside it."""


def uneven_load(ev: Evaluation) -> str | None:
    """Why the replicas' loads are the router's, not the fleet's, or ``None``: one answering replica ran at least
    :data:`UNEVEN_MIN_RUNNING` requests on the window's mean while another ran at most :data:`UNEVEN_IDLE_SHARE` of
    that. A balancer that routes evenly (round robin, least requests, the engines' own DP) keeps replicas of one
    deployment within a few requests of each other; one busy beside one idle is a router that sends it nothing
    (sgl-project/sglang#15473: the gRPC cache-aware policy saw every load as zero and always picked the first
    worker; vllm-project/vllm#48808's skewed data-parallel balancer). Then the fleet's average describes no replica,
    and a turn sized on it (more replicas, fewer, more TP, lighter weights, a larger pool) answers the wrong
    question: the idle replica is capacity the router does not use.

    Example: ``(("http://a/metrics", 256.0), ("http://b/metrics", 0.0))`` → ``"the load is uneven across the
    replicas: http://a/metrics runs 256 requests while http://b/metrics runs 0 …"``.
    """
    found = uneven_engines(ev)
    if found is None:
        return None
    (busy, busiest), (idle, idlest) = found
    return (
        f"{UNEVEN_WITHHELD.removeprefix('withheld: ')}: {busy} runs {count(busiest)} requests while {idle} runs "
        f"{count(idlest)}; the router, not the fleet's size, sets each one's load (check the load balancer's policy "
        "and its view of the replicas' load), so no turn sized on the fleet's average is proposed"
    )


def uneven_engines(ev: Evaluation) -> tuple[tuple[str, float], tuple[str, float]] | None:
    """((busiest engine, its running), (idlest engine, its running)) when :func:`uneven_load` holds, else ``None``.
    An engine that restarted in the window is idle for that reason, not the router's: no reading then."""
    if ev.stats is not None and ev.stats.counter_resets:
        return None
    # the whole window, then its older half: after the router is fixed the window's rates still carry the time it
    # was not (breaker 9: queue_growth paged "replicas 2 → 4" 16 s after the fix, on a window mostly of the fault)
    for by_engine in (ev.requests_running_by_target, ev.requests_running_by_target_early):
        loads = [(e, v) for e, v in by_engine if math.isfinite(v)]
        if len(loads) < 2:
            continue
        busy = max(loads, key=lambda e: e[1])
        idle = min(loads, key=lambda e: e[1])
        if busy[1] >= UNEVEN_MIN_RUNNING and idle[1] <= UNEVEN_IDLE_SHARE * busy[1]:
            return busy, idle
    return None


UNEVEN_WITHHELD: Final = "withheld: the load is uneven across the replicas"
"""How :func:`load_balance`'s reason begins (:func:`uneven_withheld` finds it)."""


def uneven_withheld(p: Proposal) -> bool:
    """Whether ``p`` was withheld by :func:`load_balance` (the replicas' loads are the router's)."""
    return p.withheld is not None and p.withheld.startswith(UNEVEN_WITHHELD)


def load_balance(ev: Evaluation, proposals: Sequence[Proposal]) -> list[Proposal]:
    """``proposals`` with every turn but those of :data:`ENGINE_FIGURES_ONLY_DIALS` withheld while the replicas'
    loads are uneven (:func:`uneven_load`), its reason in ``withheld``; unchanged otherwise. The lifecycle applies it
    to every rule's proposals (plugins' too); idempotent."""
    why = uneven_load(ev)
    if why is None:
        return list(proposals)
    why = f"withheld: {why}"
    return [
        p
        if p.dial in ENGINE_FIGURES_ONLY_DIALS or p.withheld is not None
        else dataclasses.replace(p, withheld=why, predicted_effect={})
        for p in proposals
    ]


def latency_quality(ev: Evaluation, proposals: Sequence[Proposal]) -> list[Proposal]:
    """``proposals`` with the latency model named in their evidence (``latency_model``: ``calibrated`` or ``prior``,
    its factors and last errors: :meth:`advisor.capacity.calibration.LatencyFit.evidence`; keys already there are
    kept) and, when the model's last one-step-ahead error is beyond its bound
    (:meth:`~advisor.capacity.calibration.LatencyFit.beyond_bound`), confidence × :data:`LATENCY_MODEL_CONFIDENCE`
    with the reason under ``latency_model_confidence``. The lifecycle applies it to every rule's proposals;
    idempotent (a proposal whose evidence has ``latency_model`` is left as it is). Without a fit
    (``ev.latency`` ``None``): unchanged.

    Example: TPOT error −0.31, confidence 0.9 → 0.45 and evidence ``latency_model: "calibrated"``,
    ``model_tpot_error_ratio: -0.31``, ``latency_model_confidence: "the latency model missed … ×0.5"``.
    """
    fit = ev.latency
    if fit is None:
        return list(proposals)
    why = fit.beyond_bound()
    extra: dict[str, Any] = fit.evidence()
    if why is not None:
        extra["latency_model_confidence"] = f"{why}: confidence ×{LATENCY_MODEL_CONFIDENCE:g}"
    out: list[Proposal] = []
    for p in proposals:
        if "latency_model" in p.evidence:
            out.append(p)
            continue
        evidence = {**extra, **p.evidence}
        confidence = round(p.confidence * LATENCY_MODEL_CONFIDENCE, 3) if why is not None else p.confidence
        out.append(dataclasses.replace(p, confidence=confidence, evidence=evidence))
    return out


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


def reserves_whole_requests(ev: Evaluation) -> bool:
    """The deployment's engine admits a request only when the pool can hold its whole length
    (:func:`advisor.engines.catalog.reserves_max_length_at_admission`: TensorRT-LLM's default ``GUARANTEED_NO_EVICT``),
    and it has not shown another policy: requests paused in the window (``Evaluation.requests_paused_max`` > 0) say
    ``MAX_UTILIZATION`` runs, which admits by the blocks free and evicts when they run out, so the blocks written are
    what holds the pool."""
    return reserves_max_length_at_admission(ev.ctx.engine) and not (ev.requests_paused_max or 0) > 0


def pool_held_by_no_request(ev: Evaluation, threshold: float = OTHER_POOL_SATURATED) -> str | None:
    """Why a KV-pool turn must not be proposed when the pool is full and nothing runs, or ``None``.

    KV usage at or above ``threshold`` while no request runs — at the newest scrape and on the window's mean
    (below one) — is not demand: the engines free a request's blocks when it finishes or is preempted (vLLM V1
    ``KVCacheManager.free``; SGLang's ``token_usage`` leaves evictable radix-cache tokens out), so the blocks are
    held by something that is not running: a KV connector's handoffs waiting for the decode side (vLLM's
    NixlConnector delays freeing a prefill's blocks until they are read or ``VLLM_NIXL_ABORT_REQUEST_TIMEOUT``
    expires: vllm-project/vllm#29906, where cancelled prefills pinned the pool for 5 minutes), requests waiting
    for remote KV, or leaked blocks. A larger pool fills the same way, and no cap on running requests frees them.
    Unknown running counts, or usage below ``threshold``, give ``None``.
    """
    s = ev.stats
    if s is None or s.kv_cache_usage_ratio is None or s.kv_cache_usage_ratio < threshold:
        return None
    if s.requests_running is None or s.requests_running > 0:
        return None
    mean = ev.requests_running_mean
    if mean is not None and (not math.isfinite(mean) or mean >= 1):
        return None
    return (
        f"withheld: KV usage {s.kv_cache_usage_ratio:.0%} with no request running: the blocks are held by no running "
        "request (a KV connector's handoffs waiting for the decode side, requests waiting for remote KV, pinned or "
        "leaked blocks); a larger pool would fill the same way, and no cap on the running requests frees them"
    )


def kv_withheld(ev: Evaluation, threshold: float = OTHER_POOL_SATURATED) -> str | None:
    """Why a KV-pool turn must not be proposed, or ``None``: another pool (a state pool, the slots) is the
    saturated one while the KV pool is not (KV usage below ``threshold``, or unknown). Then the queue and
    preemptions are that pool's, and growing the KV pool (fp8 KV, a larger budget, a shorter context) does
    not admit one more request. Or the KV pool is full while no request runs (:func:`pool_held_by_no_request`).

    Example: ``pool_usage {"mamba": 0.98}``, KV usage 0.31 → ``"the mamba pool is saturated (98%) while the
    KV pool is not (31%): …"``.
    """
    hot = saturated_pools(ev, threshold)
    if not hot:
        return pool_held_by_no_request(ev, threshold)
    kv = ev.stats.kv_cache_usage_ratio if ev.stats is not None else None
    if kv is not None and kv >= threshold:
        return pool_held_by_no_request(ev, threshold)
    pool, usage = hot[0]
    # unknown KV usage is said as unknown, not as a pool that is not saturated (breaker 13)
    kv_text = "the KV pool's usage is unknown" if kv is None else f"the KV pool is not (KV usage {kv:.0%})"
    return (
        f"withheld: the {pool} pool is saturated ({usage:.0%}) while {kv_text}; "
        f"{POOL_MEANING.get(pool, 'a pool other than the KV pool')}. A KV-pool turn would not admit one more request"
    )


def whole(x: float) -> int:
    """Round up to a whole count (replicas, sequences)."""
    return max(1, math.ceil(x - 1e-9))


STEP_SHARE_MAX = 0.5
"""Modeled TPOT ÷ observed mean TPOT at or below which, with the modeled TPOT within the target, the turns that make
the GPU's step faster (quantized weights, more TP) are withheld: the step explains at most half of what
requests see, so the rest is elsewhere, and halving the step recovers at most a quarter of the observed time (the
roofline's own error on a real GPU is ±25–35 %)."""

FAR_STEP_SHARE_MAX = 0.1
"""Modeled TPOT ÷ observed mean TPOT at or below which (the modeled TPOT within the target) even the turns that only
grow the KV pool are withheld: requests see ten times the step, beyond any error the latency model showed on
published measurements (held-out p90 ±124 %, docs/capacity.md), so the time is spent outside the GPU whatever the
batch (vllm#3567: guided JSON at 1.7 s a token where the step is ~33 ms, ~70 tokens/s at 10 running as at 100), and
a larger pool only admits more sequences into the same ceiling."""


def step_outside_gpu(ev: Evaluation, step: float, target: float, share_max: float = STEP_SHARE_MAX) -> str | None:
    """Why a turn that makes the GPU's decode step faster is withheld, or ``None``: the modelled TPOT at the observed
    batch (``step``, seconds) already meets the ``target`` while the observed mean TPOT is at least
    ``share_max``⁻¹ times it (default :data:`STEP_SHARE_MAX`). Then the time goes where the model does not put it —
    outside the step (the tokenizer or detokenizer, the CPU's scheduling, the network to the client:
    sgl-project/sglang#23393, 180 ms a token at the client where the scheduler made one every 39 ms) or into kernels
    far slower than the roofline (bitsandbytes' LLM.int8 on TGI 0.6: 110 ms a token where the same weights in fp16
    gave 18 ms, huggingface/text-generation-inference#309) — and a step the roofline makes faster does not recover
    it. Unknown TPOT → ``None``."""
    tpot = summarize(ev.stats.tpot) if ev.stats is not None else None
    observed = tpot.mean if tpot is not None else None
    if observed is None or observed <= 0 or step > target or step > share_max * observed:
        return None
    return (
        f"withheld: the modeled step gives ~{step * 1000:.0f} ms a token at this batch, within the "
        f"{target * 1000:.0f} ms target, while requests see {observed * 1000:.0f} ms on average "
        f"({step / observed:.0%} of it): the time goes outside the GPU's step (the tokenizer or detokenizer, CPU "
        "scheduling, the network) or into kernels far slower than the roofline, which a faster step cannot recover"
    )
