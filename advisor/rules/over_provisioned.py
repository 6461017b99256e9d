"""Rule ``over_provisioned``: sustained low use with the SLO met — fewer replicas or a smaller GPU.

Fires when the SLO is met (goodput at or above target), nothing waits, KV usage stays below
``max_usage`` over the window (and so does every other pool a request needs: a full Mamba state pool or
full llama.cpp slots with an idle KV cache is not spare capacity), and fewer than ``max_load_ratio`` × the
replica's concurrency ceiling run (the ceiling at the observed request length, bounded by max-num-seqs). Its
for-duration is long by default (30 min) so a quiet hour does not shrink a fleet. Never proposes a scale-up.

Never fires, and proposes no GPU-freeing turn (fewer replicas, a lower TP, a smaller GPU), while any configured
replica is down or stale (``Evaluation.replicas_up < replicas``: its load went to the others, so what they run
is not the deployment's load, and the window is partial), while requests wait, or while a replica has run for less
than the for-duration beside replicas older than it by more than :data:`FLEET_CHANGE_SPREAD_SECONDS`
(``Evaluation.replica_ages_seconds``: a rollout's surge pod beside a draining one, a scale-up, a restart: the pod
count is not the steady fleet's; kserve/kserve#5496); the status says which, in numbers.
An active incident clears then.

The load is read at the window's peak (``Evaluation.requests_running_max``), never at the newest sample alone,
and must be steady: the index of dispersion of running requests over the window (variance ÷ mean; about 1 for a
steady Poisson load) at most ``max_dispersion``. A lull after a busy spell (40 → 2 running: 17) does not fire. Nor
does a load rising through the window (:func:`_rising`: the newer half's mean running at least :data:`RISE_RATIO` ×
the older's, beyond Poisson noise), which a ramp's low dispersion would pass; an open incident clears on it.

Proposes fewer replicas (enough that each runs at ``target_load_ratio`` of its ceiling), or with one
replica the smallest catalog GPU that a priced instance type offers (:mod:`advisor.capacity.instances`) whose
capacity pass still holds the load at the same target, whose decode roofline carries the observed generation rate,
and on which the queueing model meets the SLO at the observed workload (when finished requests give it), with the
KV pool before and after. Its ``cost`` carries :data:`INSTANCE_MOVE_PENALTY`.

Over-provisioning by TP (issue 13, problem 5): a replica at tensor-parallel size > 1 also gets the lower TPs
(divisors of the current one) that hold the observed load, each checked in turn:

1. the weights fit at that TP (the capacity pass succeeds) and its pool holds one max-model-len request;
2. the pool at that TP — the engine's reported pool × the model's after ÷ before when the engine reports it —
   holds the peak tokens (``max(peak running per replica × observed tokens per finished request, peak KV usage
   × pool)``) ÷ ``target_load_ratio`` (the head-room);
3. the queueing model (:func:`advisor.capacity.queueing.predict_service`, the service of one replica from the
   roofline, :mod:`advisor.capacity.perf`) meets the SLO at the observed arrival rate per replica (finished
   requests/s: nothing waits while this rule fires) and observed prompt and output lengths. The decode step is
   scaled by the observed ÷ modelled mean TPOT at the current TP when the engine is slower than the model
   (never faster), so the prediction starts from what the engine does.

Each passing TP is a ``tensor_parallel_size`` decrease with ``gpus_added`` negative (the GPUs it frees) and
``cost`` the GPU ratio; the lowest passing TP frees the most and ranks first. TPs that fail are named with the
failing check in the evidence (``tp_rejected``). Needs a known GPU, one pipeline stage and one data-parallel
rank, and finished requests with known lengths; otherwise no TP turn is proposed (the reason is in the evidence).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any, Final

from advisor import conventions as c
from advisor.capacity.calibration import LatencyModel
from advisor.capacity.hardware import GPUSpec, get_gpu, gpu_keys
from advisor.capacity.instances import list_instances
from advisor.capacity.kv import CapacityInputs, capacity_pass
from advisor.capacity.queueing import SLO, ReplicaService, ServicePrediction, Workload, predict_service
from advisor.errors import CapacityError
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import (
    CEILING_SHARE,
    confidence,
    count,
    data_parallel_ranks,
    generated_tokens_per_request,
    gpus_per_replica,
    latency_model,
    percent,
    replicas_proposal,
)
from advisor.rules.flags import flag_for
from advisor.rules.turns import effect

INSTANCE_MOVE_PENALTY = 2.0
"""Cost multiplier of moving to another instance type (new nodes, quota, images, for TensorRT-LLM a rebuilt
engine): it ranks after a flag change (a lower TP) unless its GPUs hold less than half the memory that turn keeps."""


FLEET_CHANGE_SPREAD_SECONDS: Final = 300.0
"""Replicas started within this of each other are one fleet started together (pods of a new deployment, scheduled
and pulled a few minutes apart); a younger one beside older ones is a change in progress."""


def _changing(ev: Evaluation, for_seconds: float) -> float | None:
    """The newest replica's age, seconds, while the fleet is changing: it started less than ``for_seconds`` ago and
    the oldest more than :data:`FLEET_CHANGE_SPREAD_SECONDS` before it; ``None`` otherwise (or unknown)."""
    ages = ev.replica_ages_seconds
    if ages is None or ages[0] >= for_seconds or ages[1] - ages[0] <= FLEET_CHANGE_SPREAD_SECONDS:
        return None
    return ages[0]


RISE_RATIO: Final = 1.2
"""Newer half's mean running requests ÷ the older half's at or above which (and beyond Poisson noise,
:func:`_rising`) the window's load is rising: no scale-down is judged on it (breaker 10: a diurnal ramp paged
"replicas 3 → 2" at 41 requests/s, rising since a minute, and held it while the rate reached 93, past what 2 serve)."""


def _rising(ev: Evaluation) -> tuple[float, float] | None:
    """(older half's, newer half's) mean running requests summed over the replicas when the load rises through the
    window: the newer half (``2 × whole − older``, halves of equal span) at least :data:`RISE_RATIO` × the older and
    above it by at least twice the older's Poisson spread (``2√older``, and at least 4 requests: a trickle's 1 → 3
    running is noise — the demo's three idle replicas resolved their "3 → 1" on it); ``None`` otherwise or
    unknown."""
    whole = [v for _, v in ev.requests_running_by_target if math.isfinite(v)]
    older = [v for _, v in ev.requests_running_by_target_early if math.isfinite(v)]
    if not whole or len(older) != len(whole):
        return None
    old = math.fsum(older)
    new = 2 * math.fsum(whole) - old
    if new >= RISE_RATIO * old and new - old >= 2 * math.sqrt(max(old, 4.0)):
        return old, new
    return None


class OverProvisionedRule:
    """Low use with the SLO met → fewer replicas or a smaller instance."""

    id = c.RULE_OVER_PROVISIONED
    supersedes: tuple[str, ...] = ()
    resolve_at_once = True
    """Fewer replicas or a smaller instance is withdrawn the evaluation it stops being true, without the resolve hold
    (:func:`advisor.rules.lifecycle.resolve_hold`)."""
    _last: tuple[Evaluation, tuple[bool | None, str, dict[str, Any]]] | None = None
    """The last :meth:`_reading` and the evaluation it read: the lifecycle asks :meth:`fires`, then (active)
    :meth:`clears` and (holding) :meth:`propose` of one evaluation, each the same reading."""

    def __init__(
        self,
        max_usage: float = 0.3,
        max_load_ratio: float = 0.25,
        target_load_ratio: float = 0.5,
        for_seconds: float = 1800.0,
        max_dispersion: float = 4.0,
    ):
        """Ratios 0–1 as documented on the module; ``for_seconds`` the for-duration; ``max_dispersion`` the
        largest index of dispersion (variance ÷ mean) of running requests over the window that is a steady load."""
        self.max_usage = max_usage
        self.max_load_ratio = max_load_ratio
        self.target_load_ratio = target_load_ratio
        self._for = for_seconds
        self.max_dispersion = max_dispersion

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def _ceiling(self, ev: Evaluation) -> tuple[float, str]:
        """Sequences one replica runs at most: max-num-seqs on each data-parallel rank (× ranks), or fewer when
        the pool holds fewer at the observed request length (prompt + output of finished requests); and what sets
        it, for the text: ``"max-num-seqs"`` or ``"the KV pool at ~1,520 tokens per request"`` (the walkthrough,
        2026-12-04, read "the ceiling 256" and "the ceiling 28.97" as one quantity)."""
        s = ev.stats
        ceiling = float(ev.ctx.inputs.max_num_seqs) * data_parallel_ranks(ev)
        what = "max-num-seqs"
        if (
            s is not None
            and s.requests_finished_per_second
            and s.prompt_tokens_per_second is not None
            and s.generation_tokens_per_second is not None
            and ev.kv_capacity_tokens
        ):
            per_request = (s.prompt_tokens_per_second + s.generation_tokens_per_second) / s.requests_finished_per_second
            # no request holds more than max-model-len (breaker 23: "~11,663 tokens per request" at 8,192, where
            # generations outlasting the window count running requests' tokens against the few that finished)
            per_request = min(per_request, float(ev.ctx.capacity.max_model_len))
            if per_request > 0 and ev.kv_capacity_tokens / per_request < ceiling:
                ceiling = ev.kv_capacity_tokens / per_request
                what = f"the KV pool at ~{per_request:,.0f} tokens per request"
        return max(ceiling, 1.0), what

    def _reading(self, ev: Evaluation) -> tuple[bool | None, str, dict[str, Any]]:
        """:meth:`_read` of ``ev``, remembered for the same (immutable) evaluation; the evidence is a fresh copy
        each time (:meth:`propose` adds to it)."""
        last = self._last
        if last is not None and last[0] is ev:
            holds, reason, evidence = last[1]
        else:
            holds, reason, evidence = self._read(ev)
            self._last = (ev, (holds, reason, evidence))
        return holds, reason, dict(evidence)

    def _read(self, ev: Evaluation) -> tuple[bool | None, str, dict[str, Any]]:
        """Whether the fire side holds, the reason and the evidence (the reference :meth:`_reading` remembers)."""
        s = ev.stats
        g = ev.goodput.ratio
        side = ev.goodput.unmeasured_side()
        if side is not None:
            # one side unmeasured (a histogram missing; TGI exposes no TTFT): the SLO cannot be shown met, so no
            # GPU-freeing turn (breaker 14 asked for the why rather than the generic reason)
            return None, f"goodput unknown: {side} not measured, so the SLO cannot be shown met", {}
        if s is None or s.requests_running is None or s.requests_waiting is None or g is None:
            return None, "running, waiting or goodput unknown", {}
        usage = s.kv_cache_usage_ratio_max if s.kv_cache_usage_ratio_max is not None else s.kv_cache_usage_ratio
        if usage is None:
            return None, "KV usage unknown", {}
        ceiling, what = self._ceiling(ev)
        running = _peak_running(ev)
        per_replica = running / max(ev.replicas_up, 1)
        load = per_replica / ceiling
        # one request lives on one data-parallel rank: a rank whose pool fills, or that runs near its share of the
        # ceiling, is not spare capacity however idle the others are (vllm#48808: 27 / 5 / 0 / 0 running behind a
        # skewed balancer, engine 0 at 72 % of its pool while the ranks' mean is 21 %)
        ranks = data_parallel_ranks(ev)
        rank_usage = ev.kv_rank_usage_ratio_max
        busiest = ev.rank_requests_running_max if ranks > 1 else None
        rank_load = busiest / (ceiling / ranks) if busiest is not None else None
        rank_note = ""
        if rank_usage is not None and rank_usage > usage:
            usage = rank_usage
            rank_note = f"; the fullest data-parallel rank's pool is {percent(rank_usage)} used"
        if rank_load is not None and busiest is not None and rank_load > load:
            load = rank_load
            rank_note += (
                f"; the busiest data-parallel rank runs {count(busiest)}, {percent(rank_load)} of its share "
                f"{ceiling / ranks:,.4g} of the ceiling (one request lives on one rank)"
            )
        dispersion = ev.requests_running_dispersion
        evidence = {
            "goodput_ratio": g,
            "target_ratio": ev.ctx.slo.target_ratio,
            "kv_cache_usage_ratio_max": usage,
            "requests_running": s.requests_running,
            "requests_waiting": s.requests_waiting,
            "concurrency_ceiling_per_replica": round(ceiling, 2),
            "load_ratio": round(load, 4),
            "window_seconds": s.window_seconds,
        }
        if rank_usage is not None:
            evidence["kv_rank_usage_ratio_max"] = rank_usage
        if busiest is not None:
            evidence["rank_requests_running_max"] = busiest
        if ev.requests_running_max is not None:
            evidence["requests_running_max"] = ev.requests_running_max
        if dispersion is not None:
            evidence["requests_running_dispersion"] = round(dispersion, 3)
        # a pool other than the KV pool (a state pool, the slots) may be the full one: it counts as usage too
        others = [(u, p) for p, u in ev.pool_usage.items() if u is not None]
        hot = max(others, default=None)
        if hot is not None:
            evidence[f"{hot[1]}_pool_usage_ratio"] = hot[0]
        waiting = max(s.requests_waiting, s.requests_waiting_first or 0)
        down = max(0, ev.ctx.replicas - ev.replicas_up)
        evidence["replicas_up"] = ev.replicas_up
        evidence["replicas_configured"] = ev.ctx.replicas
        # a replica that started within the for-duration, beside replicas older than it by more than
        # FLEET_CHANGE_SPREAD_SECONDS, means the fleet is changing (a rollout's surge pod beside a draining one, a
        # scale-up, a restart): its count is not the steady fleet's (kserve/kserve#5496). Replicas started together
        # (a new deployment) are its steady fleet
        ages = ev.replica_ages_seconds
        age = _changing(ev, self._for)
        young = age is not None
        if ages is not None:
            evidence["newest_replica_age_seconds"] = round(ages[0], 1)
        rising = _rising(ev)
        holds = (
            not young
            and rising is None
            and down == 0
            and g >= ev.ctx.slo.target_ratio
            and waiting == 0
            and usage < self.max_usage
            and (hot is None or hot[0] < self.max_usage)
            and load < self.max_load_ratio
            and (dispersion is None or dispersion <= self.max_dispersion)
        )
        below = f"fires below {percent(self.max_load_ratio)}"
        reason = (
            f"goodput {g:.0%} (target {ev.ctx.slo.target_ratio:.0%}), "
            f"{_load_text(running, ev.replicas_up, ceiling, below, what)}, KV usage at most {usage:.1%}, "
            f"{count(waiting)} waiting"
        )
        reason += rank_note
        if dispersion is not None and dispersion > self.max_dispersion:
            reason += (
                f"; the load is not steady (running requests' variance ÷ mean {dispersion:.1f} > "
                f"{self.max_dispersion:g}: a lull, not a light load)"
            )
        if hot is not None:
            reason += f", {hot[1]} pool usage {hot[0]:.1%}"
        if rising is not None:
            evidence["requests_running_older_half"] = round(rising[0], 2)
            evidence["requests_running_newer_half"] = round(rising[1], 2)
            reason += (
                f"; the load is rising through the window ({rising[0]:,.1f} → {rising[1]:,.1f} running from its older "
                "half to its newer): no scale-down on a rising load"
            )
        if young and age is not None:
            reason += (
                f"; not while a replica started {age:,.0f}s ago (under the {self._for:,.0f}s this rule needs): "
                "the fleet is changing (a rollout, a scale-up or a restart), so its count is not a steady one"
            )
        if down:
            reason += (
                f"; not while {down} of {ev.ctx.replicas} replica(s) are down or stale ({ev.replicas_up} answer): "
                "their load is elsewhere and this data is partial, so no GPU-freeing turn is judged"
            )
        return holds, reason, evidence

    def fires(self, ev: Evaluation) -> Condition:
        """SLO met, no queue, low KV usage and low load."""
        holds, reason, evidence = self._reading(ev)
        return Condition(holds, reason, evidence)

    def clears(self, ev: Evaluation) -> Condition:
        """Load or usage rose past twice the thresholds, a queue formed (more than 2 and 10 % of those
        running: a Poisson arrival catching a request in the queue is no queue), or the SLO is missed."""
        holds, reason, evidence = self._reading(ev)
        if holds is None:
            return Condition(None, reason, evidence)
        busy = (
            evidence["load_ratio"] >= 2 * self.max_load_ratio
            or evidence["kv_cache_usage_ratio_max"] >= 2 * self.max_usage
            or any(v >= 2 * self.max_usage for k, v in evidence.items() if k.endswith("_pool_usage_ratio"))
            or evidence["requests_waiting"] > max(2.0, 0.1 * evidence["requests_running"])
            or evidence["goodput_ratio"] < evidence["target_ratio"]
            or ev.replicas_up < ev.ctx.replicas
            or "requests_running_newer_half" in evidence  # rising: a held decrease does not outlive the rise
        )
        return Condition(busy, reason, evidence)

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """Fewer replicas, or (one replica) a smaller GPU."""
        holds, _, evidence = self._reading(ev)
        s = ev.stats
        if holds is None or s is None or s.requests_running is None:
            return []
        waiting = max(s.requests_waiting or 0.0, s.requests_waiting_first or 0.0)
        if ev.replicas_up < ev.ctx.replicas or waiting > 0 or _changing(ev, self._for) is not None:
            return []  # no GPU-freeing turn on partial data, beside a queue or mid-change (the module docstring)
        ceiling, what = self._ceiling(ev)
        current = ev.ctx.replicas
        conf = confidence(ev, 0.8)
        running = _peak_running(ev)
        situation = (
            f"Over the last {s.covered_seconds:.0f}s the SLO was met (goodput {ev.goodput.ratio:.0%} against "
            f"{ev.ctx.slo.target_ratio:.0%}), nothing waited, KV usage peaked at "
            f"{evidence['kv_cache_usage_ratio_max']:.1%} and {_load_text(running, ev.replicas_up, ceiling, what=what)}."
        )
        tp_turns = self._tp_turns(ev, evidence, situation)
        if current > 1:
            needed = max(1, math.ceil(running / (self.target_load_ratio * ceiling)))
            keda = ev.ctx.scaled_by_keda
            if keda is not None and needed < keda.min_replicas:
                # the operator's floor (autoscaling.min_replica_count) is a choice — redundancy, a warm spare —
                # not a load the advisor measures: never proposed below it (breaker 18: "keep 2" beside "lower
                # min_replica_count from 2 to 1")
                needed = keda.min_replicas
            if needed < current:
                fewer = replicas_proposal(
                    self.id,
                    ev,
                    needed,
                    severity="info",
                    confidence=conf,
                    evidence=evidence,
                    summary=f"{ev.ctx.name}: over-provisioned — scale replicas {current} → {needed}",
                    description=(
                        f"{situation} {needed} replica(s) carry this load at {running / needed:,.3g} running per "
                        f"replica, {percent(running / (needed * ceiling))} of the ceiling {ceiling:,.4g} (at most "
                        f"{percent(self.target_load_ratio)} wanted); {current - needed} replica(s) of GPUs can be "
                        "released."
                        + (
                            " One replica leaves no redundancy: a restart, a rollout or a lost node is an outage "
                            "(keep 2 where that matters; autoscaling.min_replica_count bounds the autoscaler)."
                            if needed == 1
                            else ""
                        )
                    ),
                    extra_effects={
                        "load_ratio": effect(running / (current * ceiling), running / (needed * ceiling)),
                        "gpus": effect(current * gpus_per_replica(ev), needed * gpus_per_replica(ev)),
                    },
                )
                freed = float((needed - current) * gpus_per_replica(ev))
                return [dataclasses.replace(fewer, gpus_added=freed), *tp_turns]
        smaller = self._smaller_gpu(ev, running / max(ev.replicas_up, 1))
        if smaller is None:
            return tp_turns
        name, memory, tokens = smaller
        return [
            *tp_turns,
            Proposal(
                rule=self.id,
                dial=c.DIAL_INSTANCE_TYPE,
                action="set",
                current=ev.ctx.gpu.name if ev.ctx.gpu else f"{ev.ctx.inputs.gpu_memory_bytes / 2**30:.1f} GiB GPU",
                suggested=name,
                flag=flag_for(ev.ctx.engine, c.DIAL_INSTANCE_TYPE, f"an instance with {name} GPUs"),
                severity="info",
                confidence=conf,
                summary=f"{ev.ctx.name}: over-provisioned — a smaller GPU ({name}) carries this load",
                description=(
                    f"{situation} On {name} ({memory / 2**30:.1f} GiB) the capacity pass gives a pool of {tokens:,} "
                    f"tokens, enough for this load at {self.target_load_ratio:.0%} of the ceiling. (If per-request "
                    "latency matters more than cost, speculative decoding uses the idle bandwidth instead.)"
                ),
                predicted_effect={
                    "kv_cache_tokens": effect(ev.ctx.capacity.kv_cache_tokens, tokens),
                    "gpu_memory_bytes": effect(ev.ctx.inputs.gpu_memory_bytes, memory),
                },
                evidence=evidence,
                score=1.0,
                sufficient=True,
                cost=memory / ev.ctx.inputs.gpu_memory_bytes * INSTANCE_MOVE_PENALTY,
            ),
        ]

    def _tp_turns(self, ev: Evaluation, evidence: dict[str, Any], situation: str) -> list[Proposal]:
        """Lower tensor-parallel sizes that hold the observed load within the SLO (the module's checks 1–3).
        Adds ``tp_rejected`` (TP → the failing check) or ``tp_not_judged`` (why none was tried) to
        ``evidence`` when the current TP is above 1."""
        inputs = ev.ctx.inputs
        tp = inputs.tensor_parallel_size
        s = ev.stats
        if tp <= 1 or s is None:
            return []
        gpu = ev.ctx.gpu
        why_not = None
        if gpu is None:
            why_not = "the GPU model is unknown: its decode and prefill speed cannot be modelled"
        elif inputs.pipeline_parallel_size > 1 or data_parallel_ranks(ev) > 1:
            why_not = "pipeline or data parallelism: the TP turn is modelled for one TP engine per replica"
        observed = _observed_workload(ev)
        if why_not is None and isinstance(observed, str):
            why_not = observed
        if why_not is not None or gpu is None or isinstance(observed, str):
            evidence["tp_not_judged"] = why_not
            return []
        workload, slo = observed
        replicas_up = max(ev.replicas_up, 1)
        per_request = workload.prompt_tokens + workload.output_tokens
        model_before = float(ev.ctx.capacity.kv_cache_tokens)
        pool_before = float(ev.kv_capacity_tokens or model_before)
        anchor = pool_before / model_before if model_before > 0 else 1.0
        usage = s.kv_cache_usage_ratio_max if s.kv_cache_usage_ratio_max is not None else s.kv_cache_usage_ratio
        peak_running = _peak_running(ev) / replicas_up
        peak_tokens = max(peak_running * per_request, (usage or 0.0) * pool_before)
        need = peak_tokens / self.target_load_ratio
        try:
            before = _predict(inputs, gpu, workload, slo, pool_before, 1.0, latency_model(ev))
        except CapacityError as exc:
            evidence["tp_not_judged"] = f"the current configuration cannot be modelled: {exc}"
            return []
        # anchored on the engine: a slower engine than modelled scales every decode step alike (never faster)
        slow = 1.0
        if s.tpot is not None and s.tpot.count > 0 and before.tpot_mean_seconds > 0:
            slow = max(1.0, (s.tpot.sum / s.tpot.count) / before.tpot_mean_seconds)
            if slow > 1.0:
                before = _predict(inputs, gpu, workload, slo, pool_before, slow, latency_model(ev))
        rejected: dict[str, str] = {}
        passing: list[tuple[int, float, ServicePrediction]] = []
        for new_tp in [d for d in range(1, tp) if tp % d == 0]:
            try:
                after_inputs = dataclasses.replace(inputs, tensor_parallel_size=new_tp)
                after = capacity_pass(after_inputs)
            except (CapacityError, ValueError) as exc:
                rejected[str(new_tp)] = f"does not fit: {exc}"
                continue
            pool_after = after.kv_cache_tokens * anchor
            if not after.fits_one_full_length_request:
                rejected[str(new_tp)] = (
                    f"its pool ({after.kv_cache_tokens:,} tokens) cannot hold one {after.max_model_len:,}-token request"
                )
                continue
            if pool_after < need:
                rejected[str(new_tp)] = (
                    f"its pool ({pool_after:,.0f} tokens) is below the peak {peak_tokens:,.0f} tokens held × "
                    f"{1 / self.target_load_ratio:.2g} head-room ({need:,.0f})"
                )
                continue
            try:
                pred = _predict(after_inputs, gpu, workload, slo, pool_after, slow, latency_model(ev))
            except CapacityError as exc:
                rejected[str(new_tp)] = f"cannot be modelled: {exc}"
                continue
            if not pred.meets(slo):
                rejected[str(new_tp)] = (
                    f"the queueing model predicts goodput {pred.goodput_ratio:.1%} < target {slo.target_ratio:.0%} "
                    f"(TTFT p90 {pred.ttft_p90_seconds:.3g}s, TPOT p90 {pred.tpot_p90_seconds * 1e3:.3g}ms"
                    + (f"; {pred.reason}" if pred.reason else "")
                    + ")"
                )
                continue
            passing.append((new_tp, pool_after, pred))
        if rejected:
            evidence["tp_rejected"] = rejected
        return [
            self._tp_proposal(
                ev, new_tp, (pool_before, pool_after), per_request, (before, pred), slow, situation, rejected
            )
            for new_tp, pool_after, pred in passing
        ]

    def _tp_proposal(
        self,
        ev: Evaluation,
        new_tp: int,
        pools: tuple[float, float],
        per_request: float,
        predictions: tuple[ServicePrediction, ServicePrediction],
        slow: float,
        situation: str,
        rejected: dict[str, str],
    ) -> Proposal:
        """The ``tensor_parallel_size`` decrease to ``new_tp`` with its checks' numbers (``rejected``: the lower TPs
        that failed a check, and why; ``pools`` and ``predictions`` before and after; ``slow`` the decode slow-down
        applied)."""
        tp = ev.ctx.inputs.tensor_parallel_size
        replicas = ev.ctx.replicas
        pool_before, pool_after = pools
        before, after = predictions
        freed = (tp - new_tp) * replicas
        s = ev.stats
        assert s is not None
        evidence: dict[str, Any] = {
            "tokens_per_request": round(per_request, 1),
            "arrival_rate_per_replica": round(after.arrival_rate_per_replica, 4),
            "predicted_goodput_ratio": round(after.goodput_ratio, 4),
            "decode_slowdown_vs_model": round(slow, 3),
        }
        if rejected:
            evidence["tp_rejected"] = dict(rejected)
        return Proposal(
            rule=self.id,
            dial=c.DIAL_TENSOR_PARALLEL_SIZE,
            action="decrease",
            current=tp,
            suggested=new_tp,
            flag=flag_for(ev.ctx.engine, c.DIAL_TENSOR_PARALLEL_SIZE, new_tp),
            severity="info",
            confidence=confidence(ev, 0.7),
            summary=(
                f"{ev.ctx.name}: over-provisioned — tensor parallel {tp} → {new_tp} frees {freed} GPU(s) and still "
                "meets the SLO"
            ),
            description=(
                f"{situation} At TP {new_tp} the weights fit, the pool is ~{pool_after:,.0f} tokens per replica "
                f"(from {pool_before:,.0f}), holding the peak load with {1 / self.target_load_ratio:.2g}× head-room, "
                f"and the queueing model at {after.arrival_rate_per_replica:.3g} requests/s per replica of "
                f"~{per_request:,.0f} tokens predicts goodput {after.goodput_ratio:.1%} (TTFT p90 "
                f"{after.ttft_p90_seconds:.3g}s, TPOT p90 {after.tpot_p90_seconds * 1e3:.3g}ms) against the "
                f"{ev.ctx.slo.target_ratio:.0%} target. {freed} GPU(s) can be released; measure latency after the "
                "change, as the load may grow."
            ),
            predicted_effect={
                "gpus": effect(tp * replicas, new_tp * replicas),
                "kv_cache_tokens": effect(pool_before, pool_after),
                "concurrency_ceiling": effect(pool_before / per_request, pool_after / per_request),
                "goodput_ratio": effect(ev.goodput.ratio, after.goodput_ratio),
                "ttft_p90_seconds": effect(before.ttft_p90_seconds, after.ttft_p90_seconds),
                "tpot_p90_seconds": effect(before.tpot_p90_seconds, after.tpot_p90_seconds),
            },
            evidence=evidence,
            score=1.0 - new_tp / tp,
            sufficient=True,
            cost=new_tp / tp,
            gpus_added=-float(freed),
        )

    def _smaller_gpu(self, ev: Evaluation, running_per_replica: float) -> tuple[str, int, int] | None:
        """The catalog GPU with the least memory, below the current one (same vendor), whose pool still holds
        the load and whose decode roofline still carries the observed generation rate at the target load."""
        s = ev.stats
        inputs = ev.ctx.inputs
        per_request = None
        if s is not None and ev.kv_capacity_tokens and s.kv_cache_usage_ratio and running_per_replica > 0:
            per_request = s.kv_cache_usage_ratio * ev.kv_capacity_tokens / running_per_replica
        best: tuple[str, int, int] | None = None
        vendor = ev.ctx.gpu.name.split()[0] if ev.ctx.gpu is not None else "NVIDIA"
        observed = _observed_workload(ev)
        model_before = float(ev.ctx.capacity.kv_cache_tokens)
        anchor = float(ev.kv_capacity_tokens) / model_before if ev.kv_capacity_tokens and model_before > 0 else 1.0
        for key in gpu_keys():
            g = get_gpu(key)
            if g.memory_bytes >= inputs.gpu_memory_bytes or g.bf16_flops is None:
                continue
            if key not in _rentable_gpus():  # "move to an instance with …" needs an instance that has it
                continue
            if g.name.split()[0] != vendor:  # the same engine build and kernels: no platform migration
                continue
            try:
                result = capacity_pass(_with_memory(inputs, g.memory_bytes))
            except CapacityError:
                continue
            need = max(running_per_replica / self.target_load_ratio, 1.0) * (per_request or result.max_model_len)
            if result.kv_cache_tokens < need or result.max_concurrency < 1:
                continue
            # a smaller GPU is also a slower one: its decode roofline at a full batch must carry the observed
            # generation rate with the same head-room (found by the closed-loop simulation test)
            if s is None or not s.generation_tokens_per_second or not per_request:
                continue
            # one engine's batch: max_num_seqs and the pool of one data-parallel rank
            rank_tokens = result.kv_cache_tokens / max(1, result.data_parallel_size)
            batch = max(1.0, min(float(inputs.max_num_seqs), rank_tokens / per_request))
            try:
                tps = latency_model(ev).decode_tokens_per_second(
                    _with_memory(inputs, g.memory_bytes), g, batch, per_request
                )
            except (CapacityError, ValueError):
                continue
            # tps is one engine's (one data-parallel rank's); the observed rate is per replica, over its ranks
            rank_rate = s.generation_tokens_per_second / max(ev.replicas_up, 1) / data_parallel_ranks(ev)
            if tps * self.target_load_ratio < rank_rate:
                continue
            # and the queueing model must meet the SLO on it at the observed workload (issue 13)
            if isinstance(observed, tuple) and data_parallel_ranks(ev) == 1:
                try:
                    pred = _predict(
                        _with_memory(inputs, g.memory_bytes),
                        g,
                        observed[0],
                        observed[1],
                        result.kv_cache_tokens * anchor,
                        1.0,
                        latency_model(ev),
                    )
                except CapacityError:
                    continue
                if not pred.meets(observed[1]):
                    continue
            if best is None or g.memory_bytes < best[1]:
                best = (g.name, g.memory_bytes, result.kv_cache_tokens)
        return best


def _observed_workload(ev: Evaluation) -> tuple[Workload, SLO] | str:
    """The window's workload per replica for the queueing model — arrival rate = finished requests/s (nothing
    waits while the rule fires), prompt and output tokens per finished request — and the deployment's SLO; or why
    it cannot be built."""
    s = ev.stats
    finished = s.requests_finished_per_second if s is not None else None
    if s is None or not finished or s.prompt_tokens_per_second is None or s.generation_tokens_per_second is None:
        return "no finished request with known lengths in the window: the SLO cannot be predicted"
    try:
        workload = Workload(
            arrival_rate=finished / max(ev.replicas_up, 1),
            prompt_tokens=max(1.0, s.prompt_tokens_per_second / finished),
            output_tokens=generated_tokens_per_request(ev) or 1.0,  # never None: completions and tokens known
        )
        slo = SLO(ev.ctx.slo.ttft_seconds, ev.ctx.slo.tpot_seconds, min(ev.ctx.slo.target_ratio, 0.999))
    except CapacityError as exc:
        return f"the observed workload or SLO cannot be modelled: {exc}"
    return workload, slo


def _load_text(running: float, replicas: int, ceiling: float, note: str = "", what: str = "") -> str:
    """The over-provisioned measure with every figure it is made of, so that they can be checked against each
    other: ``30 running at the window's peak across 2 replica(s): 15 per replica, 129% of the ceiling 11.63 per
    replica (share of the ceiling)`` — ``running`` deployment-wide, divided by ``replicas`` (those answering, at
    least 1), over ``ceiling`` (per replica, :meth:`OverProvisionedRule._ceiling`), set by ``what`` (named after
    it: ``the ceiling 256 (max-num-seqs)``); ``note`` is added inside the parentheses (``share of the ceiling; fires
    below 25%``)."""
    per_replica = running / max(replicas, 1)
    source = f" ({what})" if what else ""
    return (
        f"{count(running)} running at the window's peak across {max(replicas, 1)} replica(s): {per_replica:,.3g} per "
        f"replica, {percent(per_replica / ceiling)} of the ceiling {ceiling:,.4g}{source} per replica ({CEILING_SHARE}"
        + (f"; {note}" if note else "")
        + ")"
    )


def _peak_running(ev: Evaluation) -> float:
    """Running requests at the window's peak (the newest reading when the peak is unknown), deployment-wide."""
    s = ev.stats
    now = s.requests_running if s is not None and s.requests_running is not None else 0.0
    return max(now, ev.requests_running_max or 0.0)


def _predict(
    inputs: CapacityInputs,
    gpu: GPUSpec,
    workload: Workload,
    slo: SLO,
    pool_tokens: float,
    slow: float,
    model: LatencyModel,
) -> ServicePrediction:
    """One replica of ``inputs`` on ``gpu`` under ``workload`` (per replica): batch cap ``min(max_num_seqs, pool ÷
    (prompt + output))``, the (calibrated, ``model``: :func:`advisor.rules.common.latency_model`) roofline's decode
    step at the mean context × ``slow``, the prefill of a typical prompt (as :mod:`advisor.capacity.search` builds a
    replica's service).

    Raises:
        CapacityError: the GPU lacks a speed figure, or the pool holds no request of the observed length.
    """
    per_request = workload.prompt_tokens + workload.output_tokens
    cap = min(inputs.max_num_seqs, math.floor(pool_tokens / per_request))
    if cap < 1:
        raise CapacityError(f"the pool ({pool_tokens:,.0f} tokens) holds no {per_request:,.0f}-token request")
    step = model.decode_step_model(inputs, gpu, workload.prompt_tokens + workload.output_tokens / 2)
    scaled: Callable[[float], float] = lambda b: slow * step(b)  # noqa: E731
    service = ReplicaService(
        batch_cap=cap,
        prefill_seconds=model.prefill_busy_seconds(inputs, gpu, workload.prompt_tokens),
        decode_step=scaled,
        request_overhead_seconds=model.request_overhead_seconds(gpu),
    )
    return predict_service(workload, service, 1, slo)


@functools.cache
def _rentable_gpus() -> frozenset[str]:
    """GPU keys some priced instance type offers (:func:`advisor.capacity.instances.list_instances`)."""
    return frozenset(i.gpu_key for i in list_instances(None, priced_only=True))


def _with_memory(inputs: Any, memory: int) -> Any:
    import dataclasses

    return dataclasses.replace(inputs, gpu_memory_bytes=memory)
