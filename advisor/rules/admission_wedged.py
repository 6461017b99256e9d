"""Rule ``admission_wedged``: vLLM's admission gate shut by deferred requests while slots and blocks are free.

vLLM V1's scheduler counts the requests it skips (``skipped_waiting``: waiting for a LoRA adapter slot or a remote
KV load, exported as ``vllm:num_requests_waiting_by_reason{reason="deferred"}``) against ``max_num_seqs``. Once the
running and the deferred requests reach the cap, no request waiting for capacity is admitted however many blocks
and slots are free, and the deferred ones are never reconsidered: vllm-project/vllm#53130 ("Scheduler permanently
stops admitting requests once running + skipped_waiting ("deferred") reaches max_num_seqs — engine reports healthy,
KV cache mostly free, only a restart recovers"; "the collapse point matches len(running) + blocked ==
max_num_seqs (256) exactly"). A prompt completes now and then, so the counters still move and ``stalled`` (nothing
moved) does not see it; the gauges and the wait do.

Fires (vLLM only, its queue split by reason, 0.20+) when all of these hold:

* requests wait for capacity (``waiting_capacity`` ≥ 1);
* fewer requests run than the cap (``max_num_seqs`` × data-parallel ranks × replicas: a slot is free), yet the
  running and the deferred requests reach it: the gate's arithmetic is shut;
* the fullest KV pool of the window is at most ``max_usage`` full (blocks are free), and the pool holds a
  max-length request (else a request that cannot fit explains the queue: ``pool_context``'s);
* and the wait shows it is not a passing moment: the requests that got their first token in the window waited
  ``min_wait`` or longer on average (their TTFT; a healthy engine with free slots and blocks admits within a
  step), or — none did — no request finished either over a window of at least ``min_wait``.

On a healthy engine with many deferred requests (a prefill/decode-disaggregated decode worker loading remote KV,
LoRA adapters contending for slots) the gate may read shut for a moment, but the requests waiting for capacity are
admitted within steps, so their TTFT stays short and the rule does not fire.

Proposal: as for a hung engine, no capacity dial turn clears it and a replica beside it receives its share of the
traffic, so the rule proposes ``restart`` on the pseudo-dial ``engine_process`` (the thread's only recovery), with
a stack dump and the log saved first. ``stalled`` supersedes it (one restart per incident, same problem); it
supersedes the rules that would read the wedged queue as load.
"""

from __future__ import annotations

from typing import Any

from advisor import conventions as c
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import LOAD_READINGS, confidence, count, data_parallel_ranks, percent
from advisor.rules.turns import effect

ISSUE = "https://github.com/vllm-project/vllm/issues/53130"
"""The report of the deferred-requests admission wedge."""


class AdmissionWedgedRule:
    """vLLM: running + deferred ≥ max_num_seqs with a free slot, free blocks and requests waiting minutes → restart."""

    id = c.RULE_ADMISSION_WEDGED
    problem = c.PROBLEM_STALLED
    supersedes: tuple[str, ...] = LOAD_READINGS  # the wedged queue is not load

    def __init__(self, max_usage: float = 0.5, min_wait_seconds: float = 60.0, for_seconds: float = 60.0) -> None:
        """``max_usage``: the fullest pool's KV usage (0–1) at or below which blocks count as free;
        ``min_wait_seconds``: the mean TTFT of the window's admitted requests (or, none admitted, the window with no
        request finished) that shows the gate stays shut; ``for_seconds``: for-duration.

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

    def _wait(self, ev: Evaluation) -> tuple[bool | None, str, dict[str, Any]]:
        """Whether the window shows requests held for ``min_wait`` (see the module docstring)."""
        s = ev.stats
        assert s is not None
        ttft = s.ttft
        if ttft is not None and ttft.count > 0:
            mean = ttft.sum / ttft.count
            seen: dict[str, Any] = {"ttft_mean_seconds": round(mean, 3), "first_tokens_in_window": ttft.count}
            if mean >= self.min_wait_seconds:
                return True, f"the {count(ttft.count)} request(s) admitted in the window waited {mean:,.0f}s", seen
            return False, f"requests are admitted: their mean TTFT is {mean:,.1f}s", seen
        finished = ev.counter_deltas.get("requests_finished")
        window = s.covered_seconds
        evidence: dict[str, Any] = {"requests_finished_increase": finished, "window_seconds": window}
        if finished is None:
            return None, "neither TTFT nor finished requests are known: whether requests get through cannot be told", {}
        if finished > 0:
            return False, f"{count(finished)} request(s) finished in the window", evidence
        if window is None or window < self.min_wait_seconds:
            return (
                False,
                f"no request admitted or finished in {window or 0:.0f}s, less than {self.min_wait_seconds:.0f}s",
                evidence,
            )
        return True, f"no request admitted or finished in {window:.0f}s", evidence

    def _reading(self, ev: Evaluation) -> tuple[bool | None, str, dict[str, Any]]:
        s = ev.stats
        if s is None:
            return None, "no data", {}
        if ev.ctx.engine != "vllm":
            return False, "the deferred-requests admission gate is vLLM V1's scheduler", {}
        if "waiting_capacity" not in ev.queues or "waiting_deferred" not in ev.queues:
            return None, "the engine does not split its queue by reason (vLLM 0.20+): deferred requests unknown", {}
        cap = ev.ctx.inputs.max_num_seqs
        if cap is None or s.requests_running is None:
            return None, "max_num_seqs or running requests unknown", {}
        gate = cap * data_parallel_ranks(ev) * max(ev.replicas_up, 1)
        running, capacity, deferred = s.requests_running, ev.queues["waiting_capacity"], ev.queues["waiting_deferred"]
        usage = s.kv_cache_usage_ratio_max if s.kv_cache_usage_ratio_max is not None else s.kv_cache_usage_ratio
        evidence: dict[str, Any] = {
            "max_num_seqs": cap,
            "admission_gate": gate,
            "requests_running": running,
            "requests_waiting_capacity": capacity,
            "requests_waiting_deferred": deferred,
            "kv_cache_usage_ratio_max": usage,
            "issue": ISSUE,
        }
        if capacity < 1:
            return False, "no request waits for capacity", evidence
        if running >= gate:
            return False, f"{count(running)} running fill the cap of {gate}: the slots are full (seq_cap's)", evidence
        if running + deferred < gate:
            return (
                False,
                f"{count(running)} running + {count(deferred)} deferred < max_num_seqs {gate}: the gate is open",
                evidence,
            )
        if usage is None:
            return None, "KV usage unknown: whether blocks are free cannot be told", evidence
        if usage > self.max_usage:
            return False, f"the fullest pool is {percent(usage)} used, above {percent(self.max_usage)}", evidence
        mml = ev.ctx.inputs.max_model_len or ev.ctx.capacity.max_model_len
        pool = max(ev.kv_rank_capacity_tokens) if ev.kv_rank_capacity_tokens else ev.kv_capacity_tokens
        if mml and pool and pool < mml:
            return False, f"the pool ({count(pool)} tokens) is smaller than one request (pool_context's)", evidence
        held, why, wait_evidence = self._wait(ev)
        evidence.update(wait_evidence)
        shut = (
            f"{count(running)} running + {count(deferred)} deferred ≥ max_num_seqs {gate} with "
            f"{count(capacity)} waiting for capacity, a slot free and the fullest pool {percent(usage)} used"
        )
        return held, f"{shut}; {why}", evidence

    def fires(self, ev: Evaluation) -> Condition:
        """The gate's arithmetic shut with room inside, and requests held for ``min_wait``."""
        holds, reason, evidence = self._reading(ev)
        return Condition(holds, reason, evidence)

    def clears(self, ev: Evaluation) -> Condition:
        """No longer so."""
        holds, reason, evidence = self._reading(ev)
        return Condition(None if holds is None else not holds, reason, evidence)

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
                current="admission wedged",
                suggested="restarted",
                flag=(
                    f"restart the engine process behind {ev.ctx.name} (e.g. kubectl delete pod <pod>, or systemctl "
                    "restart <unit>); first save a stack dump of its processes (py-spy dump --pid <pid>) and its log"
                ),
                severity="warning",
                confidence=confidence(ev, 0.7),
                summary=(
                    f"{ev.ctx.name}: vLLM stopped admitting requests — {count(waiting)} waiting with slots and blocks "
                    "free; restart it"
                ),
                description=(
                    f"{reason}. vLLM's scheduler counts deferred requests (waiting for a LoRA adapter slot or a "
                    "remote KV load) against max_num_seqs, and once running + deferred reach it no request waiting "
                    f"for capacity is admitted however much of the pool is free ({ISSUE}: only a restart recovered "
                    "it). This is not load: no replica, pool or context turn helps, and a new replica can wedge the "
                    "same way. Restart the engine process; save a stack dump and the engine log first. Until the "
                    "engine is fixed, what fills the deferred queue (more adapter slots, --max-loras; a slow KV "
                    "transfer) is where to look."
                ),
                predicted_effect={"requests_waiting": effect(waiting, None)},
                evidence=evidence,
                score=1.0,
                sufficient=True,
                cost=1.0,
                gpus_added=0.0,
            )
        ]
