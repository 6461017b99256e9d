"""Rule ``goodput_below_target``: too few requests meet their TTFT and TPOT targets — diagnosed.

Goodput ratio: the fraction of requests meeting both targets (DistServe, Zhong et al., OSDI 2024),
estimated from the engine's two histograms (:mod:`advisor.telemetry`). Fires when it stays below
``slo.target_ratio`` with at least ``min_requests`` finished in the window; clears at or above it. With one side
unmeasured (its histogram missing or unreadable; TGI's TTFT) the ratio is unknown and only its upper bound speaks:
below the target it fires (the breach is certain), otherwise it neither fires nor clears.

Checked against its evidence (issue 13): more TP (and chunked prefill) for TTFT rests on the diagnosis that
prefill takes the time. The falsifying measurement is the share of the observed mean TTFT that the roofline's
prefill of the observed mean prompt explains: below :data:`PREFILL_SHARE_MIN` the time goes elsewhere — queueing
(``queue_time`` histogram, waiting requests) or a transfer stage (prefill/decode-disaggregation queues,
requests deferred for a KV transfer: ``Evaluation.queues``) — and splitting the prefill cannot recover it, so
both turns are withheld with the share and the dominant stage in numbers.

The diagnosis picks the dial:

=====================================================  ==========================================================
what misses                                            advice
=====================================================  ==========================================================
TTFT, with queueing (requests wait, or queue time is   replicas from the queueing model (arrival rate vs the
half of TTFT or more)                                  per-replica capacity at the SLO)
TTFT, without queueing (long prefills)                 twice the TP degree (prefill time from the roofline) and
                                                       chunked prefill
TPOT, with a batch past the knee                       cap max-num-seqs at the knee: the largest batch whose
                                                       roofline TPOT meets the target
TPOT, at a small batch (bandwidth-bound)               quantized weights or twice the TP degree (TPOT from the
                                                       roofline); withheld when the modeled step meets the target
                                                       and is at most half the observed TPOT
                                                       (:data:`~advisor.rules.common.STEP_SHARE_MAX`)
=====================================================  ==========================================================

Replicas: :func:`advisor.rules.replicas.size_replicas`, the one queueing model every rule that proposes
replicas uses (λ = completions + in-flight growth, never completions alone, against the per-replica capacity at
the SLO).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Final

from advisor import conventions as c
from advisor.capacity.calibration import LatencyModel
from advisor.capacity.hardware import GPUSpec
from advisor.capacity.kv import CapacityInputs
from advisor.errors import CapacityError
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import (
    confidence,
    count,
    gpus_per_replica,
    latency_model,
    replicas_proposal,
    step_outside_gpu,
    tpot_knee,
    turn_gpus_added,
)
from advisor.rules.flags import flag_for
from advisor.rules.replicas import MIN_ARRIVAL_SPAN_SECONDS, arrival_history_withheld, arrival_rate, size_replicas
from advisor.rules.turns import effect
from advisor.telemetry import fraction_below, histogram_mean, histogram_mean_floor, summarize

PREFILL_SHARE_MIN = 0.25
"""Modeled prefill ÷ observed mean TTFT below which more TP for TTFT is withheld. TTFT = queueing + (transfer) +
prefill + the first decode step; doubling TP at best halves the prefill term, so when prefill is under a quarter of
TTFT the turn recovers under 12.5 % of it — less than the roofline's own error on a real GPU — while doubling the
GPUs. The rest of TTFT is then queueing or a transfer stage, which more TP does not shorten."""

TRANSFER_QUEUES = ("waiting_deferred",)
"""``Evaluation.queues`` keys, besides the disaggregation queues (``prefill_*`` / ``decode_*``), whose requests
wait for a transfer stage (vLLM ``num_requests_waiting_by_reason{reason="deferred"}``: a KV transfer or a LoRA
load), not for prefill compute."""


def _transfer_waiting(ev: Evaluation) -> dict[str, float]:
    """Requests waiting in a transfer stage, by queue (only the non-empty ones)."""
    return {
        k: v
        for k, v in sorted(ev.queues.items())
        if v > 0 and (k in TRANSFER_QUEUES or k.startswith(("prefill_", "decode_")))
    }


class GoodputRule:
    """Goodput below target for the for-duration → the dial its diagnosis points at."""

    id = c.RULE_GOODPUT_BELOW_TARGET
    problem = c.PROBLEM_SATURATION
    supersedes: tuple[str, ...] = ()

    def __init__(
        self,
        for_seconds: float = 120.0,
        min_requests: int = 20,
        target_utilization: float = 0.8,
        *,
        drain_seconds: float | None = None,
        min_history_seconds: float = MIN_ARRIVAL_SPAN_SECONDS,
    ):
        """``for_seconds``: for-duration (s); ``min_requests``: finished requests needed to judge;
        ``target_utilization``: kept for configuration compatibility (replica counts come from
        :func:`advisor.rules.replicas.size_replicas`, the same for every rule); ``drain_seconds``: its drain term
        (``rules.replicas.drain_seconds``)."""
        self._for = for_seconds
        self.min_requests = min_requests
        self.target_utilization = target_utilization
        self.drain_seconds = drain_seconds
        self.min_history_seconds = min_history_seconds  # rules.replicas.min_history: shortest history sized

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def _ratio(self, ev: Evaluation) -> tuple[float | None, str, dict[str, Any]]:
        s = ev.stats
        g = ev.goodput
        # the requests judged: the TTFT count (an inter-token-latency TPOT histogram counts tokens, not requests),
        # else the TPOT count — a saturated engine that admits nobody records no first token while its running
        # requests' TPOT still counts (breaker 32: 0 new TTFT observations beside 100 finished at 5x the TPOT
        # target read "only 0 requests finished")
        count_ = s.ttft.count if s is not None and s.ttft is not None else None
        if (count_ is None or count_ == 0) and s is not None and s.tpot is not None:
            count_ = s.tpot.count
        evidence: dict[str, Any] = {
            "goodput_ratio": g.ratio,
            "goodput_ratio_lower": g.lower,
            "goodput_ratio_upper": g.upper,
            "ttft_ok_ratio": g.ttft_ratio,
            "tpot_ok_ratio": g.tpot_ratio,
            "requests_observed": count_,
            "target_ratio": ev.ctx.slo.target_ratio,
            "window_seconds": s.window_seconds if s is not None else None,
        }
        target = ev.ctx.slo.target_ratio
        if g.ratio is None and g.upper is None:
            return None, "no TTFT/TPOT observations in the window", evidence
        if count_ is None or count_ < self.min_requests:
            return None, f"only {count_ or 0:.0f} requests finished in the window (need {self.min_requests})", evidence
        unknown = g.unmeasured_side()
        if unknown is not None:
            # one side unmeasured (its histogram missing or unreadable, or TGI's TTFT bounded by its queue time):
            # goodput is at most the known side; that judges a breach, never the target met
            assert g.upper is not None
            if g.upper < target:
                at_most = f"goodput at most {g.upper:.1%} vs target {target:.0%} ({unknown} not measured)"
                return g.upper, at_most, evidence
            return (
                None,
                f"goodput unknown: {unknown} not measured in the window (the other side alone allows "
                f"{g.upper:.1%}, which cannot show the {target:.0%} target met)",
                evidence,
            )
        return g.ratio, f"goodput {g.ratio:.1%} vs target {target:.0%}", evidence

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

    def _confidence(self, ev: Evaluation, observed: float | None) -> float:
        return round(confidence(ev, 0.8) * min(1.0, (observed or 0) / max(self.min_requests, 20)), 3) or 0.05

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """The diagnosed turns (see the module table)."""
        s = ev.stats
        ratio, _, evidence = self._ratio(ev)
        if s is None or ratio is None:
            return []
        target = ev.ctx.slo.target_ratio
        ttft_bad = ev.goodput.ttft_ratio is not None and ev.goodput.ttft_ratio < target
        tpot_bad = ev.goodput.tpot_ratio is not None and ev.goodput.tpot_ratio < target
        conf = self._confidence(ev, evidence["requests_observed"])
        out: list[Proposal] = []
        if ttft_bad:
            queue = summarize(s.queue_time)
            ttft = summarize(s.ttft)
            # a queue at either end of the window is where its TTFT misses went, not a long prefill: the misses of a
            # spike the engine has drained still fill the window (breaker 27: "long prefills miss TTFT — tensor
            # parallel 1 → 2 … without a queue" 24 s after 150 requests a replica had waited)
            queueing = (
                (s.requests_waiting or 0) > 0
                or (s.requests_waiting_first or 0) > 0
                or (
                    queue is not None
                    and ttft is not None
                    and queue.mean is not None
                    and ttft.mean is not None
                    and queue.mean >= 0.5 * ttft.mean
                )
                or _misses_queued(ev)
            )
            evidence = {
                **evidence,
                "queue_time_mean_seconds": queue.mean if queue else None,
                "ttft_mean_seconds": ttft.mean if ttft else None,
            }
            if queueing:
                rep = self._replicas(ev, ratio, evidence, conf)
                if rep is not None:
                    out.append(rep)
            else:
                out += self._prefill(ev, evidence, conf)
        if tpot_bad:
            out += self._tpot(ev, evidence, conf)
        return out

    # -- TTFT with queueing: replicas ---------------------------------------------------------------------
    def _replicas(self, ev: Evaluation, ratio: float, evidence: dict[str, Any], conf: float) -> Proposal | None:
        s = ev.stats
        sizing = size_replicas(ev, self.drain_seconds, min_history_seconds=self.min_history_seconds)
        if s is None or sizing is None:
            return None
        current = ev.ctx.replicas
        needed = sizing.replicas
        if needed <= current:
            return None
        evidence = {
            **evidence,
            **sizing.evidence(),
            "requests_running": s.requests_running,
            "requests_waiting": s.requests_waiting,
        }
        description = (
            f"Only {ratio:.1%} of requests met TTFT ≤ {ev.ctx.slo.ttft_seconds}s and TPOT ≤ "
            f"{ev.ctx.slo.tpot_seconds}s over the last {s.covered_seconds:.0f}s (target "
            f"{ev.ctx.slo.target_ratio:.0%}), and the time goes to queueing. {sizing.explanation}"
        )
        return replicas_proposal(
            self.id,
            ev,
            needed,
            severity="critical" if ratio < ev.ctx.slo.target_ratio * 0.8 else "warning",
            confidence=conf,
            evidence=evidence,
            summary=f"{ev.ctx.name}: goodput {ratio:.0%} below target, TTFT lost to queueing — replicas {current} → "
            f"{needed}",
            description=description,
            extra_effects=sizing.effects(),
            withheld=sizing.withheld or _queue_drained(ev),
        )

    # -- TTFT without queueing: long prefills --------------------------------------------------------------
    def _prefill(self, ev: Evaluation, evidence: dict[str, Any], conf: float) -> list[Proposal]:
        s = ev.stats
        gpu = ev.ctx.gpu
        if s is None or gpu is None or not s.requests_finished_per_second or s.prompt_tokens_per_second is None:
            return []
        prompt = s.prompt_tokens_per_second / s.requests_finished_per_second
        inputs = ev.ctx.inputs
        model = latency_model(ev)
        tp2 = dataclasses.replace(inputs, tensor_parallel_size=inputs.tensor_parallel_size * 2)
        try:
            before = model.prefill_seconds(inputs, gpu, prompt)
            after = model.prefill_seconds(tp2, gpu, prompt)
        except (CapacityError, ValueError):
            return []
        ev_desc = (
            f"TTFT misses its target ({ev.goodput.ttft_ratio:.0%} within {ev.ctx.slo.ttft_seconds}s) without a queue: "
            f"prompts average ~{prompt:,.0f} tokens and their prefill takes the time ({model.label} roofline "
            f"~{before:.2f}s per prompt)."
        )
        withheld = self._prefill_withheld(ev, before, evidence)
        tp_withheld = withheld or pcie_tensor_parallel_withheld(ev)
        tp_added = turn_gpus_added(ev, tp2)
        return [
            Proposal(
                rule=self.id,
                dial=c.DIAL_TENSOR_PARALLEL_SIZE,
                action="increase",
                current=inputs.tensor_parallel_size,
                suggested=tp2.tensor_parallel_size,
                flag=flag_for(ev.ctx.engine, c.DIAL_TENSOR_PARALLEL_SIZE, tp2.tensor_parallel_size),
                severity="warning",
                confidence=conf,
                summary=f"{ev.ctx.name}: long prefills miss TTFT — tensor parallel {inputs.tensor_parallel_size} → "
                f"{tp2.tensor_parallel_size}",
                description=f"{ev_desc} Twice the TP degree splits each prefill: ~{before:.2f}s → ~{after:.2f}s.",
                predicted_effect={
                    "prefill_seconds": effect(before, after),
                    "gpus_per_replica": effect(gpus_per_replica(ev), gpus_per_replica(ev, tp2)),
                },
                evidence={**evidence, "prompt_tokens_mean": round(prompt, 1)},
                score=before / max(after, 1e-9) / 2,
                sufficient=True,
                cost=2.0,
                withheld=tp_withheld,
                gpus_added=tp_added,
            ),
            Proposal(
                rule=self.id,
                dial=c.DIAL_CHUNKED_PREFILL,
                action="enable",
                current="engine default",
                suggested="on",
                flag=flag_for(ev.ctx.engine, c.DIAL_CHUNKED_PREFILL, inputs.max_num_batched_tokens or 8192),
                severity="info",
                confidence=conf,
                summary=f"{ev.ctx.name}: long prefills — make sure chunked prefill is on",
                description=f"{ev_desc} Chunked prefill interleaves long prompts with decodes so one prompt does not "
                "stall every other request's first token.",
                predicted_effect={"prefill_seconds": effect(before, before)},
                evidence={**evidence, "prompt_tokens_mean": round(prompt, 1)},
                score=1.0,
                sufficient=False,
                cost=1.0,
                withheld=withheld or _chunking_already(ev),
                gpus_added=0.0,
            ),
        ]

    def _prefill_withheld(self, ev: Evaluation, prefill: float, evidence: dict[str, Any]) -> str | None:
        """Why the prefill turns are withheld (modeled prefill < :data:`PREFILL_SHARE_MIN` of the observed mean
        TTFT, naming the stage that holds the rest), or ``None``; unknown TTFT → ``None``. Where the page's sum or
        count is impossible (the mean unknown) the least mean its buckets allow stands in
        (:func:`~advisor.telemetry.histogram_mean_floor`): a prefill share under the minimum at that mean is under it
        at the true one (breaker 32: a negative sum's −1.5 s "mean" let "tensor parallel 1 → 2" through for 100
        requests bucketed in (1, 2.5])."""
        ttft = evidence.get("ttft_mean_seconds")
        if ttft is None and ev.stats is not None:
            ttft = histogram_mean_floor(ev.stats.ttft)
        if not ttft or ttft <= 0:
            return None
        share = prefill / ttft
        if share >= PREFILL_SHARE_MIN:
            return None
        stages: list[str] = []
        queue = evidence.get("queue_time_mean_seconds")
        if queue:
            stages.append(f"queueing {queue:.2f}s ({queue / ttft:.0%} of TTFT)")
        transfer = _transfer_waiting(ev)
        if transfer:
            stages.append(
                f"{sum(transfer.values()):,.0f} requests wait for a transfer stage ("
                + ", ".join(f"{k} {v:,.0f}" for k, v in transfer.items())
                + ")"
            )
        waiting = ev.stats.requests_waiting if ev.stats is not None else None
        if waiting:
            stages.append(f"{waiting:,.0f} requests waiting")
        where = "; ".join(stages) if stages else "the rest is outside the modeled prefill"
        return (
            f"withheld: the modeled prefill (~{prefill:.3f}s for the mean prompt) is {share:.1%} of the observed mean "
            f"TTFT {ttft:.2f}s (under {PREFILL_SHARE_MIN:.0%}); {where}. Splitting the prefill cannot recover the time"
        )

    # -- TPOT ----------------------------------------------------------------------------------------------
    def _tpot(self, ev: Evaluation, evidence: dict[str, Any], conf: float) -> list[Proposal]:
        s = ev.stats
        gpu = ev.ctx.gpu
        # one engine's batch: max_num_seqs (the knee's dial) and the roofline are per data-parallel rank
        at = tpot_knee(ev)
        if s is None or gpu is None or at is None:
            return []
        inputs = ev.ctx.inputs
        ranks, batch, context, model, knee = at.ranks, at.batch, at.context, at.model, at.knee
        target = ev.ctx.slo.tpot_seconds
        now_tpot = at.tpot_seconds
        out: list[Proposal] = []
        # past the knee only where the model's TPOT at today's batch misses the target: a fractional mean batch just
        # above a knee that still meets it is not the cause (breaker 25: "cap max_num_seqs at the knee, 49" at a
        # batch of 49.5, TPOT 0.0278 → 0.0276 s against 0.25 s, then "→ 1" as prefill, not the batch, slowed decode)
        if knee is not None and knee < batch and now_tpot > target:
            knee_tpot = model.tpot_seconds(inputs, gpu, knee, context)
            alone = _cap_serves_the_load(ev, knee / batch * now_tpot / max(knee_tpot, 1e-9))
            out.append(
                Proposal(
                    rule=self.id,
                    dial=c.DIAL_MAX_NUM_SEQS,
                    action="decrease",
                    current=inputs.max_num_seqs,
                    suggested=knee,
                    flag=flag_for(ev.ctx.engine, c.DIAL_MAX_NUM_SEQS, knee),
                    severity="warning",
                    confidence=conf,
                    summary=f"{ev.ctx.name}: TPOT misses its target at a batch of {batch:.0f} — cap max_num_seqs at "
                    f"the knee, {knee}",
                    description=(
                        f"Only {ev.goodput.tpot_ratio:.0%} of requests meet TPOT ≤ {target}s with {batch:.0f} "
                        f"sequences per {'data-parallel rank' if ranks > 1 else 'replica'}. Past the knee of TPOT "
                        "against batch every extra sequence slows all the others: "
                        f"the {model.label} roofline gives "
                        f"~{now_tpot * 1000:.0f} ms at {batch:.0f} and "
                        f"~{knee_tpot * 1000:.0f} ms at {knee}. Cap the batch there and add replicas for the rest "
                        "of the load." + ("" if alone.sufficient else f" {alone.why}")
                    ),
                    predicted_effect={
                        "tpot_seconds": effect(now_tpot, knee_tpot),
                        "max_num_seqs": effect(inputs.max_num_seqs, knee),
                        "batch_per_replica": effect(batch * ranks, knee * ranks),
                    },
                    evidence={
                        **evidence,
                        "batch_per_replica": round(batch * ranks, 2),
                        **({"batch_per_rank": round(batch, 2), "data_parallel_ranks": ranks} if ranks > 1 else {}),
                    },
                    score=now_tpot / max(knee_tpot, 1e-9),
                    sufficient=alone.sufficient,
                    cost=1.0,
                    gpus_added=0.0,
                )
            )
            return out
        # small batch: bandwidth-bound — read fewer weight bytes per GPU, unless the step is not where the time goes
        withheld = (
            step_outside_gpu(ev, now_tpot, target)
            or _batch_held_by_the_cap(ev, batch)
            or _weights_not_the_step(model, inputs, gpu, batch, context)
        )
        observed = histogram_mean(s.tpot)
        observed_scale = observed / now_tpot if observed is not None and now_tpot > 0 else 1.0
        options: list[tuple[str, Any, CapacityInputs, float, str]] = []
        # an already quantized checkpoint (its own quantization_config: gpt-oss's mxfp4) is not quantized again
        if inputs.effective_quantization is None:
            q = "fp8" if gpu.fp8_flops else "awq"
            quantized = _turned(inputs, quantization=q)
            if quantized is not None:
                options.append(
                    (
                        c.DIAL_WEIGHT_QUANTIZATION,
                        q,
                        quantized,
                        1.25,
                        "the quality delta must be measured on your own evals",
                    )
                )
        wider = _turned(inputs, tensor_parallel_size=inputs.tensor_parallel_size * 2)
        if wider is not None:
            options.append(
                (
                    c.DIAL_TENSOR_PARALLEL_SIZE,
                    inputs.tensor_parallel_size * 2,
                    wider,
                    2.0,
                    "twice the GPUs per replica, with all-reduce traffic every layer",
                )
            )
        for dial, value, turned, cost, why in options:
            try:
                after = model.tpot_seconds(turned, gpu, batch, context)
            except (CapacityError, ValueError):
                continue
            if after >= now_tpot:
                continue
            field = "quantization" if dial == c.DIAL_WEIGHT_QUANTIZATION else "tensor_parallel_size"
            out.append(
                Proposal(
                    rule=self.id,
                    dial=dial,
                    action="set" if dial == c.DIAL_WEIGHT_QUANTIZATION else "increase",
                    current=getattr(inputs, field),
                    suggested=value,
                    flag=flag_for(ev.ctx.engine, dial, value, ev.ctx.inputs.engine_version),
                    severity="warning",
                    confidence=conf,
                    summary=f"{ev.ctx.name}: TPOT misses its target at a small batch — {dial} → {value}",
                    description=(
                        f"Only {ev.goodput.tpot_ratio:.0%} of requests meet TPOT ≤ {target}s though just {batch:.1f} "
                        f"sequences run per {'data-parallel rank' if ranks > 1 else 'replica'}: each step is bound by "
                        f"reading the weights. {dial} → {value} "
                        f"takes the {model.label} roofline TPOT from ~{now_tpot * 1000:.0f} ms to "
                        f"~{after * 1000:.0f} ms. "
                        f"Note: {why}."
                    ),
                    predicted_effect={
                        "tpot_seconds": effect(now_tpot, after),
                        **(
                            {"gpus_per_replica": effect(gpus_per_replica(ev), gpus_per_replica(ev, turned))}
                            if dial == c.DIAL_TENSOR_PARALLEL_SIZE
                            else {}
                        ),
                    },
                    evidence={
                        **evidence,
                        "batch_per_replica": round(batch * ranks, 2),
                        **({"batch_per_rank": round(batch, 2), "data_parallel_ranks": ranks} if ranks > 1 else {}),
                    },
                    score=now_tpot / after / cost,
                    # judged on the observed TPOT scaled by the turn's modelled ratio, not the roofline's absolute
                    # figure (breaker 12: an L40S observed at 50 ms, modelled at 29, "closes the gap" at a modelled 18)
                    sufficient=after * observed_scale <= target,
                    cost=cost,
                    withheld=withheld
                    or (
                        pcie_tensor_parallel_withheld(ev) or SMALL_BATCH_TP_WITHHELD
                        if dial == c.DIAL_TENSOR_PARALLEL_SIZE
                        else None
                    ),
                    gpus_added=turn_gpus_added(ev, turned) if dial == c.DIAL_TENSOR_PARALLEL_SIZE else 0.0,
                )
            )
        return out


SMALL_BATCH_TP_WITHHELD: Final = (
    "withheld: more tensor parallelism for a few streams is priced by the roofline as half the weight read a GPU "
    "does a step, but what operators measured at a small batch was no gain or a loss — the per-layer all-reduce and "
    "each kernel's fixed time do not split: TGI 1.2 CodeLlama-34B on H100 27.98 → 28.02 ms a token at 2 shards "
    "(huggingface/text-generation-inference#1315), Llama-2-70B 15 % slower at 8 shards than 4 on a p4de (#1129), "
    "gpt-oss-120b 90 → 78 tokens/s at TP 2 on NVLinked A100s (vllm-project/vllm#22331), BLOOM 12× slower at TP 8 on "
    "V100 (NVIDIA/TensorRT-LLM#389); no report collected measured the turn winning there. Measure it on one replica "
    "before turning it fleet-wide"
)
"""Why the small-batch TPOT branch's TP increase is listed but never suggested: the field states built from those
reports (rounds 52, 67, 71, 74, 75) each failed on it, and none of the 109 that name the dial asks for it."""

WEIGHT_SHARE_MIN: Final = 0.5
"""Share of the modelled decode step that streaming the weights takes, below which the small-batch turns (lighter
weights, more TP) are withheld: they shrink that share only, so under half of the step they recover under half of it
(fp8 at most a quarter), and the step is no longer "bound by reading the weights" as their page says."""


QUEUED_MISS_SHARE: Final = 0.5
"""Share of the window's TTFT misses that requests queued for over half the TTFT target must make up for the misses
to be read as queueing (:func:`_misses_queued`)."""


def _misses_queued(ev: Evaluation) -> bool:
    """Whether the window's TTFT misses are the queue's: the requests that waited in the queue for over half the TTFT
    target (the engine's queue-time histogram, vLLM's ``request_queue_time_seconds``) are at least
    :data:`QUEUED_MISS_SHARE` of the requests that missed it. The means cannot tell: a 2 s burst queued a few requests
    past the target while most were served at once, and the mean queue time stayed under half the mean TTFT, so the
    misses read as long prefills (breaker 29 and 27: "long prefills miss TTFT — tensor parallel 1 → 2 … without a
    queue"). ``False`` when any of it is unknown."""
    s = ev.stats
    ratio = ev.goodput.ttft_ratio
    if s is None or ratio is None or s.queue_time is None or ratio >= 1.0:
        return False
    waited = fraction_below(ev.ctx.slo.ttft_seconds / 2, s.queue_time)
    if waited is None or waited.value is None:
        return False
    return 1.0 - waited.value >= QUEUED_MISS_SHARE * (1.0 - ratio)


CAP_FULL_SHARE: Final = 0.95
"""Share of ``max_num_seqs`` the per-rank batch must reach, with requests waiting, for the batch to be the cap's."""


def _batch_held_by_the_cap(ev: Evaluation, batch: float) -> str | None:
    """Why the small-batch turns (lighter weights, more TP) are withheld because the batch is small only as
    ``max_num_seqs`` holds it there: the per-rank batch at :data:`CAP_FULL_SHARE` of the cap or more with requests
    waiting; ``None`` otherwise. Then the queue in front of the cap is where the time goes, and a faster step
    leaves it as long (vllm-project/vllm#17788: 32 running of ``--max-num-seqs 32``, 475 waiting, TTFT 147 s of
    queue; the FP8 checkpoint measured "almost the same" — field-state round 73)."""
    s = ev.stats
    cap = ev.ctx.inputs.max_num_seqs
    if s is None or not cap or not s.requests_waiting or batch < CAP_FULL_SHARE * cap:
        return None
    return (
        f"withheld: the batch ({batch:,.0f} a rank) is small because max_num_seqs {cap} holds it there, with "
        f"{s.requests_waiting:,.0f} waiting: the time goes to the queue in front of the cap, which a faster step "
        "leaves as long (seq_cap sizes the cap)"
    )


def _weights_not_the_step(
    model: LatencyModel, inputs: CapacityInputs, gpu: GPUSpec, batch: float, context: float
) -> str | None:
    """Why the small-batch weight turns are withheld at ``batch`` sequences (mean context ``context`` tokens): the
    modelled step's weight stream (``DecodeStepModel.memory_fixed``, less the experts a step leaves unread) is under
    :data:`WEIGHT_SHARE_MIN` of the step; None otherwise, or when the model cannot price it (breaker 27: "fp8 weights …
    though just 256 sequences run … each step is bound by reading the weights" at a full batch of 256)."""
    try:
        step = model.decode_step_model(inputs, gpu, context)
        total = step(max(batch, 1.0))
    except (CapacityError, ValueError):
        return None
    if total <= 0:
        return None
    share = step.memory_fixed / total
    if share >= WEIGHT_SHARE_MIN:
        return None
    return (
        f"withheld: at {batch:,.0f} sequences the weights are ~{share:.0%} of the modelled step (the KV reads and the "
        "GEMMs hold the rest): fewer weight bytes per GPU recover at most that share, and the step is not bound by "
        "reading the weights"
    )


CONSUMER_PART_MARK: Final = "GeForce"
"""The catalog names NVIDIA's consumer cards so (``advisor/data/gpus.csv``): PCIe boards without a GPU-to-GPU link
figure, whose driver does not enable PCIe peer-to-peer for NCCL on the 30 and 40 series, so tensor-parallel
all-reduces stage through host memory."""


def pcie_tensor_parallel_withheld(ev: Evaluation) -> str | None:
    """Why a larger TP degree is withheld as a *latency* turn on a consumer card (a GeForce board: PCIe only, no link
    figure in the catalog, :data:`CONSUMER_PART_MARK`), or ``None``. Every layer's all-reduces then cross PCIe —
    through host memory where peer-to-peer is off — at a bandwidth and latency the roofline's fallback link
    (:attr:`advisor.capacity.perf.PerfAssumptions.fallback_interconnect_bytes_per_second`) does not know: operators
    measured TP raising it slower, not faster (vllm-project/vllm#6955: 4 × RTX 3090 Ti on PCIe 4.0, TP 2 → 4 cut
    prompt processing 525 → 490 tokens/s; noonghunna/club-3090#356: 2 × RTX 3090 on PCIe Gen3 without P2P decode one
    stream at ~50 tokens/s against 66–71 published, "the TP=2 all-reduce sync tax"). Data-center parts whose link
    figure the catalog lacks (MI250X, GH200, H100 NVL, L40S …) are not judged so: nothing measured says their TP
    turns lose. A TP turn that makes room for the KV pool or the weights (other rules) is not this one."""
    gpu = ev.ctx.gpu
    if gpu is None or gpu.interconnect_bytes_per_second or CONSUMER_PART_MARK not in gpu.name:
        return None
    return (
        f"withheld: the {gpu.name} is a consumer card on PCIe (peer-to-peer off in the driver unless an NVLink "
        "bridge joins a pair), so each layer's all-reduces cross a link whose bandwidth and latency the roofline does "
        "not know; operators measured a larger TP degree slower on such boxes (vllm#6955: prefill 525 → 490 "
        "tokens/s at TP 2 → 4)"
    )


@dataclasses.dataclass(frozen=True, slots=True)
class _CapAlone:
    """Whether a batch cap alone carries the load (``sufficient``), and why not in one sentence (``why``)."""

    sufficient: bool
    why: str


def _cap_serves_the_load(ev: Evaluation, ratio: float) -> _CapAlone:
    """Whether a replica capped at the TPOT knee still serves the load: its completions scale by ``ratio`` (the
    capped batch ÷ today's × today's TPOT ÷ the capped one: Little's law, a request holds its slot for its decode),
    against the window's arrival rate where it is measured (:func:`advisor.rules.replicas.arrival_rate`, not over a
    history too short for one), else against today's completions while requests wait (a cap that completes fewer
    with a queue lets it grow). The cap closes the TPOT gap, not the load's: at 400 running and 600 waiting a cap of
    39 completes a fifth of what runs today (field-state round 45, llm-d/llm-d-batch-gateway#491, where it ranked
    first as "closes the gap")."""
    s = ev.stats
    done = s.requests_finished_per_second if s is not None else None
    flow = arrival_rate(s) if s is not None else None
    arriving = flow[0] if flow is not None and arrival_history_withheld(ev) is None else None
    if done and math.isfinite(done) and arriving is not None and math.isfinite(arriving):
        served = done * ratio
        if served >= arriving:
            return _CapAlone(True, "")
        return _CapAlone(
            False,
            f"Alone the cap completes ~{served:.2f} requests/s against {arriving:.2f} arriving: the queue grows "
            "until the replicas are added.",
        )
    waiting = s.requests_waiting if s is not None else None
    if ratio < 1 and (done or waiting is None or waiting > 0):
        # arrivals not measured: today's completions are what arrives in a steady state (and a queue or an unknown
        # one means at least that), so a cap that completes fewer lets a queue build (breaker 12: 400 running, no
        # queue, 15/s completing, a cap of 39 called sufficient)
        queued = f" with {waiting:,.0f} waiting" if waiting else ""
        return _CapAlone(
            False,
            f"Alone the cap completes ~{ratio:.0%} of today's requests/s{queued}: a queue builds until the replicas "
            "are added.",
        )
    return _CapAlone(True, "")


def _chunking_already(ev: Evaluation) -> str | None:
    """Why "make sure chunked prefill is on" is no turn, or ``None``: vLLM already chunks long prompts here
    (:attr:`advisor.capacity.inputs.CapacityInputs.chunked_prefill`: V1 always unless turned off), so the turn would
    tell the operator to set what is set (field-state round 33, vllm PR #44787: a V1 TTFT tail from the frontend's
    multimodal preprocessing, where "enable chunked prefill" was proposed)."""
    inputs = ev.ctx.inputs
    if inputs.engine != "vllm" or not inputs.chunked_prefill:
        return None
    return "withheld: vLLM already chunks long prompts here (V1 does unless --no-enable-chunked-prefill is set)"


def _queue_drained(ev: Evaluation) -> str | None:
    """Why a replica count for TTFT lost to queueing is withheld: the window began with requests waiting and none
    wait now — a burst (a restart's reconnecting clients, a traffic spike) that drained on its own, whose queue
    times still fill the window's histogram; replicas sized from it serve a queue that is gone (breaker 22: "replicas
    3 → 4" and "1 → 2" pages updated in after the queue emptied, held for minutes). ``None``: a queue is there now,
    or none was at the window's start (queue time from a steady overload)."""
    s = ev.stats
    if s is None or s.requests_waiting is None or s.requests_waiting > 0 or not s.requests_waiting_first:
        return None
    return (
        f"withheld: the queue has drained ({count(s.requests_waiting_first)} waiting at the window's start, none now): "
        "the window's TTFT misses are that queue's, not a load the replicas must carry"
    )


def _turned(inputs: CapacityInputs, **change: Any) -> CapacityInputs | None:
    """``inputs`` with ``change``, or ``None`` when the capacity inputs refuse it (a quantization the checkpoint's
    own contradicts, a TP the heads do not divide): no such turn to propose (field-state round 67, vllm#22331:
    ``awq`` on gpt-oss's mxfp4 checkpoint raised out of the rule and dropped the deployment)."""
    try:
        return dataclasses.replace(inputs, **change)
    except (CapacityError, ValueError):
        return None


def _finite(x: float) -> float | None:
    """JSON has no infinity: an unstable queue's wait is reported as null (unbounded)."""
    return None if math.isinf(x) or math.isnan(x) else x
