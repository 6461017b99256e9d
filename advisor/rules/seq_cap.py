"""Rule ``seq_cap``: requests wait for a sequence slot while the KV pool has room.

Fires when a replica runs at its sequence cap (``max_num_seqs``; SGLang ``--max-running-requests``, TensorRT-LLM
``--max_batch_size``: per data-parallel rank) with requests waiting, while its KV pool is at most ``max_usage``
full and tokens are being generated. Then the waiting requests wait for a slot, not for blocks: vLLM's scheduler
stops admitting at ``len(self.running) == self.max_num_running_reqs`` (``vllm/v1/core/sched/scheduler.py``) however
many blocks are free, so a second request's TTFT is the first one's whole generation at ``max_num_seqs`` 1
(MiaAI-Lab/DeepSeek-v4-Flash-One-DGX-Spark#7: "R2 TTFT 50.46 s (first token exactly at R1 finish)" with the pool
2 % used). Neither the pool turns (the pool is not what binds) nor replicas (one replica's idle pool would serve
the queue) fit; raising the cap does.

Proposes ``max_num_seqs`` raised to hold the running and the waiting-for-capacity requests (vLLM's ``deferred`` ones
wait for a LoRA slot or a remote KV load), bounded by what the pool holds at the observed request size (the longer of
finished requests and running requests' KV, ``max_usage_after`` of the pool) with the raised cap's own pool (the
capacity pass re-run: vLLM's sampler warm-up grows with the cap; a cap the engine cannot start with is never proposed)
and, with a TPOT target and a GPU, by the largest batch whose calibrated TPOT still meets it
(:func:`advisor.rules.common.knee_batch`). A queue that moved over the window is a burst arriving or a backlog
draining, so the raise follows the window's load, not its last scrape (:func:`arrivals_bounded_demand`). The fullest
pool of the window is judged, not the mean over replicas. Not while the window's measured TPOT misses its target (a
larger batch slows every token: ``goodput_below_target``'s), nor when more requests run than the configured cap (the
config's ``max_num_seqs`` is not what the engine runs). When that bound is not above the current cap the cap is what
keeps TPOT within its target, and nothing is proposed (``goodput`` and ``queue_growth`` speak for that load). The
raise closes the gap (``sufficient``) only where the requests/s the raised cap completes (today's completions × slots
after ÷ before × TPOT before ÷ after) serve the window's arrival rate with a mean wait for a slot (M/M/c over the
slots) within the TTFT target; otherwise it says that more replicas are needed as well (an overload arriving at 6.9/s
where 4.9/s complete is not cleared by a cap that completes 6.3/s).

llama.cpp (mozilla-ai/llamafile#183: one slot, "the second request waits until the first one finishes"): every
``--parallel`` slot busy with requests deferred while tokens flow. Its ``--ctx-size`` cells are split over the slots,
so raising ``--parallel`` alone shrinks every request's room: the proposal raises both (``--parallel n --ctx-size
n × the slot's cells``), up to the running and deferred requests, as many slots as the GPU holds beside the weights
at ``max_usage_after`` of its memory, never more than llama.cpp starts with (``LLAMA_MAX_SEQ`` 256), and the TPOT
knee — unless sharing the cells (``--kv-unified``, below) holds at least as many slots with no memory added. Its
counters move when a slot finishes, so a still generation counter is no hang here; its mean TPOT is the time
counters' (``engine_time``), and a measured TPOT over the target adds no slot. Deferred requests beside a configured
free slot (llama.cpp defers only when no slot is idle) mean the config's ``--parallel`` is not the server's: unknown.
With ``--kv-unified`` (llama-server's own setting when ``--parallel`` is not given: 4 slots sharing the cells) a slot
takes cells only as its request writes them, so the raise is ``--parallel`` alone (``--kv-unified`` kept on the
command line), bounded by the requests of the longest length measured (``n_tokens_max`` or the observed request
length) that ``max_usage_after`` of the cells hold; none without a measured length (Mesh-LLM/mesh-llm#1973: 4 unified
slots, 32 clients, TTFT p50 80 s on a 131,072-cell cache ~1.5 % used; 32 slots: 823 ms). Requests deferred beside idle
unified slots wait for the cells, not a slot: not this rule's.

Not for TGI (its batch is bounded by tokens, and ``--max-concurrent-requests`` refuses the excess rather than queueing
it) or a Dynamo frontend (its gauges count every worker's requests, the queued ones inside the in-flight); nor an
engine other than vLLM whose cap the config does not state (SGLang derives
``--max-running-requests`` from its pool: the 256 assumed is not its cap). Not while another pool (a state pool, the
slots) is saturated: that pool holds the queue. A stalled engine, whose gauges describe a hang, is ``stalled``'s (it
supersedes this rule, and on engines whose counters move during decode this rule needs tokens generated in the
window).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import Any

from advisor import conventions as c
from advisor.capacity.engines import LLAMACPP_MAX_SEQUENCES
from advisor.capacity.hardware import GIB
from advisor.capacity.queueing import mean_queue_wait_seconds
from advisor.engines.catalog import running_cap_slack
from advisor.errors import CapacityError
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import (
    UNIFIED_CELLS_FILL_MAX,
    confidence,
    count,
    data_parallel_ranks,
    knee_batch,
    kv_withheld,
    latency_model,
    observed_request_tokens,
    percent,
)
from advisor.rules.flags import flag_for
from advisor.rules.replicas import arrival_history_withheld, arrival_rate
from advisor.rules.turns import effect, turn

NOT_FOR_ENGINES = {
    "tgi": "TGI bounds its batch by tokens (--max-batch-total-tokens), not by a sequence cap",
    "dynamo": "Dynamo's frontend counts every worker's requests, queued ones inside in-flight: no one engine's slots",
}
"""Engines whose sequence-count dial is not a cap that queues (why, per engine)."""


def _llamacpp_bounded(ev: Evaluation, slots: int, want: int, context: float, bounds: dict[str, Any]) -> int | None:
    """``want`` llama.cpp slots (what the requests and the cells or GPU allow) bounded by the slots llama.cpp starts
    with (``LLAMACPP_MAX_SEQUENCES``) and, with a TPOT target, the TPOT knee at ``context`` tokens a request; the
    bounds that bound go into ``bounds``. None when that is not above ``slots``."""
    capped = min(want, LLAMACPP_MAX_SEQUENCES)
    if capped == LLAMACPP_MAX_SEQUENCES < want:
        bounds["slots_limit"] = LLAMACPP_MAX_SEQUENCES
    gpu = ev.ctx.gpu
    target = ev.ctx.slo.tpot_seconds
    if target and capped > slots and gpu is None:
        bounds["tpot_unpriced"] = True
    elif target and capped > slots and gpu is not None:
        try:
            knee = knee_batch(latency_model(ev), ev.ctx.inputs, gpu, context, target, capped)
        except (CapacityError, ValueError):
            bounds["tpot_unpriced"] = True
        else:
            bounds["tpot_knee"] = knee
            capped = min(capped, knee) if knee is not None else slots
    return capped if capped > slots else None


def _llamacpp_bound_texts(bounds: dict[str, Any]) -> tuple[str, str]:
    """The TPOT knee's and the slot limit's clauses of a llama.cpp raise (each empty when it did not bound)."""
    knee = (
        f"; TPOT meets its target up to a batch of {bounds['tpot_knee']}"
        if bounds.get("tpot_knee")
        else "; the latency model cannot price the larger batch on this hardware: watch TPOT after the change"
        if bounds.get("tpot_unpriced")
        else ""
    )
    limit = f"; llama.cpp starts with at most {LLAMACPP_MAX_SEQUENCES} slots" if bounds.get("slots_limit") else ""
    return knee, limit


STANDING_QUEUE_SHARE = 0.1
"""How far (share of its size at the window's start, at least one request) the queue may move over the window and
still be a standing queue — clients that re-send as they are served, whose running plus waiting is their number —
rather than arrivals outrunning the cap or a backlog draining (:meth:`SeqCapRule._raised`)."""


def steady_slots(ev: Evaluation) -> int | None:
    """Sequence slots per data-parallel rank the window's arrivals keep busy, with room for their fluctuation, or
    ``None`` when a rate is unknown: ``m + 2√m`` for ``m = λ × W`` — λ the arrival rate per rank
    (:func:`advisor.rules.replicas.arrival_rate`), ``W`` a request's time in a slot at today's batch by Little's law
    (the window's mean running per rank ÷ its completions per rank) — the requests in service of an M/G/∞ system
    being Poisson with mean λW (Kleinrock vol. 1 §4.9), ``m + 2√m`` about its 98th percentile.

    A cap sized to the running and waiting requests of one scrape followed the backlog, not the load (breaker 23:
    "max_num_seqs 4 → 19", then 22, 27, … 210 within minutes at 6 requests/s of 3-second requests, where ~10 a replica
    serve them); ``W`` grows with the batch (TPOT rises), so ``λW`` at today's batch is a floor of the need, which
    the TPOT knee bounds from above."""
    s = ev.stats
    rates = arrival_rate(s)
    if s is None or rates is None or ev.replicas_up <= 0:
        return None
    arrival, done, _ = rates
    ranks = data_parallel_ranks(ev)
    mean = ev.requests_running_mean if ev.requests_running_mean is not None else s.requests_running
    if mean is None or not math.isfinite(mean) or mean <= 0 or done <= 0 or arrival < 0:
        return None
    held = mean / done  # W: seconds a request holds a slot, Little's law over the window
    m = arrival / ev.replicas_up / ranks * held
    return math.ceil(m + 2 * math.sqrt(m))


def arrivals_bounded_demand(
    ev: Evaluation, demand: int, cap: int, bounds: dict[str, Any], suffix: str, slack: int = 0
) -> int:
    """``demand`` (slots per rank: the running and waiting requests of this scrape, plus ``slack``) bounded by the
    window's load when the queue moved over the window; what bounded it is recorded in ``bounds`` as
    ``steady_slots_<suffix>`` or ``in_flight_held_<suffix>``.

    A queue that grew over the window is arrivals outrunning the cap, one that shrank a backlog draining: its size at
    one scrape is where the growth or the drain has got to, so the slots follow the arrival rate
    (:func:`steady_slots`; breaker 23's rerun: "4 → 203" as a burst's backlog drained). Where no rate is measured
    (llama.cpp exposes no request counter; a window too short for one) the bound is the in-flight requests (running
    + waiting) the window held at both ends — the smaller of its first and last scrape's — so the raise follows the
    load the whole window showed, not where a burst had got to. A standing queue (moved by at most
    :data:`STANDING_QUEUE_SHARE` of its size, at least one request) is the clients' own population (eight clients on
    one slot keep seven waiting: field-state round 14), held whole. Never below ``cap + 1``: the rule fires only with
    requests waiting at the cap. Shared by every engine's raise (``max_num_seqs`` and its kin, llama.cpp
    ``--parallel``)."""
    s = ev.stats
    assert s is not None
    first = s.requests_waiting_first
    now = s.requests_waiting
    if first is None or now is None or abs(now - first) <= max(1.0, STANDING_QUEUE_SHARE * first):
        return demand
    steady = steady_slots(ev)
    if steady is not None:
        bounds[f"steady_slots_{suffix}"] = steady + slack
        return min(demand, max(steady + slack, cap + 1))
    if s.requests_running_first is None or s.requests_running is None:
        return demand
    per = max(ev.replicas_up, 1) * data_parallel_ranks(ev)
    held = math.ceil(min(s.requests_running_first + first, s.requests_running + now) / per) + slack
    bounds[f"in_flight_held_{suffix}"] = held
    return min(demand, max(held, cap + 1))


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

    def _waiting_for_a_slot(self, ev: Evaluation) -> float | None:
        """Requests waiting for a slot: vLLM's ``waiting_capacity`` where the engine splits its queue by reason
        (``deferred`` requests wait for a LoRA adapter slot or a remote KV load, ``skipped_waiting`` in
        ``vllm/v1/core/sched/scheduler.py``: a larger cap admits none of them), else the whole waiting count."""
        s = ev.stats
        assert s is not None
        if "waiting_capacity" in ev.queues:
            return ev.queues["waiting_capacity"]
        return s.requests_waiting

    def _reading(self, ev: Evaluation) -> tuple[bool | None, str, dict[str, Any]]:
        s = ev.stats
        if s is None:
            return None, "no data", {}
        why_not = NOT_FOR_ENGINES.get(ev.ctx.engine)
        if why_not:
            return False, why_not, {}
        if ev.ctx.engine == "llamacpp":
            return self._llamacpp_reading(ev)
        cap = ev.ctx.inputs.max_num_seqs
        waiting = self._waiting_for_a_slot(ev)
        if cap is None or s.requests_running is None or waiting is None:
            return None, "max_num_seqs, running or waiting unknown", {}
        if ev.ctx.engine != "vllm" and not ev.ctx.max_num_seqs_stated:
            # SGLang derives --max-running-requests from its pool, TensorRT-LLM its batch from its engine build: the
            # 256 the capacity pass assumes is not the cap the engine queues at
            return None, f"the sequence cap is not stated (set deployments[].max_num_seqs; {cap} is assumed)", {}
        ranks = data_parallel_ranks(ev)
        per_replica = s.requests_running / max(ev.replicas_up, 1)
        usage = s.kv_cache_usage_ratio_max if s.kv_cache_usage_ratio_max is not None else s.kv_cache_usage_ratio
        evidence: dict[str, Any] = {
            "max_num_seqs": cap,
            "requests_running_per_replica": round(per_replica, 2),
            "requests_waiting_for_a_slot": waiting,
            "kv_cache_usage_ratio_max": usage,
        }
        if ranks > 1:
            evidence["data_parallel_ranks"] = ranks
        if per_replica > cap * ranks + 0.5:
            # the engine never runs more than its cap (vLLM: ``num_running >= max_num_running_reqs``): the config's
            # max_num_seqs is not what the engine runs with, and its real cap is unknown
            return None, f"{count(per_replica)} running exceed the configured max_num_seqs {cap * ranks}", evidence
        slack = running_cap_slack(ev.ctx.engine)  # slots the engine leaves idle below its cap (SGLang: 1 a rank)
        binds = max(cap - slack, 1) * ranks
        if slack:
            evidence["running_cap_slack_per_rank"] = slack
        if per_replica < binds - 1e-9 or waiting < 1:
            # below the cap a queue waits for KV blocks (or a prefill budget), not for a slot
            reason = f"{count(per_replica)} running of a cap of {cap * ranks}, {count(waiting)} waiting"
            if slack:
                reason += f" (the cap binds at {binds}: {ev.ctx.engine} runs {slack} below it a rank)"
            return False, reason, evidence
        if usage is None:
            return None, "KV usage unknown: whether the pool has room cannot be told", evidence
        if usage > self.max_usage:
            return False, f"the fullest pool is {percent(usage)} used, above {percent(self.max_usage)}", evidence
        other = kv_withheld(ev)
        if other:  # a state pool or the slots are full: that pool, not the cap, holds the queue
            return False, other.removeprefix("withheld: "), evidence
        generated = ev.counter_deltas.get("generation_tokens")
        if generated is not None and generated <= 0:
            return False, "no token generated in the window: a hang is not a cap (stalled speaks for it)", evidence
        tpot_ok = ev.tpot_ok.value if ev.tpot_ok is not None else None
        if tpot_ok is not None and tpot_ok < ev.ctx.slo.target_ratio:
            # a larger batch only slows every token further: goodput_below_target's
            return False, f"only {percent(tpot_ok)} of requests meet the TPOT target at this batch", evidence
        return (
            True,
            f"{count(per_replica)} running at max_num_seqs {cap}"
            + (f" × {ranks} ranks" if ranks > 1 else "")
            + (
                f" ({ev.ctx.engine} runs {slack} below its cap a rank while requests queue: sgl-project/sglang#30294)"
                if slack
                else ""
            )
            + f" with {count(waiting)} waiting for a slot while the fullest pool is {percent(usage)} used",
            evidence,
        )

    def _llamacpp_reading(self, ev: Evaluation) -> tuple[bool | None, str, dict[str, Any]]:
        """llama.cpp: every ``--parallel`` slot busy with requests deferred while tokens flow. Its cells are
        ``--ctx-size`` split over the slots (``n_ctx_seq = n_ctx / n_seq_max``, ``src/llama-context.cpp``), so more
        slots need a larger ``--ctx-size`` to keep each slot's room: whether those cells fit the GPU is the raise's
        bound (:meth:`_llamacpp_raised`), not the pool's usage today."""
        s = ev.stats
        assert s is not None
        settings = ev.ctx.inputs.engine_settings
        slots = settings.parallel
        if slots is None:
            return None, "--parallel unknown (set deployments[].parallel)", {}
        if s.requests_running is None or s.requests_waiting is None:
            return None, "the busy or deferred slot count is unknown (the page's figures are missing or impossible)", {}
        per_replica = s.requests_running / max(ev.replicas_up, 1)
        waiting = s.requests_waiting / max(ev.replicas_up, 1)
        evidence: dict[str, Any] = {
            "parallel": slots,
            "requests_running_per_replica": round(per_replica, 2),
            "requests_waiting_per_replica": round(waiting, 2),
        }
        if per_replica > slots + 0.5:
            return None, f"{count(per_replica)} running exceed the configured --parallel {slots}", evidence
        if waiting < 1:
            return False, f"{count(per_replica)} of {slots} slot(s) busy, nothing deferred", evidence
        if per_replica < slots - 1e-9 and settings.kv_unified:
            # unified slots take no cells until their requests write them: requests deferred beside idle slots wait
            # for the shared cells (or a proxy in front holds them), which more slots would not add
            return (
                False,
                (
                    f"{count(waiting)} deferred with {count(per_replica)} of {slots} unified slot(s) busy: the shared "
                    "cells, not the slots, hold them (pool_context judges the cells)"
                ),
                evidence,
            )
        if per_replica < slots - 1e-9:
            # llama.cpp defers a task only when no slot is idle (tools/server: the adapter's requests_deferred): a
            # deferred request beside a configured free slot means the server runs fewer slots than the config says
            # (or requests pin a slot with id_slot)
            return (
                None,
                (
                    f"{count(waiting)} deferred with {count(per_replica)} of the configured {slots} slot(s) busy: the "
                    "server runs fewer slots than deployments[].parallel states (or requests pin a slot)"
                ),
                evidence,
            )
        # llama.cpp counts generated tokens when a slot finishes (counters_advance_during_decode False): a still
        # counter over a window is a long generation, not a hang (stalled, which supersedes this rule, judges that)
        measured = ev.engine_time.tpot_seconds if ev.engine_time is not None else None
        target = ev.ctx.slo.tpot_seconds
        if measured is not None:
            evidence["tpot_mean_seconds"] = round(measured, 4)
            if target and measured > target:
                return (
                    False,
                    (
                        f"its slots already take {measured * 1000:,.0f} ms a token against the {target * 1000:,.0f} ms "
                        "target: more slots slow every token further"
                    ),
                    evidence,
                )
        return (
            True,
            f"all {slots} slot(s) busy with {count(waiting)} request(s) deferred: each waits for a slot",
            evidence,
        )

    def _llamacpp_raised(self, ev: Evaluation) -> tuple[int | None, dict[str, Any]]:
        """More slots for llama.cpp, each keeping its cells (``--ctx-size`` grown with them): up to the running and
        deferred requests, as many as the GPU holds (weights + the cells at ``max_usage_after`` of its memory; the
        compute buffers, 0.3–1 GiB, are the rest), and with a TPOT target the TPOT knee."""
        s = ev.stats
        capacity = ev.ctx.capacity
        settings = ev.ctx.inputs.engine_settings
        slots = settings.parallel
        assert s is not None and slots is not None and s.requests_running is not None
        per_slot = (capacity.kv_cache_tokens or 0) // slots
        per_token = capacity.kv_cache_bytes_per_token_per_gpu
        demand = math.ceil((s.requests_running + (s.requests_waiting or 0)) / max(ev.replicas_up, 1))
        room = (
            self.max_usage_after * ev.ctx.inputs.gpu_memory_bytes
            - capacity.weights_bytes_per_gpu
            - ev.ctx.inputs.gpu_memory_used_by_others_bytes
        )
        bounds: dict[str, Any] = {"demand_per_replica": demand, "tokens_per_slot": per_slot}
        demand = arrivals_bounded_demand(ev, demand, slots, bounds, "per_replica")
        if per_slot <= 0 or per_token <= 0 or room <= 0:
            return None, bounds
        fit = int(room // (per_slot * per_token))
        bounds["slots_that_fit"] = fit
        return _llamacpp_bounded(ev, slots, min(demand, fit), float(per_slot) / 2, bounds), bounds

    def _llamacpp_unified_raised(self, ev: Evaluation) -> tuple[int | None, dict[str, Any]]:
        """More slots on one unified cache (``--kv-unified``): the cells do not grow with the slots (a slot takes
        cells only as its request writes them, ``n_ctx_seq = n_ctx``), so the bound is the requests of the longest
        length measured — the longest sequence held since start (llama.cpp ``n_tokens_max``) or the observed request
        length, whichever is longer — that ``max_usage_after`` of the cells hold (a unified cache that runs out aborts
        the running generations, ``pool_context``'s), then the running and deferred requests, ``LLAMACPP_MAX_SEQUENCES``
        and the TPOT knee at half that length. No length measured: None (``request_tokens_unknown``), since the cells'
        share per request cannot be told."""
        s = ev.stats
        settings = ev.ctx.inputs.engine_settings
        slots = settings.parallel
        assert s is not None and slots is not None and s.requests_running is not None
        cells = ev.ctx.capacity.kv_cache_tokens or 0
        demand = math.ceil((s.requests_running + (s.requests_waiting or 0)) / max(ev.replicas_up, 1))
        bounds: dict[str, Any] = {"demand_per_replica": demand, "unified_cells": cells}
        demand = arrivals_bounded_demand(ev, demand, slots, bounds, "per_replica")
        measured = [v for v in (ev.longest_sequence_tokens, observed_request_tokens(ev)[0]) if v and v > 0]
        if cells <= 0 or not measured:
            bounds["request_tokens_unknown"] = True
            return None, bounds
        length = max(measured)
        # never past pool_context's bound for unified slots, so its check does not fire on the raise
        fit = int(min(self.max_usage_after, UNIFIED_CELLS_FILL_MAX) * cells // length)
        bounds |= {"request_tokens_longest_measured": round(length), "slots_the_cells_hold": fit}
        return _llamacpp_bounded(ev, slots, min(demand, fit), length / 2, bounds), bounds

    def _llamacpp_unified_propose(
        self,
        ev: Evaluation,
        reason: str,
        evidence: dict[str, Any],
        raised: tuple[int | None, dict[str, Any]] | None = None,
    ) -> list[Proposal]:
        """``--parallel`` raised on a unified cache, the cells (``--ctx-size``) left as they are (``raised``: the
        :meth:`_llamacpp_unified_raised` already computed)."""
        new, bounds = raised if raised is not None else self._llamacpp_unified_raised(ev)
        if new is None:
            return []
        slots = ev.ctx.inputs.engine_settings.parallel
        assert slots is not None
        cells = bounds["unified_cells"]
        length = bounds["request_tokens_longest_measured"]
        knee, limit = _llamacpp_bound_texts(bounds)
        return [
            self._slot_raise(
                ev,
                slots,
                new,
                bounds,
                flag=f"{flag_for(ev.ctx.engine, c.DIAL_MAX_NUM_SEQS, new)} --kv-unified",
                summary=f"{ev.ctx.name}: requests wait for a llama.cpp slot — raise --parallel {slots} → {new} "
                f"on the same {cells:,} unified cells",
                description=(
                    f"{reason}, so each one's TTFT includes a running request's whole generation. "
                    + (
                        "The slots share one "
                        if ev.ctx.inputs.engine_settings.kv_unified
                        else f"Today --ctx-size is split over the slots ({cells // slots:,} cells each); with "
                        "--kv-unified they share one "
                    )
                    + f"cache of {cells:,} cells and take cells only as their requests write them: "
                    f"{new} requests of the longest length measured ({length:,} tokens, the longest sequence held "
                    f"since start or the observed request length) fill {percent(new * length / cells)} of them, so "
                    f"--ctx-size stays ({bounds['slots_the_cells_hold']} such requests fit at "
                    f"{percent(min(self.max_usage_after, UNIFIED_CELLS_FILL_MAX))} of the cells"
                    + knee
                    + limit
                    + "). Keep --kv-unified on the command line: llama-server shares the cells by itself only when "
                    "--parallel is not given (its auto setting, 4 slots), and an explicit --parallel without it splits "
                    "--ctx-size over the slots. Falsified by: requests that grow towards the cells' share per slot "
                    "(llama.cpp aborts generations when unified cells run out)."
                ),
                predicted_effect={"max_num_seqs": effect(slots, new)},
                evidence={**evidence, **bounds},
            )
        ]

    def _slot_raise(
        self,
        ev: Evaluation,
        slots: int,
        new: int,
        bounds: dict[str, Any],
        *,
        flag: str,
        summary: str,
        description: str,
        predicted_effect: dict[str, dict[str, Any]],
        evidence: dict[str, Any],
    ) -> Proposal:
        """A llama.cpp slot raise ``slots`` → ``new`` (split or unified cells: the caller says which in ``flag``,
        ``summary`` and ``description``); lower confidence where the TPOT knee could not be priced."""
        return Proposal(
            rule=self.id,
            dial=c.DIAL_MAX_NUM_SEQS,
            action="increase",
            current=slots,
            suggested=new,
            flag=flag,
            severity="warning",
            confidence=confidence(ev, 0.5 if bounds.get("tpot_unpriced") else 0.7),
            summary=summary,
            description=description,
            predicted_effect=predicted_effect,
            evidence=evidence,
            score=new / slots,
            cost=1.0,
            gpus_added=0.0,
        )

    def _llamacpp_propose(self, ev: Evaluation, reason: str, evidence: dict[str, Any]) -> list[Proposal]:
        """More llama.cpp slots: on shared cells (``--kv-unified``, the cells as they are) where the server shares them
        already, or where sharing them holds at least as many slots as growing ``--ctx-size`` with them would (no
        memory added: Hal0ai/hal0#1067, agents serialized on ``--parallel 1`` — "without --kv-unified, --ctx-size C
        silently splits to C/N per slot"; "slots are nearly memory-free at fixed ctx pool"); else each new slot with
        its own cells (``--ctx-size`` grown)."""
        if ev.ctx.inputs.engine_settings.kv_unified:
            return self._llamacpp_unified_propose(ev, reason, evidence)
        new, bounds = self._llamacpp_raised(ev)
        shared = self._llamacpp_unified_raised(ev)
        if shared[0] is not None and (new is None or shared[0] >= new):
            return self._llamacpp_unified_propose(ev, reason, evidence, shared)
        if new is None:
            return []
        slots = ev.ctx.inputs.engine_settings.parallel
        assert slots is not None
        per_slot = bounds["tokens_per_slot"]
        ctx_before, ctx_after = per_slot * slots, per_slot * new
        per_token = ev.ctx.capacity.kv_cache_bytes_per_token_per_gpu
        knee, limit = _llamacpp_bound_texts(bounds)
        return [
            self._slot_raise(
                ev,
                slots,
                new,
                bounds,
                flag=f"--parallel {new} --ctx-size {ctx_after}",
                summary=f"{ev.ctx.name}: requests wait for a llama.cpp slot — raise --parallel {slots} → {new} "
                f"with --ctx-size {ctx_before:,} → {ctx_after:,}",
                description=(
                    f"{reason}, so each one's TTFT includes a running request's whole generation. llama.cpp splits "
                    f"--ctx-size over the slots, so the slots go to {new} with --ctx-size {ctx_after:,}: each keeps "
                    f"its {per_slot:,} cells, and the cache grows by {(ctx_after - ctx_before) * per_token / GIB:.2f} "
                    f"GiB ({bounds['slots_that_fit']} such slots fit the GPU beside the weights at "
                    f"{percent(self.max_usage_after)} of its memory"
                    + knee
                    + limit
                    + f"). Raising --parallel alone would cut every slot to --ctx-size ÷ {new} = "
                    f"{ctx_before // new:,} cells. A server started without -np runs 4 slots sharing one unified "
                    "cache (llama-server's auto setting): an explicit --parallel splits it, so state kv_unified in "
                    "the deployment if yours does, and the advisor judges the shared cells instead."
                ),
                predicted_effect={
                    "max_num_seqs": effect(slots, new),
                    "kv_cache_tokens": effect(ctx_before, ctx_after),
                },
                evidence={**evidence, **bounds},
            )
        ]

    def fires(self, ev: Evaluation) -> Condition:
        """At the cap with a queue and room in the pool."""
        holds, reason, evidence = self._reading(ev)
        return Condition(holds, reason, evidence)

    def clears(self, ev: Evaluation) -> Condition:
        """No longer so — at the window's peak of running requests too: with requests waiting, a newest gauge one
        slot below the cap is a slot freed between two steps, not the cap released (breaker 23: 7 of 8 running with
        29 waiting cleared the rule for one scrape, and the incident switched from max_num_seqs 4 → 19 to "replicas
        2 → 6" and never came back)."""
        holds, reason, evidence = self._reading(ev)
        at_peak = self._at_peak(ev) if holds is False else None
        if at_peak is not None:
            return Condition(
                False, f"{reason}; at the window's peak {self._reading(at_peak)[1]}: not yet clear", evidence
            )
        return Condition(None if holds is None else not holds, reason, evidence)

    def _at_peak(self, ev: Evaluation) -> Evaluation | None:
        """``ev`` read at the window's peak of running requests, when the newest gauge is below that peak and the
        rule holds there; else ``None``. With requests waiting, a gauge one slot below the cap is a slot freed between
        two steps: :meth:`clears` and :meth:`propose` read the cap at the peak, so the rule neither clears nor drops
        its turn on one scrape (breaker 23: the incident then switched at once to another rule's replicas)."""
        s = ev.stats
        peak = ev.requests_running_max
        if s is None or s.requests_running is None or peak is None or peak <= s.requests_running:
            return None
        seen = dataclasses.replace(ev, stats=dataclasses.replace(s, requests_running=peak))
        return seen if self._reading(seen)[0] else None

    def _holds_at(self, ev: Evaluation, n: int, length: float | None, per_rank: float, usage: float) -> int | None:
        """Requests the pool holds at ``max_usage_after`` with the cap at ``n`` (vLLM's sampler warm-up grows with
        max_num_seqs and shrinks the pool: the capacity pass with the cap turned gives the pool's new size), at
        ``length`` tokens a request where the pool's size is known, else at the running requests' share of it
        (``per_rank`` running fill ``usage``); None when the deployment would not start with that cap."""
        t = turn(ev.ctx.inputs, c.DIAL_MAX_NUM_SEQS, n)
        if t is None or not t.before.kv_cache_tokens or t.after.kv_cache_tokens <= 0:
            return None
        shrink = t.after.kv_cache_tokens / t.before.kv_cache_tokens
        pool = ev.kv_capacity_tokens
        if length and pool:
            return math.floor(self.max_usage_after * pool * shrink / data_parallel_ranks(ev) / length)
        return math.floor(self.max_usage_after * shrink * per_rank / usage)

    def _raised(self, ev: Evaluation) -> tuple[int | None, dict[str, Any]]:
        """The raised cap per rank (or None), with its bounds as evidence: the largest cap up to the running and
        waiting requests that the pool holds at the observed request size (the larger of finished requests' length
        and running requests' KV, :func:`advisor.rules.common.observed_request_tokens`; the running requests' share
        of the pool when its size is unknown) with that cap's own pool, then the TPOT knee."""
        s = ev.stats
        inputs = ev.ctx.inputs
        cap = inputs.max_num_seqs
        waiting = self._waiting_for_a_slot(ev)
        assert s is not None and cap is not None and s.requests_running is not None and waiting is not None
        ranks = data_parallel_ranks(ev)
        per_rank = s.requests_running / max(ev.replicas_up, 1) / ranks
        # a cap of n runs n − slack (SGLang's chunked prefill), so running and waiting all need n = demand + slack
        slack = running_cap_slack(ev.ctx.engine)
        demand = math.ceil(per_rank + waiting / max(ev.replicas_up, 1) / ranks) + slack
        bounds: dict[str, Any] = {"demand_per_rank": demand}
        demand = arrivals_bounded_demand(ev, demand, cap, bounds, "per_rank", slack)
        usage = s.kv_cache_usage_ratio_max if s.kv_cache_usage_ratio_max is not None else s.kv_cache_usage_ratio
        length, _ = observed_request_tokens(ev)
        if not (length and ev.kv_capacity_tokens) and not (usage and usage > 0):
            return None, bounds
        if length and ev.kv_capacity_tokens:
            bounds["tokens_per_request"] = round(length)
        assert usage is not None
        # the largest n ≤ demand the pool holds with the cap at n: the pool shrinks as n grows, so the test is
        # monotone (true up to some n, false beyond)
        lo, hi, want, held = cap + 1, max(cap + 1, demand), cap, None
        while lo <= hi:
            mid = (lo + hi) // 2
            holds = self._holds_at(ev, mid, length, per_rank, usage)
            if holds is not None and mid <= holds:
                want, held, lo = mid, holds, mid + 1
            else:
                hi = mid - 1
        if want <= cap:
            return None, bounds
        bounds["pool_holds_requests"] = held
        gpu = ev.ctx.gpu
        target = ev.ctx.slo.tpot_seconds
        if gpu is not None and target:
            context = length or float(inputs.max_model_len or 2048) / 2
            try:
                knee = knee_batch(latency_model(ev), inputs, gpu, context, target, want)
            except (CapacityError, ValueError):  # the part lacks a figure the roofline needs: TPOT unpriced
                bounds["tpot_unpriced"] = True
            else:
                bounds["tpot_knee"] = knee
                want = min(want, knee) if knee is not None else cap
        return (want if want > cap else None), bounds

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """``max_num_seqs`` raised, bounded by the pool at the observed request size, what starts and the TPOT
        target."""
        holds, reason, evidence = self._reading(ev)
        if holds is False and (at_peak := self._at_peak(ev)) is not None:  # a slot freed between steps: the peak's turn
            ev = at_peak
            holds, reason, evidence = self._reading(ev)
        if not holds:
            return []
        if ev.ctx.engine == "llamacpp":
            return self._llamacpp_propose(ev, reason, evidence)
        new, bounds = self._raised(ev)
        if new is None:
            return []
        inputs = ev.ctx.inputs
        cap = inputs.max_num_seqs
        s = ev.stats
        usage = evidence["kv_cache_usage_ratio_max"]
        assert s is not None and cap is not None and usage is not None
        ranks = data_parallel_ranks(ev)
        running = max((s.requests_running or 0.0) / max(ev.replicas_up, 1) / ranks, 1.0)
        predicted: dict[str, dict[str, Any]] = {
            "max_num_seqs": effect(cap, new),
            # the running requests' share of the pool, scaled to the new cap at their size today
            "kv_cache_usage_ratio": effect(usage, min(1.0, usage * new / running)),
        }
        gpu = ev.ctx.gpu
        length = bounds.get("tokens_per_request")
        if gpu is not None:
            model = latency_model(ev)
            context = float(length or (inputs.max_model_len or 2048) / 2)
            with contextlib.suppress(CapacityError, ValueError):
                predicted["tpot_seconds"] = effect(
                    model.tpot_seconds(inputs, gpu, running, context), model.tpot_seconds(inputs, gpu, new, context)
                )
        served, arriving = self._served_at(ev, running, new, predicted.get("tpot_seconds"))
        wait = None
        if served is not None and arriving is not None:
            bounds["completions_per_second_at_new_cap"] = round(served, 4)
            bounds["arrival_rate_per_second"] = round(arriving, 4)
            # the slots as M/M/c servers (each request holds one for new ÷ served s): the mean wait for a slot
            slots = max(1, round(new * max(ev.replicas_up, 1) * ranks))
            wait = mean_queue_wait_seconds(slots, arriving, served / slots)
            bounds["slot_wait_seconds_at_new_cap"] = round(wait, 4) if math.isfinite(wait) else None
        # the raise closes the gap only if the slot queue it leaves is stable and waits within the TTFT target
        sufficient = wait is None or wait <= (ev.ctx.slo.ttft_seconds or math.inf)
        held = (
            f" (the pool holds {bounds['pool_holds_requests']} requests of ~{length:,} tokens, the longer of finished "
            f"and running requests, at {percent(self.max_usage_after)} usage"
            if length
            else f" (at the running requests' share of the pool the pool holds {bounds['pool_holds_requests']} at "
            f"{percent(self.max_usage_after)} usage"
        )
        knee = bounds.get("tpot_knee")
        tpot = (
            f"; TPOT meets its target up to a batch of {knee}"
            if knee
            else "; the latency model cannot price the larger batch on this GPU: watch TPOT after the change"
            if bounds.get("tpot_unpriced")
            else ""
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
                summary=f"{ev.ctx.name}: requests wait for a sequence slot with the KV pool {percent(usage)} used — "
                f"raise max_num_seqs {cap} → {new}",
                description=(
                    f"{reason}: they wait for a slot, not for blocks (the scheduler admits no request past "
                    "max_num_seqs however many blocks are free), so each one's TTFT includes a running request's "
                    f"whole generation. {new} slots hold the running and waiting requests{held}{tpot})."
                    + (
                        " Pool turns would not help: the pool has room."
                        if sufficient
                        else f" At {new} slots the deployment completes at most about {served:.2f} requests/s "
                        f"against {arriving:.2f} arriving (each request's decode slows with the batch), so requests "
                        + (
                            "still queue without bound"
                            if wait is None or not math.isfinite(wait)
                            else f"still wait {wait:.1f} s for a slot on average"
                        )
                        + ": the cap shortens the wait but does not close the gap; more replicas do. Pool turns "
                        "would not help: the pool has room."
                    )
                ),
                predicted_effect=predicted,
                evidence={**evidence, **bounds},
                score=new / cap
                if served is None or not s.requests_finished_per_second
                else served / s.requests_finished_per_second,
                cost=1.0,
                gpus_added=0.0,
                sufficient=sufficient,
            )
        ]

    @staticmethod
    def _served_at(
        ev: Evaluation, running: float, new: int, tpot: dict[str, Any] | None
    ) -> tuple[float | None, float | None]:
        """(completions/s the deployment would reach at ``new`` slots per rank, requests/s arriving), each ``None``
        when unknown. Today's completions at ``running`` sequences per rank scale with the slots and inversely with
        each request's decode time (Little's law: completions = sequences ÷ time a request holds its slot, the time
        set by TPOT at that batch; the prefill's share is left as it is): ``done × new ÷ running × TPOT(running) ÷
        TPOT(new)``. The arrival rate is the window's flow balance (:func:`advisor.rules.replicas.arrival_rate`),
        not read over a history too short for one (:func:`advisor.rules.replicas.arrival_history_withheld`)."""
        flow = arrival_rate(ev.stats)
        s = ev.stats
        if flow is None or s is None or not s.requests_finished_per_second or running <= 0:
            return None, None
        if arrival_history_withheld(ev) is not None:  # a few seconds' growth is a momentary backlog, not a rate
            return None, None
        slowdown = 1.0
        if tpot is not None and tpot.get("before") and tpot.get("after"):
            slowdown = float(tpot["after"]) / float(tpot["before"])
        return s.requests_finished_per_second * new / running / max(slowdown, 1e-9), flow[0]
