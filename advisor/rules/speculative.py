"""Rule ``speculative_decoding``: a latency lever for small batches, and a cost once the batch fills the GPU.

Enable: speculation does not run (neither the config nor the engine's draft counter says so), at most
``max_batch_per_replica`` sequences run per replica and TPOT misses its target — decode is bound by reading the
weights, and the bandwidth sits idle between steps. A draft proposes ``k`` tokens the target model verifies in one
step; with acceptance rate α the expected tokens per step are (1 − α^(k+1)) ÷ (1 − α) (Leviathan, Kalman & Matias,
"Fast Inference from Transformers via Speculative Decoding", ICML 2023, eq. 1). The advisor assumes α = 0.6 and
k = 4 (≈2.3 tokens per step) and a 10 % draft overhead, and names a disable-by-batch-size threshold
(``disable_by_batch_size``) above which the batch already keeps the GPU busy. An n-gram draft's acceptance is the
workload's overlap with its prompts, so it is withheld where the requests read fewer than
:data:`NGRAM_MIN_PROMPT_PER_OUTPUT` prompt tokens per generated token since the engines started (free-form
generation).

Speculation running, measured (the engine counts its drafts — vLLM V1, llama.cpp — or keeps their mean as gauges —
SGLang's acceptance length and verify size, its rounds then the generated tokens ÷ that length): the window's drafts
give the mean acceptance length ``L`` (tokens a verification round yields per sequence) and the draft length ``k``.
At the batch that runs, the roofline prices the round: ``L × step(B) ÷ verify(B, k + 1)`` bounds the speedup over
plain decoding from above (:func:`advisor.capacity.spec_speedup.speculative_speedup`; the draft's own cost is left
out). Below
``LOSS_BOUND`` (0.9) the verification costs more than the accepted tokens return, whatever the draft costs: the rule
fires whether or not TPOT meets its target (speculation then costs both latency and throughput). It proposes the
draft length with the best bound when the engine splits acceptance by position and that length's bound reaches
``SHORTEN_MIN_SPEEDUP`` (1.1), else turning speculation off. A bound at or above ``LOSS_BOUND`` is no loss the
roofline can show; the batch threshold below still applies (costs the roofline does not price grow with the batch:
an n-gram lookup per sequence on the CPU, the rejection sampler), except where the bound shows a clear win
(``CLEAR_WIN``, 1.5×): the measurement then contradicts it, and the rule does not fire.

The bound leaves the draft's own passes out, so a round that is slow for reasons outside the roofline (a draft
model or head as costly as the target's thin MoE step, CUDA graphs not captured for the verify shapes) is read from
the engine's own time per token instead: where the latency model's TPOT without speculation, at the window's batch,
context and prefill share, is below ``MEASURED_LOSS_BOUND`` (0.75, the model's error bound) of the TPOT the engine
measures with it, speculation makes every token slower than plain decoding would, and the rule turns it off
(sgl-project/SpecForge#339: EAGLE-3 on Qwen3-30B-A3B at one stream, 6.26 ms a token against 4.49 ms without;
vllm-project/vllm#35387's MTP at one request: 46 ms against 17.5 ms a plain step). A gap of an inter-token-latency
histogram that is observed once per engine step (vLLM before its per-request TPOT) is a whole round there, divided by
the measured acceptance length. Once a running speculation was measured as a loss, the enable side does not propose
speculation for that deployment again for ``REENABLE_AFTER_SECONDS`` (24 h; remembered by the daemon's rule, not
across a restart): with it off, the same small batch still misses TPOT, and enabling it again would flip the advice.

Speculation running, not measured (no draft counter, or fewer than ``MIN_DRAFTS`` drafts in the window): more than
``disable_above_batch_per_replica`` sequences per replica while TPOT misses its target → disable.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any, Final

from advisor import conventions as c
from advisor.capacity.calibration import MODEL_ERROR_BOUND
from advisor.capacity.generation import parse_version
from advisor.capacity.spec_speedup import DraftLengthChoice, best_draft_length, speculative_speedup
from advisor.engines.catalog import counters_advance_during_decode, itl_per_token
from advisor.errors import CapacityError
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import (
    confidence,
    count,
    data_parallel_ranks,
    latency_model,
    step_outside_gpu,
    tokens_per_running_request,
    tpot_knee,
)
from advisor.rules.flags import (
    draft_length_flag,
    flag_for,
    mtp_speculation,
    speculation_available,
    vllm_legacy_ngram_flag,
)
from advisor.rules.observation import histogram_mean, window_observation
from advisor.rules.turns import effect
from advisor.telemetry import histogram_quantile

ACCEPTANCE = 0.6
MTP_ACCEPTANCE: Final = 0.85
"""Acceptance of a draft token from the checkpoint's own multi-token-prediction layer: DeepSeek-V3 Technical Report
(arXiv 2412.19437, §5.4.3): "the acceptance rate of the second token prediction ranges between 85% and 90%" (the
low end taken)."""
MTP_DRAFT_TOKENS: Final = 1
"""Draft tokens proposed from the MTP layers: one, the depth whose acceptance is reported (above); later depths
accept far less (MiMo-7B's MTP: 0.88 at the first, 0.18 at the second, vllm-project/vllm#25136), and the engines'
recipes for DeepSeek-V3/R1 run one (vllm-project/vllm#12755, SGLang's DeepSeek guide)."""
DRAFT_TOKENS = 4
DRAFT_OVERHEAD = 1.1
"""A round's cost over a plain step from the draft's own passes, assumed (10 %): what the enable side divides its
expected tokens per step by, and the least acceptance length a running speculation must reach to pay for itself
(:meth:`Measured.below_draft_cost`)."""
MIN_DRAFTS: Final = 50
"""Drafts a window must hold before its acceptance is read (fewer: the batch threshold decides)."""
LOSS_BOUND: Final = 0.9
"""Speedup bound below which the measured rule fires: a 10 % margin for the roofline's ratio of a verification
step to a plain step (both set by the same FLOP/s once the batch is compute-bound, so their ratio errs less than
either time)."""
MEASURED_LOSS_BOUND: Final = 1.0 - MODEL_ERROR_BOUND
"""Modelled plain-decode TPOT ÷ measured TPOT below which speculation is measured to cost (0.75). The latency
model's TPOT ``P'`` errs from the engine's plain TPOT ``P`` within its bound
(:data:`advisor.capacity.calibration.MODEL_ERROR_BOUND`, 25 %: ``P' ≥ 0.75 P``), so a measured TPOT ``M`` with
``P' ÷ M < 0.75`` is above ``P``: the engine decodes slower with speculation than it would without, unless the model
errs beyond its bound."""
REENABLE_AFTER_SECONDS: Final = 24 * 3600.0
"""How long after a running speculation was measured as a loss the enable side stays quiet for that deployment: the
loss is a property of the model, draft and GPU, not of the hour's traffic, and enabling it again would undo the
advice that turned it off."""
MIN_MEASURED_TOKENS: Final = 100
"""Generated tokens in the window below which a TPOT mean over fewer than
:data:`~advisor.rules.observation.MIN_REQUESTS` requests is not read as the engine's time per token."""
LITTLE_AGREEMENT: Final = 2.0
"""How far the TPOT of the window's finished requests may exceed the engine's own interval between a sequence's tokens
(:func:`token_interval_seconds`) and still be read as the engine's time per token: a request's TPOT is its decode time
÷ (tokens − 1), so a consistent reading is at most twice the interval; beyond it the few requests that finished met
steps the running sequences did not (a prefill chunk in each of a short request's gaps)."""
CLEAR_MARGIN: Final = 0.05
"""How far above :data:`LOSS_BOUND` the bound must rise before a measured loss clears (hysteresis)."""
CLEAR_WIN: Final = 1.5
"""Speedup bound at or above which the measurement withholds the batch threshold's disable: a round that returns
half again what it costs stays a win after a draft model's or head's own passes (EAGLE heads and n-gram lookups cost
far less; a draft model of a tenth of the target's size at k = 4, about 40 %)."""
SHORTEN_MIN_SPEEDUP: Final = 1.1
"""Speedup bound a shorter draft must reach to be proposed instead of turning speculation off."""
NGRAM_MIN_PROMPT_PER_OUTPUT: Final = 2.0
"""Prompt tokens the requests read per token they generate (since the engines started) below which an n-gram draft is
not proposed. A
prompt-lookup draft proposes only the tokens that follow a span the output repeats from its context (vLLM's
``NgramProposer``; Saxena, "Prompt Lookup Decoding", 2023: input-grounded tasks — summarization, document QA, code
editing), so its acceptance is the workload's overlap, which no metric shows before it runs: free-form generation
longer than its prompt repeats little of it ("effective on workloads with repetitive or quoted input and weak on
freely generated text", the RBLN restatement of upstream vLLM's n-gram method; vLLM's own docs through 0.14: speculation
"does not usually yield inter-token latency reductions for all prompt datasets"). Measured at prompts a fifth and
a half of the outputs: vllm-project/vllm#8439, one stream of Qwen2-7B 69.8 → 61.8 tokens/s; vllm-project/vllm#10031,
two streams 10 % slower. Summaries and document answers read several times what they write; chat reads about what it
writes — twice is between them."""
_POSITION_ENGINES: Final = frozenset({"vllm", "llamacpp"})
"""Engines whose draft length the advisor can set from a per-position reading (vLLM ``num_speculative_tokens``,
llama.cpp ``--draft-max``); others get only the switch."""


def tokens_per_step(alpha: float = ACCEPTANCE, k: int = DRAFT_TOKENS) -> float:
    """Expected tokens per verification step (Leviathan et al. 2023, eq. 1): (1 − α^(k+1)) ÷ (1 − α)."""
    return (1 - alpha ** (k + 1)) / (1 - alpha)


@dataclass(frozen=True, slots=True)
class Measured:
    """Speculation's round against the roofline at the running batch (module docstring).

    Attributes:
        batch: sequences per engine (running ÷ replicas up ÷ data-parallel ranks).
        context: mean tokens per running request (the KV each sequence reads per step).
        acceptance_length: tokens a round yields per sequence, the bonus token included.
        draft_length: mean draft tokens per round.
        speedup: the bound at the running draft length.
        choice: the bound at every shorter length when the engine splits acceptance by position, else ``None``.
        drafts: drafts in the window.
        draft_share: the share of sequence-steps that carried a draft (:attr:`SpeculationWindow.draft_share`); 1.0
            where the engine's counters cannot say (llama.cpp drafts at each step of a slot with a draft model;
            SGLang's rounds are derived as drafted ones).
    """

    batch: float
    context: float
    acceptance_length: float
    draft_length: float
    speedup: float
    choice: DraftLengthChoice | None
    drafts: float
    draft_share: float = 1.0
    measured_tpot_seconds: float | None = None
    plain_tpot_seconds: float | None = None

    @property
    def per_token_speedup(self) -> float | None:
        """The latency model's TPOT without speculation at the window's batch, context and prefill share ÷ the TPOT
        the engine measured with it; ``None`` when either is unknown."""
        if self.measured_tpot_seconds is None or self.plain_tpot_seconds is None or self.measured_tpot_seconds <= 0:
            return None
        return self.plain_tpot_seconds / self.measured_tpot_seconds

    def per_token_loss(self, bound: float = MEASURED_LOSS_BOUND) -> bool:
        """The measured time per token is beyond ``bound`` of the modelled plain decode
        (:data:`MEASURED_LOSS_BOUND`)."""
        speedup = self.per_token_speedup
        return speedup is not None and speedup < bound

    def below_draft_cost(self, margin: float = 0.0) -> bool:
        """The acceptance length is below :data:`DRAFT_OVERHEAD` (+ ``margin``): a round yields ``L`` tokens and costs
        at least one plain step (verifying ``k + 1`` tokens is never cheaper than decoding one) plus the draft's own
        passes, so its speedup is at most ``L ÷ DRAFT_OVERHEAD`` < 1 whatever the roofline says of the verify step —
        the drafts are almost all rejected (vllm-project/vllm#41789: an MTP drafter at mean acceptance length 1.03,
        25 of 3,652 draft tokens accepted, while the verify-only bound read 0.98× and no loss)."""
        return self.acceptance_length < DRAFT_OVERHEAD + margin


def _draft_cost_text(m: Measured) -> str:
    """The reason's tail for :meth:`Measured.below_draft_cost`."""
    return (
        f"; {m.acceptance_length:.2f} tokens a round cannot repay the draft's own cost (~{DRAFT_OVERHEAD - 1:.0%} "
        "of a step)"
    )


def _draft_cost_facts(m: Measured) -> str:
    """The description's facts for :meth:`Measured.below_draft_cost`."""
    return (
        f"Each verification round yields {m.acceptance_length:.2f} tokens per sequence for {m.draft_length:.1f} draft "
        f"tokens ({m.drafts:,.0f} drafts in the window): almost every draft is rejected. A round costs at least one "
        f"plain decode step plus the draft's own passes (~{DRAFT_OVERHEAD - 1:.0%} assumed), so speculation is at best "
        f"{m.acceptance_length / DRAFT_OVERHEAD:.2f}× plain decoding here, whatever the verify step costs."
    )


def _measured_evidence(ev: Evaluation, m: Measured) -> dict[str, Any]:
    """The measured round as evidence keys (``spec_*``)."""
    out: dict[str, Any] = {
        "batch_per_engine": round(m.batch, 2),
        "spec_drafts": m.drafts,
        "spec_mean_acceptance_length": round(m.acceptance_length, 3),
        "spec_draft_length": round(m.draft_length, 2),
        "spec_speedup_bound": round(m.speedup, 3),
        "spec_draft_share": round(m.draft_share, 3),
    }
    if m.per_token_speedup is not None and m.measured_tpot_seconds is not None and m.plain_tpot_seconds is not None:
        out["tpot_mean_seconds"] = round(m.measured_tpot_seconds, 6)
        out["tpot_modelled_without_speculation_seconds"] = round(m.plain_tpot_seconds, 6)
        out["spec_measured_speedup"] = round(m.per_token_speedup, 3)
    if ev.speculation is not None and ev.speculation.accepted_by_position:
        out["spec_position_acceptance"] = [
            None if p is None else round(p, 3) for p in ev.speculation.position_acceptance()
        ]
    return out


def _per_token(ev: Evaluation, tokens_per_round: float = 1.0) -> tuple[float | None, float | None]:
    """(measured mean TPOT, the latency model's TPOT without speculation at the same batch, context and prefill
    share), seconds, from the window (:func:`advisor.rules.observation.window_observation`: at least
    :data:`~advisor.rules.observation.MIN_REQUESTS` observations, or any over :data:`MIN_MEASURED_TOKENS` generated
    tokens); ``(None, None)`` where either is unknown. Where the TPOT histogram is an inter-token latency observed
    once per engine step (vLLM before its per-request TPOT, 0.11; :func:`advisor.engines.catalog.itl_per_token`), a
    gap is a whole round: it is divided by ``tokens_per_round`` (the measured acceptance length). A TPOT of fewer
    than ``MIN_REQUESTS`` requests more than :data:`LITTLE_AGREEMENT` times the engine's interval between a running
    sequence's tokens (:func:`token_interval_seconds`) is not the engine's pace (unknown); a mean over more requests
    is read as it is. The plain step is priced at the running
    sequences' context where it exceeds the finished requests' (their KV is what a step reads). The
    model's decode factor is not calibrated on a speculating engine (:mod:`advisor.online_calibration`), so its
    plain step is the published calibration's, or the deployment's prefill-calibrated model."""
    obs = window_observation(ev)
    gpu = ev.ctx.gpu
    if obs is None or gpu is None:
        return None, None
    measured = obs.tpot_seconds
    few = False
    if measured is None and ev.stats is not None:
        # fewer than MIN_REQUESTS requests finished (one stream at batch 1 finishes one a second): their mean time
        # per token is read while the window generated enough tokens, and only where it agrees with the engine's
        # own interval between tokens (below)
        mean, n = histogram_mean(ev.stats.tpot)
        generated = ev.counter_deltas.get("generation_tokens")
        if mean is not None and n >= 1 and generated is not None and generated >= MIN_MEASURED_TOKENS:
            measured, few = mean, True
    if measured is None:
        return None, None
    if ev.tpot_is_itl and not itl_per_token(ev.ctx.engine):
        # one gap per step per request: a speculative round's ``tokens_per_round`` tokens arrive in one gap
        measured /= max(1.0, tokens_per_round)
    interval = token_interval_seconds(ev) if few else None
    if interval is not None and measured > LITTLE_AGREEMENT * interval:
        # the few requests that finished are not the engine's pace: short ones whose gaps fell on prefill chunks
        return None, None
    running_context = tokens_per_running_request(ev)
    if running_context is not None and running_context > obs.context_tokens:
        # the running sequences' KV, not the finished requests', is what each plain step would read
        obs = dataclasses.replace(obs, context_tokens=running_context)
    try:
        plain = latency_model(ev).predicted_tpot(ev.ctx.inputs, gpu, obs)
    except (CapacityError, ValueError):
        return None, None
    return measured, plain


def token_interval_seconds(ev: Evaluation) -> float | None:
    """The engine's mean time between a running sequence's tokens over the window, by Little's law: mean running
    sequences ÷ generated tokens per second, both over the deployment (seconds); ``None`` when either is unknown or
    nothing was generated. A sequence that is prefilling counts as running and generates nothing, so this is at least
    the decode interval; a request's own TPOT (decode time ÷ (tokens − 1)) exceeds it by at most 2× for consistent
    readings (a two-token request's one gap against its two tokens' share of the running time). ``None`` too where
    the engine's token counters move only when a request finishes
    (:func:`advisor.engines.catalog.counters_advance_during_decode`: SGLang, llama.cpp): a short window's rate is then
    whole requests' tokens, not the window's."""
    if counters_advance_during_decode(ev.ctx.engine) is not True:
        return None
    s = ev.stats
    if s is None or not s.generation_tokens_per_second or s.generation_tokens_per_second <= 0:
        return None
    running = ev.requests_running_mean if ev.requests_running_mean is not None else s.requests_running
    if running is None or running <= 0:
        return None
    return running / s.generation_tokens_per_second


def _per_token_text(m: Measured) -> str:
    """The reason's clause for a measured per-token loss."""
    return (
        f"; measured {(m.measured_tpot_seconds or 0) * 1e3:.2f} ms a token against "
        f"{(m.plain_tpot_seconds or 0) * 1e3:.2f} ms modelled without speculation ({m.per_token_speedup or 0:.2f}×)"
    )


def _per_token_facts(m: Measured) -> str:
    """The description's facts for a measured per-token loss."""
    return (
        f"With speculation the engine takes {(m.measured_tpot_seconds or 0) * 1e3:.2f} ms per output token at "
        f"{m.batch:.0f} sequences per engine, where the latency model prices plain decoding at "
        f"{(m.plain_tpot_seconds or 0) * 1e3:.2f} ms ({m.per_token_speedup or 0:.2f}×, below "
        f"{MEASURED_LOSS_BOUND:.3f}: beyond the model's {MODEL_ERROR_BOUND:.0%} error bound). Each round yields "
        f"{m.acceptance_length:.2f} tokens for {m.draft_length:.1f} drafted; the roofline bounds a free draft's "
        f"speedup at {m.speedup:.2f}×, so the draft's own passes (a draft model or head, its LM head, launches "
        "outside CUDA graphs) cost the rest."
    )


class SpeculativeRule:
    """Small batch with TPOT over target → enable; a running speculation that costs more than it returns (measured)
    or a big batch with TPOT over target (not measured) → shorten or disable."""

    id = c.RULE_SPECULATIVE_DECODING
    supersedes: tuple[str, ...] = ()

    def __init__(
        self,
        max_batch_per_replica: float = 4,
        disable_by_batch_size: int = 8,
        disable_above_batch_per_replica: float = 32,
        for_seconds: float = 300.0,
    ):
        """Batch sizes in sequences per replica; ``for_seconds`` the for-duration."""
        self.max_batch = max_batch_per_replica
        self.disable_by = disable_by_batch_size
        self.disable_above = disable_above_batch_per_replica
        self._for = for_seconds
        self._measured_loss_at: dict[str, float] = {}
        """Deployment name → when a running speculation was last measured as a loss held for the for-duration (unix
        s): the enable side does not propose it again for :data:`REENABLE_AFTER_SECONDS` (kept in memory: a restart
        forgets it)."""
        self._loss_since: dict[str, float] = {}
        """Deployment name → since when every measured reading has been a loss (unix s); a reading without one
        clears it."""

    def _note_loss(self, ev: Evaluation) -> None:
        """Record a measured loss: remembered (:attr:`_measured_loss_at`) once the readings have held it for the
        for-duration, as the rule would fire on it — a loss read in one window and gone in the next (a burst of
        prefills) never turned speculation off, so it must not keep the enable side quiet for a day either."""
        since = self._loss_since.setdefault(ev.ctx.name, ev.now)
        if ev.now - since >= self._for:
            self._measured_loss_at[ev.ctx.name] = ev.now

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    @staticmethod
    def measure(ev: Evaluation) -> Measured | None:
        """The running speculation against the roofline (:class:`Measured`), or ``None`` when the window holds fewer
        than :data:`MIN_DRAFTS` drafts (or does not count them), its counters contradict one another
        (:attr:`~advisor.telemetry.SpeculationWindow.consistent`), nothing runs, or the model cannot price the batch
        (no GPU, a refused model)."""
        sp, s, gpu = ev.speculation, ev.stats, ev.ctx.gpu
        if sp is None or sp.drafts is None or sp.drafts < MIN_DRAFTS or not sp.consistent:
            return None
        if s is None or not s.requests_running or gpu is None:
            return None
        length, k = sp.mean_acceptance_length, sp.draft_length
        if length is None or k is None or k <= 0:
            return None
        batch = s.requests_running / max(ev.replicas_up, 1) / data_parallel_ranks(ev)
        if batch < 1:
            return None
        context = tokens_per_running_request(ev) or float(ev.ctx.inputs.max_model_len or 2048) / 2
        positions = sp.position_acceptance()
        try:
            step = latency_model(ev).decode_step_model(ev.ctx.inputs, gpu, context)
            share = sp.draft_share or 1.0
            speedup = speculative_speedup(step, batch, length, k, share)
            choice = None
            if positions and all(p is not None for p in positions) and ev.ctx.engine in _POSITION_ENGINES:
                known = [p for p in positions if p is not None]
                # the draft length that runs: one position counter per draft token (vLLM creates exactly
                # num_speculative_tokens; llama.cpp writes those it reached), at least the mean drafted
                choice = best_draft_length(step, batch, known, max(len(known), math.ceil(k - 1e-9)), share)
        except (CapacityError, ValueError):
            return None
        measured_tpot, plain_tpot = _per_token(ev, length)
        return Measured(batch, context, length, k, speedup, choice, sp.drafts, share, measured_tpot, plain_tpot)

    def _reading(self, ev: Evaluation) -> tuple[bool | None, str, dict[str, Any], Measured | None]:
        """``(holds, reason, evidence, measurement)``: the fire condition and the measured round it rests on (``None``
        when the batch threshold, or the enable side, decides)."""
        s = ev.stats
        runs = ev.speculation_runs()
        measured = self.measure(ev) if runs else None
        tpot_ok = ev.tpot_ok.value if ev.tpot_ok is not None else None
        evidence: dict[str, Any] = {}
        if s is not None and s.requests_running is not None:
            batch = s.requests_running / max(ev.replicas_up, 1)
            evidence = {
                "requests_running": s.requests_running,
                "batch_per_replica": round(batch, 2),
                "tpot_within_target_ratio": tpot_ok,
                "tpot_p50_seconds": histogram_quantile(0.5, s.tpot),
                "tpot_target_seconds": ev.ctx.slo.tpot_seconds,
                "speculative_decoding": runs,
                "window_seconds": s.window_seconds,
            }
        if measured is not None:
            evidence |= _measured_evidence(ev, measured)
            reason = (
                f"speculation yields {measured.acceptance_length:.2f} tokens a round for {measured.draft_length:.1f} "
                f"drafted at {measured.batch:.0f} sequences per engine: the roofline bounds its speedup at "
                f"{measured.speedup:.2f}×"
            )
            if measured.speedup < LOSS_BOUND:
                self._note_loss(ev)
                return True, reason, evidence, measured
            if measured.per_token_loss():
                self._note_loss(ev)
                return True, reason + _per_token_text(measured), evidence, measured
            if measured.below_draft_cost():
                self._note_loss(ev)
                return True, reason + _draft_cost_text(measured), evidence, measured
            self._loss_since.pop(ev.ctx.name, None)
            if measured.speedup >= CLEAR_WIN:
                return False, reason + " (a clear win)", evidence, measured
            if tpot_ok is None:  # between the two: the batch threshold decides, and it needs TPOT
                return None, reason + "; TPOT unknown", evidence, measured
            big = self._big_batch_miss(evidence, tpot_ok, ev)
            return big, reason + f"; {tpot_ok:.0%} within TPOT", evidence, measured
        self._loss_since.pop(ev.ctx.name, None)  # no measured loss this window: one read again starts afresh
        if not evidence or tpot_ok is None:
            return None, "running requests or TPOT unknown", {}, None
        batch = evidence["batch_per_replica"]
        if runs:
            holds = self._big_batch_miss(evidence, tpot_ok, ev)
            reason = f"speculation on with {batch:.0f} sequences per replica; {tpot_ok:.0%} of requests within TPOT"
        else:
            holds = tpot_ok < ev.ctx.slo.target_ratio and 0 < batch <= self.max_batch
            reason = f"{batch:.1f} sequences per replica; {tpot_ok:.0%} of requests within TPOT"
            lost = self._measured_loss_at.get(ev.ctx.name)
            if holds and lost is not None and 0 < ev.now - lost < REENABLE_AFTER_SECONDS:
                # the speculation this would enable was measured costing on this deployment: proposing it again
                # would flip the advice back and forth
                holds = False
                reason += (
                    f"; speculation was measured as a loss here {(ev.now - lost) / 60:.0f} min ago: not proposed "
                    f"again for {REENABLE_AFTER_SECONDS / 3600:.0f} h"
                )
        return holds, reason, evidence, None

    def _big_batch_miss(self, evidence: dict[str, Any], tpot_ok: float | None, ev: Evaluation) -> bool:
        """TPOT misses its target with more than ``disable_above_batch_per_replica`` sequences per replica."""
        batch = evidence.get("batch_per_replica")
        return (
            tpot_ok is not None
            and batch is not None
            and tpot_ok < ev.ctx.slo.target_ratio
            and batch > self.disable_above
        )

    def fires(self, ev: Evaluation) -> Condition:
        """See the module docstring."""
        holds, reason, evidence, _ = self._reading(ev)
        return Condition(holds, reason, evidence)

    def clears(self, ev: Evaluation) -> Condition:
        """The measured loss is gone by a margin (the bound at or above :data:`LOSS_BOUND` +
        :data:`CLEAR_MARGIN`, so a bound hovering at 0.9 does not flap), TPOT meets its target again, or the batch
        left the regime."""
        holds, reason, evidence, measured = self._reading(ev)
        if holds is False and measured is not None and measured.speedup < LOSS_BOUND + CLEAR_MARGIN:
            return Condition(False, f"{reason}: within {CLEAR_MARGIN} of the loss bound {LOSS_BOUND}", evidence)
        if holds is False and measured is not None and measured.per_token_loss(MEASURED_LOSS_BOUND + CLEAR_MARGIN):
            return Condition(
                False, f"{reason}: measured within {CLEAR_MARGIN} of the loss bound {MEASURED_LOSS_BOUND}", evidence
            )
        if holds is False and measured is not None and measured.below_draft_cost(CLEAR_MARGIN):
            return Condition(
                False,
                f"{reason}: acceptance length within {CLEAR_MARGIN} of the draft's cost {DRAFT_OVERHEAD}",
                evidence,
            )
        return Condition(None if holds is None else not holds, reason, evidence)

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """Enable (with a disable-by-batch-size threshold), shorten the draft, or disable speculative decoding."""
        holds, _, evidence, measured = self._reading(ev)
        if not holds:
            return []
        conf = confidence(ev, 0.6)
        if measured is not None and measured.speedup < LOSS_BOUND:
            return [self._measured_turn(ev, measured, evidence, conf)]
        if measured is not None and measured.per_token_loss():
            return [
                self._disable(ev, evidence, conf, facts=_per_token_facts(measured), speedup=measured.per_token_speedup)
            ]
        if measured is not None and measured.below_draft_cost():
            facts = _draft_cost_facts(measured)
            return [self._disable(ev, evidence, conf, facts=facts, speedup=measured.acceptance_length / DRAFT_OVERHEAD)]
        if ev.speculation_runs():
            return [self._disable(ev, evidence, conf)]
        return [self._enable(ev, evidence, conf)]

    def _miss_severity(self, ev: Evaluation) -> str:
        ok = ev.tpot_ok.value if ev.tpot_ok is not None else None
        return "warning" if ok is not None and ok < ev.ctx.slo.target_ratio else "info"

    def _measured_turn(self, ev: Evaluation, m: Measured, evidence: dict[str, Any], conf: float) -> Proposal:
        name, engine = ev.ctx.name, ev.ctx.engine
        facts = (
            f"Each verification round yields {m.acceptance_length:.2f} tokens per sequence for "
            f"{m.draft_length:.1f} draft tokens scored ({m.drafts:,.0f} drafts in the window), and "
            f"{m.batch:.0f} sequences run per engine: scoring {m.draft_length + 1:.1f} tokens per sequence makes a "
            f"round cost more than {m.acceptance_length:.2f} plain decode steps, so the roofline bounds "
            f"speculation's speedup at {m.speedup:.2f}× even with a free draft (Leviathan et al. 2023, §3.4)."
        )
        choice = m.choice
        # the draft length the engine runs, as its counters say (the config's may be stale)
        current_k = choice.current[0] if choice is not None else math.ceil(m.draft_length - 1e-9)
        if choice is not None and 1 <= choice.best[0] < current_k and choice.best[1] >= SHORTEN_MIN_SPEEDUP:
            j, bound = choice.best
            return Proposal(
                rule=self.id,
                dial=c.DIAL_SPECULATIVE_DECODING,
                action="decrease",
                current=current_k,
                suggested=j,
                flag=draft_length_flag(engine, j),
                severity=self._miss_severity(ev),
                confidence=conf,
                summary=f"{name}: speculation drafts more than the batch verifies — draft {j} tokens, not {current_k}",
                description=(
                    f"{facts} The later draft positions are rarely accepted: with {j} draft token"
                    f"{'s' if j > 1 else ''} the bound is {bound:.2f}× (per-position acceptance "
                    f"{evidence.get('spec_position_acceptance')}). Shorten the draft; turn speculation off if the "
                    "shorter draft does not lower TPOT."
                ),
                predicted_effect={"spec_speedup_bound": effect(round(m.speedup, 3), round(bound, 3))},
                evidence=evidence,
                score=bound / max(m.speedup, 1e-9),
                sufficient=True,
                cost=1.0,
                gpus_added=0.0,
            )
        return self._disable(ev, evidence, conf, facts=facts, speedup=m.speedup)

    def _disable(
        self,
        ev: Evaluation,
        evidence: dict[str, Any],
        conf: float,
        facts: str | None = None,
        speedup: float | None = None,
    ) -> Proposal:
        name = ev.ctx.name
        if facts is None:
            description = (
                f"{count(evidence['requests_running'])} sequences run ({evidence['batch_per_replica']:.0f} per "
                "replica): the batch keeps the GPU busy, so verifying draft tokens costs compute that "
                "decoding needs, and TPOT misses its target. Turn speculation off (vLLM ≥ 0.10 ignores a "
                "disable-by-batch-size threshold in its speculative config)."
            )
            summary = f"{name}: large batches with speculation on — disable speculative decoding"
            severity = "warning"
            predicted: dict[str, Any] = {"speculative_decoding": effect(1, 0)}
        else:
            description = f"{facts} No shorter draft returns more than it costs at this batch. Turn speculation off."
            summary = f"{name}: speculation costs more than it returns at this batch — disable speculative decoding"
            severity = self._miss_severity(ev)
            predicted = {"spec_speedup_bound": effect(round(speedup or 0.0, 3), 1.0)}
        return Proposal(
            rule=self.id,
            dial=c.DIAL_SPECULATIVE_DECODING,
            action="disable",
            current="on",
            suggested="off",
            flag="remove --speculative-config" if ev.ctx.engine == "vllm" else "turn speculative decoding off",
            severity=severity,
            confidence=conf,
            summary=summary,
            description=description,
            predicted_effect=predicted,
            evidence=evidence,
            score=1.0,
            sufficient=facts is not None,
            cost=1.0,
            gpus_added=0.0,
        )

    def _enable(self, ev: Evaluation, evidence: dict[str, Any], conf: float) -> Proposal:
        """Turn speculation on. A checkpoint that ships its own multi-token-prediction layers (DeepSeek-V3/R1's
        NextN, ``num_nextn_predict_layers``), on an engine that loads them (:func:`mtp_speculation`), drafts with
        them: the draft its makers trained for it, :data:`MTP_DRAFT_TOKENS` token at :data:`MTP_ACCEPTANCE` (1.85 a
        step; its weights and KV come out of the pool, which :mod:`advisor.capacity.speculative` sizes). Any other
        drafts by
        prompt-lookup n-grams (:data:`DRAFT_TOKENS` at an assumed :data:`ACCEPTANCE`)."""
        p50 = evidence["tpot_p50_seconds"]
        layers = ev.ctx.inputs.model.mtp_layers
        model_type = ev.ctx.inputs.model.model_type
        version = parse_version(ev.ctx.inputs.engine_version)
        mtp = mtp_speculation(ev.ctx.engine, MTP_DRAFT_TOKENS, model_type, version) if layers > 0 else None
        config: dict[str, Any]
        if mtp is not None:
            tps = tokens_per_step(MTP_ACCEPTANCE, MTP_DRAFT_TOKENS)
            method, flag = mtp
            config = {"method": method, "num_speculative_tokens": MTP_DRAFT_TOKENS}
            how = (
                f"The checkpoint ships {layers} multi-token-prediction layer(s) trained as its draft; at the "
                f"acceptance its makers report ({MTP_ACCEPTANCE:.0%}, DeepSeek-V3 Technical Report §5.4.3) each "
                f"step yields ~{tps:.2f} tokens"
            )
            tail = "The layer's weights and KV come out of the KV pool. "
            evidence = {**evidence, "mtp_layers": layers}
        else:
            tps = tokens_per_step()
            config = {"method": "ngram", "num_speculative_tokens": DRAFT_TOKENS, "prompt_lookup_max": 4}
            value: Any = json.dumps(config) if ev.ctx.engine == "vllm" else DRAFT_TOKENS
            legacy = vllm_legacy_ngram_flag(version, DRAFT_TOKENS) if ev.ctx.engine == "vllm" else None
            flag = legacy or flag_for(ev.ctx.engine, c.DIAL_SPECULATIVE_DECODING, value)
            how = (
                f"With {DRAFT_TOKENS} draft tokens at an assumed acceptance of {ACCEPTANCE:.0%}, each step yields "
                f"~{tps:.1f} tokens (Leviathan et al. 2023)"
            )
            tail = ""
        after = p50 * DRAFT_OVERHEAD / tps if p50 is not None else None
        return Proposal(
            rule=self.id,
            dial=c.DIAL_SPECULATIVE_DECODING,
            action="enable",
            current="off",
            suggested=config,
            flag=flag,
            severity="warning",
            confidence=conf,
            summary=f"{ev.ctx.name}: small batches miss TPOT — enable speculative decoding"
            + (" with the model's own MTP layer" if mtp is not None else ""),
            description=(
                f"Only {evidence['batch_per_replica']:.1f} sequences run per replica and only "
                f"{evidence['tpot_within_target_ratio']:.0%} of requests meet TPOT ≤ {ev.ctx.slo.tpot_seconds}s: "
                f"decode is bound by reading the weights and the bandwidth sits idle. {how}, so TPOT p50 "
                f"~{p50 or 0:.3f}s → ~{after or 0:.3f}s. {tail}The win fades as the batch grows: watch it, and turn "
                f"speculation off above ~{self.disable_by} running sequences"
                + (" (vLLM ≥ 0.10 no longer applies a disable-by-batch-size itself)" if ev.ctx.engine == "vllm" else "")
                + ". Measure the acceptance rate on your own traffic."
            ),
            predicted_effect={"tpot_seconds": effect(p50, after)},
            evidence=evidence,
            score=tps / DRAFT_OVERHEAD,
            sufficient=True,
            cost=1.0,
            withheld=self._enable_withheld(ev, version, mtp is not None),
            gpus_added=0.0,
        )

    def _enable_withheld(self, ev: Evaluation, version: tuple[int, ...] | None, trained_draft: bool) -> str | None:
        """Why turning speculation on is withheld, or ``None``:

        * the engine's release cannot speculate (:func:`advisor.engines.flags.speculation_available`; field-state
          round 36: TGI 0.6 and 0.8, on bitsandbytes weights at 110-190 ms a token, were told to ``--speculate``, a
          flag those releases refuse);
        * the draft is an n-gram lookup (``trained_draft`` false: its acceptance only assumed) and the engines' requests
          read fewer than :data:`NGRAM_MIN_PROMPT_PER_OUTPUT` prompt tokens per generated token since they started
          (:attr:`Evaluation.lifetime_prompt_per_generated_token`; field-state
          round 70, vllm-project/vllm#8439): free-form output repeats too little of its prompt for a lookup to draft;
        * the draft is an n-gram lookup and the modelled
          step explains at most half of the TPOT requests see (:func:`advisor.rules.common.step_outside_gpu`): the
          enable side's two premises — decode bound by the weights' read, a round costing ~10 % over a step — are
          then both unmeasured, and where per-step costs outside the roofline dominate, the draft's and verifier's
          own per-round work is of their size (field-state round 68, vllm-project/vllm#10031: Qwen2-1.5B on an A100
          at two streams, ~3 ms modelled of 11 ms seen, 335 s → 367 s with speculation).

        A draft the checkpoint ships (its MTP layers, trained for it, at the acceptance its makers report) is not
        withheld on the step's share: a round amortizes every per-step cost over its accepted tokens — kernel
        launches, all-reduces — not only the read (sgl-project/sglang#3196: one stream of DeepSeek-V3 at 13
        tokens/s, far above its roofline step, is what MTP speeds up)."""
        if not speculation_available(ev.ctx.engine, version):
            return (
                f"withheld: {ev.ctx.engine} {ev.ctx.inputs.engine_version} cannot speculate (it arrived in a later "
                "release); the missed TPOT is not fixed by a flag this release lacks"
            )
        if trained_draft:
            return None
        mix = ev.lifetime_prompt_per_generated_token
        if mix is not None and mix < NGRAM_MIN_PROMPT_PER_OUTPUT:
            return (
                f"withheld: the requests read {mix:.2f} prompt tokens per token they generate since the engine "
                f"started (below {NGRAM_MIN_PROMPT_PER_OUTPUT:g}): an n-gram draft proposes only spans the output "
                "repeats from its prompt, and free-form generation longer than its prompt repeats little of it, so "
                f"the assumed {ACCEPTANCE:.0%} acceptance is not this workload's (vllm-project/vllm#8439: one stream "
                "of Qwen2-7B decoded 69.8 → 61.8 tokens/s with n-gram drafts)"
            )
        knee = tpot_knee(ev)
        outside = None if knee is None else step_outside_gpu(ev, knee.tpot_seconds, ev.ctx.slo.tpot_seconds)
        if outside is None:
            return None
        return (
            f"{outside}. An n-gram draft at an assumed acceptance saves steps of the weights' read, which is not where "
            "this time goes, and adds its own work each round (vllm-project/vllm#10031: a small model at two "
            "streams ran 10 % slower with speculation)"
        )
