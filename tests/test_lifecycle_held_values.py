"""advisor_recommended_value follows the advice's stabilization (issue 13, problem 7).

Found by a new-user walkthrough: ``advisor_recommended_value{dial="replicas"}`` appeared and disappeared ~14 times
in 115 s while one incident stayed open (the exporter exports a dial while the incident proposes it, and the
replicas proposal came and went with the momentary data), and ``max_num_seqs`` jittered 28 ↔ 31 (alternatives'
values skipped the ≥ 10 % material-change rule). Now an open incident holds each alternative's announced value
unless it moves materially, and holds a replicas turn, once proposed, for the life of the incident.

Hand-computed for the script below: max_num_seqs announced 28 first; 31 is 3 ÷ 28 = 10.7 % off (material: one
change), and from 31 the values 28–30 are at most 3 ÷ 31 = 9.7 % off (never material), so the exported value
changes at most once. Replicas: the raw count 3 is observed every other evaluation, 5 s apart; HPA's scale-up
rule (lowest raw count of the last 60 s) against 1 configured gives 3 in every evaluation.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, replace

from prometheus_client import CollectorRegistry

from advisor.deployment_view import DeploymentView
from advisor.evaluate import engine_view
from advisor.exporter import make_registry
from advisor.results import CycleResult, DeploymentResult
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.lifecycle import Lifecycle, material_change
from tests.factories import evaluation


@dataclass
class _Saturation:
    """One saturation rule whose proposals the test scripts per evaluation: fp8 KV (the best turn), a
    max_num_seqs cap at ``seqs`` and, when ``replicas`` is set, replicas 1 → ``replicas``."""

    id: str = "scripted_saturation"
    problem: str = "saturation"
    supersedes: tuple[str, ...] = ()
    seqs: int = 28
    replicas: int | None = 3

    def for_seconds(self) -> float:
        return 0.0

    def fires(self, ev: Evaluation) -> Condition:
        return Condition(True, "saturated")

    def clears(self, ev: Evaluation) -> Condition:
        return Condition(False, "still saturated")

    def propose(self, ev: Evaluation) -> list[Proposal]:
        def turn(dial: str, action: str, current: object, suggested: object, score: float, gpus: float) -> Proposal:
            return Proposal(
                self.id,
                dial,
                action,
                current,
                suggested,
                f"--{dial} {suggested}",
                "warning",
                0.9,
                f"saturated: {dial} {current} → {suggested}",
                "d",
                {},
                {},
                score=score,
                sufficient=dial != "max_num_seqs",
                gpus_added=gpus,
            )

        out = [
            turn("kv_cache_dtype", "set", "auto", "fp8", 1.5, 0.0),
            turn("max_num_seqs", "decrease", 256, self.seqs, 1.0, 0.0),
        ]
        if self.replicas is not None:
            out.append(turn("replicas", "increase", 1, self.replicas, 1.0, float(self.replicas - 1)))
        return out


def _exported(registry: CollectorRegistry, deployment: str) -> dict[str, float]:
    """``advisor_recommended_value`` by dial, as ``/metrics`` serves it."""
    return {
        s.labels["dial"]: s.value
        for m in registry.collect()
        if m.name == "advisor_recommended_value"
        for s in m.samples
        if s.labels.get("deployment") == deployment
    }


def test_the_exported_values_hold_while_the_incident_is_open() -> None:
    rng = random.Random(13)
    rule = _Saturation()
    lc = Lifecycle([rule])
    registry, collector, _ = make_registry()
    seen: list[dict[str, float]] = []
    ids: set[str] = set()
    for i in range(40):
        rule.seqs = 28 if i == 0 else rng.choice((28, 29, 30, 31))
        rule.replicas = 3 if i % 2 == 0 else None  # this window's data proposes replicas every other time
        ev = evaluation(now=1000.0 + 5 * i)
        lc.evaluate(ev)
        ids |= {r.id for r in lc.open_recommendations()}
        collector.publish(CycleResult(timestamp=ev.now, deployments=(_result(lc, ev),)))
        seen.append(_exported(registry, ev.ctx.name))
    assert len(ids) == 1  # one incident throughout
    assert all("replicas" in s for s in seen), [i for i, s in enumerate(seen) if "replicas" not in s]
    assert {s["replicas"] for s in seen} == {3.0}
    seqs = [s["max_num_seqs"] for s in seen]
    assert seqs[0] == 28.0
    changes = [(a, b) for a, b in itertools.pairwise(seqs) if a != b]
    assert all(material_change(a, b) for a, b in changes), changes
    assert len(changes) <= 1, seqs


def _result(lc: Lifecycle, ev: Evaluation) -> DeploymentResult:
    """The cycle's deployment result with the lifecycle's open incidents (nothing reported by an engine)."""
    ctx = ev.ctx
    view = DeploymentView(
        reported=engine_view([], None, 1, "ok"),
        kv_cache_capacity_tokens_predicted=ctx.capacity.kv_cache_tokens,
        capacity_model_error_ratio=None,
        goodput_ratio=None,
        goodput_ratio_bounds=(None, None),
        goodput_tokens_per_second=None,
        ttft_within_target_ratio=None,
        tpot_within_target_ratio=None,
        max_model_len=ctx.capacity.max_model_len,
        max_model_len_ceiling_requests=None,
        pool_usage={},
    )
    return DeploymentResult(
        name=ctx.name,
        engine="vllm",
        state="fresh",
        evaluation=ev,
        snapshot=view,
        capacity=ctx.capacity,
        targets=(),
        recommendations=tuple(lc.open_recommendations(ctx.name)),
        rule_statuses=tuple(lc.statuses.values()),
    )


def test_an_alternative_s_value_changes_only_by_a_material_step() -> None:
    """max_num_seqs alone, jittering 28–31 over 40 evaluations (replicas proposed every time)."""
    rng = random.Random(7)
    rule = _Saturation()
    lc = Lifecycle([rule])
    announced: list[object] = []
    for i in range(40):
        rule.seqs = 28 if i == 0 else rng.choice((28, 29, 30, 31))
        lc.evaluate(evaluation(now=1000.0 + 5 * i))
        (rec,) = lc.open_recommendations()
        (alt,) = [a for a in rec.alternatives if a["dial"] == "max_num_seqs"]
        announced.append(alt["suggested"])
    assert announced[0] == 28
    changes = [(a, b) for a, b in itertools.pairwise(announced) if a != b]
    assert changes in ([], [(28, 31)]), announced


@dataclass
class _Pool(_Saturation):
    """The saturation rule proposing only fp8 KV (or max_num_seqs ``pool_seqs``), its ceiling moving per evaluation
    (walkthrough, 2026-12-07: ``/api/v1/recommendations`` showed a description "from 31.1 to 73.4" beside a
    ``predicted_effect`` of 30.2 → 71.4, the opening evaluation's figures, held because the value had not moved)."""

    before: float = 30.2
    after: float = 71.4
    pool_seqs: int | None = None

    def propose(self, ev: Evaluation) -> list[Proposal]:
        self.seqs = self.pool_seqs or self.seqs
        fp8, seqs = super().propose(ev)[:2]
        return [
            replace(
                fp8 if self.pool_seqs is None else seqs,
                description=f"the ceiling from {self.before} to {self.after}",
                predicted_effect={"concurrency_ceiling": {"before": self.before, "after": self.after}},
            )
        ]


def test_the_same_turn_carries_this_evaluations_effect_beside_its_description() -> None:
    rule = _Pool()
    lc = Lifecycle([rule])
    lc.evaluate(evaluation(now=1000.0))
    rule.before, rule.after = 31.1, 73.4
    lc.evaluate(evaluation(now=1060.0))
    (rec,) = lc.open_recommendations()
    assert "from 31.1 to 73.4" in rec.description
    assert rec.predicted_effect["concurrency_ceiling"] == {"before": 31.1, "after": 73.4}


def test_a_held_value_keeps_the_effect_announced_with_it() -> None:
    rule = _Pool(pool_seqs=100, before=10.0, after=20.0)
    lc = Lifecycle([rule])
    lc.evaluate(evaluation(now=1000.0))
    rule.pool_seqs, rule.before, rule.after = 104, 11.0, 21.0  # 4 % off 100: not material, the advice stays at 100
    lc.evaluate(evaluation(now=1060.0))
    (rec,) = lc.open_recommendations()
    assert rec.suggested == 100
    assert rec.predicted_effect["concurrency_ceiling"] == {"before": 10.0, "after": 20.0}
