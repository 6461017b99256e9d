"""over_provisioned by TP or GPU size (issue 13, problem 5), and its steady-load guard.

A 70B model at TP 8 on one H100-SXM replica, using a few percent of its pool under a light steady load: the lower
TPs are checked in turn — the weights must fit, the pool must hold the peak tokens with the head-room, and the
queueing model must meet the SLO. Hand-computed reference figures:

* Llama-3.1-70B-Instruct: 70,553,706,496 parameters × 2 B = 141.1 GB of bf16 weights. At TP 1 that is 131.4 GiB
  on one GPU, more than the 79.15 GiB × 0.9 = 71.24 GiB budget: TP 1 does not fit.
* The decode step streams the weights on each GPU at least once: at TP 4, 35.28 GB ÷ (3.35 TB/s × 0.8 bandwidth
  efficiency) = 13.2 ms per token even at batch 1 — over a 10 ms TPOT target whatever the load; at TP 8, 17.64 GB
  → 6.6 ms.
* Peak tokens held: 5 % KV usage × the engine's 1,390,192-token pool = 69,509.6 tokens (6 running × 1,800 tokens
  = 10,800 is less); the head-room at ``target_load_ratio`` 0.5 asks for a pool of 2 × 69,509.6 = 139,019 tokens.

On 8db4a05 the rule had no TP turn (it proposed only a smaller GPU for one replica) and no notion of a lull.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisor.capacity.kv import capacity_pass
from advisor.capacity.models import get_preset
from advisor.rules.base import SLOTargets
from advisor.rules.over_provisioned import OverProvisionedRule
from tests.rules.helpers import ctx, ev, good, hist

RULE = OverProvisionedRule(max_usage=0.3, max_load_ratio=0.25, target_load_ratio=0.5)
MODEL = get_preset("meta-llama/Llama-3.1-70B-Instruct")


def _dep(tp: int = 8, replicas: int = 1, tpot: float = 0.05) -> Any:
    return ctx(
        replicas=replicas,
        gpu="H100-SXM",
        model=MODEL,
        tensor_parallel_size=tp,
        slo=SLOTargets(2.0, tpot, 0.9),
    )


def _ev(dep: Any = None, **kw: Any) -> Any:
    dep = dep or _dep()
    stats: dict[str, Any] = {
        "goodput": good(0.99, 1.0),
        "kv_capacity_tokens": dep.capacity.kv_cache_tokens,
        "requests_running": 6,
        "requests_waiting": 0,
        "requests_waiting_first": 0,
        "kv_cache_usage_ratio": 0.05,
        "kv_cache_usage_ratio_max": 0.05,
        # 0.5 requests/s of 1,500 prompt + 300 output tokens
        "requests_finished_per_second": 0.5,
        "prompt_tokens_per_second": 750.0,
        "generation_tokens_per_second": 150.0,
    }
    stats.update(kw)
    return ev(dep=dep, **stats)


def _tp(props: list[Any]) -> list[Any]:
    return [p for p in props if p.dial == "tensor_parallel_size"]


def test_weights_params_are_the_reference() -> None:
    # the figure the module docstring's hand computation starts from
    assert MODEL.num_parameters == 70_553_706_496
    assert _dep().capacity.kv_cache_tokens == 1_390_192


def test_a_70b_at_tp8_with_5_percent_usage_gets_tp4_and_frees_four_gpus() -> None:
    e = _ev()
    assert RULE.fires(e).holds is True
    props = RULE.propose(e)
    (p,) = _tp(props)
    assert (p.action, p.current, p.suggested) == ("decrease", 8, 4)
    assert p.gpus_added == -4.0
    assert p.cost == 0.5
    assert p.predicted_effect["gpus"] == {"before": 8, "after": 4}
    assert "--tensor-parallel-size 4" in p.flag
    # TP 1: the weights do not fit; TP 2: its pool is under 2 × 69,509.6 = 139,019 tokens
    rejected = p.evidence["tp_rejected"]
    assert "does not fit" in rejected["1"] and "131.45 GiB" in rejected["1"]
    tp2_pool = capacity_pass(dataclasses.replace(_dep().inputs, tensor_parallel_size=2)).kv_cache_tokens
    assert tp2_pool < 139_019
    assert "139,019" in rejected["2"]
    # the pool after is the capacity pass at TP 4 (the engine reports the model's pool here: anchor 1)
    tp4_pool = capacity_pass(dataclasses.replace(_dep().inputs, tensor_parallel_size=4)).kv_cache_tokens
    assert p.predicted_effect["kv_cache_tokens"] == {"before": 1_390_192, "after": tp4_pool}
    # the flag change ranks before the instance move (cost 0.5 against the move's penalty)
    assert min(props, key=lambda q: q.cost) is p


def test_the_pool_after_is_anchored_on_the_engine() -> None:
    # the engine reports half the model's pool: the pool at TP 4 is the model's TP-4 pool × 0.5
    e = _ev(kv_capacity_tokens=695_096)
    (p,) = _tp(RULE.propose(e))
    tp4_pool = capacity_pass(dataclasses.replace(_dep().inputs, tensor_parallel_size=4)).kv_cache_tokens
    assert p.predicted_effect["kv_cache_tokens"]["before"] == 695_096
    assert p.predicted_effect["kv_cache_tokens"]["after"] == pytest.approx(tp4_pool * 0.5, abs=1)


def test_a_tpot_target_tp4_cannot_meet_is_no_tp_turn() -> None:
    # TPOT target 10 ms: TP 4 streams 35.28 GB per step on each GPU, 13.2 ms at batch 1 — the SLO fails
    e = _ev(dep=_dep(tpot=0.010))
    assert _tp(RULE.propose(e)) == []
    evidence: dict[str, Any] = {}
    assert RULE._tp_turns(e, evidence, "") == []
    assert "queueing model predicts goodput" in evidence["tp_rejected"]["4"]
    # nor a smaller GPU: a 40 GB A100 streams the same 17.64 GB per GPU at 1.56 TB/s (≥ 14 ms) — over 10 ms
    assert [p.dial for p in RULE.propose(e)] == []


def test_an_engine_slower_than_the_model_scales_the_prediction() -> None:
    # TPOT target 25 ms. TP 4 alone is ~16 ms; but the engine's observed mean TPOT (40 ms over 150 tokens) is ~5×
    # the model's ~8 ms at TP 8, so TP 4 is predicted at ≥ 5 × 13.2 ms = 66 ms > 25 ms: no TP turn
    assert _tp(RULE.propose(_ev(dep=_dep(tpot=0.025))))
    slow = _ev(dep=_dep(tpot=0.025), tpot=hist((0.05, 150.0), total_sum=150 * 0.040))
    assert _tp(RULE.propose(slow)) == []


def test_fewer_replicas_frees_gpus_and_says_so() -> None:
    # 4 replicas of TP 8, 6 running: 1 replica holds it → 3 replicas × 8 GPUs freed
    dep = _dep(replicas=4)
    props = RULE.propose(_ev(dep=dep, replicas_up=4))
    rep = next(p for p in props if p.dial == "replicas")
    assert (rep.current, rep.suggested, rep.gpus_added) == (4, 1, -24.0)
    # TP 8 → 4 on each of the 4 replicas frees 16
    (tp,) = _tp(props)
    assert tp.gpus_added == -16.0


@pytest.mark.parametrize(
    ("stats", "fires"),
    [
        ({"requests_running": 2, "requests_running_max": 40, "requests_running_dispersion": 10.78}, False),
        ({"requests_running": 2, "requests_running_max": 64, "requests_running_dispersion": 1.0}, False),
        ({"requests_running": 4, "requests_running_max": 5, "requests_running_dispersion": 0.17}, True),
        ({"requests_running": 4, "requests_running_max": 5, "requests_running_dispersion": 4.0}, True),
        ({"requests_running": 4, "requests_running_max": 5, "requests_running_dispersion": 4.01}, False),
    ],
    ids=[
        "a lull after 40 running (dispersion 10.78) does not fire",
        "the peak (64 of 256 = 0.25) counts, not the newest 2",
        "a steady light load fires",
        "dispersion at max_dispersion fires",
        "dispersion just over max_dispersion does not fire",
    ],
)
def test_steady_load_guard(stats: dict[str, Any], fires: bool) -> None:
    # Llama-3.1-8B on one H100: ceiling 256 (max-num-seqs), peak usage 10 %
    running_max = stats.pop("requests_running_max")
    dispersion = stats.pop("requests_running_dispersion")
    e = ev(
        goodput=good(0.95, 1.0),
        requests_waiting=0,
        requests_waiting_first=0,
        kv_cache_usage_ratio=0.05,
        kv_cache_usage_ratio_max=0.1,
        **stats,
    )
    e = dataclasses.replace(e, requests_running_max=running_max, requests_running_dispersion=dispersion)
    c = RULE.fires(e)
    assert c.holds is fires
    if dispersion > 4.0:
        assert "not steady" in c.reason


def test_running_load_reads_peak_and_dispersion_from_the_window() -> None:
    from advisor.domain import EngineSnapshot, TimedSnapshot
    from advisor.evaluate import TargetView, running_load

    def view(url: str, values: list[float]) -> TargetView:
        hist_ = tuple(
            TimedSnapshot(url, 100.0 + 15 * i, EngineSnapshot(engine="vllm", requests_running=v))
            for i, v in enumerate(values)
        )
        return TargetView(url, True, None, None, hist_)

    # a lull: 40, 30, 2 → mean 24, variance (256 + 36 + 484) ÷ 3 = 258.67, ÷ 24 = 10.78; a steady 4, 5, 3 → 0.17
    lull = running_load([view("a", [40, 30, 2])], now=130.0, window_seconds=60.0)
    assert lull.peak == 40 and lull.dispersion == pytest.approx(10.778, abs=1e-3)
    both = running_load([view("a", [40, 30, 2]), view("b", [4, 5, 3])], now=130.0, window_seconds=60.0)
    assert both.peak == 45 and both.dispersion == pytest.approx(10.778, abs=1e-3)
    # samples outside the window do not count: only 30, 2 (t = 115, 130) → mean 16, variance 196 → 12.25
    assert running_load([view("a", [40, 30, 2])], now=130.0, window_seconds=20.0).dispersion == pytest.approx(12.25)
    assert running_load([view("a", [7])], now=100.0, window_seconds=60.0).dispersion is None
    # a gauge no request count reaches (a broken exporter's 1e300, 1e308) is not read, and does not stop the others
    # (its square overflowed and the whole deployment went unevaluated)
    broken = running_load([view("a", [4.0, 1e300]), view("b", [4, 5, 3])], now=130.0, window_seconds=60.0)
    assert broken.peak is not None and broken.mean is not None
    over = running_load([view("a", [1e308, 1e308]), view("b", [4, 5, 3])], now=130.0, window_seconds=60.0)
    assert (over.peak, over.mean) == (5, pytest.approx(4.0))


def test_evaluate_deployment_carries_the_peak_and_dispersion_to_the_rule() -> None:
    from advisor.domain import EngineSnapshot, TimedSnapshot
    from advisor.evaluate import Quality, TargetView, evaluate_deployment
    from tests.factories import context

    url = "http://10.0.0.9:8000/metrics"
    hist_ = tuple(
        TimedSnapshot(url, 100.0 + 15 * i, EngineSnapshot(engine="vllm", requests_running=v, requests_waiting=0))
        for i, v in enumerate([40, 30, 2])
    )
    e, _ = evaluate_deployment(
        context(), [TargetView(url, True, None, None, hist_)], 130.0, 60.0, Quality(interval_seconds=15.0)
    )
    # the newest reading is 2 running, but the window's peak is 40 and the load was not steady (10.78 > 4)
    assert e.stats is not None and e.stats.requests_running == 2
    assert e.requests_running_max == 40
    assert e.requests_running_dispersion == pytest.approx(10.778, abs=1e-3)
