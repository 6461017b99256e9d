"""speculative_decoding against the simulator: the advice read from a simulated vLLM's draft counters, turned in the
simulator, moves TPOT the way it says.

The simulated engine (:mod:`advisor.sim`, vLLM's V1 scheduler step by step) runs Llama-3.1-8B on one H100-SXM with
speculation whose acceptance the advisor is not told: it reads the engine's ``/metrics`` page (the simulator's vLLM
exposition, with ``vllm:spec_decode_*`` counters, parsed by the vLLM adapter) every 5 s through the daemon's
:class:`~advisor.tracker.Tracker`. The simulator prices a verification round as the advisor's roofline does, plus the
draft's own passes (``draft_cost_ratio``), which the rule leaves out of its bound; the ground truth for each advice is
the simulator's own TPOT with the dial turned, at the same traffic.

* 20 requests/s of ~200 + ~200 tokens with 6 draft tokens accepted at 20 % each: the verification of 7 tokens per
  sequence buys ~1.25 tokens a round, the batch piles up (~200 running against ~26 without speculation) and the rule
  turns speculation down; the turn lowers the simulated TPOT.
* Llama-3.1-70B at TP 2, 1 request/s with 3 draft tokens at 70 % and a config silent about speculation: ~2 sequences
  run and miss a 10 ms TPOT target; the round costs about one step and yields ~2.5 tokens. The counters say
  speculation runs, so it is never proposed again (the config alone would have it enabled), and the rule does not
  turn it down (the simulator: speculation lowers TPOT there by more than 40 %).
"""

from __future__ import annotations

from typing import Any

import pytest

from advisor.config import parse_config
from advisor.domain import TimedSnapshot
from advisor.evaluate import Quality
from advisor.exporter import make_registry
from advisor.observe import observe
from advisor.results import CycleResult
from advisor.service import build_rules, deployment_context
from advisor.sim.engine import Speculative
from advisor.sim.exposition import VLLMCollector, render
from advisor.sim.fleet import Fleet, simulate
from advisor.sim.metrics import VLLMMetrics
from advisor.sim.scenarios import Scenario
from advisor.sim.traffic import LognormalLengths, Poisson, TrafficProfile
from advisor.tracker import Tracker

exported: dict[str, dict[str, float]] = {}
"""The ``advisor_speculative_*`` gauges of the last :func:`_advice` run, by scenario name."""
SCRAPE = 5.0
WINDOW = 60.0
T0 = 1_000_000.0
LENGTHS = LognormalLengths(200, 0.3, 200, 0.3)
SEVENTY_B: dict[str, Any] = {"model": "meta-llama/Llama-3.1-70B-Instruct", "tensor_parallel_size": 2}


def _scenario(rate: float, spec: Speculative | None, tpot_slo: float = 0.1, **kw: Any) -> Scenario:
    return Scenario(
        name="spec",
        traffic=TrafficProfile(Poisson(rate), LENGTHS),
        max_num_seqs=1024,
        speculative=spec,
        slo_tpot_seconds=tpot_slo,
        **kw,
    )


def _advice(s: Scenario, fields: dict[str, Any], seconds: float = 90.0) -> list[dict[str, Any]]:
    """The speculative_decoding recommendations open after ``seconds`` of the simulated engine, scraped every 5 s."""
    config = s.engine_config()
    metrics: list[VLLMMetrics] = []

    def observers(i: int) -> list[VLLMMetrics]:
        metrics.append(VLLMMetrics(config.max_model_len))
        return [metrics[-1]]

    fleet = Fleet(config, s.traffic, replicas=1, seed=0, observers=observers)
    (replica,) = fleet.replicas
    collector = VLLMCollector(replica, metrics[0], created=T0)
    url = "http://127.0.0.1:9000/metrics"
    cfg = parse_config(
        {"scrape_interval": "5s", "evaluation_window": f"{WINDOW:g}s", "deployments": [fields | {"targets": [url]}]}
    )
    tracker = Tracker(
        build_rules(cfg), evaluation_window=WINDOW, scrape_interval=SCRAPE, quality=Quality(SCRAPE), ignore_for=True
    )
    tracker.add_deployment(deployment_context(cfg.deployments[0], None), [url])
    tick = None
    for k in range(1, int(seconds / SCRAPE) + 1):
        fleet.advance(SCRAPE * k)
        seen = observe(render(collector).decode(), "vllm", None)
        assert seen.snapshot is not None, seen.error_message
        tracker.observe("spec", url, TimedSnapshot(url, T0 + SCRAPE * k, seen.snapshot))
        tick = tracker.evaluate(T0 + SCRAPE * k)
    assert tick is not None
    result = tick.result("spec")
    assert result is not None
    _, collector, _ = make_registry()
    collector.publish(CycleResult(tick.now, tick.results))
    exported[s.name] = {
        m.name: m.samples[0].value
        for m in collector.collect()
        if m.name.startswith("advisor_speculative_") and m.samples
    }
    recs = result.as_dict()["recommendations"]
    out = []
    for r in recs:
        for t in [r, *r.get("alternatives", [])]:
            if t.get("dial") == "speculative_decoding":
                out.append(t)
    return out


def _tpot_p50(s: Scenario) -> float:
    r = simulate(
        s.engine_config(), s.traffic, duration=90.0, slo_ttft_seconds=2.5, slo_tpot_seconds=0.1, seed=1, warmup=30.0
    )
    return r.tpot.p50


def test_a_losing_speculation_is_turned_down_and_the_turn_lowers_tpot() -> None:
    spec = Speculative(num_speculative_tokens=6, acceptance_rate=0.2, draft_cost_ratio=0.02)
    s = _scenario(20.0, spec)
    turns = _advice(s, s.deployment_fields([]))
    assert [t["action"] for t in turns] in (["disable"], ["decrease"]), turns
    (turn,) = turns
    evidence = turn.get("evidence") or {}
    # the engine's own counters, not the config: ~1 + 0.2 + 0.04 + … = 1.25 tokens a round for 6 drafted
    assert 1.15 < evidence["spec_mean_acceptance_length"] < 1.35
    assert 5.5 < evidence["spec_draft_length"] <= 6  # a request's last round drafts no further than its end
    gauges = exported["spec"]
    assert gauges["advisor_speculative_mean_acceptance_length_tokens"] == pytest.approx(
        evidence["spec_mean_acceptance_length"], abs=1e-3
    )
    assert 5.5 < gauges["advisor_speculative_draft_length_tokens"] <= 6
    turned = _scenario(20.0, None if turn["action"] == "disable" else Speculative(turn["suggested"], 0.2, 0.02))
    before, after = _tpot_p50(s), _tpot_p50(turned)
    assert after < 0.5 * before, (before, after)


def test_a_winning_speculation_the_config_does_not_name_is_neither_enabled_nor_turned_down() -> None:
    spec = Speculative(num_speculative_tokens=3, acceptance_rate=0.7, draft_cost_ratio=0.02)
    # ~2 running miss a 10 ms TPOT target: the reading without the counters (the config's) enables speculation here
    s = _scenario(1.0, spec, tpot_slo=0.01, **SEVENTY_B)
    fields = s.deployment_fields([]) | {"speculative_decoding": False}
    assert _advice(s, fields) == []
    assert _tpot_p50(s) < 0.6 * _tpot_p50(_scenario(1.0, None, **SEVENTY_B))
