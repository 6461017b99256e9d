"""Every adapter survives any label value: rank, replica, model, bucket and category labels are text.

A label value is whatever the exposition says. ``engine="²"`` or ``dp_rank="²"`` passes ``str.isdigit()``
but ``int()`` rejects it; before the fix the vLLM, SGLang and Dynamo adapters raised ``ValueError`` on it
and a valid page was reported as ``parse_error (adapter error: ValueError)``. The fixtures are the
hand-written pages in tests/fixtures/<engine>/; every label named below is set to the drawn value on every
sample (added where absent), and each adapter's snapshot must come back without raising.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.domain import EngineSnapshot, Exposition, Sample
from advisor.engines import ENGINES, get_adapter
from advisor.engines.dynamo import WORKER_KV_NAMES, worker_kv
from advisor.sources.exposition import parse_exposition

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

# Rank labels (vLLM engine, SGLang/Dynamo dp_rank), replica labels (vLLM behind Ray Serve, SGLang TP/PP/EP),
# model labels, histogram bounds and category labels.
LABELS = (
    "engine",
    "dp_rank",
    "tp_rank",
    "pp_rank",
    "moe_ep_rank",
    "attn_cp_rank",
    "ReplicaId",
    "WorkerId",
    "version",
    "le",
    "priority",
    "model_name",
    "model",
    "worker_id",
)

# Values that look numeric to one check and not to another.
TRICKY = ("²", "٣", "１", "-1", "+1", "1e3", "1.5", "+Inf", "-Inf", "NaN", "", " 1", "0x1", "00", "9" * 400)

VALUES = st.one_of(st.sampled_from(TRICKY), st.text(max_size=8))


def _pages(engine: str) -> list[Path]:
    return sorted((FIXTURES / engine).glob("*.prom"))


CASES = [(engine, page) for engine in ENGINES for page in _pages(engine)]


def _relabel(expo: Exposition, changes: dict[str, str]) -> dict[str, list[Sample]]:
    return {name: [Sample(s.name, {**s.labels, **changes}, s.value) for s in samples] for name, samples in expo.items()}


def test_every_engine_has_a_fixture_to_fuzz() -> None:
    assert {engine for engine, _ in CASES} == set(ENGINES)


@pytest.mark.parametrize(("engine", "page"), CASES, ids=[f"{e}-{p.stem}" for e, p in CASES])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes=st.dictionaries(st.sampled_from(LABELS), VALUES, min_size=1, max_size=4))
def test_no_label_value_crashes_an_adapter(engine: str, page: Path, changes: dict[str, str]) -> None:
    adapter = get_adapter(engine)
    expo = _relabel(parse_exposition(page.read_text(), keep=adapter.wants), changes)
    for model in [None, *adapter.models(expo)]:
        adapter.snapshot(expo, model)


@pytest.mark.parametrize("label", ["engine", "dp_rank", "tp_rank", "ReplicaId"])
@pytest.mark.parametrize("engine", ["vllm", "sglang", "dynamo"])
def test_a_unicode_digit_rank_is_read_as_a_name(engine: str, label: str) -> None:
    """``"²"`` is a rank name, not a number: the page is read, not reported as an adapter error."""
    for page in _pages(engine):
        adapter = get_adapter(engine)
        expo = _relabel(parse_exposition(page.read_text(), keep=adapter.wants), {label: "²"})
        adapter.snapshot(expo)


# A Dynamo worker page (``dynamo_component_*`` KV gauges, lib/runtime/src/metrics/prometheus_names.rs), two DP
# ranks; read by advisor.engines.dynamo.worker_kv after the engine's adapter.
WORKER_PAGE = """\
dynamo_component_gpu_cache_usage_percent{dp_rank="0",model="m"} 0.5
dynamo_component_gpu_cache_usage_percent{dp_rank="1",model="m"} 0.25
dynamo_component_total_blocks{dp_rank="0",model="m"} 100
dynamo_component_total_blocks{dp_rank="1",model="m"} 300
"""


@settings(max_examples=200, deadline=None)
@given(changes=st.dictionaries(st.sampled_from(("dp_rank", "model", "model_name")), VALUES, min_size=1, max_size=3))
def test_no_label_value_crashes_the_dynamo_worker_reader(changes: dict[str, str]) -> None:
    expo = _relabel(parse_exposition(WORKER_PAGE, keep=lambda name: name in WORKER_KV_NAMES), changes)
    snap = EngineSnapshot(engine="sglang", model="m", engine_config={"block_size": "16"})
    worker_kv(snap, expo)


def test_a_unicode_digit_dynamo_worker_rank_is_a_rank_name() -> None:
    page = WORKER_PAGE.replace('dp_rank="1"', 'dp_rank="²"')
    expo = parse_exposition(page, keep=lambda name: name in WORKER_KV_NAMES)
    snap = worker_kv(EngineSnapshot(engine="sglang", model="m", engine_config={"block_size": "16"}), expo)
    assert snap.kv_cache_capacity_tokens == (100 + 300) * 16
    assert snap.kv_cache_usage_ratio == pytest.approx((0.5 * 100 + 0.25 * 300) / 400)
