"""Rule ``pool_context``: the pool holds less than the context the deployment promises.

Fires when the KV pool of a replica (the engine's own number when it reports one) holds fewer than
``min_full_length_requests`` requests of max-model-len. Then one long request can take the whole pool,
and one longer than the pool can never be admitted: vLLM keeps it at the head of the waiting queue
(``vllm/v1/core/sched/scheduler.py``: the request cannot be allocated, scheduling stops at it), so
everything behind it waits too. Adding replicas does not help — each has the same pool.

With data-parallel ranks the pool that matters is **one rank's**: one request lives on one rank, so a
max-length request fits only if the largest single rank's pool holds it, and the deployment's ceiling at
max-model-len is the sum over ranks of ``⌊rank pool ÷ max-model-len⌋`` — the summed pool ÷ max-model-len
would hide that the longest requests can never fit (SGLang DP attention, vLLM ``--data-parallel-size``).
For llama.cpp the bound is one slot (``--ctx-size ÷ --parallel`` cells, ``n_ctx_seq`` in
``src/llama-context.cpp``): a request never spans slots, however large the whole pool. With ``--kv-unified`` the
slots share the cells (``n_ctx_seq = n_ctx``) and are admitted without reserving any: every slot may grow to
max-model-len, and when the cells run out llama.cpp aborts the generations ("Context size has been exceeded",
``tools/server/server.cpp``) rather than queueing or preempting them, so the pool must hold ``--parallel``
max-length requests (ggml-org/llama.cpp#23652: 4 slots × 1,024 on 1,024 cells). Then the rule also proposes fewer
slots (``--parallel`` = the max-length requests the cells hold), and its cap is the cells' share per slot — withheld
when the engine has held a longer sequence since it started (llama.cpp ``n_tokens_max``): the cap would refuse what
it serves, fewer slots would not (lemonade-sdk/lemonade#3276: four requests over 32,768 tokens each on 131,072
shared cells, fixed by ``--parallel 1``) — and withheld when no request length is visible at all (no
``n_tokens_max``, KV gauge or request lengths), since the cap may then refuse what runs (ggml-org/llama.cpp#17527: two
agents of ~25,000 tokens on 8 slots of 131,072 shared cells, a share of 16,384). Fewer slots never go below the
requests that run at once while a slot is free (those would queue behind one another's whole turn); with every slot
busy the overflow is at hand and the cells' own count stands.
A hybrid vLLM model whose engine reports no group-aware ``kv_cache_size_tokens`` has no trustworthy pool
(``block_size`` is the minimum over its KV groups, and the capacity pass does not model the groups): the rule
cannot tell, whichever number stands in for the pool.

Proposes capping max-model-len to what the pool holds (rounded down to a multiple of 1,024 tokens), or
the turns that enlarge the pool until it holds the promised context. Supersedes the saturation, queue and
goodput rules, whose replica advice would be wrong here.

Checked against its evidence (issue 13): the cap is a preventive one (reject what the pool can never hold), so it
is withheld when the observed requests (:func:`advisor.rules.common.observed_request_tokens`: tokens per finished
request from the counters, KV tokens per running request except on hybrid models) stay far below it — even
:data:`advisor.rules.common.CAP_TAIL_FACTOR` × their length is under the cap — and nothing is blocked: long
contexts are then not what the pool holds, and the cap frees nothing. A queue blocked behind a request the pool
cannot hold (waiting, nothing running, no tokens) is the cap's own evidence; it is never withheld then. The
pool-enlarging turns are withheld while a different pool (a state pool, the slots) is the saturated one
(:func:`advisor.rules.common.kv_withheld`).
"""

from __future__ import annotations

import math
from typing import Any, Final

from advisor import conventions as c
from advisor.capacity.kvlayout import VLLM_V1_NULL_BLOCKS
from advisor.engines.vllm import reported_block_size
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import (
    CAP_TAIL_FACTOR,
    UNIFIED_CELLS_FILL_MAX,
    anchored,
    confidence,
    context_cap_withheld,
    count,
    kv_withheld,
    observed_request_tokens,
    percent,
    pool_effect,
    pool_turns,
    reserves_whole_requests,
    turn_proposal,
)
from advisor.rules.flags import flag_for
from advisor.rules.turns import effect, turn

ROUND_TO = 1024
SLOT_FULL_SHARE: Final = 0.95
"""A llama.cpp slot counts as filled when a measured sequence reaches this share of it (a full slot reads one cell
short of its size, and a running request's share is a mean over the running)."""
"""Capped context lengths are rounded down to a multiple of this many tokens…"""
ROUND_TO_SMALL = 128
"""…or of this many when the cap is under :data:`ROUND_TO` (a small llama.cpp context's share per slot)."""


def unified_slots(ev: Evaluation) -> int | None:
    """The llama.cpp slots that share one unified cache (``--parallel`` with ``--kv-unified``), when more than one;
    None for every other engine and setting."""
    settings = ev.ctx.inputs.engine_settings
    if ev.ctx.engine != "llamacpp" or not settings.kv_unified or not settings.parallel or settings.parallel < 2:
        return None
    return settings.parallel


def _unified_share_unreached(ev: Evaluation, evidence: dict[str, Any]) -> str | None:
    """Why ``--parallel`` unified slots × max-model-len beyond the cells is no hazard measured, or None.

    The oversubscription is a preventive reading: slots that may each grow to max-model-len. Its falsifier is the
    length the slots actually reach: when every slot at the longest measured (llama.cpp ``n_tokens_max``, the longest
    sequence held since start, or the observed request length) fits :data:`advisor.rules.common.UNIFIED_CELLS_FILL_MAX`
    of the cells, the cells have never come near running out, and llama-server's own default (4 slots sharing
    ``--ctx-size`` cells, ``tools/server/server.cpp``) is not an incident. The same bound caps ``seq_cap``'s raise of
    unified slots. Unknown length → None. Without the falsifier every default llama-server read as saturated, and its
    fire superseded ``seq_cap`` while 28 requests waited for one of 4 slots on a cache 1.5 % used
    (Mesh-LLM/mesh-llm#1973)."""
    slots = evidence.get("unified_slots")
    pool = evidence.get("kv_cache_capacity_tokens")
    measured = [v for v in (ev.longest_sequence_tokens, observed_request_tokens(ev)[0]) if v and v > 0]
    if not slots or not pool or not measured:
        return None
    longest = max(measured)
    if slots * longest > UNIFIED_CELLS_FILL_MAX * float(pool):
        return None
    evidence["request_tokens_longest_measured"] = round(longest)
    return (
        f"{slots} unified slots × max-model-len {evidence['max_model_len']:,} exceed the {pool:,.0f} shared cells, "
        f"but {slots} sequences of the longest measured ({longest:,.0f} tokens) fill "
        f"{percent(slots * longest / float(pool))} of them: the cells have not come near running out"
    )


def _rounded_cap(tokens: float) -> int:
    """``tokens`` rounded down to a multiple of :data:`ROUND_TO`, or of :data:`ROUND_TO_SMALL` below it (0 if less)."""
    step = ROUND_TO if tokens >= ROUND_TO else ROUND_TO_SMALL
    return int(tokens) // step * step


class PoolContextRule:
    """Pool smaller than the context it promises → cap max-model-len, or enlarge the pool."""

    id = c.RULE_POOL_CONTEXT
    problem = c.PROBLEM_SATURATION
    supersedes: tuple[str, ...] = (
        c.RULE_KV_SATURATION,
        c.RULE_QUEUE_GROWTH,
        c.RULE_GOODPUT_BELOW_TARGET,
        c.RULE_ADMISSION_THRASH,
        c.RULE_SEQ_CAP,
    )

    def __init__(self, min_full_length_requests: float = 1.0, for_seconds: float = 60.0):
        """``min_full_length_requests``: max-length requests the pool must hold; ``for_seconds``: for-duration."""
        self.n = min_full_length_requests
        self._for = for_seconds

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def _reading(self, ev: Evaluation) -> tuple[float | None, dict[str, Any]]:
        pool = ev.kv_capacity_tokens
        if ev.kv_capacity_source == "engine" and ev.kv_capacity_tokens_smallest is not None:
            # replicas whose pools differ: a max-length request must fit each one a router may send it to (breaker
            # 14: 6,400 tokens on one replica under max-model-len 8,192 hid behind the two replicas' mean, 11,184)
            pool = ev.kv_capacity_tokens_smallest
        mml = ev.ctx.inputs.max_model_len or ev.ctx.capacity.max_model_len
        s = ev.stats
        ranks = ev.kv_rank_capacity_tokens if ev.kv_capacity_source == "engine" else ()
        if ranks:
            pool = max(ranks)
        null = _null_block_tokens(ev)
        if pool and null:
            pool = max(0.0, pool - null)  # what one request can hold on one engine (or rank)
        slot = ev.ctx.capacity.max_request_tokens
        if pool and slot is not None and slot < pool:
            pool = slot  # llama.cpp: one request holds one slot's cells, not the pool
        evidence: dict[str, Any] = {
            "kv_cache_capacity_tokens": pool,
            "kv_cache_capacity_source": ev.kv_capacity_source,
            "max_model_len": mml,
            "requests_running": s.requests_running if s else None,
            "requests_waiting": s.requests_waiting if s else None,
            "generation_tokens_per_second": s.generation_tokens_per_second if s else None,
            "window_seconds": s.window_seconds if s else None,
        }
        if pool and pool == slot:
            evidence["slot_tokens"] = slot
            evidence["kv_cache_capacity_tokens_whole_pool"] = ev.kv_capacity_tokens
        slots = unified_slots(ev)
        reserved = _reservation_bound(ev, pool, mml) if pool else None
        evidence["max_length_requests_wanted"] = max(self.n, float(slots or 0), float(reserved or 0))
        if slots:
            evidence["unified_slots"] = slots
        if reserved and pool:
            evidence["reservation_bound_requests_wanted"] = reserved
            evidence["max_length_reservations_held"] = math.floor(pool / mml)
        if ranks:
            evidence["data_parallel_ranks"] = len(ranks)
            evidence["kv_cache_capacity_tokens_summed_over_ranks"] = sum(ranks)
            evidence["max_model_len_ceiling_requests"] = sum(int(r // mml) for r in ranks)
        # A hybrid model's pool is known only from the engine's group-aware number: the capacity pass does not
        # model the groups, and num_gpu_blocks × block_size is not the pool (the vLLM adapter leaves it unknown).
        group_aware = ev.kv_capacity_source == "engine" and "kv_cache_size_tokens" in ev.engine_config
        hybrid_unsure = ev.kv_cache_hybrid and not group_aware
        if not pool or hybrid_unsure:
            return None, evidence
        return pool / mml, evidence

    def fires(self, ev: Evaluation) -> Condition:
        """Pool ÷ max-model-len < ``min_full_length_requests`` (llama.cpp unified slots: < ``--parallel``); on vLLM
        V1 the pool less its null block (:data:`advisor.capacity.kvlayout.VLLM_V1_NULL_BLOCKS`)."""
        holds, evidence = self._reading(ev)
        if holds is None:
            if ev.kv_cache_hybrid:
                return Condition(
                    None,
                    "KV pool size unknown: a hybrid model's block_size is the minimum over its KV groups, so "
                    "num_gpu_blocks × block_size is not its pool",
                    evidence,
                )
            return Condition(None, "KV pool size unknown", evidence)
        where = "the pool"
        wanted = evidence["max_length_requests_wanted"]
        if "unified_slots" in evidence:
            where = f"the unified cache its {evidence['unified_slots']} slots share"
        if "slot_tokens" in evidence:
            where = "one slot (ctx-size ÷ parallel)"
        if "data_parallel_ranks" in evidence:
            where = f"the largest of {evidence['data_parallel_ranks']} data-parallel ranks' pools"
        if "reservation_bound_requests_wanted" in evidence:
            where = f"{ev.ctx.engine} reserves a request's whole length before admitting it: {where}"
            wanted_text = (
                f"{wanted:g} wanted (the running and waiting requests: the reservations hold the queue while "
                f"{percent(_usage(ev) or 0.0)} of the blocks are written)"
            )
        else:
            wanted_text = f"{wanted:g} wanted"
        unreached = _unified_share_unreached(ev, evidence) if holds >= self.n else None
        if holds < wanted and unreached:
            return Condition(False, unreached, evidence)
        return Condition(
            holds < wanted,
            # rounded down: a pool 16 tokens short of one request fires, and "1.00" beside it read as a contradiction
            f"{where} holds {math.floor(holds * 100) / 100:.2f} max-length requests "
            f"({evidence['kv_cache_capacity_tokens']:,.0f} tokens "
            f"for max-model-len {evidence['max_model_len']:,}); at least {wanted_text}",
            evidence,
        )

    def clears(self, ev: Evaluation) -> Condition:
        """The pool holds the promised requests again (the config changed)."""
        cond = self.fires(ev)
        return Condition(None if cond.holds is None else not cond.holds, cond.reason, cond.evidence)

    def _blocked(self, ev: Evaluation) -> bool:
        s = ev.stats
        return (
            s is not None
            and (s.requests_waiting or 0) > 0
            and not s.requests_running
            and not (s.generation_tokens_per_second or 0) > 0
        )

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """Cap max-model-len (first) or enlarge the pool until it holds the promised context."""
        holds, evidence = self._reading(ev)
        if holds is None:
            return []
        pool = float(evidence["kv_cache_capacity_tokens"])
        mml = int(evidence["max_model_len"])
        blocked = self._blocked(ev)
        reserved = evidence.get("reservation_bound_requests_wanted")
        severity = "critical" if blocked else "warning"
        conf = confidence(ev, 0.95)
        warning = (
            f" A request larger than the pool can never be admitted and blocks the queue behind it: "
            f"{count(ev.stats.requests_waiting if ev.stats else None)} waiting, nothing running, no tokens generated."
            if blocked
            else " A request longer than the pool can never be admitted, and one that is admitted can hold the "
            "whole pool and block the queue behind it."
        )
        situation = (
            f"The KV pool holds {pool:,.0f} tokens per replica ({ev.kv_capacity_source}-reported), but "
            f"max-model-len promises {mml:,}: {holds:.2f} max-length requests fit.{warning} More replicas do not help: "
            "each has the same pool."
        )
        if "slot_tokens" in evidence:
            situation = (
                f"Each llama.cpp slot serves ctx-size ÷ parallel = {pool:,.0f} tokens (the whole pool is "
                f"{evidence['kv_cache_capacity_tokens_whole_pool'] or 0:,.0f} cells), but max-model-len promises "
                f"{mml:,}: a request longer than one slot is refused, however free the other slots are. "
                "More replicas do not help: each has the same slots."
            )
        slots = evidence.get("unified_slots")
        if slots:
            situation = (
                f"llama.cpp's {slots} slots share one unified cache of {pool:,.0f} cells (--kv-unified) and are "
                f"admitted without reserving any: each may grow to max-model-len {mml:,}, {slots * mml:,} tokens in "
                f"all, while the cells hold {holds:.2f} max-length requests. When they run out, llama.cpp aborts "
                'the running generations ("Context size has been exceeded") instead of queueing them. More '
                "replicas do not help: each has the same cells and slots."
            )
        if "data_parallel_ranks" in evidence:
            situation = (
                f"Each request lives on one of {evidence['data_parallel_ranks']} data-parallel ranks, and the "
                f"largest rank's KV pool holds {pool:,.0f} tokens ({ev.kv_capacity_source}-reported), but "
                f"max-model-len promises {mml:,}: {holds:.2f} max-length requests fit on a rank, "
                f"{evidence['max_model_len_ceiling_requests']} in the whole replica. The summed pool "
                f"({evidence['kv_cache_capacity_tokens_summed_over_ranks']:,.0f} tokens) hides this: no request "
                f"can use more than one rank's pool.{warning} More replicas or ranks do not help: each rank has the "
                "same pool."
            )
        if reserved:
            held = evidence["max_length_reservations_held"]
            s = ev.stats
            situation = (
                f"{ev.ctx.engine}'s default scheduler (GUARANTEED_NO_EVICT) admits a request only when the pool can "
                f"hold its whole length — its prompt + max_tokens, and max-model-len {mml:,} when the client sends "
                f"no max_tokens. The pool ({pool:,.0f} tokens) holds {held} such reservation(s), so "
                f"{count(s.requests_running if s else None)} run and {count(s.requests_waiting if s else None)} wait "
                f"with {percent(_usage(ev) or 0.0)} of the blocks written (NVIDIA/TensorRT-LLM#9412: requests "
                "without max_tokens run one at a time). A larger pool or more replicas buy one reservation each; "
                "the cure is a shorter reservation: a max-model-len cap, or max_tokens on every request (the "
                "clients' fix), or capacity_scheduler_policy MAX_UTILIZATION (admits by blocks written, pausing "
                "requests when the pool runs out)."
            )
        out: list[Proposal] = []
        wanted = float(evidence["max_length_requests_wanted"])
        cap = _rounded_cap(reservation_share(ev, pool, wanted) if reserved else pool / wanted)
        if (ROUND_TO_SMALL if slots else ROUND_TO) <= cap < mml:
            t = turn(ev.ctx.inputs, c.DIAL_MAX_MODEL_LEN, cap)
            if t is not None:
                # a cap that shortens the reservations is the cure, not a preventive cap: never withheld for short
                # observed requests (they are what the reservation wastes)
                cap_withheld = None if blocked or reserved else context_cap_withheld(ev, cap, tail=CAP_TAIL_FACTOR)
                longest = ev.longest_sequence_tokens
                if slots and cap_withheld is None and longest is not None and longest > cap:
                    # the share per slot would refuse a length the engine has served; fewer slots keep it
                    cap_withheld = (
                        f"withheld: the engine has held a sequence of {longest:,.0f} tokens since it started "
                        f"(llama.cpp n_tokens_max), longer than the cap of {cap:,}: the cap would refuse requests it "
                        "serves, where fewer slots (the max_num_seqs turn) keep every request its context"
                    )
                elif slots and cap_withheld is None and longest is None and observed_request_tokens(ev)[0] is None:
                    # a preventive cap whose falsifier cannot be read: no length is visible (no n_tokens_max, no KV
                    # gauge, no finished-request lengths), so the cap may refuse what runs (ggml-org/llama.cpp#17527:
                    # two agents of ~25,000 tokens on 8 unified slots of 131,072 cells, whose share is 16,384)
                    cap_withheld = (
                        f"withheld: no request length is visible (the engine exposes no n_tokens_max, KV usage or "
                        f"request count), so whether requests run longer than the cap of {cap:,} cannot be told: the "
                        "cap could refuse requests it serves, where fewer slots (the max_num_seqs turn) keep every "
                        "request its context"
                    )
                seqs = pool_effect(ev, t.before.max_concurrency, t.after.max_concurrency)
                summary = (
                    f"{ev.ctx.name}: the pool ({pool:,.0f} tokens) is smaller than max-model-len {mml:,} — cap "
                    f"it at {cap:,}" + (" (a request larger than the pool blocks the queue)" if blocked else "")
                )
                what = "makes the engine reject what can never run instead of queueing it forever"
                tail = (
                    "Longer requests need a replica with a larger pool (the other turns). Falsified by: observed "
                    f"requests far shorter than the cap ({CAP_TAIL_FACTOR:g}× their length still under it) while "
                    "nothing is blocked."
                )
                if reserved:
                    what = (
                        f"shortens every reservation to {cap:,} tokens, so the pool admits "
                        f"{math.floor(pool / cap)} at once instead of {evidence['max_length_reservations_held']}"
                    )
                    tail = (
                        f"It is at least {CAP_TAIL_FACTOR:g}× the observed request length, so it cuts no request seen. "
                        "Falsified by: requests admitted beyond the reservations the pool holds (the clients send "
                        "max_tokens)."
                    )
                flag = flag_for(ev.ctx.engine, c.DIAL_MAX_MODEL_LEN, cap)
                if slots:
                    summary = (
                        f"{ev.ctx.name}: {slots} slots × max-model-len {mml:,} oversubscribe {pool:,.0f} shared "
                        f"cells — cap each request at {cap:,}"
                    )
                    what = "keeps every slot within its share of the cells, so no running generation is aborted"
                    # with --kv-unified a slot may use all of --ctx-size: the per-slot cap is the unified cache off
                    flag = (
                        f"remove --kv-unified (each of the {slots} slots then holds --ctx-size ÷ --parallel = "
                        f"{int(pool) // slots:,} cells, a request at most that)"
                    )
                proposal = Proposal(
                    rule=self.id,
                    dial=c.DIAL_MAX_MODEL_LEN,
                    action="decrease",
                    current=mml,
                    suggested=cap,
                    flag=flag,
                    severity=severity,
                    confidence=conf,
                    summary=summary,
                    description=(
                        f"{situation} Capping max-model-len at {cap:,} {what}; the ceiling at max-model-len goes from "
                        f"{seqs['before'] or 0:.2f} to {seqs['after'] or 0:.2f} sequences. {tail}"
                    ),
                    predicted_effect={
                        "max_concurrency": seqs,
                        "kv_cache_tokens": pool_effect(ev, t.before.kv_cache_tokens, t.after.kv_cache_tokens),
                        "max_model_len": effect(mml, cap),
                    },
                    evidence=evidence,
                    score=2.0,
                    sufficient=True,
                    cost=1.0,
                    withheld=cap_withheld,
                    gpus_added=0.0,
                )
                out.append(anchored(ev, proposal))
        if slots:
            out += self._fewer_slots(ev, slots, pool, mml, severity, conf, evidence, situation)
        elif "slot_tokens" in evidence and evidence.get("kv_cache_capacity_tokens_whole_pool"):
            # split slots: each gets --ctx-size ÷ --parallel, so fewer slots give each more cells (ggml-org/llama.cpp
            # #12251: --ctx-size 1024 over 10 slots is 102 a request; --parallel 1 gives one request all 1,024)
            # — but only where requests are measured longer than a slot: fewer slots help only those, and cut the
            # concurrency of every other (a server of 600-token chats in 2,048-token slots loses 3 in 4 for nothing)
            split = ev.ctx.inputs.engine_settings.parallel
            whole = float(evidence["kv_cache_capacity_tokens_whole_pool"])
            slot = float(evidence["slot_tokens"])
            # (n_tokens_max, or what a running request holds: a full slot reads one cell short of its size, since
            # llama.cpp stops or shifts a slot at n_tokens + 1 ≥ n_ctx_slot, tools/server/server.cpp)
            measured = (ev.longest_sequence_tokens, observed_request_tokens(ev)[0])
            longest = max([v for v in measured if v is not None], default=None)
            full = SLOT_FULL_SHARE * slot
            if ev.ctx.engine == "llamacpp" and split and split > 1 and longest is not None and longest >= full:
                out += self._fewer_slots(ev, split, whole, mml, severity, conf, evidence, situation, shared=False)
        needed = wanted / holds if holds > 0 else None
        candidates = pool_turns(ev)
        if reserved or _queue_behind_reservations(ev):
            # a pool turn buys one reservation per max-model-len it adds: not the dial while requests wait behind
            # reservations with the blocks mostly unwritten and slots free (NVIDIA/TensorRT-LLM#2866: one request's
            # large max_tokens holds the pool; GPUs bought to hold a client's worst case are not the cure) — unless
            # it costs nothing (no GPU, no quality) and holds every queued reservation at max-model-len: a token pin
            # lifted (tensorrtllm_backend#453, triton-inference-server/server#7676)
            queue = _queued_reservations(ev)
            candidates = [
                cand
                for cand in candidates
                if queue is not None and cand.cost <= 1.0 and pool * cand.turn.kv_gain_ratio() >= queue * mml
            ]
        other_pool = kv_withheld(ev)
        out += [
            turn_proposal(
                self.id,
                ev,
                cand,
                needed_factor=needed,
                severity=severity,
                confidence=conf,
                evidence=evidence,
                headline=f"pool smaller than max-model-len {mml:,}",
                situation=situation,
                withheld=other_pool,
            )
            for cand in candidates
        ]
        return out

    def _fewer_slots(
        self,
        ev: Evaluation,
        slots: int,
        pool: float,
        mml: int,
        severity: str,
        conf: float,
        evidence: dict[str, Any],
        situation: str,
        *,
        shared: bool = True,
    ) -> list[Proposal]:
        """``--parallel`` lowered to the max-length requests the unified cells hold (at least 1), when fewer than
        the slots: every admitted request then keeps max-model-len. ``shared`` False: the cells are split evenly over
        the slots (no ``--kv-unified``), and fewer slots give each slot ``--ctx-size ÷ --parallel`` cells."""
        fit = held = max(1, int(pool // mml))
        s = ev.stats
        running = s.requests_running if s is not None else None
        usage = _usage(ev)
        longest = ev.longest_sequence_tokens
        # one replica's running requests against one replica's cells (breaker 14: two replicas' sum halved the floor)
        each = None if running is None else running / max(ev.replicas_up, 1)
        filled = shared and (
            (usage is not None and usage >= UNIFIED_CELLS_FILL_MAX)
            # or as many requests of the longest sequence served overrun the shared cells
            or (longest is not None and each is not None and each * longest > UNIFIED_CELLS_FILL_MAX * pool)
        )
        if each is not None and 0 < each < slots and not filled:
            # never below the requests that run at once while a slot is still free: those would queue behind one
            # another's whole turn (ggml-org/llama.cpp#17527: 2 agents on 8 slots); with every slot busy the overflow
            # is at hand (#23652: 4 of 4), and the cells' own count stands — as it does when the requests running
            # already fill the shared cells: as many slots again overrun them (anomalyco/opencode#22166: 3 sessions
            # of 49K, 87K and 133K tokens on 262,144 cells, where 4 → 3 slots was proposed)
            fit = max(fit, math.ceil(each))
        if fit >= slots:
            return []
        proposal = Proposal(
            rule=self.id,
            dial=c.DIAL_MAX_NUM_SEQS,
            action="decrease",
            current=slots,
            suggested=fit,
            # an explicit --parallel without --kv-unified splits --ctx-size over the slots (llama-server shares the
            # cells by itself only when --parallel is not given, tools/server/server.cpp): the flag keeps the sharing
            flag=flag_for(ev.ctx.engine, c.DIAL_MAX_NUM_SEQS, fit) + (" --kv-unified" if shared else ""),
            severity=severity,
            confidence=conf,
            summary=(
                f"{ev.ctx.name}: {slots} slots {'share' if shared else 'split'} {pool:,.0f} cells that hold {held} "
                f"request(s) of max-model-len {mml:,} — lower --parallel to {fit}"
            ),
            description=(
                (
                    (
                        f"{situation} With --parallel {fit}, the slots that run can each reach max-model-len without "
                        "exhausting the cells"
                        if fit <= held
                        else f"{situation} With --parallel {fit} (the requests running at once while a slot was free; "
                        f"the cells hold {held} of max-model-len), fewer requests share the cells"
                    )
                    + f"; the others' requests wait in the queue instead of aborting. Or keep "
                    f"{slots} slots and cap each request at the cells' share (the max-model-len turn). Falsified by: "
                    "requests that stay far shorter than the share, so the cells never run out."
                )
                if shared
                else (
                    f"{situation} With --parallel {fit}, each slot holds {int(pool) // fit:,} of the {pool:,.0f} "
                    f"cells, max-model-len {mml:,} or more; requests beyond {fit} at once wait in the queue instead "
                    "of running in a slot too short for them (context shift discards half a full slot and the "
                    "generation goes on from what is left). Or a larger --ctx-size for the same slots. Falsified by: "
                    "requests that stay within the current slot size."
                )
            ),
            predicted_effect={"max_num_seqs": effect(slots, fit)},
            evidence=evidence,
            score=2.0,
            sufficient=True,
            cost=1.0,
            gpus_added=0.0,
        )
        return [anchored(ev, proposal)]


RESERVATION_MAX_USAGE = 0.5
"""KV usage at or below which a queue behind reservations is read as reservation-bound: the blocks written are far
fewer than the blocks reserved (NVIDIA/TensorRT-LLM#9412: 1 running, 7 waiting, 0.4 % written)."""


def _usage(ev: Evaluation) -> float | None:
    s = ev.stats
    if s is None:
        return None
    return s.kv_cache_usage_ratio_max if s.kv_cache_usage_ratio_max is not None else s.kv_cache_usage_ratio


def _waiting(ev: Evaluation) -> float | None:
    """Requests waiting: the engine's whole queue, else (unknown) those it says wait for capacity — at least that
    many wait (the Triton backend's ``active − scheduled`` while its executor queue is not exposed)."""
    s = ev.stats
    if s is not None and s.requests_waiting is not None:
        return s.requests_waiting
    return ev.queues.get("waiting_capacity")


def _queued_reservations(ev: Evaluation) -> float | None:
    """The reservations a replica's queue asks for at once: running + waiting per replica (at least what
    :func:`_waiting` knows), at most max-num-seqs; ``None`` when either count is unknown. A pool turn is the cure
    behind reservations only when its pool holds this many of max-model-len (the worst case a request reserves)."""
    s = ev.stats
    waiting = _waiting(ev)
    if s is None or s.requests_running is None or waiting is None:
        return None
    want = float(math.ceil((s.requests_running + waiting) / max(ev.replicas_up, 1)))
    cap = ev.ctx.inputs.max_num_seqs
    return min(want, cap) if cap is not None else want


def _queue_behind_reservations(ev: Evaluation) -> bool:
    """Requests wait on an engine that reserves a request's whole length at admission, with a sequence slot free and
    at most :data:`RESERVATION_MAX_USAGE` of the blocks written: the reservations, not the memory, hold the queue."""
    s = ev.stats
    if not reserves_whole_requests(ev) or s is None:
        return False
    usage, cap = _usage(ev), ev.ctx.inputs.max_num_seqs
    running, waiting = s.requests_running, _waiting(ev)
    if running is None or waiting is None or usage is None:
        return False
    free_slot = cap is None or running / max(ev.replicas_up, 1) < cap
    return waiting >= 1 and usage <= RESERVATION_MAX_USAGE and free_slot


def _reservation_bound(ev: Evaluation, pool: float, mml: int) -> float | None:
    """The requests a reservation-bound queue wants to run at once (running + waiting, at most max-num-seqs), or
    ``None``: the engine reserves a request's whole length at admission
    (:func:`advisor.engines.catalog.reserves_max_length_at_admission`), requests wait while no more run than
    ``⌊pool ÷ max-model-len⌋`` reservations, a sequence slot is free and at most :data:`RESERVATION_MAX_USAGE` of
    the blocks are written. More running than the reservations means the clients send max_tokens: not this."""
    s = ev.stats
    if not reserves_whole_requests(ev) or s is None:
        return None
    running, waiting, usage = s.requests_running, _waiting(ev), _usage(ev)
    if running is None or waiting is None or usage is None or waiting < 1 or usage > RESERVATION_MAX_USAGE:
        return None
    per_replica = running / max(ev.replicas_up, 1)
    held = math.floor(pool / mml)
    cap = ev.ctx.inputs.max_num_seqs
    if per_replica > held or (cap is not None and per_replica >= cap):
        return None
    want = float(math.ceil((running + waiting) / max(ev.replicas_up, 1)))
    want = min(want, cap) if cap is not None else want
    # the requests themselves may be long (a reservation each that is really used): then a cap that cuts none of
    # them admits no more than run, and the pool, not the reservation, is what binds
    share = reservation_share(ev, pool, want)
    if share >= mml or math.floor(pool / share) <= per_replica:
        return None
    return want


def reservation_share(ev: Evaluation, pool: float, wanted: float) -> float:
    """Tokens a request may reserve so that ``wanted`` fit the pool, never under :data:`CAP_TAIL_FACTOR` × the
    observed request length (:func:`advisor.rules.common.observed_request_tokens`): the cap shortens reservations,
    it must not cut requests."""
    share = pool / wanted
    length, _ = observed_request_tokens(ev)
    return max(share, CAP_TAIL_FACTOR * length) if length else share


def _null_block_tokens(ev: Evaluation) -> float:
    """Tokens of the pool no request can hold: vLLM V1's null block(s) × the block size the engine reports (else
    the deployment's), 0 on other engines and V0, and 0 on a hybrid model, whose group-aware pool counts a shared
    block as a fraction of a group's tokens (``kv_cache_utils.py``: blocks ÷ groups × the smallest block)."""
    if ev.ctx.engine != "vllm" or ev.ctx.inputs.overhead_profile != "vllm-v1" or ev.kv_cache_hybrid:
        return 0.0
    block = reported_block_size(ev.engine_config) or float(ev.ctx.inputs.block_size)
    return VLLM_V1_NULL_BLOCKS * block
