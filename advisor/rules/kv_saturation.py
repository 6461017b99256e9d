"""Rule ``kv_saturation``: the KV pool is full and requests queue or get preempted.

Fires when KV-cache usage is at or above ``usage_threshold`` and requests are waiting or preemptions
rose in the window. (vLLM preempts running sequences by recompute when no free block is left —
``vllm/v1/core/sched/scheduler.py`` ``_preempt_request`` — so preemptions with a full pool mean the
concurrency ceiling, not compute, bounds the batch.) Clears when usage falls below ``resolve_below``, or
when nothing waits and nothing is preempted over the window. A preemption count the window cannot give yet (one
scrape after a restart) is unknown, not zero: the rule then cannot tell, and an open incident stays open
(:func:`advisor.rules.common.pool_pressure`).

Proposes the turns that raise the ceiling (:func:`advisor.rules.common.pool_turns`), each predicted by the
capacity pass with the dial turned, and the replica count of :func:`advisor.rules.replicas.size_replicas` (the
arrival rate against the per-replica capacity at the SLO — never enough to hold the momentary backlog at once);
ranked so that a turn that holds the whole demand comes first, cheapest first. When the engine is allowed
more sequences than its pool holds at the observed request lengths, it also proposes capping
max-num-seqs there ("near the knee"), which stops the preemption thrash without raising the ceiling.
It never proposes *raising* max-num-seqs: with a full pool, more sequences only preempt more. Where the time goes
outside the GPU's step — the modelled TPOT at the batch meets the target and is at most half of what requests see
(:func:`advisor.rules.common.step_outside_gpu`: a guided-decoding path, a detokenizer) — the turns that speed the step
(more TP, lighter weights) are withheld, a faster step buys nothing; at a tenth or less
(:data:`~advisor.rules.common.FAR_STEP_SHARE_MAX`, beyond the model's error) every pool turn is: a larger pool admits
more sequences into the same ceiling.

On an engine that reserves a request's whole length at admission (TensorRT-LLM's default ``GUARANTEED_NO_EVICT``:
:func:`advisor.engines.catalog.reserves_max_length_at_admission`), the blocks written understate the blocks held:
there the pool also counts as full when its free blocks hold less than one running request's share of the written
ones — usage above ``r ÷ (r + 1)`` with ``r`` requests running per replica (:func:`admission_full`) — since a
request waiting to be admitted needs at least as much as one that runs (tensorrtllm_backend#453: 5 running, 35 of
40 blocks written, 71 waiting).

Only the KV pool's own pressure counts: where vLLM splits the queue by reason
(``num_requests_waiting_by_reason``), only requests waiting for ``capacity`` count as waiting, not those
deferred for a LoRA budget or a KV transfer; and when a different pool is the saturated one (a state pool,
the slots: :func:`advisor.rules.common.kv_withheld`), the rule does not fire and says why.
"""

from __future__ import annotations

import math
from typing import Any, Final

from advisor import conventions as c
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import (
    FAR_STEP_SHARE_MAX,
    confidence,
    count,
    data_parallel_ranks,
    kv_withheld,
    percent,
    pool_demand_factor,
    pool_pressure,
    pool_turns,
    replicas_proposal,
    reserves_whole_requests,
    step_outside_gpu,
    tpot_knee,
    turn_proposal,
)
from advisor.rules.flags import flag_for
from advisor.rules.replicas import MIN_ARRIVAL_SPAN_SECONDS, size_replicas
from advisor.rules.turns import effect, turn

STEP_DIALS: Final = frozenset({c.DIAL_TENSOR_PARALLEL_SIZE, c.DIAL_WEIGHT_QUANTIZATION})
"""Pool turns that also speed each decode step (fewer weight bytes per GPU): withheld where the time goes outside the
GPU's step (:func:`advisor.rules.common.step_outside_gpu`)."""
ADMITS_ONLY_DIALS: Final = frozenset(
    {c.DIAL_GPU_MEMORY_UTILIZATION, c.DIAL_KV_CACHE_MEMORY_BYTES, c.DIAL_KV_CACHE_DTYPE}
)
"""Pool turns that only admit more sequences (more blocks, no more compute): withheld while the decode batch is
already past the TPOT knee (:func:`past_the_tpot_knee`). A larger TP or lighter weights also speed each step, so
they stand."""


def past_the_tpot_knee(ev: Evaluation) -> str | None:
    """Why a turn that only admits more sequences must be withheld: the requests miss the TPOT target (observed:
    ``ev.goodput.tpot_ratio`` below the SLO's target ratio) and the latency model puts the decode batch past the
    knee of TPOT against batch (:func:`advisor.rules.common.tpot_knee`), so more sequences slow every one of them
    further; ``None`` otherwise. Both, so that TPOT inflated by preemption stalls (recompute waits, which a larger
    pool cures) under a batch the model says decodes in time does not withhold the pool turns.

    Field state, SGLang (sgl-project/sglang#938): 1,010 running at 0.72 s a token, 93 % of the pool used with
    12,279 queued; the knee cap (max_num_seqs → 543) was right, and fp8 KV and a larger memory fraction rode along.
    """
    s = ev.stats
    ratio = ev.goodput.tpot_ratio
    target = ev.ctx.slo.target_ratio
    if s is None or ratio is None or ratio >= target:
        return None
    at = tpot_knee(ev)
    if at is None or not at.past:
        return None
    return (
        f"withheld: only {ratio:.0%} of requests meet TPOT ≤ {ev.ctx.slo.tpot_seconds}s at a batch of "
        f"{at.batch:.0f}, past the knee of TPOT against batch ({at.knee} in the {at.model.label} roofline, "
        f"~{at.tpot_seconds * 1000:.0f} ms a token now): a larger pool admits more sequences into a batch that "
        "already decodes too slowly"
    )


def admission_full(ev: Evaluation) -> bool:
    """The pool cannot admit one more request on an engine that reserves a request's whole length at admission.
    Requests run, a sequence slot is free, and either

    * the engine held requests back for capacity at every scrape of the window (``Evaluation.waiting_capacity_min``
      ≥ 1: the Triton backend's ``active − scheduled``, requests its capacity scheduler refused), or
    * the free blocks hold less than one running request's share of the written ones (usage ``u > r ÷ (r + 1)``
      with ``r`` running per replica): a waiting request needs at least what a running one holds.

    ``False`` on other engines (they admit by the blocks a prompt needs, which usage shows) and when the engine
    paused requests (:func:`advisor.rules.common.reserves_whole_requests`), with every slot taken
    (the batch cap binds, not the pool), or when running or usage is unknown. ``False`` too when the smallest
    replica's pool holds one more max-model-len request beside the busiest replica's running ones, each reserved at
    max-model-len (``pool ≥ (r + 1) × max-model-len``, ``r`` the most one replica ran at one of the window's scrapes,
    or the mean per replica now if more): no reservation exceeds max-model-len (the config's, taken as the engine's
    ``max_seq_len``), so requests held back then wait for something else than blocks (round 57,
    triton-inference-server/tensorrtllm_backend#189: 16 active, one scheduled, 18 of 1,700 blocks of 64 used at
    max-model-len 4,096, where fp8 KV was proposed at 1 % usage). Not with data-parallel ranks (one rank's pool is
    not the replica's).

    Example: 5 running on one replica, 87.5 % written → 0.875 > 5/6: full; 1 running, 42.5 % written, 7 held back
    for capacity at both scrapes, a cap of 8, a pool of 1.5 max-length requests → full; the same with nothing held
    back, or a pool of 26 max-length requests → not.
    """
    s = ev.stats
    if s is None or not reserves_whole_requests(ev):
        return False
    usage, running = s.kv_cache_usage_ratio, s.requests_running
    if usage is None or running is None or running <= 0:
        return False
    per_replica = running / max(ev.replicas_up, 1)
    cap = ev.ctx.inputs.max_num_seqs
    if cap is not None and per_replica >= cap:
        return False
    pool = ev.kv_capacity_tokens_smallest or ev.kv_capacity_tokens
    longest = ev.ctx.inputs.max_model_len
    # the busiest replica at its peak, not the mean over replicas (an idle replica beside a full one hid its queue:
    # breaker 16) nor its mean over the window (a replica that filled during the window: breaker 17)
    peaks = [v for _, v in ev.requests_running_by_target if math.isfinite(v)]
    if ev.requests_running_busiest is not None and math.isfinite(ev.requests_running_busiest):
        peaks.append(ev.requests_running_busiest)
    busiest = max([per_replica, *peaks])
    if pool and longest and not ev.kv_rank_capacity_tokens and pool >= (busiest + 1) * longest:
        return False  # every running request reserved whole, one more still fits: not the blocks
    held_back = ev.waiting_capacity_min is not None and ev.waiting_capacity_min >= 1
    return held_back or usage > per_replica / (per_replica + 1)


class KVSaturationRule:
    """KV pool saturation with queueing or preemption → raise the concurrency ceiling."""

    id = c.RULE_KV_SATURATION
    problem = c.PROBLEM_SATURATION
    supersedes: tuple[str, ...] = ()

    def __init__(
        self,
        usage_threshold: float = 0.9,
        resolve_below: float = 0.8,
        for_seconds: float = 60.0,
        *,
        drain_seconds: float | None = None,
        min_history_seconds: float = MIN_ARRIVAL_SPAN_SECONDS,
    ):
        """Thresholds: usage ratios 0–1; ``for_seconds`` the for-duration in seconds; ``drain_seconds`` the
        replica count's drain term (``rules.replicas.drain_seconds``, :func:`advisor.rules.replicas.size_replicas`)."""
        self.usage_threshold = usage_threshold
        self.resolve_below = resolve_below
        self._for = for_seconds
        self.drain_seconds = drain_seconds
        self.min_history_seconds = min_history_seconds  # rules.replicas.min_history: shortest history sized

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def _pressure(self, ev: Evaluation) -> tuple[bool | None, dict[str, Any]]:
        s = ev.stats
        assert s is not None
        waiting = s.requests_waiting
        if "waiting_capacity" in ev.queues:
            waiting = ev.queues["waiting_capacity"]
        evidence = {
            "kv_cache_usage_ratio": s.kv_cache_usage_ratio,
            "requests_running": s.requests_running,
            "requests_waiting": waiting,
            "preemptions_increase": s.preemptions_increase,
            "preemptions_per_second": s.preemptions_per_second,
            "window_seconds": s.window_seconds,
        }
        return pool_pressure(ev, waiting), evidence

    def fires(self, ev: Evaluation) -> Condition:
        """Usage ≥ threshold and (waiting > 0 or preemptions rose), unless another pool is the saturated one.
        ``None`` (cannot tell) when usage is at the threshold and the pressure is unknown
        (:func:`advisor.rules.common.pool_pressure`)."""
        withheld = kv_withheld(ev, self.usage_threshold)
        if withheld:
            return Condition(False, withheld, {"pool_usage": dict(ev.pool_usage)})
        if ev.stats is None or ev.stats.kv_cache_usage_ratio is None:
            return Condition(None, "KV-cache usage unknown")
        usage = ev.stats.kv_cache_usage_ratio
        pressure, evidence = self._pressure(ev)
        reason = (
            f"KV usage {usage:.1%} (threshold {self.usage_threshold:.0%}), {count(evidence['requests_waiting'])} "
            f"waiting, {count(evidence['preemptions_increase'])} preemptions in the last "
            f"{ev.stats.covered_seconds:.0f}s"
        )
        if usage < self.usage_threshold:
            if not admission_full(ev):
                return Condition(False, reason, evidence)
            reason += (
                f"; {ev.ctx.engine} reserves each request's whole length at admission, and the free blocks hold less "
                "than one running request's share of the written ones"
            )
        if pressure is None:
            return Condition(None, f"{reason}: whether requests queue or are preempted is unknown", evidence)
        return Condition(pressure, reason, evidence)

    def clears(self, ev: Evaluation) -> Condition:
        """Usage < resolve_below, or no queue and no preemption, or another pool is the saturated one. ``None``
        (cannot tell: an open incident stays open) when usage is at or above resolve_below and the queue or the
        preemption count is unknown (:func:`advisor.rules.common.pool_pressure`)."""
        withheld = kv_withheld(ev, self.usage_threshold)
        if withheld:
            return Condition(True, withheld, {"pool_usage": dict(ev.pool_usage)})
        if ev.stats is None or ev.stats.kv_cache_usage_ratio is None:
            return Condition(None, "KV-cache usage unknown")
        pressure, evidence = self._pressure(ev)
        usage = ev.stats.kv_cache_usage_ratio
        reason = (
            f"KV usage {usage:.1%} (resolves below {self.resolve_below:.0%}), "
            f"{count(evidence['requests_waiting'])} waiting, {count(evidence['preemptions_increase'])} preemptions"
        )
        if (usage < self.resolve_below and not admission_full(ev)) or pressure is False:
            return Condition(True, reason, evidence)
        if pressure is None:
            return Condition(None, f"{reason}: cannot tell whether the pressure is gone", evidence)
        return Condition(False, reason, evidence)

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """The ceiling-raising turns and the replica count, each with its predicted effect."""
        s = ev.stats
        if s is None or kv_withheld(ev, self.usage_threshold):
            return []
        _, evidence = self._pressure(ev)
        evidence = {
            **evidence,
            "kv_cache_capacity_tokens": ev.kv_capacity_tokens,
            "kv_cache_capacity_source": ev.kv_capacity_source,
            "replicas_up": ev.replicas_up,
        }
        growing = (s.requests_waiting or 0) > (s.requests_waiting_first or 0)
        # critical while it preempts and either the queue grows or the SLO is missed: the queue's direction between
        # two readings is noise (a walkthrough's six ``once`` runs on one state: five warning, one critical, with
        # 437 waiting and goodput 0 %); a missed SLO is the harm itself
        missed = ev.goodput.ratio is not None and ev.goodput.ratio < ev.ctx.slo.target_ratio
        severity = "critical" if (s.preemptions_increase or 0) > 0 and (growing or missed) else "warning"
        conf = confidence(ev, 0.9)
        needed = pool_demand_factor(ev)
        situation = (
            f"KV-cache usage is {s.kv_cache_usage_ratio:.1%} with {count(s.requests_running)} running, "
            f"{count(s.requests_waiting)} waiting and {count(s.preemptions_increase)} preemptions over the last "
            f"{s.covered_seconds:.0f}s: the pool, not compute, bounds the batch."
        )
        too_slow = past_the_tpot_knee(ev)
        at_batch = tpot_knee(ev)
        step, target = (None, 0.0) if at_batch is None else (at_batch.tpot_seconds, ev.ctx.slo.tpot_seconds)
        # the time goes outside the GPU's step: a faster step buys nothing (past half the observed TPOT, as goodput
        # holds its GPU turns), and far beyond the model's error a larger pool only admits more sequences into the
        # same ceiling (field-state round 37, vllm#3567: guided JSON held 100 running at ~70 tokens/s, as 10 did)
        outside = None if step is None else step_outside_gpu(ev, step, target)
        far = None if step is None else step_outside_gpu(ev, step, target, FAR_STEP_SHARE_MAX)
        out = [
            turn_proposal(
                self.id,
                ev,
                cand,
                needed_factor=needed,
                severity=severity,
                confidence=conf,
                evidence=evidence,
                headline="KV pool saturated",
                situation=situation,
                withheld=far
                or (outside if cand.turn.dial in STEP_DIALS else None)
                or (too_slow if cand.turn.dial in ADMITS_ONLY_DIALS else None),
            )
            for cand in pool_turns(ev)
        ]
        sizing = size_replicas(ev, self.drain_seconds, min_history_seconds=self.min_history_seconds)
        if sizing is not None and sizing.replicas > ev.ctx.replicas:
            current = ev.ctx.replicas
            target = sizing.replicas
            out.append(
                replicas_proposal(
                    self.id,
                    ev,
                    target,
                    severity=severity,
                    confidence=conf,
                    evidence={**evidence, **sizing.evidence()},
                    summary=f"{ev.ctx.name}: KV pool saturated — scale replicas {current} → {target}",
                    description=(
                        f"{situation} {sizing.explanation} Replicas are sized for the arrival rate, not for the "
                        "momentary backlog. Each replica costs its GPUs: a per-replica turn that holds the demand is "
                        "cheaper when there is one."
                    ),
                    extra_effects=sizing.effects(),
                    withheld=sizing.withheld,
                )
            )
        knee = self._knee_proposal(ev, severity, conf, evidence)
        if knee is not None:
            out.append(knee)
        no_evict = self._no_evict_proposal(ev, severity, conf, evidence)
        if no_evict is not None:
            out.insert(0, no_evict)
        return out

    def _no_evict_proposal(
        self, ev: Evaluation, severity: str, conf: float, evidence: dict[str, Any]
    ) -> Proposal | None:
        """The admission policy back to ``GUARANTEED_NO_EVICT`` when the engine paused running requests
        (``Evaluation.requests_paused_max`` > 0: TensorRT-LLM pauses only under ``MAX_UTILIZATION``), first: it
        admits a request only when its whole length fits, so a full pool queues new requests instead of evicting
        running ones to recompute them later. NVIDIA/TensorRT-LLM#16827 (Llama-3.3-70B FP8 on H200, KV
        oversubscribed): ``MAX_UTILIZATION`` served 95.7 output tokens/s against 161.0 under ``GUARANTEED_NO_EVICT``,
        TPOT p99 1,111 ms against 122 ms, at the same pool."""
        paused = ev.requests_paused_max
        if paused is None or paused <= 0:
            return None
        s = ev.stats
        usage = s.kv_cache_usage_ratio if s is not None else None
        situation = (
            f"The engine paused {paused:,.0f} running request(s) in the window (their KV blocks freed, to be "
            f"recomputed) with the pool {'?' if usage is None else percent(usage)} used and "
            f"{count(s.requests_waiting if s else None)} waiting: TensorRT-LLM pauses only under the MAX_UTILIZATION "
            "capacity scheduler, which admits requests while any block is free and evicts running ones when the "
            "pool runs out."
        )
        return Proposal(
            rule=self.id,
            dial=c.DIAL_ADMISSION_POLICY,
            action="set",
            current="MAX_UTILIZATION (admit while blocks are free, pause running requests when they run out)",
            suggested="GUARANTEED_NO_EVICT",
            flag=flag_for(ev.ctx.engine, c.DIAL_ADMISSION_POLICY, "GUARANTEED_NO_EVICT"),
            severity=severity,
            confidence=conf,
            summary=(
                f"{ev.ctx.name}: running requests are paused for KV — set the capacity scheduler to GUARANTEED_NO_EVICT"
            ),
            description=(
                f"{situation} GUARANTEED_NO_EVICT admits a request only when its whole length fits, so a full pool "
                "queues new requests instead of evicting running ones (NVIDIA/TensorRT-LLM#16827, under KV "
                "oversubscription: +68 % output tokens/s, TPOT p99 1,111 → 122 ms at the same pool). It does not "
                "enlarge the pool: the turns below do. Falsified by: requests still paused after the change."
            ),
            predicted_effect={c.EVIDENCE_REQUESTS_PAUSED: effect(paused, 0.0)},
            evidence={**evidence, c.EVIDENCE_REQUESTS_PAUSED: paused},
            score=3.0,
            sufficient=False,
            cost=1.0,
            gpus_added=0.0,
        )

    def _knee_proposal(self, ev: Evaluation, severity: str, conf: float, evidence: dict[str, Any]) -> Proposal | None:
        """Cap max-num-seqs at what the pool holds at the observed request lengths, when it allows more."""
        s = ev.stats
        if s is None or not s.requests_finished_per_second or not ev.kv_capacity_tokens:
            return None
        if s.prompt_tokens_per_second is None or s.generation_tokens_per_second is None:
            return None
        per_request = (s.prompt_tokens_per_second + s.generation_tokens_per_second) / s.requests_finished_per_second
        if per_request <= 0:
            return None
        # max_num_seqs holds on each data-parallel rank: what one rank's pool holds
        ranks = data_parallel_ranks(ev)
        rank_pool = ev.kv_capacity_tokens / ranks
        holds = math.floor(rank_pool / per_request)
        current = ev.ctx.inputs.max_num_seqs
        if holds < 1 or holds >= current or (s.preemptions_increase or 0) <= 0:
            return None
        t = turn(ev.ctx.inputs, c.DIAL_MAX_NUM_SEQS, holds)
        if t is None:
            return None
        return Proposal(
            rule=self.id,
            dial=c.DIAL_MAX_NUM_SEQS,
            action="decrease",
            current=current,
            suggested=holds,
            flag=flag_for(ev.ctx.engine, c.DIAL_MAX_NUM_SEQS, holds),
            severity=severity,
            confidence=conf,
            summary=f"{ev.ctx.name}: preemption thrash — cap max_num_seqs {current} → {holds} near the knee",
            description=(
                f"Finished requests average ~{per_request:,.0f} tokens (prompt + output); the pool of "
                f"{rank_pool:,.0f} tokens{' per data-parallel rank' if ranks > 1 else ''} holds {holds} of them at "
                "once, but the engine may run "
                f"{current}, so it admits more than fit and preempts {count(s.preemptions_increase)} in "
                f"{s.covered_seconds:.0f}s (recomputing their prefills). Capping at {holds} stops the thrash; it "
                "does not raise the ceiling — pair it with a pool turn or replicas."
            ),
            predicted_effect={
                "max_num_seqs": effect(current, holds),
                "preemptions_per_second": effect(s.preemptions_per_second, 0.0),
            },
            evidence={**evidence, "tokens_per_finished_request": round(per_request, 1)},
            score=1.0,
            sufficient=False,
            cost=1.0,
            complementary=True,
            gpus_added=0.0,
        )
