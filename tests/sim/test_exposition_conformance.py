"""Acceptance 6: the simulated vLLM (SGLang) exposition has the same family names, types, label names and bucket
bounds as the vLLM 0.33.0 (SGLang 0.5.23) capture, for every family the advisor's adapter reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from advisor.engines import get_adapter
from advisor.sim.engine import PrefixCaching, Replica
from advisor.sim.exposition import SGLangCollector, VLLMCollector, render
from advisor.sim.fleet import Fleet
from advisor.sim.metrics import SGLangMetrics, VLLMMetrics
from advisor.sim.traffic import LognormalLengths, Poisson, TrafficProfile
from tests.sim.conftest import llama_engine

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
CAPTURES = SHARED / "engine-metrics"
VLLM_CAPTURE = CAPTURES / "vllm-0.33.0-engine-code-healthy-llama3.1-8b.prom"
SGLANG_CAPTURE = CAPTURES / "sglang-0.5.23-engine-code-healthy-llama3.1-8b.prom"

pytestmark = pytest.mark.conformance

Shape = tuple[str, dict[str, frozenset[str]], tuple[str, ...]]


def shapes(text: str) -> dict[str, Shape]:
    """family → (type, {sample name: label names without le}, sorted distinct le values)."""
    out: dict[str, Shape] = {}
    for fam in text_string_to_metric_families(text):
        labels: dict[str, set[str]] = {}
        les: set[str] = set()
        for s in fam.samples:
            labels.setdefault(s.name, set()).update(k for k in s.labels if k != "le")
            if "le" in s.labels:
                les.add(s.labels["le"])
        bounds = tuple(sorted(les, key=lambda v: float(v)))
        out[fam.name] = (fam.type, {k: frozenset(v) for k, v in labels.items()}, bounds)
    return out


def read_families(text: str, engine: str) -> set[str]:
    """Families with at least one sample the engine's adapter reads."""
    adapter = get_adapter(engine)
    return {fam.name for fam in text_string_to_metric_families(text) if any(adapter.wants(s.name) for s in fam.samples)}


def busy_fleet() -> Fleet:
    cfg = llama_engine()
    cfg = type(cfg)(**{**cfg.__dict__, "prefix_caching": PrefixCaching(0.1)})
    profile = TrafficProfile(Poisson(3.0), LognormalLengths(1500, 0.5, 300, 1.0))
    fleet = Fleet(cfg, profile, seed=7, observers=lambda i: [VLLMMetrics(cfg.max_model_len), SGLangMetrics()])
    fleet.advance(60.0)
    return fleet


def observers(replica: Replica) -> tuple[VLLMMetrics, SGLangMetrics]:
    v, s = replica.observers
    assert isinstance(v, VLLMMetrics) and isinstance(s, SGLangMetrics)
    return v, s


def compare(capture: Path, simulated: str, engine: str) -> None:
    if not capture.is_file():
        pytest.skip(f"{capture} is absent (../shared is not checked out beside the repository)")
    real_text = capture.read_text(encoding="utf-8")
    real = shapes(real_text)
    sim = shapes(simulated)
    wanted = read_families(real_text, engine)
    assert wanted, "the adapter reads nothing from the capture"
    problems = []
    for name in sorted(wanted):
        if name not in sim:
            problems.append(f"{name}: missing from the simulated exposition")
            continue
        r_type, r_labels, r_bounds = real[name]
        s_type, s_labels, s_bounds = sim[name]
        if r_type != s_type:
            problems.append(f"{name}: type {s_type} != {r_type}")
        if r_labels != s_labels:
            problems.append(f"{name}: labels {s_labels} != {r_labels}")
        if r_bounds != s_bounds:
            problems.append(f"{name}: buckets {s_bounds} != {r_bounds}")
    assert not problems, "\n".join(problems)


def test_the_simulated_vllm_exposition_matches_the_0_33_capture_for_every_family_the_advisor_reads() -> None:
    fleet = busy_fleet()
    replica = fleet.replicas[0]
    v, _ = observers(replica)
    text = render(VLLMCollector(replica, v, created=1.7e9)).decode()
    compare(VLLM_CAPTURE, text, "vllm")


def test_the_simulated_sglang_exposition_matches_the_0_5_23_capture_for_every_family_the_advisor_reads() -> None:
    fleet = busy_fleet()
    replica = fleet.replicas[0]
    _, s = observers(replica)
    text = render(SGLangCollector(replica, s, pid=4242)).decode()
    compare(SGLANG_CAPTURE, text, "sglang")


def test_the_cache_config_info_label_set_is_the_capture_s() -> None:
    if not VLLM_CAPTURE.is_file():
        pytest.skip(f"{VLLM_CAPTURE} is absent (../shared is not checked out beside the repository)")
    fleet = busy_fleet()
    replica = fleet.replicas[0]
    v, _ = observers(replica)
    sim = shapes(render(VLLMCollector(replica, v, created=1.7e9)).decode())
    real = shapes(VLLM_CAPTURE.read_text(encoding="utf-8"))
    assert sim["vllm:cache_config_info"] == real["vllm:cache_config_info"]
