"""What a simulated replica's engine would count, as each engine counts it (pure observers).

:class:`VLLMMetrics` follows vLLM V1 0.33's ``IterationStats`` / ``FinishedRequestStats`` and
``PrometheusStatLogger`` (``vllm/v1/metrics/stats.py``, ``vllm/v1/metrics/loggers.py``):

* prompt tokens are counted once per request, when its prefill completes (``num_prompt_tokens +=
  prompt_len`` while ``num_generation_tokens == 0``), cached tokens included; the split by source is
  ``local_compute`` / ``local_cache_hit``;
* generation tokens per step; ITL one observation per request per step that emits (after the first token);
* prefix-cache queries and hits (tokens) at every admission, preempted requests again;
* per finished request: e2e, queue (WAITING), inference (RUNNING), prefill (scheduled → first token),
  decode (first → last token), mean TPOT ``decode ÷ (generated − 1)``, prompt/generation token counts,
  ``n`` (always 1 here), ``max_tokens`` (= the output length asked for), preemptions;
* ``iteration_tokens_total``: tokens scheduled per step.

:class:`SGLangMetrics` follows SGLang 0.5.23's ``TokenizerMetricsCollector`` and ``SchedulerMetricsCollector``
(``python/sglang/srt/observability/metrics_collector.py``): prompt, generation and request counters on
finish; TTFT on the first token; ITL per emitted token gap; per-request TPOT ``(finished − first) ÷
(completion − 1)``; queue time on admission; retractions (SGLang's preemptions) counted.

Both keep the bucket bounds of :mod:`advisor.sim.buckets`. Rendering is :mod:`advisor.sim.exposition`.
"""

from __future__ import annotations

from collections.abc import Sequence

from advisor.sim import buckets as b
from advisor.sim.buckets import BucketHistogram
from advisor.sim.engine import SimRequest

__all__ = ["FINISH_REASONS", "SGLangMetrics", "VLLMMetrics"]

FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")
"""``finished_reason`` values vLLM 0.33 pre-declares on ``vllm:request_success_total``."""


class VLLMMetrics:
    """vLLM V1 counters and histograms of one replica (a :class:`~advisor.sim.engine.ReplicaObserver`)."""

    def __init__(self, max_model_len: int, num_speculative_tokens: int = 0) -> None:
        tokens = b.one_two_five(max_model_len)
        self.prompt_tokens = 0
        self.prompt_tokens_cached = 0
        self.generation_tokens = 0
        self.preemptions = 0
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.success = dict.fromkeys(FINISH_REASONS, 0)
        self.spec_drafts = 0
        self.spec_draft_tokens = 0
        self.spec_accepted = 0
        self.spec_accepted_per_pos = [0] * num_speculative_tokens
        self.ttft = BucketHistogram(b.VLLM_TTFT)
        self.itl = BucketHistogram(b.VLLM_ITL)
        self.tpot = BucketHistogram(b.VLLM_ITL)
        self.e2e = BucketHistogram(b.VLLM_REQUEST_LATENCY)
        self.queue = BucketHistogram(b.VLLM_REQUEST_LATENCY)
        self.inference = BucketHistogram(b.VLLM_REQUEST_LATENCY)
        self.prefill = BucketHistogram(b.VLLM_REQUEST_LATENCY)
        self.decode = BucketHistogram(b.VLLM_REQUEST_LATENCY)
        self.request_prompt_tokens = BucketHistogram(tokens)
        self.request_generation_tokens = BucketHistogram(tokens)
        self.request_max_num_generation_tokens = BucketHistogram(tokens)
        self.request_params_max_tokens = BucketHistogram(tokens)
        self.request_prefill_kv_computed_tokens = BucketHistogram(tokens)
        self.request_params_n = BucketHistogram(b.VLLM_PARAMS_N)
        self.request_num_preemptions = BucketHistogram(b.VLLM_PREEMPTIONS)
        self.iteration_tokens = BucketHistogram(b.VLLM_ITERATION_TOKENS)

    def on_admitted(self, req: SimRequest, now: float, queried_tokens: int, hit_tokens: int) -> None:
        self.prefix_queries += queried_tokens
        self.prefix_hits += hit_tokens

    def on_step(self, now: float, tokens: int, prefill_tokens: int, decode_tokens: int) -> None:
        self.generation_tokens += decode_tokens
        self.iteration_tokens.observe(tokens)

    def on_itl(self, seconds: float, count: int) -> None:
        self.itl.observe(seconds, count)

    def on_first_token(self, req: SimRequest, now: float) -> None:
        self.ttft.observe(now - req.arrival)
        self.prompt_tokens += req.prompt_tokens
        self.prompt_tokens_cached += req.cached_tokens

    def on_preempted(self, req: SimRequest, now: float) -> None:
        self.preemptions += 1

    def on_finished(self, req: SimRequest, now: float) -> None:
        reason = req.finish_reason if req.finish_reason in self.success else "stop"
        self.success[reason] += 1
        if req.first_token < 0:
            return
        self.e2e.observe(now - req.arrival)
        self.queue.observe(req.first_scheduled - req.queued)
        self.inference.observe(now - req.first_scheduled)
        self.prefill.observe(req.first_token - req.first_scheduled)
        self.decode.observe(now - req.first_token)
        if req.generated > 1:
            self.tpot.observe(req.tpot)
        self.request_prompt_tokens.observe(req.prompt_tokens)
        self.request_generation_tokens.observe(req.generated)
        self.request_max_num_generation_tokens.observe(req.output_tokens)
        self.request_params_max_tokens.observe(req.output_tokens)
        self.request_prefill_kv_computed_tokens.observe(req.prompt_tokens - req.cached_tokens)
        self.request_params_n.observe(1)
        self.request_num_preemptions.observe(req.preemptions)

    def on_spec(self, drafts: int, draft_tokens: int, accepted_tokens: int, accepted_per_pos: Sequence[int]) -> None:
        self.spec_drafts += drafts
        self.spec_draft_tokens += draft_tokens
        self.spec_accepted += accepted_tokens
        for i, n in enumerate(accepted_per_pos):
            if i < len(self.spec_accepted_per_pos):
                self.spec_accepted_per_pos[i] += n


class SGLangMetrics:
    """SGLang 0.5.23 counters and histograms of one replica (a :class:`~advisor.sim.engine.ReplicaObserver`)."""

    def __init__(self) -> None:
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.requests = 0
        self.cached_tokens = 0
        self.retracted_requests = 0
        self.retracted_input_tokens = 0
        self.retracted_output_tokens = 0
        self.spec_steps = 0
        self.spec_accept_length = 0.0
        self.spec_accept_rate = 0.0
        self.ttft = BucketHistogram(b.SGLANG_TTFT)
        self.itl = BucketHistogram(b.SGLANG_ITL)
        self.tpot = BucketHistogram(b.SGLANG_ITL)
        self.e2e = BucketHistogram(b.SGLANG_E2E)
        self.queue = BucketHistogram(b.SGLANG_QUEUE)
        self.prompt_tokens_histogram = BucketHistogram(b.SGLANG_TOKENS)
        self.uncached_prompt_tokens_histogram = BucketHistogram(b.SGLANG_TOKENS)
        self.generation_tokens_histogram = BucketHistogram(b.SGLANG_TOKENS)
        self.cache_hit_rate = 0.0
        self.gen_throughput = 0.0
        self._window_tokens = 0
        self._window_start = 0.0

    def on_admitted(self, req: SimRequest, now: float, queried_tokens: int, hit_tokens: int) -> None:
        if req.preemptions == 0:
            self.queue.observe(now - req.queued)
        if queried_tokens:
            self.cache_hit_rate = hit_tokens / queried_tokens

    def on_step(self, now: float, tokens: int, prefill_tokens: int, decode_tokens: int) -> None:
        # gen_throughput: tokens/s over SGLang's decode log interval (≈ 40 steps); here over ≥ 1 s windows
        self._window_tokens += decode_tokens
        span = now - self._window_start
        if span >= 1.0:
            self.gen_throughput = self._window_tokens / span
            self._window_tokens = 0
            self._window_start = now

    def on_itl(self, seconds: float, count: int) -> None:
        self.itl.observe(seconds, count)

    def on_first_token(self, req: SimRequest, now: float) -> None:
        self.ttft.observe(now - req.arrival)

    def on_preempted(self, req: SimRequest, now: float) -> None:
        self.retracted_requests += 1
        self.retracted_input_tokens += req.prompt_tokens
        self.retracted_output_tokens += req.generated

    def on_finished(self, req: SimRequest, now: float) -> None:
        self.requests += 1
        self.prompt_tokens += req.prompt_tokens
        self.generation_tokens += req.generated
        self.cached_tokens += req.cached_tokens
        if req.first_token < 0:
            return
        self.e2e.observe(now - req.arrival)
        if req.generated > 1:
            self.tpot.observe(req.tpot)
        self.prompt_tokens_histogram.observe(req.prompt_tokens)
        self.uncached_prompt_tokens_histogram.observe(req.prompt_tokens - req.cached_tokens)
        self.generation_tokens_histogram.observe(req.generated)

    def on_spec(self, drafts: int, draft_tokens: int, accepted_tokens: int, accepted_per_pos: Sequence[int]) -> None:
        self.spec_steps = len(accepted_per_pos)
        if drafts:
            self.spec_accept_length = 1.0 + accepted_tokens / drafts
        if draft_tokens:
            self.spec_accept_rate = accepted_tokens / draft_tokens
