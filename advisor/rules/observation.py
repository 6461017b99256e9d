"""What one evaluation window measured of a deployment's engine speed, per data-parallel rank
(:class:`~advisor.capacity.calibration.WindowObservation`): the online calibration's measurement
(:mod:`advisor.online_calibration`), and the speculative-decoding rule's measured time per token
(:mod:`advisor.rules.speculative`). Pure: reads the evaluation only.
"""

from __future__ import annotations

from typing import Final

from advisor.capacity.calibration import WindowObservation
from advisor.domain import Histogram
from advisor.rules.base import Evaluation
from advisor.rules.common import data_parallel_ranks, generated_tokens_per_request
from advisor.telemetry import histogram_mean as telemetry_mean

MIN_REQUESTS: Final = 5
"""Fewest observations (requests in the window's TPOT or TTFT histogram) behind a measurement: fewer is one
request's length, not the engine's speed (the filter's measurement variance grows as 1 ÷ n as well)."""


def histogram_mean(h: Histogram | None) -> tuple[float | None, float]:
    """(mean, count) of a window's delta histogram; ``(None, 0)`` when empty or unknown — the mean as
    :func:`advisor.telemetry.histogram_mean` reads it (a sum or count the buckets contradict is unknown)."""
    mean = telemetry_mean(h)
    if h is None or mean is None:
        return None, 0.0
    return mean, float(h.count)


def window_observation(ev: Evaluation) -> WindowObservation | None:
    """What ``ev``'s window measured, per data-parallel rank (:class:`WindowObservation`), or ``None`` when it
    cannot say (no GPU, nothing finished, token counters unknown, no replica up). An engine that counts no requests
    and has no latency histograms but counts its time (llama.cpp) is read by :func:`time_counter_observation`.

    * batch: the window's mean running requests (``Evaluation.requests_running_mean``, else the newest gauge) ÷
      replicas up ÷ ranks;
    * prompt and output: the token counters' rates ÷ completions; context = prompt + output ÷ 2;
    * TPOT: the mean of the window's TPOT (or inter-token latency) histogram, with ≥ :data:`MIN_REQUESTS`;
    * prefill: mean TTFT − mean queue time when the engine exports its queue time (vLLM
      ``request_queue_time_seconds``) and the waiting queue held still over the window (:func:`_queue_moved`); else
      the mean TTFT, only when nothing waited at either end of the window.

    Example: 40 running on 2 replicas, 2 req/s finishing, 2,000 prompt + 600 generation tokens/s → batch 20,
    prompt 1,000, context 1,150, λ 1 req/s per replica.
    """
    s = ev.stats
    if s is None or ev.ctx.gpu is None or ev.replicas_up <= 0:
        return None
    done = s.requests_finished_per_second
    if done is None and ev.engine_time is not None:
        return time_counter_observation(ev)
    if not done or done <= 0 or not s.prompt_tokens_per_second or s.generation_tokens_per_second is None:
        return None
    engines = ev.replicas_up * data_parallel_ranks(ev)
    running = ev.requests_running_mean if ev.requests_running_mean is not None else s.requests_running
    if running is None:
        return None
    prompt = max(1.0, s.prompt_tokens_per_second / done)
    output = generated_tokens_per_request(ev) or 1.0  # never None here: completions and tokens are known
    tpot, tpot_n = histogram_mean(s.tpot)
    if tpot_n < MIN_REQUESTS:
        tpot = None
    ttft, ttft_n = histogram_mean(s.ttft)
    queue, queue_n = histogram_mean(s.queue_time)
    prefill = None
    if ttft is not None and queue is not None and ttft_n >= MIN_REQUESTS and queue_n >= MIN_REQUESTS:
        moved = _queue_moved(s.requests_waiting_first, s.requests_waiting)
        prefill = ttft - queue if ttft > queue and not moved else None
        ttft = None
    elif ttft_n < MIN_REQUESTS or s.requests_waiting or s.requests_waiting_first:
        ttft = None  # without the queue time, a TTFT measures prefill only when nothing queued
    return WindowObservation(
        batch=running / engines,
        context_tokens=prompt + output / 2,
        prompt_tokens=prompt,
        requests_per_second=done / engines,
        tpot_seconds=tpot,
        tpot_count=tpot_n,
        prefill_seconds=prefill,
        ttft_seconds=ttft,
        ttft_count=ttft_n,
    )


QUEUE_MOVED_SHARE: Final = 0.25
"""Change of the waiting queue over the window, as a share of its larger end, beyond which the window's mean TTFT
and mean queue time describe different requests (:func:`_queue_moved`)."""


def _queue_moved(first: float | None, last: float | None) -> bool:
    """Whether the waiting queue changed by more than :data:`QUEUE_MOVED_SHARE` of its larger end (and at least two
    requests) over the window, or is unknown at either end. vLLM observes a request's TTFT at its first token but its
    queue time when it finishes (``vllm/v1/metrics/loggers.py``: ``time_to_first_tokens_iter`` per iteration,
    ``finished_request.queued_time`` per finished request), so the window's two means come from different requests:
    while the queue grows, the TTFTs are the newest requests' long waits and the queue times older, shorter ones, and
    their difference is queueing, not prefill (a growing queue read a 4.49 s "prefill" for a true 0.088 s and halved
    the calibrated prefill speed)."""
    if first is None or last is None:
        return True
    return abs(last - first) >= max(2.0, QUEUE_MOVED_SHARE * max(first, last))


def time_counter_observation(ev: Evaluation) -> WindowObservation | None:
    """What ``ev``'s window measured on an engine without latency histograms or a request count that counts the
    time its sequences spend generating and the time spent on prompts (llama.cpp; :attr:`Evaluation.engine_time`,
    :class:`advisor.telemetry.EngineTime`), per data-parallel rank; ``None`` when it cannot say.

    * TPOT: Δ``generation_seconds_total`` ÷ Δ``generation_tokens_total`` — llama.cpp adds, as each request finishes,
      its time from its first to its last token and its generated tokens (``tools/server/server-context.cpp``
      ``metrics_on_prediction``; :mod:`advisor.engines.llamacpp`), so the ratio is the mean time between a
      sequence's tokens as the sequence sees it, prompt batches of other slots included. Its count (the filter's
      measurement variance, and the :data:`MIN_REQUESTS` floor) is the tokens, as for an inter-token-latency
      histogram. The first token of each request comes free with its prompt batch, so the figure is (n − 1) ÷ n of
      the interval (−1.6 % at 64 tokens), below the filter's 5 % measurement floor for outputs of 20 tokens or more.
    * prefill share: Δ``prompt_seconds_total`` ÷ Δt, measured, the ``ρ_p`` of the decode measurement model.
    * batch: the window's mean running requests (busy slots, ``llamacpp:requests_processing``) ÷ replicas ÷ ranks.
    * context: the engine counts no requests, so the mean prompt and output are unknown; the decode step is taken at
      half the deployment's ``max_model_len`` (a slot's context grows from its prompt to at most that), which weighs
      only the step's KV reads: the calibrated factor absorbs the difference at the observed batch.
    * TTFT is not calibrated: llama.cpp has no TTFT histogram and no request count to turn its prompt time into a
      time per request (``prompt_tokens``, ``requests_per_second``, ``prefill_seconds`` stay ``None``).

    Example: 2 busy slots on one replica, 59.4 s generating 30,000 tokens and 0.9 s of prompts over 30 s →
    batch 2, TPOT 1.98 ms, prefill share 0.03.
    """
    t = ev.engine_time
    s = ev.stats
    if t is None or s is None or ev.replicas_up <= 0:
        return None
    tpot, share = t.tpot_seconds, t.prefill_share
    if tpot is None or share is None or t.generation_tokens < MIN_REQUESTS:
        return None
    running = ev.requests_running_mean if ev.requests_running_mean is not None else s.requests_running
    if running is None:
        return None
    max_len = ev.ctx.inputs.max_model_len or ev.ctx.capacity.max_model_len
    return WindowObservation(
        batch=running / (ev.replicas_up * data_parallel_ranks(ev)),
        context_tokens=max_len / 2,
        prompt_tokens=None,
        requests_per_second=None,
        tpot_seconds=tpot,
        tpot_count=t.generation_tokens,
        prefill_share=share,
    )
