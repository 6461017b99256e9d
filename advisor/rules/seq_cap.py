"""Rule ``seq_cap``: requests wait for a sequence slot while the KV pool has room.

Fires when a replica runs at its sequence cap (``max_num_seqs``; SGLang ``--max-running-requests``, TensorRT-LLM
``--max_batch_size``: per data-parallel rank) with requests waiting, while its KV pool is at most ``max_usage``
full and tokens are being generated. Then the waiting requests wait for a slot, not for blocks: vLLM's scheduler
stops admitting at ``len(self.running) == self.max_num_running_reqs`` (``vllm/v1/core/sched/scheduler.py``) however
many blocks are free, so a second request's TTFT is the first one's whole generation at ``max_num_seqs`` 1
(MiaAI-Lab/DeepSeek-v4-Flash-One-DGX-Spark#7: "R2 TTFT 50.46 s (first token exactly at R1 finish)" with the pool
2 % used). Neither the pool turns (the pool is not what binds) nor replicas (one replica's idle pool would serve
the queue) fit; raising the cap does.

Proposes ``max_num_seqs`` raised to hold the running and waiting requests, bounded by what the pool holds at the
observed tokens per running request (``max_usage_after`` of the pool, re-run through the capacity pass: a larger
cap also raises vLLM's sampler warm-up and shrinks the pool a little) and, with a TPOT target and a GPU, by the
largest batch whose calibrated TPOT still meets it (:func:`advisor.rules.common.knee_batch`). When that bound is not
above the current cap the cap is what keeps TPOT within its target, and nothing is proposed (``goodput`` and
``queue_growth`` speak for that load). Not for llama.cpp (``--parallel`` splits ``--ctx-size`` into smaller slots
unless ``--kv-unified``: raising it shrinks every request's room) nor TGI (its batch is bounded by tokens, and
``--max-concurrent-requests`` refuses the excess rather than queueing it), nor an engine whose cap the config does not
state other than vLLM (SGLang derives ``--max-running-requests`` from its pool: the 256 assumed is not its cap). Not
while another pool (a state pool, the slots) is saturated: that pool holds the queue. A stalled engine, whose gauges
describe a hang, is ``stalled``'s (it supersedes this rule, and this rule needs tokens generated in the window).
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

from advisor import conventions as c
from advisor.errors import CapacityError
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import (
    confidence,
    count,
    data_parallel_ranks,
    knee_batch,
    kv_withheld,
    latency_model,
    percent,
    tokens_per_running_request,
)
from advisor.rules.flags import flag_for
from advisor.rules.turns import effect, turn

NOT_FOR_ENGINES = {
    "llamacpp": "llama.cpp's --parallel splits --ctx-size into slots: more slots give each request less room",
    "tgi": "TGI bounds its batch by tokens (--max-batch-total-tokens), not by a sequence cap",
}
"""Engines whose sequence-count dial is not a cap that queues (why, per engine)."""


class SeqCapRule:
    """Running at the sequence cap, requests waiting, the pool with room → raise the cap."""

    id = c.RULE_SEQ_CAP
    problem = c.PROBLEM_SATURATION
    supersedes: tuple[str, ...] = ()

    def __init__(self, max_usage: float = 0.5, max_usage_after: float = 0.9, for_seconds: float = 60.0):
        """``max_usage``: KV usage (0–1) at or below which the pool counts as having room; ``max_usage_after``: the
        usage the raised cap may fill at the observed tokens per request; ``for_seconds``: for-duration."""
        self.max_usage = max_usage
        self.max_usage_after = max_usage_after
        self._for = for_seconds

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def _reading(self, ev: Evaluation) -> tuple[bool | None, str, dict[str, Any]]:
        s = ev.stats
        if s is None:
            return None, "no data", {}
        why_not = NOT_FOR_ENGINES.get(ev.ctx.engine)
        if why_not:
            return False, why_not, {}
        cap = ev.ctx.inputs.max_num_seqs
        if cap is None or s.requests_running is None or s.requests_waiting is None:
            return None, "max_num_seqs, running or waiting unknown", {}
        if ev.ctx.engine != "vllm" and not ev.ctx.max_num_seqs_stated:
            # SGLang derives --max-running-requests from its pool, TensorRT-LLM its batch from its engine build: the
            # 256 the capacity pass assumes is not the cap the engine queues at
            return None, f"the sequence cap is not stated (set deployments[].max_num_seqs; {cap} is assumed)", {}
        ranks = data_parallel_ranks(ev)
        per_replica = s.requests_running / max(ev.replicas_up, 1)
        evidence: dict[str, Any] = {
            "max_num_seqs": cap,
            "requests_running_per_replica": round(per_replica, 2),
            "requests_waiting": s.requests_waiting,
            "kv_cache_usage_ratio": s.kv_cache_usage_ratio,
        }
        if ranks > 1:
            evidence["data_parallel_ranks"] = ranks
        at_cap = per_replica >= cap * ranks - 1e-9
        if not at_cap or s.requests_waiting < 1:
            reason = f"{count(per_replica)} running of a cap of {cap * ranks}, {count(s.requests_waiting)} waiting"
            return False, reason, evidence
        if s.kv_cache_usage_ratio is None:
            return None, "KV usage unknown: whether the pool has room cannot be told", evidence
        if s.kv_cache_usage_ratio > self.max_usage:
            return False, f"the pool is {percent(s.kv_cache_usage_ratio)} full: blocks bind, not the cap", evidence
        other = kv_withheld(ev)
        if other:  # a state pool or the slots are full: that pool, not the cap, holds the queue
            return False, other.removeprefix("withheld: "), evidence
        generated = ev.counter_deltas.get("generation_tokens")
        if generated is not None and generated <= 0:
            return False, "no token generated in the window: a hang is not a cap (stalled speaks for it)", evidence
        return (
            True,
            f"{count(per_replica)} running at max_num_seqs {cap}"
            + (f" × {ranks} ranks" if ranks > 1 else "")
            + f" with {count(s.requests_waiting)} waiting while the pool is {percent(s.kv_cache_usage_ratio)} full",
            evidence,
        )

    def fires(self, ev: Evaluation) -> Condition:
        """At the cap with a queue and room in the pool."""
        holds, reason, evidence = self._reading(ev)
        return Condition(holds, reason, evidence)

    def clears(self, ev: Evaluation) -> Condition:
        """No longer so."""
        holds, reason, evidence = self._reading(ev)
        return Condition(None if holds is None else not holds, reason, evidence)

    def _raised(self, ev: Evaluation) -> tuple[int | None, str, dict[str, Any]]:
        """The raised cap per rank (or None) and why, with the bounds as evidence."""
        s = ev.stats
        inputs = ev.ctx.inputs
        cap = inputs.max_num_seqs
        assert s is not None and cap is not None and s.requests_running is not None and s.requests_waiting is not None
        ranks = data_parallel_ranks(ev)
        replicas = max(ev.replicas_up, 1)
        demand = math.ceil((s.requests_running + s.requests_waiting) / replicas / ranks)
        bounds: dict[str, Any] = {"demand_per_rank": demand}
        want = max(cap + 1, demand)
        per_request = tokens_per_running_request(ev)
        pool = ev.kv_capacity_tokens
        if per_request and pool:
            t = turn(inputs, c.DIAL_MAX_NUM_SEQS, want)
            shrink = t.after.kv_cache_tokens / t.before.kv_cache_tokens if t and t.before.kv_cache_tokens else 1.0
            fits = math.floor(self.max_usage_after * pool * shrink / ranks / per_request)
            bounds |= {"tokens_per_running_request": round(per_request), "pool_holds_requests": fits}
            want = min(want, fits)
        gpu = ev.ctx.gpu
        target = ev.ctx.slo.tpot_seconds
        if gpu is not None and target and want > cap:
            context = per_request or float(inputs.max_model_len or 2048) / 2
            try:
                knee = knee_batch(latency_model(ev), inputs, gpu, context, target, want)
            except (CapacityError, ValueError):  # the part lacks a figure the roofline needs: TPOT unpriced
                bounds["tpot_unpriced"] = True
            else:
                bounds["tpot_knee"] = knee
                want = min(want, knee) if knee is not None else cap
        if want <= cap:
            return None, f"no cap above {cap} holds the pool and the TPOT target ({bounds})", bounds
        return want, "", bounds

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """``max_num_seqs`` raised, bounded by the pool at the observed request size and the TPOT target."""
        holds, reason, evidence = self._reading(ev)
        if not holds:
            return []
        new, _, bounds = self._raised(ev)
        if new is None:
            return []
        inputs = ev.ctx.inputs
        cap = inputs.max_num_seqs
        s = ev.stats
        assert s is not None and cap is not None and s.kv_cache_usage_ratio is not None
        ranks = data_parallel_ranks(ev)
        running = (s.requests_running or 0.0) / max(ev.replicas_up, 1) / ranks
        usage_after = min(1.0, s.kv_cache_usage_ratio * new / max(running, 1.0))
        predicted: dict[str, dict[str, Any]] = {
            "max_num_seqs": effect(cap, new),
            "kv_cache_usage_ratio": effect(s.kv_cache_usage_ratio, usage_after),
        }
        gpu = ev.ctx.gpu
        per_request = bounds.get("tokens_per_running_request")
        if gpu is not None:
            model = latency_model(ev)
            context = float(per_request or (inputs.max_model_len or 2048) / 2)
            with contextlib.suppress(CapacityError, ValueError):
                predicted["tpot_seconds"] = effect(
                    model.tpot_seconds(inputs, gpu, max(running, 1.0), context),
                    model.tpot_seconds(inputs, gpu, new, context),
                )
        return [
            Proposal(
                rule=self.id,
                dial=c.DIAL_MAX_NUM_SEQS,
                action="increase",
                current=cap,
                suggested=new,
                flag=flag_for(ev.ctx.engine, c.DIAL_MAX_NUM_SEQS, new),
                severity="warning",
                confidence=confidence(ev, 0.7),
                summary=f"{ev.ctx.name}: requests wait for a sequence slot with the KV pool "
                f"{percent(s.kv_cache_usage_ratio)} full — raise max_num_seqs {cap} → {new}",
                description=(
                    f"{reason}: the waiting requests wait for a slot, not for blocks (the scheduler admits no request "
                    f"past max_num_seqs however many blocks are free), so each one's TTFT includes a running "
                    f"request's whole generation. {new} slots hold the running and waiting requests"
                    + (
                        f" (the pool holds {bounds['pool_holds_requests']} requests of the observed "
                        f"~{per_request:,} tokens at {percent(self.max_usage_after)} usage"
                        if "pool_holds_requests" in bounds
                        else " (the pool's room per request is unknown: watch KV usage after the change"
                    )
                    + (f"; TPOT meets its target up to a batch of {k})" if (k := bounds.get("tpot_knee")) else ")")
                    + (
                        "; the latency model cannot price the larger batch on this GPU: watch TPOT after the change"
                        if bounds.get("tpot_unpriced")
                        else ""
                    )
                    + ". Replicas and pool turns would not help: this replica's pool is mostly idle."
                ),
                predicted_effect=predicted,
                evidence={**evidence, **bounds},
                score=new / cap,
                cost=1.0,
                gpus_added=0.0,
            )
        ]
