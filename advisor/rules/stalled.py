"""Rule ``stalled``: requests inside an engine, none completing, no token moving — a hung engine (issue 13, problem 4).

Reads what :mod:`advisor.evaluate` measures per target (:func:`advisor.evaluate.stall_span`): the time, ending at
the newest sample, over which the engine held requests (waiting, running, or both: whatever is running) while
none of its generation-token, prompt-token and finished-request counters moved, its KV usage did not move (a long
prefill fills blocks before vLLM V1 counts its prompt), and the process did not restart.

* Fires when some target has been still for at least ``min_intervals`` consecutive scrape intervals
  (``Evaluation.stalled_intervals``); the lifecycle then waits the for-duration as for every rule.
* Clears when every answering target moved in its newest interval or holds no request any more (tokens moved,
  or the queue drained and nothing runs). On data that is stale for another reason (no new sample) it cannot
  tell, and an open stall stays open.
* Runs on ``fresh`` and ``stale`` data (``evaluated_in``): the data-quality check marks the data of an engine
  frozen with requests running stale, so that no capacity rule reads its frozen gauges, and this rule is what
  speaks for it. A queue with nothing running stays ``fresh``; while this rule fires it supersedes the rules that
  would read the hang as load (queue growth, goodput, over-provisioning …).
* Checked against its evidence: with nothing running, a queue, and a KV pool smaller than one max-length request
  (the largest data-parallel rank's pool when ranks report), a request that cannot fit explains the still queue
  (``pool_context`` proposes the cap); the rule does not fire and says so. A restart would clear the queue only
  until the next such request.
* Checked against the engine's counters
  (:attr:`advisor.engines.catalog.CatalogEntry.counters_advance_during_decode`): SGLang, TGI, TensorRT-LLM and
  llama.cpp count tokens and requests only when a request *finishes*, so a few long generations (and the queue
  behind them) hold every counter still for minutes on a healthy engine. For such an engine (and for one whose
  engine is not known yet) a stall with requests running must also outlast a bound on a request's lifetime,
  ``max(rules.stalled.finish_only_counters_for, max_model_len × the window's mean TPOT)`` (the longest generation
  the deployment allows, at the speed it decodes), and its confidence is capped at :data:`FINISH_ONLY_CONFIDENCE`
  (never ``critical``): even then the counters cannot tell a hang from a generation longer than the bound. No gauge
  is read as proof of decoding: SGLang's ``gen_throughput`` is refreshed every ``--decode-log-interval`` decode
  steps and keeps its last value when the scheduler hangs, so a value above 0 proves nothing.
* Checked against the queues (``Evaluation.queues``): with nothing running, requests that wait on a stage that
  is not the engine's own compute — a LoRA adapter slot or a remote KV transfer (vLLM ``waiting_deferred``), a
  prefill/decode-disaggregation queue (``prefill_bootstrap``, ``prefill_prealloc``, ``prefill_inflight``,
  ``decode_prealloc``, ``decode_transfer``, ``decode_host_receive``) — explain the still queue; the rule does not
  fire and names the queues (the peer worker or the transfer is where to look, and restarting this engine drops
  the requests already handed over).
* Needs history: a stall is ``min_intervals`` still intervals. When the evaluation cannot see that many
  (``observable_intervals``: ``once`` sees one), the rule answers *unknown* with the reason instead of guessing.

Proposal: no dial fixes a hung engine, and a replica added beside a hung one still receives its share of
traffic, so the rule never proposes replicas, a pool turn or any capacity dial. It proposes ``restart`` on the
pseudo-dial ``engine_process`` (:data:`advisor.conventions.DIAL_ENGINE_PROCESS`) for the stalled targets, with a
stack dump and the engine log saved first for the bug report.

Confidence (engines whose counters move during decode, or nothing running): ``0.5 + 0.15 × stalled_intervals ÷
min_intervals`` (0.65 at the threshold, 0.95 at three times it,
at most 0.95), × ``0.7 + 0.1 × k`` for the ``k`` of the three work counters known (an engine that exports only
one counter gives thinner evidence), × 0.6 when the KV pool is smaller than one max-length request while requests
run (the pool may be part of the story); at most :data:`FINISH_ONLY_CONFIDENCE` on an engine whose counters move
only when a request finishes while requests run. Severity ``critical`` at confidence ≥ :data:`HIGH_CONFIDENCE` with
requests waiting, else ``warning``.
"""

from __future__ import annotations

from typing import Any

from advisor import conventions as c
from advisor.engines.catalog import counters_advance_during_decode
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import LOAD_READINGS, count, restart_flag
from advisor.rules.turns import effect

HIGH_CONFIDENCE = 0.75
"""Confidence at or above which a stall with requests waiting is ``critical``."""

FINISH_ONLY_CONFIDENCE = 0.45
"""Highest confidence of a stall read from counters that move only when a request finishes, with requests running:
below 0.5, so never ``critical`` (a generation longer than the bound looks the same)."""

OTHER_STAGE_QUEUES = (
    "waiting_deferred",
    "prefill_bootstrap",
    "prefill_prealloc",
    "prefill_inflight",
    "decode_prealloc",
    "decode_transfer",
    "decode_host_receive",
)
"""``Evaluation.queues`` keys of requests waiting on a stage that is not the engine's own compute: a LoRA adapter
slot or remote KV (vLLM ``num_requests_waiting_by_reason{reason="deferred"}``, vllm/v1/core/sched/scheduler.py) and
SGLang's prefill/decode-disaggregation queues (python/sglang/srt/disaggregation/, :mod:`advisor.engines.sglang`)."""


_WORK = ("generation_tokens", "prompt_tokens", "requests_finished")
"""The ``Evaluation.counter_deltas`` keys: the work counters whose standing still is the stall."""


class StalledRule:
    """Requests inside an engine and no work done for ``min_intervals`` scrape intervals → restart the engine."""

    id = c.RULE_STALLED
    problem = c.PROBLEM_STALLED
    evaluated_in = (c.STATE_FRESH, c.STATE_STALE)
    # a hung engine's gauges describe the hang, not the load (LOAD_READINGS); one restart per incident
    supersedes: tuple[str, ...] = (*LOAD_READINGS, c.RULE_ADMISSION_WEDGED, c.RULE_RANK_WEDGED)

    def __init__(
        self,
        min_intervals: int = 3,
        for_seconds: float = 60.0,
        finish_only_for_seconds: float = 600.0,
        observable_intervals: int | None = None,
    ) -> None:
        """``min_intervals``: consecutive still scrape intervals that make a stall (≥ 1); ``for_seconds``: the
        for-duration after that; ``finish_only_for_seconds``: the least a stall with requests running must last on
        an engine whose counters move only when a request finishes (see the module docstring);
        ``observable_intervals``: the most scrape intervals one evaluation can see (``once``: 1), ``None`` for the
        daemon's unbounded history.

        Raises:
            ValueError: ``min_intervals`` or ``observable_intervals`` below 1, or a negative duration.
        """
        if min_intervals < 1:
            raise ValueError(f"min_intervals must be at least 1, got {min_intervals}")
        if for_seconds < 0:
            raise ValueError(f"for_seconds must not be negative, got {for_seconds}")
        if finish_only_for_seconds < 0:
            raise ValueError(f"finish_only_for_seconds must not be negative, got {finish_only_for_seconds}")
        if observable_intervals is not None and observable_intervals < 1:
            raise ValueError(f"observable_intervals must be at least 1, got {observable_intervals}")
        self.min_intervals = min_intervals
        self._for = for_seconds
        self.finish_only_for_seconds = finish_only_for_seconds
        self.observable_intervals = observable_intervals

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def _evidence(self, ev: Evaluation) -> dict[str, Any]:
        evidence: dict[str, Any] = {
            "stalled_seconds": round(ev.stalled_seconds, 3),
            "stalled_intervals": ev.stalled_intervals,
            "min_intervals": self.min_intervals,
            "stalled_targets": dict(ev.stalled_targets),
            "requests_running": ev.stalled_requests_running,
            "requests_waiting": ev.stalled_requests_waiting,
            "data_state": ev.state,
        }
        for key in _WORK:
            evidence[f"{key}_increase"] = ev.counter_deltas.get(key)
        evidence["counters_advance_during_decode"] = counters_advance_during_decode(ev.ctx.engine)
        bound = self._lifetime_bound(ev)
        if bound is not None:
            evidence["request_lifetime_bound_seconds"] = round(bound, 1)
        elsewhere = {k: v for k in OTHER_STAGE_QUEUES if (v := ev.queues.get(k))}
        if elsewhere:
            evidence["queues_other_stage"] = elsewhere
        if ev.stats is not None:
            evidence["window_seconds"] = ev.stats.window_seconds
        return evidence

    def _finish_only(self, ev: Evaluation) -> bool:
        """The stall is read from counters that may stand still while requests decode: requests run (or the
        engine does not say) and the engine's counters move only on a finish (or the engine is not known)."""
        if ev.stalled_requests_running is not None and ev.stalled_requests_running <= 0:
            return False
        return counters_advance_during_decode(ev.ctx.engine) is not True

    def _lifetime_bound(self, ev: Evaluation) -> float | None:
        """Seconds a request may live without moving a finish-only counter: ``max(finish_only_counters_for,
        max_model_len × mean TPOT)`` (TPOT from the window's histogram, when it observed any); ``None`` when the
        counters move during decode."""
        if not self._finish_only(ev):
            return None
        bound = self.finish_only_for_seconds
        mml = ev.ctx.inputs.max_model_len or ev.ctx.capacity.max_model_len
        tpot = ev.stats.tpot if ev.stats is not None else None
        if mml and tpot is not None and tpot.count > 0 and tpot.sum > 0:
            bound = max(bound, mml * tpot.sum / tpot.count)
        return bound

    def _waiting_elsewhere(self, ev: Evaluation) -> str | None:
        """Why the still queue waits on a stage that is not this engine's compute, or ``None``: nothing runs, requests
        wait, and a LoRA/remote-KV or disaggregation queue holds requests."""
        if (ev.stalled_requests_running or 0) > 0 or not ev.stalled_requests_waiting:
            return None
        elsewhere = {k: v for k in OTHER_STAGE_QUEUES if (v := ev.queues.get(k))}
        if not elsewhere:
            return None
        held = ", ".join(f"{k} {count(v)}" for k, v in elsewhere.items())
        return (
            f"not a hung engine: nothing runs and {count(ev.stalled_requests_waiting)} wait, but requests wait on a "
            f"stage that is not this engine's compute ({held}: a LoRA adapter slot, a remote KV transfer or a "
            "disaggregation peer) — look at the peer workers and the KV transfer; restarting this engine would drop "
            "the requests handed over"
        )

    def _moved(self, ev: Evaluation) -> str:
        parts = [f"{k.replace('_', ' ')} +{v:,.0f}" for k in _WORK if (v := ev.counter_deltas.get(k)) is not None]
        return ", ".join(parts) if parts else "work counters unknown"

    def _stall_text(self, ev: Evaluation) -> str:
        targets = ", ".join(sorted(ev.stalled_targets)) or "a target"
        return (
            f"{targets}: {count(ev.stalled_requests_running)} running and {count(ev.stalled_requests_waiting)} "
            f"waiting for {ev.stalled_seconds:.0f}s ({ev.stalled_intervals} scrape interval(s)) with no token "
            "generated, no prompt token processed and no request finished"
        )

    def fires(self, ev: Evaluation) -> Condition:
        """Some target still for at least ``min_intervals`` scrape intervals (and, on an engine whose counters move
        only on a finish, for longer than a request may live); unknown when the evaluation cannot see
        ``min_intervals`` intervals."""
        evidence = self._evidence(ev)
        if self.observable_intervals is not None and self.observable_intervals < self.min_intervals:
            return Condition(
                None,
                f"needs {self.min_intervals} scrape intervals in which nothing moved; this evaluation sees "
                f"{self.observable_intervals} (once scrapes twice): two scrapes cannot prove a stall",
                evidence,
            )
        blocked = self._blocked_by_pool(ev) or self._waiting_elsewhere(ev)
        if ev.stalled_intervals >= 1 and blocked:
            return Condition(False, blocked, evidence)
        bound = self._lifetime_bound(ev)
        if ev.stalled_intervals >= self.min_intervals and bound is not None and ev.stalled_seconds < bound:
            engine = ev.ctx.engine
            return Condition(
                False,
                f"{self._stall_text(ev)}; but {engine}'s token and request counters move only when a request "
                f"finishes, and a request may live {bound:.0f}s (max(rules.stalled.finish_only_counters_for, "
                f"max-model-len × mean TPOT)): "
                f"{ev.stalled_seconds:.0f}s of {bound:.0f}s",
                evidence,
            )
        if ev.stalled_intervals >= self.min_intervals:
            return Condition(True, self._stall_text(ev), evidence)
        if ev.stalled_intervals > 0:
            return Condition(
                False, f"{self._stall_text(ev)}: {ev.stalled_intervals} of {self.min_intervals} intervals", evidence
            )
        return Condition(False, f"no engine stalled (over the window: {self._moved(ev)})", evidence)

    def clears(self, ev: Evaluation) -> Condition:
        """Every answering target moved in its newest interval or holds no request; ``None`` on data stale for
        another reason (no target could be read now)."""
        evidence = self._evidence(ev)
        if ev.stalled_intervals > 0:
            return Condition(False, self._stall_text(ev), evidence)
        if ev.state != c.STATE_FRESH:
            return Condition(None, f"data is {ev.state}: cannot tell whether the engine moves again", evidence)
        return Condition(
            True, f"the engine works again or holds no request (over the window: {self._moved(ev)})", evidence
        )

    def confidence(self, ev: Evaluation) -> float:
        """Confidence 0–1 as the module documents it."""
        base = min(0.95, 0.5 + 0.15 * ev.stalled_intervals / self.min_intervals)
        known = sum(1 for k in _WORK if ev.counter_deltas.get(k) is not None)
        conf = base * (0.7 + 0.1 * max(1, known))
        if self._pool_blocks(ev):
            conf *= 0.6
        if self._finish_only(ev):
            conf = min(conf, FINISH_ONLY_CONFIDENCE)
        return round(max(0.0, min(1.0, conf)), 3)

    def _pool_blocks(self, ev: Evaluation) -> bool:
        """The KV pool (the largest data-parallel rank's, when ranks report) is smaller than one max-length
        request: a request that cannot fit may itself be what holds the queue."""
        mml = ev.ctx.inputs.max_model_len or ev.ctx.capacity.max_model_len
        pool = max(ev.kv_rank_capacity_tokens) if ev.kv_rank_capacity_tokens else ev.kv_capacity_tokens
        return bool(mml and pool and pool < mml)

    def _blocked_by_pool(self, ev: Evaluation) -> str | None:
        """Why the still queue is explained by a request that cannot fit, or ``None``: nothing runs, requests
        wait, and the pool is smaller than one max-length request."""
        if not self._pool_blocks(ev) or (ev.stalled_requests_running or 0) > 0 or not ev.stalled_requests_waiting:
            return None
        mml = ev.ctx.inputs.max_model_len or ev.ctx.capacity.max_model_len
        pool = max(ev.kv_rank_capacity_tokens) if ev.kv_rank_capacity_tokens else ev.kv_capacity_tokens
        return (
            f"not a hung engine: nothing runs and {count(ev.stalled_requests_waiting)} wait, but the KV pool "
            f"({count(pool)} tokens) is smaller than one {mml:,}-token request — a request that cannot fit holds the "
            "queue (pool_context), and a restart would clear it only until the next one"
        )

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """Restart the stalled engines (pseudo-dial ``engine_process``); nothing when no target is stalled."""
        if ev.stalled_intervals < 1 or self._blocked_by_pool(ev) or self._waiting_elsewhere(ev):
            return []
        conf = self.confidence(ev)
        waiting = ev.stalled_requests_waiting or 0.0
        severity = "critical" if conf >= HIGH_CONFIDENCE and waiting > 0 else "warning"
        targets = ", ".join(sorted(ev.stalled_targets)) or "the stalled target"
        description = (
            f"{self._stall_text(ev)}. Over the window the deployment moved: {self._moved(ev)}. "
            "A hung engine is not a capacity problem: no dial turn clears it, and a replica added beside it still "
            "receives its share of the traffic, so no capacity advice is given while it lasts"
            + (" (its data is marked stale)" if ev.state != c.STATE_FRESH else "")
            + ". Restart the engine process; save a stack dump and the engine log first for the bug report. "
            "This resolves when tokens move again or no request is left inside the engine."
        )
        bound = self._lifetime_bound(ev)
        if bound is not None:
            description += (
                f" Confidence is held below 0.5 (never critical): {ev.ctx.engine}'s counters move only when a "
                f"request finishes, so a generation longer than {bound:.0f}s would look the same; check the engine "
                "log for decode steps before restarting."
            )
        if self._pool_blocks(ev):
            description += (
                " Note: the KV pool is smaller than one max-length request; a request that cannot fit can hold the "
                "queue, so a restart may clear it only until the next one (see pool_context)."
            )
        return [
            Proposal(
                rule=self.id,
                dial=c.DIAL_ENGINE_PROCESS,
                action=c.ACTION_RESTART,
                # the state, not its age: a current value that moved every cycle re-rendered the incident as
                # "UPDATED stalled 44s → restarted" each scrape (breaker 27); the summary and evidence carry the age
                current="stalled",
                suggested="restarted",
                flag=restart_flag(f"behind {targets}"),
                severity=severity,
                confidence=conf,
                summary=(
                    f"{ev.ctx.name}: engine stalled — {count(ev.stalled_requests_waiting)} waiting, nothing "
                    f"completing for {ev.stalled_seconds:.0f}s; restart it"
                ),
                description=description,
                predicted_effect={
                    # measured zero on the stalled targets; after a restart: unknown until the engine serves again
                    "generation_tokens_per_second": effect(0.0, None),
                    "requests_finished_per_second": effect(0.0, None),
                    "requests_waiting": effect(ev.stalled_requests_waiting, None),
                },
                evidence=self._evidence(ev),
                score=1.0,
                sufficient=True,
                cost=1.0,
                gpus_added=0.0,
            )
        ]
