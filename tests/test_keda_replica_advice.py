"""A replica turn where KEDA sets the count says so, instead of a ``kubectl scale`` the HPA undoes.

A deployment with an ``autoscaling:`` block gets a ScaledObject (``rules generate``) whose HPA follows
``advisor_desired_replicas``; a hand ``kubectl scale`` there is reverted at the HPA's next sync (15 s by default,
https://kubernetes.io/docs/concepts/workloads/autoscaling/horizontal-pod-autoscale/). Found by a fresh user, who saw
``kubectl scale deployment/<name>`` on a deployment whose scale target the config names.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor.assembly import deployment_context
from advisor.config import parse_config
from advisor.rules.base import Evaluation, KedaScaling, Proposal
from advisor.rules.lifecycle import localized
from tests.factories import context, evaluation

PHRASE = "scale to {n} replica(s) (e.g. kubectl scale deployment/<name> --replicas={n})"  # flag_for's, written out


def _proposal(n: int, flag: str | None = None) -> Proposal:
    return Proposal(
        rule="queue_growth",
        dial="replicas",
        action="increase",
        current=2,
        suggested=n,
        flag=flag if flag is not None else PHRASE.format(n=n),
        severity="warning",
        confidence=0.8,
        summary=f"replicas 2 → {n}",
        description="",
        predicted_effect={},
        evidence={},
        score=1.0,
    )


def _ev(keda: KedaScaling | None, platform: str = "kubernetes"):  # type: ignore[no-untyped-def]
    return evaluation(ctx=replace(context(replicas=2), scaled_by_keda=keda, platform=platform))


KEDA = KedaScaling(target="llm-8b", namespace="serving", min_replicas=1, max_replicas=4)


def test_within_the_bounds_keda_sets_the_count_and_kubectl_is_the_fallback() -> None:
    p = localized(_ev(KEDA), _proposal(3))
    assert p.flag is not None
    assert p.flag.startswith("KEDA scales deployment/llm-8b to 3 or more"), p.flag  # the lead may hold more
    assert "advisor_desired_replicas" in p.flag
    assert "kubectl -n serving scale deployment/llm-8b --replicas=3" in p.flag
    assert "<name>" not in p.flag
    assert p.engine_flag == PHRASE.format(n=3)


def test_above_max_replica_count_the_bound_is_the_turn_not_kubectl() -> None:
    p = localized(_ev(KEDA), _proposal(6))
    assert p.flag is not None
    assert "max_replica_count" in p.flag and "maxReplicaCount" in p.flag and "from 4 to 6" in p.flag, p.flag
    assert "KEDA holds deployment/llm-8b at 4" in p.flag
    assert "kubectl" not in p.flag  # HPA would undo it


def test_below_min_replica_count_the_bound_is_the_turn() -> None:
    keda = replace(KEDA, min_replicas=3)
    p = localized(_ev(keda), replace(_proposal(1), action="decrease"))
    assert p.flag is not None and "min_replica_count" in p.flag and "from 3 to 1" in p.flag, p.flag
    assert "kubectl" not in p.flag


def test_a_rules_own_words_around_the_phrase_stay() -> None:
    wrapped = "add one dedicated long-context replica; " + PHRASE.format(n=3)
    p = localized(_ev(KEDA), _proposal(3, flag=wrapped))
    assert p.flag is not None and p.flag.startswith("add one dedicated long-context replica; KEDA scales"), p.flag


@pytest.mark.parametrize(("keda", "platform"), [(None, "kubernetes"), (KEDA, "systemd")])
def test_without_keda_the_kubectl_phrase_or_the_platforms_own_stays(keda: KedaScaling | None, platform: str) -> None:
    p = localized(_ev(keda, platform), _proposal(3))
    assert p.flag is not None and "KEDA" not in p.flag
    if platform == "kubernetes":
        assert p.flag == PHRASE.format(n=3)


def test_other_dials_are_untouched() -> None:
    p = replace(_proposal(3), dial="max_num_seqs", flag="--max-num-seqs 3")
    assert localized(_ev(KEDA), p) == p


def test_the_config_block_reaches_the_context() -> None:
    base = {
        "name": "chat-8b",
        "targets": ["http://127.0.0.1:9/metrics"],
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
    }
    cfg = parse_config(
        {
            "deployments": [
                {**base, "autoscaling": {"max_replica_count": 8}},
                {
                    **base,
                    "name": "b",
                    "autoscaling": {"scale_target": "vllm-b", "namespace": "ml", "min_replica_count": 2},
                },
                {**base, "name": "c"},
                {**base, "name": "d", "platform": "systemd"},
                # no ScaledObject is written for these (rules generate warns): no advice may name one (breaker)
                {**base, "name": "KS_Upper", "autoscaling": {"max_replica_count": 8}},
                {**base, "name": "e" * 60, "autoscaling": {"max_replica_count": 8}},
                {**base, "name": "f", "platform": "sagemaker", "autoscaling": {"max_replica_count": 8}},
            ]
        }
    )
    got = [deployment_context(d).scaled_by_keda for d in cfg.deployments]
    assert got[0] == KedaScaling("chat-8b", None, 1, 8)  # the target defaults to the deployment's name
    assert got[1] == KedaScaling("vllm-b", "ml", 2, 100)  # KEDA's default maxReplicaCount
    assert got[2:] == [None] * 5


def test_a_reload_that_changes_the_bounds_rewrites_the_held_turn() -> None:
    """Breaker, 2026-12-05: after a SIGHUP lowered min_replica_count from 3 to 1, the open incident kept "lower
    autoscaling.min_replica_count … from 3 to 1 … KEDA holds … at 3" (its value unchanged, so its flag was kept as
    announced). The same value is written as the evaluation writes it now."""
    from advisor.rules.lifecycle import Lifecycle
    from tests.test_lifecycle import ScriptedRule

    class ScaleDown(ScriptedRule):
        def propose(self, ev: Evaluation) -> list[Proposal]:
            return [replace(p, flag=PHRASE.format(n=1)) for p in super().propose(ev)]

    lc = Lifecycle([ScaleDown(fire=True, for_s=0, dials=["replicas"], suggested=1, current=3, action="decrease")])

    def at(now: float, keda: KedaScaling) -> list[str | None]:
        lc.evaluate(evaluation(now=now, ctx=replace(context(replicas=3), scaled_by_keda=keda)))
        return [r.flag for r in lc.open_recommendations("chat-8b") if r.dial == "replicas"]

    (before,) = at(1000.0, replace(KEDA, min_replicas=3))
    assert before is not None and "lower autoscaling.min_replica_count" in before and "from 3 to 1" in before
    (after,) = at(1010.0, replace(KEDA, min_replicas=1))
    assert after is not None and after.startswith("KEDA scales deployment/llm-8b to 1 or more"), after
