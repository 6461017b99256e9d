"""Rule ``admission_wedged``: a vLLM engine that admits nothing while it has room and barely works.

vllm-project/vllm#53130 ("Scheduler permanently stops admitting requests once running + skipped_waiting
("deferred") reaches max_num_seqs — engine reports healthy, KV cache mostly free, only a restart recovers"): 4
running, 492 waiting (19 for capacity, 473 deferred), KV 20 %, 0.48 generated tokens/s, no request finishing, one
prompt admitted after ~5,000 s in the queue, for over 1.5 h; a restart cleared it. The reporter traces it to the
deferred requests filling ``max_num_seqs``; vLLM's admission loop counts ``len(self.running) +
self.num_waiting_for_streaming_input`` against the cap (``vllm/v1/core/sched/scheduler.py``), so that mechanism is
the reporter's reading, not established. The rule therefore reads the symptom, not a mechanism. A prompt still
completes now and then, so the counters move and ``stalled`` (nothing moved) does not see it.

Fires (vLLM with its queue split by reason, 0.20+) when all of these hold over the evaluation window:

* requests waited for capacity (``waiting_capacity``: not yet admitted) at *every* scrape of the window — on a
  healthy engine with free slots a request waits in that queue for a step or a few;
* requests run (the stuck ones): with nothing running every slot may be held by paused streaming sessions (vLLM
  counts them against the cap; they are ``deferred``) or the engine sleeps, and it answers unknown;
* fewer requests run than the cap (``max_num_seqs`` × data-parallel ranks × replicas): a slot is free;
* the fullest KV pool is at most ``max_usage`` full and no replica's usage moved (a prefill fills blocks before vLLM
  counts its prompt: moving usage is a working engine), and the pool holds a max-length request (else a request that
  cannot fit explains the queue: ``pool_context``'s);
* the engine barely works: its prompt and generated tokens together run at most :data:`IDLE_SHARE` of what the
  latency model prefills on its GPU (:data:`REFERENCE_PROMPT_TOKENS` a prompt), and each running request
  decodes at most :data:`STUCK_TOKENS_PER_SECOND` tokens a second — a decode batch or a long prefill keeps one or
  the other busy, however long the queue behind it;
* and requests are held: the window's admitted requests waited ``min_wait`` or longer on average (their TTFT; the
  engine is idle, so it is not their prefill), or none was admitted and none finished over at least ``min_wait``.

It answers *unknown* when the engine restarted in the window (the new process is not the wedged one), when it
cannot price the GPU's prefill, or when a short window (``once``) saw no request admitted.

It clears only when that shape is gone (no persistent queue, no free slot, a used or moving pool, or a working
engine), not because one request finished: a wedge that admits one request a minute stays one incident.

Proposal: as for a hung engine, no capacity dial turn clears it and a replica beside it receives its share of the
traffic, so the rule proposes ``restart`` on the pseudo-dial ``engine_process`` (the thread's only recovery), with
a stack dump and the log saved first. ``stalled`` supersedes it (one restart per incident, same problem); it
supersedes the rules that would read the held queue as load. Known limit: the reading is deployment-wide (summed
over replicas), so one wedged replica beside working ones is not seen.
"""

from __future__ import annotations

from typing import Any

from advisor import conventions as c
from advisor.errors import CapacityError
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import (
    LOAD_READINGS,
    confidence,
    count,
    data_parallel_ranks,
    latency_model,
    percent,
    restart_flag,
)
from advisor.rules.turns import effect

ISSUE = "https://github.com/vllm-project/vllm/issues/53130"
"""The report of an engine that stopped admitting with its pool mostly free."""

IDLE_SHARE = 0.1
"""The most of the modelled prefill rate (tokens/s) an idle engine's prompt + generated tokens run at: a tenth.
A working engine with a queue runs its budget near the roofline (the #53130 engine ran 1,946 tokens/s where the
model prefills ~40,000 on its H100)."""

STUCK_TOKENS_PER_SECOND = 1.0
"""The most generated tokens a second per running request that counts as stuck: a TPOT of a second, far outside any
serving SLO (#53130: 0.48 tokens/s over 4 running)."""

REFERENCE_PROMPT_TOKENS = 2048
"""The prompt length whose modelled prefill rate is the engine's measure of work (vLLM's default step budget)."""

MOVED_USAGE = 1e-3
"""One replica's KV usage moving by more than this over the window is a working engine (blocks filling or freeing),
when the evaluation does not say (:attr:`advisor.rules.base.Evaluation.kv_usage_moved`)."""


class AdmissionWedgedRule:
    """vLLM admits nothing with slots and blocks free, barely working, requests held for minutes → restart."""

    id = c.RULE_ADMISSION_WEDGED
    problem = c.PROBLEM_STALLED
    supersedes: tuple[str, ...] = LOAD_READINGS  # the held queue is not load

    def __init__(self, max_usage: float = 0.5, min_wait_seconds: float = 60.0, for_seconds: float = 60.0) -> None:
        """``max_usage``: the fullest pool's KV usage (0–1) at or below which blocks count as free;
        ``min_wait_seconds``: the mean TTFT of the window's admitted requests (or, none admitted, the window with no
        request finished) that shows requests are held; ``for_seconds``: for-duration.

        Raises:
            ValueError: ``max_usage`` outside (0, 1) or a negative duration.
        """
        if not 0.0 < max_usage < 1.0:
            raise ValueError(f"max_usage must be between 0 and 1, got {max_usage}")
        if min_wait_seconds < 0 or for_seconds < 0:
            raise ValueError("min_wait_seconds and for_seconds must not be negative")
        self.max_usage = max_usage
        self.min_wait_seconds = min_wait_seconds
        self._for = for_seconds

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def _idle(self, ev: Evaluation, evidence: dict[str, Any]) -> tuple[bool | None, str]:
        """Whether the engine barely works: tokens ≤ IDLE_SHARE of the modelled prefill rate and running requests
        decoding at most STUCK_TOKENS_PER_SECOND each."""
        s = ev.stats
        assert s is not None
        gpu = ev.ctx.gpu
        prompt, generated = s.prompt_tokens_per_second, s.generation_tokens_per_second
        if gpu is None or prompt is None or generated is None:
            return None, "the GPU or the token rates are unknown: whether the engine works cannot be told"
        try:
            busy = latency_model(ev).prefill_busy_seconds(ev.ctx.inputs, gpu, REFERENCE_PROMPT_TOKENS)
        except (CapacityError, ValueError):
            return None, "the latency model cannot price a prefill on this GPU"
        # every replica and data-parallel rank prefills on its own GPUs
        capacity = REFERENCE_PROMPT_TOKENS / busy * max(ev.replicas_up, 1) * data_parallel_ranks(ev)
        evidence["tokens_per_second"] = round(prompt + generated, 2)
        evidence["modelled_prefill_tokens_per_second"] = round(capacity)
        if prompt + generated > IDLE_SHARE * capacity:
            return False, (
                f"the engine works: {prompt + generated:,.0f} tokens/s, above {percent(IDLE_SHARE)} of the "
                f"{capacity:,.0f} it prefills"
            )
        running = s.requests_running or 0.0
        if running > 0 and generated / running > STUCK_TOKENS_PER_SECOND:
            return False, f"its {count(running)} running requests decode {generated / running:,.1f} tokens/s each"
        return True, f"{prompt + generated:,.0f} tokens/s against the {capacity:,.0f} it prefills"

    def _shape(self, ev: Evaluation) -> tuple[bool | None, str, dict[str, Any]]:
        """The wedge's shape: a persistent queue, a free slot, a free and still pool, an idle engine."""
        s = ev.stats
        if s is None:
            return None, "no data", {}
        if ev.ctx.engine != "vllm":
            return False, "reads vLLM's queue split by reason", {}
        if "waiting_capacity" not in ev.queues or ev.waiting_capacity_min is None:
            return None, "the engine does not split its queue by reason (vLLM 0.20+)", {}
        cap = ev.ctx.inputs.max_num_seqs
        if cap is None or s.requests_running is None:
            return None, "max_num_seqs or running requests unknown", {}
        if s.counter_resets:
            return None, "the engine restarted in the window: the new process is judged on its own", {}
        gate = cap * data_parallel_ranks(ev) * max(ev.replicas_up, 1)
        running, held = s.requests_running, ev.waiting_capacity_min
        usage = s.kv_cache_usage_ratio_max if s.kv_cache_usage_ratio_max is not None else s.kv_cache_usage_ratio
        evidence: dict[str, Any] = {
            "max_num_seqs": cap,
            "sequence_slots": gate,
            "requests_running": running,
            "requests_waiting_capacity_min": held,
            "requests_waiting_deferred": ev.queues.get("waiting_deferred"),
            "kv_cache_usage_ratio_max": usage,
            "issue": ISSUE,
        }
        if held < 1:
            return False, "no request waited for capacity through the window", evidence
        if running < 1:
            # nothing inside to be stuck: every slot may be held by paused streaming sessions (deferred, counted
            # against max_num_seqs by vLLM's admission loop), or the engine sleeps; a queue with nothing running and
            # nothing moving is stalled's
            return None, "nothing runs: whether a slot is free (paused sessions hold slots) cannot be told", evidence
        if running >= gate:
            return False, f"{count(running)} running fill the {gate} slots (seq_cap's)", evidence
        if usage is None:
            return None, "KV usage unknown: whether blocks are free cannot be told", evidence
        if usage > self.max_usage:
            return False, f"the fullest pool is {percent(usage)} used, above {percent(self.max_usage)}", evidence
        low = s.kv_cache_usage_ratio_min
        moved = ev.kv_usage_moved
        if moved is None and ev.replicas_up <= 1 and low is not None:
            moved = usage - low > MOVED_USAGE
        if moved:
            return False, "KV usage moved in the window: blocks fill or free", evidence
        mml = ev.ctx.inputs.max_model_len or ev.ctx.capacity.max_model_len
        pool = max(ev.kv_rank_capacity_tokens) if ev.kv_rank_capacity_tokens else ev.kv_capacity_tokens
        if mml and pool and pool < mml:
            return False, f"the pool ({count(pool)} tokens) is smaller than one request (pool_context's)", evidence
        idle, why = self._idle(ev, evidence)
        shape = (
            f"{count(held)} waited for capacity through the window with {count(running)} of {gate} slots running "
            f"and the fullest pool {percent(usage)} used"
        )
        return idle, f"{shape}; {why}", evidence

    def _held(self, ev: Evaluation, evidence: dict[str, Any]) -> tuple[bool | None, str]:
        """Whether requests are held ``min_wait``: the window's admitted requests' mean TTFT, or none admitted and
        none finished over at least ``min_wait``."""
        s = ev.stats
        assert s is not None
        ttft = s.ttft
        if ttft is not None and ttft.count > 0:
            mean = ttft.sum / ttft.count
            evidence["ttft_mean_seconds"] = round(mean, 3)
            evidence["first_tokens_in_window"] = ttft.count
            if mean >= self.min_wait_seconds:
                return True, f"the {count(ttft.count)} request(s) admitted in the window waited {mean:,.0f}s"
            return False, f"requests are admitted: their mean TTFT is {mean:,.1f}s"
        finished = ev.counter_deltas.get("requests_finished")
        window = s.covered_seconds
        evidence["requests_finished_increase"] = finished
        if finished is None:
            return None, "neither TTFT nor finished requests are known: whether requests get through cannot be told"
        if finished > 0:
            return False, f"{count(finished)} request(s) finished in the window"
        if window < self.min_wait_seconds:
            return None, (
                f"no request admitted or finished in {window:.0f}s: too short to tell a wedge (needs "
                f"{self.min_wait_seconds:.0f}s)"
            )
        return True, f"no request admitted or finished in {window:.0f}s"

    def _reading(self, ev: Evaluation) -> tuple[bool | None, str, dict[str, Any]]:
        shape, reason, evidence = self._shape(ev)
        if not shape:
            return shape, reason, evidence
        held, why = self._held(ev, evidence)
        return held, f"{reason}; {why}", evidence

    def fires(self, ev: Evaluation) -> Condition:
        """The wedge's shape, and requests held for ``min_wait``."""
        holds, reason, evidence = self._reading(ev)
        return Condition(holds, reason, evidence)

    def clears(self, ev: Evaluation) -> Condition:
        """The shape is gone (a request finishing inside it is not enough)."""
        shape, reason, evidence = self._shape(ev)
        return Condition(None if shape is None else not shape, reason, evidence)

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """Restart the engine (pseudo-dial ``engine_process``)."""
        holds, reason, evidence = self._reading(ev)
        if not holds:
            return []
        waiting = ev.stats.requests_waiting if ev.stats is not None else None
        return [
            Proposal(
                rule=self.id,
                dial=c.DIAL_ENGINE_PROCESS,
                action=c.ACTION_RESTART,
                current="admitting nothing",
                suggested="restarted",
                flag=restart_flag(f"behind {ev.ctx.name}"),
                severity="warning",
                confidence=confidence(ev, 0.7),
                summary=(
                    f"{ev.ctx.name}: vLLM stopped admitting requests — {count(waiting)} waiting with slots and blocks "
                    "free; restart it"
                ),
                description=(
                    f"{reason}. The engine holds its queue with room to run it and does almost no work: not load, "
                    "so no replica, pool or context turn helps, and a replica beside it still receives its share. "
                    f"vllm-project/vllm#53130 reports this state ({ISSUE}: running + deferred requests reached "
                    "max_num_seqs, KV mostly free; only a restart recovered it). Restart the engine process; save a "
                    "stack dump and the engine log first for the bug report. This resolves when the queue drains, "
                    "the engine works again or its pool fills."
                ),
                predicted_effect={"requests_waiting": effect(waiting, None)},
                evidence=evidence,
                score=1.0,
                sufficient=True,
                cost=1.0,
                gpus_added=0.0,
            )
        ]
