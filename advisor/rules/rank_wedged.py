"""Rule ``rank_wedged``: one data-parallel rank holds its queue with nothing running while the others serve.

sgl-project/sglang#39271 ("DP scheduler rank can permanently stop processing requests after a near-KV-capacity
request is cancelled"): a request that passes validation but never fits its rank's pool sets the rank's persistent
``batch_is_full`` flag; "Even after the original request is cancelled and the running batch and KV usage become
empty, the DP rank can continue returning early indefinitely. All later requests remain queued until the server is
restarted." The other ranks keep serving, so the deployment's counters move and ``stalled`` (nothing moved) does not
see it; the rank's own gauges do.

Fires when the evaluation names a stuck rank (:attr:`advisor.rules.base.Evaluation.stuck_ranks`: waiting requests,
none running and an empty pool at every one of at least two scrapes of the window, while another rank of the same
target runs requests — one request lives on one rank, and a healthy rank admits its queue within a step), and tokens
flow (else the whole engine is still: ``stalled``'s). On vLLM a rank's waiting count includes requests deferred for a
LoRA adapter slot or a remote KV load, which wait on another stage: while any are deferred the rule cannot tell and
answers unknown.

Proposal: restart (pseudo-dial ``engine_process``): a rank's scheduler is not a dial, a replica beside it inherits the
same trap, and the requests routed to the rank wait for good. ``stalled`` supersedes it (one restart per incident,
same problem); it supersedes the rules that would read the stuck queue as load. ``pool_context`` stays: a context cap
below the rank's pool keeps the next trap out.
"""

from __future__ import annotations

from typing import Any

from advisor import conventions as c
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import LOAD_READINGS, confidence, count, restart_flag
from advisor.rules.turns import effect

ISSUE = "https://github.com/sgl-project/sglang/issues/39271"
"""The report of a data-parallel rank that stopped admitting while the others served."""


class RankWedgedRule:
    """A data-parallel rank with a queue, nothing running and an empty pool while others serve → restart."""

    id = c.RULE_RANK_WEDGED
    problem = c.PROBLEM_STALLED
    supersedes: tuple[str, ...] = LOAD_READINGS  # the stuck rank's queue is not load

    def __init__(self, for_seconds: float = 60.0) -> None:
        """``for_seconds``: for-duration.

        Raises:
            ValueError: a negative duration.
        """
        if for_seconds < 0:
            raise ValueError(f"for_seconds must not be negative, got {for_seconds}")
        self._for = for_seconds

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def _reading(self, ev: Evaluation) -> tuple[bool | None, str, dict[str, Any]]:
        ranks = ev.stuck_ranks
        evidence: dict[str, Any] = {"stuck_ranks": list(ranks), "issue": ISSUE}
        if not ranks:
            return False, "no data-parallel rank holds a queue with nothing running", evidence
        if ev.ctx.engine == "vllm" and "waiting_capacity" not in ev.queues:
            # before 0.20 vLLM's waiting count includes requests compiling a grammar or loading remote KV
            # (WAITING_FOR_FSM, WAITING_FOR_REMOTE_KVS go back to self.waiting): a rank's queue may wait on those
            return (
                None,
                "vLLM does not split its queue by reason (0.20+): a rank's queue may wait on another stage",
                evidence,
            )
        if ev.queues.get("waiting_deferred"):
            deferred = ev.queues["waiting_deferred"]
            return (
                None,
                (
                    f"{count(deferred)} request(s) wait deferred (a LoRA adapter slot or a remote KV load): a rank's "
                    "queue may wait on another stage"
                ),
                evidence,
            )
        moved = [v for k in ("generation_tokens", "prompt_tokens") if (v := ev.counter_deltas.get(k)) is not None]
        if not moved:
            return None, "the token counters are unknown: whether the other ranks serve cannot be told", evidence
        if max(moved) <= 0:
            return False, "no token moved anywhere: the whole engine is still (stalled's)", evidence
        return (
            True,
            (
                f"{', '.join(ranks)}: requests wait with none running and an empty pool at every scrape of the window, "
                "while another rank runs requests and tokens flow"
            ),
            evidence,
        )

    def fires(self, ev: Evaluation) -> Condition:
        """A stuck rank while the others serve."""
        holds, reason, evidence = self._reading(ev)
        return Condition(holds, reason, evidence)

    def clears(self, ev: Evaluation) -> Condition:
        """No rank is stuck any more."""
        holds, reason, evidence = self._reading(ev)
        return Condition(None if holds is None else not holds, reason, evidence)

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """Restart the engine (pseudo-dial ``engine_process``)."""
        holds, reason, evidence = self._reading(ev)
        if not holds:
            return []
        ranks = ", ".join(ev.stuck_ranks)
        return [
            Proposal(
                rule=self.id,
                dial=c.DIAL_ENGINE_PROCESS,
                action=c.ACTION_RESTART,
                current=f"stuck: {ranks}",
                suggested="restarted",
                flag=restart_flag(f"serving {ranks}"),
                severity="warning",
                confidence=confidence(ev, 0.7),
                summary=f"{ev.ctx.name}: a data-parallel rank stopped admitting requests ({ranks}) — restart it",
                description=(
                    f"{reason}. One request lives on one rank, and a healthy rank admits its queue within a step: the "
                    "requests routed to this rank wait for good, while the deployment's counters, moved by the other "
                    "ranks, look healthy. Not load: no replica or pool turn helps. Restart the engine process; save a "
                    "stack dump and the log first."
                    + (
                        f" SGLang reports this ({ISSUE}: after a near-capacity request is cancelled the rank keeps "
                        "returning early; only a restart recovers); a context cap below the rank's pool "
                        "(pool_context) keeps the trap's requests out."
                        if ev.ctx.engine == "sglang"
                        else ""
                    )
                ),
                predicted_effect={"requests_waiting": effect(ev.stats.requests_waiting if ev.stats else None, None)},
                evidence=evidence,
                score=1.0,
                sufficient=True,
                cost=1.0,
                gpus_added=0.0,
            )
        ]
