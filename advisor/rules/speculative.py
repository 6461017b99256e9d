"""Rule ``speculative_decoding``: a latency lever for small batches.

Enable: at most ``max_batch_per_replica`` sequences run per replica and TPOT misses its target — decode
is bound by reading the weights, and the bandwidth sits idle between steps. A draft proposes ``k`` tokens
the target model verifies in one step; with acceptance rate α the expected tokens per step are
(1 − α^(k+1)) ÷ (1 − α) (Leviathan, Kalman & Matias, "Fast Inference from Transformers via Speculative
Decoding", ICML 2023, eq. 1). The advisor assumes α = 0.6 and k = 4 (≈2.3 tokens per step) and a 10 %
draft overhead, and disables speculation above ``disable_by_batch_size`` running sequences (vLLM's
``disable_by_batch_size``), where the batch already keeps the GPU busy.

Disable: the deployment runs speculation (``speculative_decoding: true`` in its config) with more than
``disable_above_batch_per_replica`` sequences per replica while TPOT misses its target.
"""

from __future__ import annotations

import json
from typing import Any

from advisor import conventions as c
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import confidence, count
from advisor.rules.flags import flag_for
from advisor.rules.turns import effect
from advisor.telemetry import histogram_quantile

ACCEPTANCE = 0.6
DRAFT_TOKENS = 4
DRAFT_OVERHEAD = 1.1


def tokens_per_step(alpha: float = ACCEPTANCE, k: int = DRAFT_TOKENS) -> float:
    """Expected tokens per verification step (Leviathan et al. 2023, eq. 1): (1 − α^(k+1)) ÷ (1 − α)."""
    return (1 - alpha ** (k + 1)) / (1 - alpha)


class SpeculativeRule:
    """Small batch with TPOT over target → enable; big batch with speculation on → disable."""

    id = c.RULE_SPECULATIVE_DECODING
    supersedes: tuple[str, ...] = ()

    def __init__(
        self,
        max_batch_per_replica: float = 4,
        disable_by_batch_size: int = 8,
        disable_above_batch_per_replica: float = 32,
        for_seconds: float = 300.0,
    ):
        """Batch sizes in sequences per replica; ``for_seconds`` the for-duration."""
        self.max_batch = max_batch_per_replica
        self.disable_by = disable_by_batch_size
        self.disable_above = disable_above_batch_per_replica
        self._for = for_seconds

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def _reading(self, ev: Evaluation) -> tuple[bool | None, str, dict[str, Any]]:
        s = ev.stats
        if s is None or s.requests_running is None or ev.tpot_ok is None or ev.tpot_ok.value is None:
            return None, "running requests or TPOT unknown", {}
        batch = s.requests_running / max(ev.replicas_up, 1)
        tpot_ok = ev.tpot_ok.value
        miss = tpot_ok < ev.ctx.slo.target_ratio
        p50 = histogram_quantile(0.5, s.tpot)
        evidence = {
            "requests_running": s.requests_running,
            "batch_per_replica": round(batch, 2),
            "tpot_within_target_ratio": tpot_ok,
            "tpot_p50_seconds": p50,
            "tpot_target_seconds": ev.ctx.slo.tpot_seconds,
            "speculative_decoding": ev.ctx.speculative_decoding,
            "window_seconds": s.window_seconds,
        }
        if ev.ctx.speculative_decoding:
            holds = miss and batch > self.disable_above
            reason = f"speculation on with {batch:.0f} sequences per replica; {tpot_ok:.0%} of requests within TPOT"
        else:
            holds = miss and 0 < batch <= self.max_batch
            reason = f"{batch:.1f} sequences per replica; {tpot_ok:.0%} of requests within TPOT"
        return holds, reason, evidence

    def fires(self, ev: Evaluation) -> Condition:
        """See the module docstring."""
        holds, reason, evidence = self._reading(ev)
        return Condition(holds, reason, evidence)

    def clears(self, ev: Evaluation) -> Condition:
        """TPOT meets its target again, or the batch left the regime."""
        holds, reason, evidence = self._reading(ev)
        return Condition(None if holds is None else not holds, reason, evidence)

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """Enable (with a disable-by-batch-size threshold) or disable speculative decoding."""
        holds, _, evidence = self._reading(ev)
        if holds is None:
            return []
        conf = confidence(ev, 0.6)
        p50 = evidence["tpot_p50_seconds"]
        if ev.ctx.speculative_decoding:
            return [
                Proposal(
                    rule=self.id,
                    dial=c.DIAL_SPECULATIVE_DECODING,
                    action="disable",
                    current="on",
                    suggested="off",
                    flag="remove --speculative-config" if ev.ctx.engine == "vllm" else "turn speculative decoding off",
                    severity="warning",
                    confidence=conf,
                    summary=f"{ev.ctx.name}: large batches with speculation on — disable speculative decoding",
                    description=(
                        f"{count(evidence['requests_running'])} sequences run ({evidence['batch_per_replica']:.0f} per "
                        "replica): the batch keeps the GPU busy, so verifying draft tokens costs compute that "
                        "decoding needs, and TPOT misses its target. Turn speculation off (or set a "
                        f"disable-by-batch-size threshold of {self.disable_by})."
                    ),
                    predicted_effect={"speculative_decoding": effect(1, 0)},
                    evidence=evidence,
                    score=1.0,
                    sufficient=False,
                    cost=1.0,
                    gpus_added=0.0,
                )
            ]
        tps = tokens_per_step()
        config = {"method": "ngram", "num_speculative_tokens": DRAFT_TOKENS, "prompt_lookup_max": 4}
        value: Any = json.dumps(config) if ev.ctx.engine == "vllm" else DRAFT_TOKENS
        after = p50 * DRAFT_OVERHEAD / tps if p50 is not None else None
        return [
            Proposal(
                rule=self.id,
                dial=c.DIAL_SPECULATIVE_DECODING,
                action="enable",
                current="off",
                suggested=config,
                flag=flag_for(ev.ctx.engine, c.DIAL_SPECULATIVE_DECODING, value),
                severity="warning",
                confidence=conf,
                summary=f"{ev.ctx.name}: small batches miss TPOT — enable speculative decoding",
                description=(
                    f"Only {evidence['batch_per_replica']:.1f} sequences run per replica and only "
                    f"{evidence['tpot_within_target_ratio']:.0%} of requests meet TPOT ≤ {ev.ctx.slo.tpot_seconds}s: "
                    f"decode is bound by reading the weights and the bandwidth sits idle. With {DRAFT_TOKENS} draft "
                    f"tokens at an assumed acceptance of {ACCEPTANCE:.0%}, each step yields ~{tps:.1f} tokens "
                    f"(Leviathan et al. 2023), so TPOT p50 ~{p50 or 0:.3f}s → ~{after or 0:.3f}s. The win fades as the "
                    f"batch grows: watch it, and turn speculation off above ~{self.disable_by} running sequences "
                    "(vLLM ≥ 0.10 no longer applies a disable-by-batch-size itself). Measure the acceptance rate on "
                    "your own traffic."
                ),
                predicted_effect={"tpot_seconds": effect(p50, after)},
                evidence=evidence,
                score=tps / DRAFT_OVERHEAD,
                sufficient=True,
                cost=1.0,
                gpus_added=0.0,
            )
        ]
