"""Rule ``admission_thrash``: a few very long requests hold the pool.

Fires when KV usage is at or above ``usage_threshold`` while at most ``max_running_per_replica``
requests run, each holding at least ``min_pool_share`` of the pool, and requests wait or get preempted
(SGLang retracts; vLLM preempts by recompute). Generation collapses while prompts keep arriving: the pool
is spent on context, not concurrency. Raising the number of concurrent sequences only makes the thrash
worse, so this rule never proposes it.

Proposes, in order: cap max-model-len so that ``target_concurrency`` requests of the cap fit in the pool;
admit a request only when its whole prompt and output budget fit (the admission policy, where the engine
has one and does not already admit so: never on TGI, nor on TensorRT-LLM under ``GUARANTEED_NO_EVICT``); a
dedicated long-context replica for the long requests; and the turns that enlarge the pool without more GPUs
(:func:`advisor.rules.common.pool_turns` but TP: a larger budget, fp8 KV, …), which hold more of the long requests at
once (offered beside the rule's own, never as closing the gap alone: the long requests still hold the pool).
Supersedes ``kv_saturation``, whose incident would otherwise offer the pool turns without the diagnosis. With
data-parallel ranks, "running", "pool" and the share are per rank (a request lives on one rank), not summed over
the replica.

On a hybrid model (``Evaluation.kv_cache_hybrid``: attention + Mamba/GDN or sliding-window groups) a request's
share of the pool is not its context: every KV group pins whole pages per request, the attention page raised to
the Mamba page's size (7,808 tokens in vllm-project/vllm#54458, where a 12-token prompt held 32.9 % of the pool).
Capping max-model-len does not shrink that footprint, so the cap is withheld there (with the footprint and the
observed lengths in numbers); the other turns stand, and with requests preempted ``max_num_seqs`` is lowered to the
requests 90 % of the pool holds at that footprint (the one exception to "never a concurrency turn": fewer, not more).

Checked against its evidence (issue 13): the cap rests on the diagnosis that long contexts are the pool's
consumer. The measurement that falsifies it is the observed request length
(:func:`advisor.rules.common.observed_request_tokens`: prompt + generation tokens per finished request from the
counters, and KV tokens per running request except on hybrid models); when that length is below the proposed cap,
the cap frees nothing and is withheld (:func:`advisor.rules.common.context_cap_withheld`). The other side: when the
finished requests average at least the cap, the long requests are not "a few" but the traffic, and the cap would
reject it; withheld too (:func:`advisor.rules.common.context_cap_rejects_traffic`).
"""

from __future__ import annotations

import math
from typing import Any

from advisor import conventions as c
from advisor.engines.catalog import usage_is_whole_request_reservation
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import (
    anchored,
    confidence,
    context_cap_rejects_traffic,
    context_cap_withheld,
    count,
    data_parallel_ranks,
    gpus_per_replica,
    kv_withheld,
    percent,
    pool_effect,
    pool_pressure,
    pool_turns,
    reserves_whole_requests,
    tokens_per_finished_request,
    tokens_per_running_request,
    turn_proposal,
)
from advisor.rules.flags import flag_for
from advisor.rules.replicas import MIN_ARRIVAL_SPAN_SECONDS, arrival_history_withheld
from advisor.rules.turns import effect, turn

ROUND_TO = 1024


def _admits_whole_requests(ev: Evaluation) -> bool:
    """The engine already admits a request only when its whole length fits, so "admit only when the whole request
    fits" is its current policy, not a turn: TGI's router always (:func:`usage_is_whole_request_reservation`:
    huggingface/text-generation-inference#2842, where the advisor proposed it, and TGI's command for it — a lower
    ``--max-total-tokens`` — would have refused the operator's 12,000-token prompts), TensorRT-LLM under its default
    ``GUARANTEED_NO_EVICT`` (:func:`advisor.rules.common.reserves_whole_requests`)."""
    return usage_is_whole_request_reservation(ev.ctx.engine) or reserves_whole_requests(ev)


FIT_SHARE = 0.9
"""Share of the pool the lowered sequence cap fills at the running requests' footprint: room for them to grow."""


def _rank_pool(ev: Evaluation) -> float:
    """The pool one request competes for — a request lives on one data-parallel rank: the mean of the ranks' pools
    when the engine reports them, else the replica's pool ÷ its ranks
    (:func:`~advisor.rules.common.data_parallel_ranks`) — unless the engine's one figure is already a rank's (the
    capacity pass on the engine's settings, ``running_model_error_ratio``, within its error bound of D times it and
    not of it; undecided, the figure is the replica's, as the README defines a target's pool)."""
    ranks = ev.kv_rank_capacity_tokens
    if ranks and ev.kv_capacity_source == "engine":
        return sum(ranks) / len(ranks)
    pool, d = ev.kv_capacity_tokens or 0.0, data_parallel_ranks(ev)
    err = ev.running_model_error_ratio if ev.running_model_error_ratio is not None else ev.capacity_model_error_ratio
    if d > 1 and ev.kv_capacity_source == "engine" and err is not None:
        # one figure from the engine with no ranks: a rank's (one scheduler reporting, one DP rank per target) when
        # the capacity pass on what the engine runs is within its error bound of D times it, and not of it
        ratio, bound = 1.0 + err, ev.capacity_model_error_bound
        if abs(ratio / d - 1.0) <= bound < abs(ratio - 1.0):
            return pool
    return pool / d


LLAMACPP_SPLIT_SLOTS = (
    "llama.cpp splits its cells over the slots (--ctx-size ÷ --parallel, no --kv-unified): a request never holds "
    "another slot's cells, so a full pool is the running slots' own contexts and the deferred requests wait for a "
    "slot (seq_cap's), not for cells a few long requests took"
)
"""Why ``admission_thrash`` does not read a llama.cpp server whose slots each own their cells
(``src/llama-context.cpp``: ``n_ctx_seq = kv_unified ? n_ctx : n_ctx / n_seq_max``): breaker 26 paged a critical
"cap max-model-len 8,192 → 4,096" whose ceiling stayed 4 → 4 (``--parallel 4`` bounds it) while the four slots held
~7,000-token requests and six waited for a slot."""


class AdmissionThrashRule:
    """A few long requests hold the pool → cap context, admit whole requests, or a long-context replica."""

    id = c.RULE_ADMISSION_THRASH
    problem = c.PROBLEM_SATURATION
    supersedes: tuple[str, ...] = (c.RULE_KV_SATURATION,)

    def __init__(
        self,
        usage_threshold: float = 0.9,
        max_running_per_replica: float = 8,
        min_pool_share: float = 0.1,
        target_concurrency: int = 8,
        for_seconds: float = 120.0,
        *,
        min_history_seconds: float = MIN_ARRIVAL_SPAN_SECONDS,
    ):
        """Thresholds as documented on the module; ``for_seconds`` the for-duration; ``min_history_seconds`` the
        shortest history a replica turn is proposed from (``rules.replicas.min_history``)."""
        self.usage_threshold = usage_threshold
        self.max_running = max_running_per_replica
        self.min_share = min_pool_share
        self.target_concurrency = target_concurrency
        self._for = for_seconds
        self.min_history_seconds = min_history_seconds

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def _reading(self, ev: Evaluation) -> tuple[bool | None, str, dict[str, Any]]:
        s = ev.stats
        withheld = kv_withheld(ev, self.usage_threshold)
        if withheld:
            return False, withheld, {"pool_usage": dict(ev.pool_usage)}
        if ev.ctx.engine == "llamacpp" and not ev.ctx.inputs.engine_settings.kv_unified:
            return False, LLAMACPP_SPLIT_SLOTS, {}
        if s is None or s.kv_cache_usage_ratio is None or s.requests_running is None or not ev.kv_capacity_tokens:
            return None, "KV usage, running requests or pool size unknown", {}
        per_request = tokens_per_running_request(ev)
        ranks = data_parallel_ranks(ev)
        running_per_replica = s.requests_running / max(ev.replicas_up, 1) / ranks
        share = (per_request or 0) / _rank_pool(ev)
        pressure = pool_pressure(ev, s.requests_waiting)
        evidence = {
            "kv_cache_usage_ratio": s.kv_cache_usage_ratio,
            "requests_running": s.requests_running,
            "requests_waiting": s.requests_waiting,
            "preemptions_increase": s.preemptions_increase,
            "tokens_per_running_request": round(per_request, 1) if per_request else None,
            "pool_share_per_request": round(share, 4),
            "generation_tokens_per_second": s.generation_tokens_per_second,
            "prompt_tokens_per_second": s.prompt_tokens_per_second,
            "kv_cache_capacity_tokens": ev.kv_capacity_tokens,
            "window_seconds": s.window_seconds,
        }
        shape = (
            s.kv_cache_usage_ratio >= self.usage_threshold
            and 0 < running_per_replica <= self.max_running
            and share >= self.min_share
        )
        # the pressure matters only when the pool has the shape; unknown there, the rule cannot tell either way
        holds = pressure if shape else False
        reason = (
            f"KV usage {s.kv_cache_usage_ratio:.1%} held by {running_per_replica:.0f} running request(s) "
            f"{'per data-parallel rank' if ranks > 1 else 'per replica'}, "
            f"~{share:.0%} of the pool each; {count(s.requests_waiting)} waiting, "
            f"{count(s.preemptions_increase)} preempted"
        )
        return holds, reason, evidence

    def fires(self, ev: Evaluation) -> Condition:
        """Full pool, few running, each holding a large share, with a queue or preemptions."""
        holds, reason, evidence = self._reading(ev)
        return Condition(holds, reason, evidence)

    def clears(self, ev: Evaluation) -> Condition:
        """The fire condition no longer holds."""
        holds, reason, evidence = self._reading(ev)
        return Condition(None if holds is None else not holds, reason, evidence)

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """Cap max-model-len, whole-request admission, a long-context replica — in that order."""
        holds, _, evidence = self._reading(ev)
        if (
            holds is None
            or not ev.kv_capacity_tokens
            or kv_withheld(ev, self.usage_threshold)
            or not evidence.get("tokens_per_running_request")  # nothing running, or an empty pool: no one holds it
        ):
            return []
        pool = _rank_pool(ev)
        mml = ev.ctx.inputs.max_model_len or ev.ctx.capacity.max_model_len
        conf = confidence(ev, 0.85)
        s = ev.stats
        assert s is not None
        ranks = data_parallel_ranks(ev)
        whose = f"Each of the {ranks} data-parallel ranks' pools" if ranks > 1 else "The pool"
        situation = (
            f"{whose} ({pool:,.0f} tokens) is {s.kv_cache_usage_ratio:.0%} full with only "
            f"{count(s.requests_running)} request(s) running — each holds ~{evidence['tokens_per_running_request']:,} "
            f"tokens of context — while {count(s.requests_waiting)} wait and {count(s.preemptions_increase)} were "
            f"preempted in {s.covered_seconds:.0f}s (generation {s.generation_tokens_per_second or 0:,.0f} tokens/s). "
            "Context, not concurrency, fills the pool: raising max concurrent sequences would only preempt more."
        )
        out: list[Proposal] = []
        cap = int(pool / self.target_concurrency) // ROUND_TO * ROUND_TO
        # the measurement that falsifies "long contexts hold the pool": observed lengths below the cap (the long-context
        # replica rests on the same diagnosis; a hybrid model's pages do not shrink under a cap, but long finished
        # requests may still want their own replica, so for it only the lengths count)
        short = context_cap_withheld(ev, max(cap, ROUND_TO))
        if ROUND_TO <= cap < mml:
            t = turn(ev.ctx.inputs, c.DIAL_MAX_MODEL_LEN, cap)
            if t is not None:
                seqs = pool_effect(ev, t.before.max_concurrency, t.after.max_concurrency)
                # the gain is the ceiling's, as every turn's score: a slot or sequence bound the cap does not move
                # leaves it at ×1, however many full-length requests the cells would hold
                before, after = seqs["before"], seqs["after"]
                gain = after / before if before and after else float(self.target_concurrency)
                cap_proposal = Proposal(
                    rule=self.id,
                    dial=c.DIAL_MAX_MODEL_LEN,
                    action="decrease",
                    current=mml,
                    suggested=cap,
                    flag=flag_for(ev.ctx.engine, c.DIAL_MAX_MODEL_LEN, cap),
                    severity="critical",
                    confidence=conf,
                    summary=(
                        f"{ev.ctx.name}: a few long requests hold the pool — cap max-model-len {mml:,} → {cap:,} "
                        "and serve longer ones on a dedicated long-context replica"
                    ),
                    description=(
                        f"{situation} At max-model-len {cap:,}, {self.target_concurrency} full-length requests fit "
                        f"in the pool (the ceiling goes from {seqs['before'] or 0:.2f} to {seqs['after'] or 0:.2f}); "
                        "route longer requests to a long-context replica. Falsified by: observed requests shorter "
                        "than the cap (then long contexts are not what holds the pool)."
                    ),
                    predicted_effect={"max_concurrency": seqs, "max_model_len": effect(mml, cap)},
                    evidence=evidence,
                    score=gain,
                    sufficient=gain > 1.0,
                    cost=1.0,
                    withheld=self._cap_withheld(ev, cap),
                    gpus_added=0.0,
                )
                out.append(anchored(ev, cap_proposal))
        # offered = proposed and not withheld: only then does the cap stand in for fewer sequences
        cap_offered = any(p.dial == c.DIAL_MAX_MODEL_LEN and p.withheld is None for p in out)
        fewer = self._fewer_sequences(ev, pool, conf, evidence, situation, cap_offered)
        if fewer is not None:
            out.append(fewer)
        if not _admits_whole_requests(ev):
            out.append(self._admission_turn(ev, conf, evidence, situation))
        current = ev.ctx.replicas
        out.append(
            Proposal(
                rule=self.id,
                dial=c.DIAL_REPLICAS,
                action="increase",
                current=current,
                suggested=current + 1,
                flag=(
                    "add one dedicated long-context replica (route requests over the cap to it); "
                    + flag_for(ev.ctx.engine, c.DIAL_REPLICAS, current + 1)
                ),
                severity="warning",
                confidence=conf,
                summary=f"{ev.ctx.name}: serve the long requests on a dedicated long-context replica",
                description=(
                    f"{situation} A separate long-context replica keeps the few long requests from starving the rest; "
                    "the existing replicas then run with the capped context."
                ),
                predicted_effect={"replicas": effect(current, current + 1)},
                evidence=evidence,
                score=1.0,
                sufficient=True,
                cost=(current + 1) / current,
                # a replica turn over a history too short to measure the load is withheld like every other
                withheld=short or arrival_history_withheld(ev, self.min_history_seconds),
                gpus_added=float(gpus_per_replica(ev)),
            )
        )
        # a larger pool holds more of the long requests at once: the turns kv_saturation offers, ranked with these
        # (triton-inference-server/tensorrtllm_backend#575: a larger KV fraction measured faster on long prompts,
        # where the only turn offered was a 3 % context cap)
        out += [
            turn_proposal(
                self.id,
                ev,
                cand,
                # more pool admits more of the long requests but does not change who holds it: never "closes the
                # gap alone", so the rule's own turns lead (an operator state: SGLang SWA, 4 requests holding 2.64M)
                needed_factor=math.inf,
                alone="a larger pool admits more of the long requests, but they still hold it",
                severity="warning",
                confidence=conf,
                evidence=evidence,
                headline="a few long requests hold the pool",
                situation=situation,
            )
            for cand in pool_turns(ev)
            # GPUs for the long requests are the dedicated replica's turn above, sized for them; a TP turn would
            # double every replica's GPUs for a few requests (and means nothing on DP/EP ranks: field-state round 35)
            if cand.turn.dial != c.DIAL_TENSOR_PARALLEL_SIZE
        ]
        return out

    def _admission_turn(self, ev: Evaluation, conf: float, evidence: dict[str, Any], situation: str) -> Proposal:
        """Admit a request only when its whole length fits the free pool."""
        s = ev.stats
        assert s is not None
        return Proposal(
            rule=self.id,
            dial=c.DIAL_ADMISSION_POLICY,
            action="set",
            current="admit while any block is free",
            suggested="admit only when the whole request fits",
            flag=flag_for(ev.ctx.engine, c.DIAL_ADMISSION_POLICY, "admit whole requests only"),
            severity="warning",
            confidence=conf,
            summary=f"{ev.ctx.name}: admit a request only when its whole context fits in the free pool",
            description=(
                f"{situation} Admitting a request only when its prompt and output budget fit the free blocks stops "
                "the admit-then-preempt loop (TGI's router budgets whole requests this way, TensorRT-LLM's "
                "GUARANTEED_NO_EVICT too; SGLang reserves more for running requests with a higher "
                "--schedule-conservativeness; vLLM has no such flag: hold long requests back in a routing layer)."
            ),
            predicted_effect={"preemptions_increase": effect(s.preemptions_increase, 0.0)},
            evidence=evidence,
            score=1.5,
            sufficient=False,
            cost=1.0,
            gpus_added=0.0,
        )

    def _fewer_sequences(
        self,
        ev: Evaluation,
        pool: float,
        conf: float,
        evidence: dict[str, Any],
        situation: str,
        cap_offered: bool = False,
    ) -> Proposal | None:
        """``max_num_seqs`` lowered to the requests the pool holds at the running requests' footprint with
        :data:`FIT_SHARE` of it (room to grow as they decode), when requests were preempted and that is below the
        cap (vLLM's docs, "Preemption": decrease ``max_num_seqs`` to stop it). On a hybrid model, whose per-request
        pages a context cap does not shrink, always (MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks#122: ~91k-token
        footprints in a 356,667-token pool preempted 165 times at 4 sequences, 59 at 3); on any other model only when
        no context cap is offered (``cap_offered`` False: the requests are within the cap the pool would need, or the
        cap is withheld because the long requests are the traffic), so the long requests themselves are served, fewer
        at a time (vllm-project/vllm-ascend#5859: 32k-token prompts, 7 running at 92 % KV decode at 114 ms a token,
        8 at 98.9 % at 440 ms)."""
        s = ev.stats
        cap = ev.ctx.inputs.max_num_seqs
        held = tokens_per_running_request(ev)
        if (
            (not ev.kv_cache_hybrid and cap_offered)
            or s is None
            or not s.preemptions_increase
            or cap is None
            or held is None
            or held <= 0
        ):
            return None
        fit = max(1, int(FIT_SHARE * pool // held))
        if fit >= cap:
            return None
        return Proposal(
            rule=self.id,
            dial=c.DIAL_MAX_NUM_SEQS,
            action="decrease",
            current=cap,
            suggested=fit,
            flag=flag_for(ev.ctx.engine, c.DIAL_MAX_NUM_SEQS, fit),
            severity="warning",
            confidence=conf,
            summary=f"{ev.ctx.name}: each request holds ~{held:,.0f} KV tokens — lower max_num_seqs {cap} → {fit}",
            description=(
                f"{situation} "
                + (
                    f"On this hybrid model each running request pins whole pages per KV group (~{held:,.0f} tokens), "
                    "which a context cap does not shrink: "
                    if ev.kv_cache_hybrid
                    else f"Each running request holds ~{held:,.0f} KV tokens and no context cap would free them: "
                )
                + f"{fit} such requests fit in {percent(FIT_SHARE)} of the pool with room to grow, {cap} do not, and "
                "the overflow is preempted and recomputed. Falsified by: preemptions continuing at the lower cap."
            ),
            predicted_effect={
                "max_num_seqs": effect(cap, fit),
                "preemptions_increase": effect(s.preemptions_increase, 0.0),
            },
            evidence={**evidence, "kv_tokens_held_per_request": round(held), "requests_that_fit": fit},
            score=float(fit),
            sufficient=True,
            cost=1.0,
            gpus_added=0.0,
        )

    def _cap_withheld(self, ev: Evaluation, cap: int) -> str | None:
        """Why the context cap is withheld (see the module docstring), or ``None``."""
        if ev.kv_cache_hybrid:
            per_running = tokens_per_running_request(ev)
            finished = tokens_per_finished_request(ev)
            held = "unknown" if per_running is None else f"{per_running:,.0f}"
            seen = "" if finished is None else f"; finished requests average {finished:,.0f} tokens"
            return (
                f"withheld: hybrid model (several KV-cache groups): each running request pins {held} KV tokens of "
                f"whole pages per group{seen}; capping max-model-len at {cap:,} does not shrink that footprint, so "
                "the cap frees nothing"
            )
        return context_cap_withheld(ev, cap) or context_cap_rejects_traffic(ev, cap)
