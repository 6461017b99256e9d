"""Rule ``prefix_caching_off``: long prompts re-prefilled on a vLLM engine whose prefix cache is off.

Fires on a vLLM V1 engine that runs with automatic prefix caching off (``vllm:cache_config_info``
``enable_prefix_caching="False"``, or ``enable_prefix_caching: false`` in the deployment) while its requests' TTFT
misses the target *after* their queue wait (and the wait is the smaller part), and their prompts are long (at least
:data:`LONG_PROMPT_TOKENS` on average): the time to the first token is the prompt's own prefill. With the cache off the
engine prefills every prompt whole, the part an earlier request already computed too — a multi-turn chat or an agent
re-sends its whole history each turn, a shared system prompt is prefilled per request. With it on, vLLM reuses the
blocks of the longest cached prefix and prefills only the rest (``vllm/v1/core/kv_cache_manager.py``
``get_computed_blocks``): syv-ai/qwen38-27b-rtx3090#6 measured a coding agent's ~20K-token turn at 16.7 s cold and
1.0–1.2 s with its prefix cached (14×, no GPU added), where a second GPU for TP would at best halve the 16.7 s;
rwlove/home-ops#13384 an agent loop re-prefilling 96K tokens a step at 9.9K tokens/s because fp8 KV had turned the cache
off.

The measurement is the window's (TTFT, queue-time and prompt-length histograms, at least :data:`MIN_REQUESTS`
observed in it) or, when the window observed fewer (a single user's long turns), the engines' since they started
(:attr:`advisor.rules.base.Evaluation.lifetime_prefill`) — unless the few requests the window did observe meet the
TTFT target: older history never overrules them, so the rule clears once a fix takes. Whether the prompts share
prefixes cannot be measured while the cache is off (its hit counters count nothing), so the proposal says what
falsifies it: a hit rate near zero afterwards (the engine's prefix-cache hit and query counters). Where the GPU's
roofline is known, the modelled prefill of the mean prompt must explain at least
:data:`advisor.rules.goodput.PREFILL_SHARE_MIN` of the TTFT past the queue; below it the time goes elsewhere (the API
server's preprocessing, a grammar compile) and the proposal is withheld.

Not for V0 (prefix caching off by default and, on some attention backends, refused beside an fp8 KV cache: vllm
#13147), nor for a hybrid (Mamba / linear-attention) model with speculative decoding running (the cache corrupts its
output beside a drafter: vllm#43559, open on 0.28 as vllm#53912; operators keep it off for that, noonghunna/club-3090
#720), nor for a hybrid model before vLLM 0.26, where the cache is not the engine's
default for hybrids (:data:`advisor.capacity.kvlayout.HYBRID_PREFIX_CACHING_DEFAULT_SINCE`). On a hybrid the cache
runs the ``align`` mode, whose state pages shrink the pool: the capacity pass prices that (``kv_cache_tokens``
before and after). Not on other engines: their caches (SGLang's radix cache, TensorRT-LLM's block reuse) are on by
default and no page they serve says whether they run.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from advisor import conventions as c
from advisor.capacity.generation import parse_version
from advisor.capacity.kv import capacity_pass
from advisor.capacity.kvlayout import HYBRID_PREFIX_CACHING_DEFAULT_SINCE
from advisor.errors import CapacityError
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import confidence, data_parallel_ranks, latency_model, percent
from advisor.rules.flags import flag_for
from advisor.rules.goodput import PREFILL_SHARE_MIN
from advisor.rules.turns import effect
from advisor.telemetry import histogram_mean

LONG_PROMPT_TOKENS: Final = 1024
"""Mean prompt tokens at and above which a prompt's prefill is the TTFT a prefix cache can shorten: shorter prompts
prefill in tens of milliseconds on a GPU (a ~1,000-token prompt of an 8B model is ~16 TFLOP), so a TTFT miss with
them is a queue or a stage outside the engine."""
MIN_REQUESTS: Final = 20
"""Requests a window's TTFT histogram must have observed to be read instead of the since-start means (the goodput
rule's own minimum)."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Prefill:
    """How the requests reached their first token: mean TTFT, mean queue wait (``None`` unknown), mean prompt
    tokens (``None`` unknown), requests observed, and over what (the window, or since the engines started)."""

    ttft: float
    queue: float | None
    prompt: float | None
    requests: float
    over: str
    window_ttft: float | None = None
    window_requests: float = 0.0


def _measured(ev: Evaluation) -> _Prefill | None:
    """The window's TTFT and queue means where its TTFT histogram observed at least :data:`MIN_REQUESTS` and every
    answering engine exposes a queue-time histogram (else the queue mean would be over some engines' requests and the
    TTFT over all: known from :attr:`~advisor.rules.base.Evaluation.lifetime_prefill`, which is unknown unless every
    engine has one), else the engines' means since they started; ``None`` when neither is known. The prompt length is
    always the engines' per-request histogram since start, never the window's counters (prompt tokens are counted at
    prefill, requests at their end: a window where requests start faster than they finish inflates their quotient;
    breaker 11: 600-token prompts read as 18,000)."""
    s = ev.stats
    life = ev.lifetime_prefill
    window = histogram_mean(s.ttft) if s is not None and s.ttft is not None and s.ttft.count >= MIN_REQUESTS else None
    queue = histogram_mean(s.queue_time) if s is not None else None
    prompt = life.prompt_tokens_mean if life is not None else None
    every_queue = life is not None and life.queue_seconds_mean is not None
    if s is not None and s.ttft is not None and window is not None and queue is not None and every_queue:
        return _Prefill(window, queue, prompt, s.ttft.count, "the window")
    if life is None:
        return None
    seen = s.ttft.count if s is not None and s.ttft is not None else 0.0
    return _Prefill(
        life.ttft_seconds_mean,
        life.queue_seconds_mean,
        prompt,
        life.requests,
        "since the engines started",
        histogram_mean(s.ttft) if s is not None and s.ttft is not None and seen > 0 else None,
        seen,
    )


def caching_state(ev: Evaluation) -> tuple[bool | None, str]:
    """Whether the engine runs automatic prefix caching, and who says so: the engine's ``cache_config_info`` label
    (what runs) before the deployment's ``enable_prefix_caching`` (what was meant); ``(None, …)`` when neither says."""
    label = ev.engine_config.get("enable_prefix_caching")
    if label == c.ENGINE_CONFIG_MIXED:
        return None, "the replicas' cache_config_info differ (prefix caching on in some, off in others)"
    if label in ("True", "False"):
        return label == "True", "the engine's cache_config_info"
    stated = ev.ctx.inputs.enable_prefix_caching
    if stated is not None:
        return stated, "the deployment's enable_prefix_caching"
    return None, "neither the engine nor the deployment says"


class PrefixCachingRule:
    """Prefix caching off, long prompts, TTFT past the queue over its target → turn prefix caching on."""

    id = c.RULE_PREFIX_CACHING_OFF
    problem = c.PROBLEM_SATURATION
    supersedes: tuple[str, ...] = ()

    def __init__(self, for_seconds: float = 60.0, long_prompt_tokens: float = LONG_PROMPT_TOKENS):
        """``for_seconds``: for-duration; ``long_prompt_tokens``: the mean prompt length from which prefill counts
        as the TTFT a cache can shorten."""
        self._for = for_seconds
        self.long_prompt_tokens = long_prompt_tokens

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def _reading(self, ev: Evaluation) -> tuple[bool | None, str, dict[str, Any]]:
        if ev.ctx.engine != "vllm":
            return False, "prefix caching is read for vLLM only (the others' caches are on by default)", {}
        inputs = ev.ctx.inputs
        if inputs.overhead_profile != "vllm-v1":
            return False, "V0: prefix caching is off by default there, and some backends refuse it beside fp8 KV", {}
        on, source = caching_state(ev)
        evidence: dict[str, Any] = {"enable_prefix_caching": on, "enable_prefix_caching_source": source}
        if on is None:
            return None, f"whether prefix caching runs is unknown ({source})", evidence
        if on:
            return False, f"prefix caching is on ({source})", evidence
        version = parse_version(inputs.engine_version)
        if inputs.model.linear_layers and version is not None and version < HYBRID_PREFIX_CACHING_DEFAULT_SINCE:
            since = ".".join(map(str, HYBRID_PREFIX_CACHING_DEFAULT_SINCE))
            why = f"a hybrid model on vLLM {inputs.engine_version}: its prefix cache is the default from {since}"
            return False, why, evidence
        if inputs.model.linear_layers and ev.speculation_runs():
            return (
                False,
                (
                    "a hybrid (Mamba / linear-attention) model with speculative decoding: vLLM's prefix cache corrupts "
                    "its output beside a drafter (vllm#43559, still on 0.28: vllm#53912), so the cache stays off"
                ),
                evidence,
            )
        target = ev.ctx.slo.ttft_seconds
        if not target:
            return None, "no TTFT target", evidence
        m = _measured(ev)
        if m is None:
            return (
                None,
                f"TTFT unknown (fewer than {MIN_REQUESTS} requests observed, or the TTFT histograms unreadable)",
                evidence,
            )
        evidence |= {
            "ttft_mean_seconds": round(m.ttft, 4),
            "queue_mean_seconds": None if m.queue is None else round(m.queue, 4),
            "prompt_tokens_mean": None if m.prompt is None else round(m.prompt, 1),
            "requests_observed": m.requests,
            "measured_over": m.over,
        }
        if m.window_ttft is not None and m.window_ttft <= target:
            # the since-start means fill in a window with too few requests to judge, never overrule one whose own
            # requests meet the target: a day of 3.5 s TTFTs fired the rule beside today's 0.4 s, and it could not
            # clear after the fix (breaker 13)
            return (
                False,
                f"the window's {m.window_requests:,.0f} request(s) average a {m.window_ttft:.2f} s TTFT, within the "
                f"{target:g} s target (the since-start mean, {m.ttft:.2f} s, is older history)",
                evidence,
            )
        if m.prompt is None or m.queue is None:
            return (
                None,
                "the prompt length or queue time is unknown: whether prefill holds the TTFT cannot be told",
                (evidence),
            )
        past_queue = m.ttft - m.queue
        if past_queue < 0:
            # per-request means of one population cannot do this: the two histograms counted different requests
            # (or one is corrupt), and what the prefill takes is unknown, never negative seconds (breaker 13)
            return (
                None,
                f"the mean queue wait ({m.queue:.2f} s) exceeds the mean TTFT ({m.ttft:.2f} s), {m.over}: the "
                "histograms disagree, so the time past the queue is unknown",
                evidence,
            )
        evidence["ttft_past_queue_seconds"] = round(past_queue, 4)
        if m.prompt < self.long_prompt_tokens:
            return False, f"prompts average {m.prompt:,.0f} tokens: their prefill is not the TTFT", evidence
        if past_queue <= target:
            return (
                False,
                f"TTFT past the queue averages {past_queue:.2f} s, within the {target:g} s target ({m.over})",
                evidence,
            )
        if m.queue > past_queue:
            # the wait for admission holds most of the TTFT: the pool or the slots are what binds (the saturation
            # rules'), and a cache that shortens the prefill leaves the queue (the demo's saturated pool: 30.8 s
            # queued beside 3.5 s past the queue got "turn prefix caching on" as its first turn)
            return (
                False,
                f"requests wait {m.queue:.2f} s in the queue beside {past_queue:.2f} s past it ({m.over}): the queue, "
                "not the prefill, holds the TTFT",
                evidence,
            )
        return (
            True,
            f"prefix caching is off ({source}) and prompts of ~{m.prompt:,.0f} tokens take {past_queue:.2f} s to "
            f"their first token past a {m.queue:.2f} s queue wait, over the {target:g} s TTFT target ({m.over}, "
            f"{m.requests:,.0f} requests)",
            evidence,
        )

    def fires(self, ev: Evaluation) -> Condition:
        """Cache off, long prompts, TTFT past the queue over target."""
        holds, reason, evidence = self._reading(ev)
        return Condition(holds, reason, evidence)

    def clears(self, ev: Evaluation) -> Condition:
        """No longer so (the cache is on, or the TTFT meets its target)."""
        holds, reason, evidence = self._reading(ev)
        return Condition(None if holds is None else not holds, reason, evidence)

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """``prefix_caching`` on, with the pool it leaves and the prefill the TTFT holds."""
        holds, reason, evidence = self._reading(ev)
        if not holds:
            return []
        inputs = ev.ctx.inputs
        prompt = float(evidence["prompt_tokens_mean"])
        past_queue = float(evidence["ttft_past_queue_seconds"])
        withheld = None
        gpu = ev.ctx.gpu
        prefill: float | None = None
        if gpu is not None:
            try:
                prefill = latency_model(ev).prefill_seconds(inputs, gpu, prompt)
            except (CapacityError, ValueError):
                prefill = None
        if prefill is not None:
            evidence["prefill_seconds_modelled"] = round(prefill, 4)
            # requests prefilling together share the steps: each one's first token waits for the others' chunks too,
            # so the prefill a TTFT can hold is one prompt's × the requests in flight (the window's mean running)
            # — on one engine core: the deployment's mean over its replicas and their data-parallel ranks, each of
            # which schedules its own steps (breaker 13: five replicas' sum turned a withheld turn into a firing one)
            together = max(1.0, (ev.requests_running_mean or 0.0) / (max(ev.replicas_up, 1) * data_parallel_ranks(ev)))
            if prefill * together < PREFILL_SHARE_MIN * past_queue:
                withheld = (
                    f"withheld: the modelled prefill of a {prompt:,.0f}-token prompt is {prefill:.2f} s"
                    + (f" (× {together:.1f} requests in flight)" if together > 1 else "")
                    + f", {percent(prefill * together / past_queue)} of the {past_queue:.2f} s past the queue: the "
                    "time goes to a stage outside the prefill (the API server's preprocessing, a grammar compile), "
                    "which a cache does not shorten"
                )
        before: int | None
        after: int | None
        try:
            # what runs (the cache off, whatever the deployment left to the default) against the cache on
            before = capacity_pass(dataclasses.replace(inputs, enable_prefix_caching=False)).kv_cache_tokens
            after = capacity_pass(dataclasses.replace(inputs, enable_prefix_caching=True)).kv_cache_tokens
        except CapacityError:
            before = after = None
        fp8 = str(inputs.kv_cache_dtype).startswith("fp8") and inputs.enable_prefix_caching is None
        hybrid = bool(inputs.model.linear_layers)
        usage = ev.stats.kv_cache_usage_ratio if ev.stats is not None else None
        predicted: dict[str, Any] = {"ttft_seconds": effect(float(evidence["ttft_mean_seconds"]), None)}
        if before is not None and after is not None and before != after:
            predicted["kv_cache_tokens"] = effect(before, after)
        return [
            Proposal(
                rule=self.id,
                dial=c.DIAL_PREFIX_CACHING,
                action="enable",
                current=False,
                suggested=True,
                flag=flag_for(ev.ctx.engine, c.DIAL_PREFIX_CACHING, True),
                severity="warning",
                confidence=confidence(ev, 0.5 if hybrid else 0.6),
                summary=f"{ev.ctx.name}: prompts of ~{prompt:,.0f} tokens are prefilled whole with prefix caching off "
                "— turn prefix caching on",
                description=(
                    f"{reason}. With the cache off the engine prefills every prompt whole, the part an earlier "
                    "request already computed too: a multi-turn chat or an agent re-sends its history each turn, a "
                    "shared system prompt is prefilled per request. With it on, vLLM reuses the blocks of the longest "
                    "cached prefix and prefills only the rest (syv-ai/qwen38-27b-rtx3090#6: a ~20K-token agent turn "
                    "16.7 s cold, 1.0–1.2 s with its prefix cached). It is vLLM V1's default and costs next to nothing "
                    "where prompts share no prefix; no GPU is added."
                    + (
                        f" The modelled prefill of one such prompt is {prefill:.2f} s of the {past_queue:.2f} s."
                        if prefill is not None
                        else ""
                    )
                    + (
                        " If the engine turned the cache off itself (its start-up log says why: an fp8 KV cache on "
                        "some releases and attention backends, rwlove/home-ops#13384), --kv-cache-dtype auto restores "
                        "it" + (f"; the pool is {percent(usage)} used" if usage is not None else "") + "."
                        if fp8
                        else ""
                    )
                    + (
                        " On a hybrid (Mamba / linear-attention) model the cache keeps state pages beside the blocks "
                        "(the 'align' mode), which shrinks the pool, and caches only whole blocks of the prefix."
                        if hybrid
                        else ""
                    )
                    + " Falsified by: a prefix-cache hit rate near zero afterwards (the engine's prefix-cache hits ÷ "
                    "queries counters): the prompts share no prefix, and the TTFT is their prefill."
                ),
                predicted_effect=predicted,
                evidence=evidence,
                score=2.0,
                # how much of the prefill it removes is the prompts' shared share, which no counter measures while
                # the cache is off: never claimed to close the gap alone
                sufficient=False,
                cost=1.0,
                withheld=withheld,
                gpus_added=0.0,
            )
        ]
