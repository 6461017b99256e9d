"""VLLMAdapter on hand-written expositions (tests/fixtures/vllm/*.prom).

Each fixture has explicit assertions below and a golden snapshot beside it (``<name>.snapshot.json``),
compared field by field. After an intended change, regenerate the goldens with
``ADVISOR_UPDATE_GOLDEN=1 pytest tests/engines/test_vllm_golden.py`` and review the diff.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from advisor.domain import EngineSnapshot, Histogram, RankValues, Sample
from advisor.engines import ENGINES, get_adapter
from advisor.engines.vllm import WANTED_SAMPLE_NAMES, VLLMAdapter
from advisor.sources.exposition import parse_exposition

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm"
ADAPTER = VLLMAdapter()

# Primary (newest) family name the adapter lists in `missing` for each unknown snapshot field.
FAMILY = {
    "kv_cache_usage_ratio": "vllm:kv_cache_usage_perc",
    "kv_cache_capacity_tokens": "vllm:cache_config_info",
    "requests_running": "vllm:num_requests_running",
    "requests_waiting": "vllm:num_requests_waiting",
    "preemptions_total": "vllm:num_preemptions_total",
    "prompt_tokens_total": "vllm:prompt_tokens_total",
    "generation_tokens_total": "vllm:generation_tokens_total",
    "requests_finished_total": "vllm:request_success_total",
    "ttft": "vllm:time_to_first_token_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
    "queue_time": "vllm:request_queue_time_seconds",
    "process_start_time_seconds": "process_start_time_seconds",
}


def load(name: str, model: str | None = None) -> EngineSnapshot:
    text = (FIXTURES / f"{name}.prom").read_text()
    return ADAPTER.snapshot(parse_exposition(text, keep=ADAPTER.wants), model=model)


def assert_unknown_exactly(snap: EngineSnapshot, *fields: str) -> None:
    """The named fields are None and listed in missing; every other field is known and not listed."""
    for field, family in FAMILY.items():
        value = getattr(snap, field)
        if field in fields:
            assert value is None, field
            assert family in snap.missing, field
        else:
            assert value is not None, field
            assert family not in snap.missing, field


def jsonable(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        return value
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


GOLDEN_NAMES = sorted(p.stem for p in FIXTURES.glob("*.prom"))


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_snapshot_matches_the_golden_file(name: str) -> None:
    got = jsonable(dataclasses.asdict(load(name)))
    golden = FIXTURES / f"{name}.snapshot.json"
    if os.environ.get("ADVISOR_UPDATE_GOLDEN") == "1":
        golden.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
    want = json.loads(golden.read_text())
    for key in sorted(set(want) | set(got)):
        assert got.get(key) == want.get(key), f"{name}: field {key}"


def test_renamed_metrics_old_names_are_read_and_tpot_is_flagged_as_itl() -> None:
    snap = load("renamed-0.8-gpu-cache-usage")
    assert snap.model == "org/old-model"
    assert snap.kv_cache_usage_ratio == 0.42  # from vllm:gpu_cache_usage_perc
    assert snap.kv_cache_capacity_tokens == 1000 * 16  # cache_config_info without engine label
    assert (snap.requests_running, snap.requests_waiting) == (5, 2)
    assert (snap.preemptions_total, snap.prompt_tokens_total, snap.generation_tokens_total) == (
        7,
        12345,
        6789,
    )
    assert snap.requests_finished_total == 12
    assert snap.tpot_source == "vllm:time_per_output_token_seconds"
    assert snap.tpot_is_itl is True
    assert snap.tpot == Histogram(
        buckets=((0.01, 100), (0.05, 6000), (0.1, 6777), (math.inf, 6777)), count=6777, sum=203.31
    )
    assert snap.ttft is not None and snap.ttft.bounds() == (0.1, 1.0, 10.0, math.inf)
    assert_unknown_exactly(snap, "queue_time", "process_start_time_seconds")
    assert snap.ranks == ()


def test_two_dp_ranks_sum_counters_weight_usage_by_capacity_and_merge_histograms() -> None:
    snap = load("dp-two-ranks")
    assert snap.kv_cache_capacity_tokens == 3000 * 16 + 16000  # rank 1: kv_cache_size_tokens wins
    assert snap.kv_cache_usage_ratio == pytest.approx((0.5 * 48000 + 0.1 * 16000) / 64000)  # 0.4
    assert (snap.requests_running, snap.requests_waiting) == (14, 1)
    assert (snap.preemptions_total, snap.prompt_tokens_total, snap.generation_tokens_total) == (5, 1500, 300)
    assert snap.requests_finished_total == 13
    assert snap.ttft == Histogram(buckets=((0.1, 3), (1.0, 8), (math.inf, 9)), count=9, sum=3.5)
    assert snap.tpot_source == "vllm:request_time_per_output_token_seconds" and not snap.tpot_is_itl
    assert snap.tpot == Histogram(buckets=((0.05, 11), (math.inf, 13)), count=13, sum=0.5)
    assert snap.ranks == (
        RankValues("0", 0.5, 48000, 10, 1, 3, 1000, 200),
        RankValues("1", 0.1, 16000, 4, 0, 2, 500, 100),
    )
    assert snap.engine_config["engine"] == "0" and snap.engine_config["num_gpu_blocks"] == "3000"
    assert snap.process_start_time_seconds == 1.7e9
    assert_unknown_exactly(snap, "e2e", "queue_time")


def test_usage_is_a_plain_mean_when_a_rank_capacity_is_unknown() -> None:
    text = (FIXTURES / "dp-two-ranks.prom").read_text().replace('num_gpu_blocks="3000"', 'num_gpu_blocks="None"')
    snap = ADAPTER.snapshot(parse_exposition(text, keep=ADAPTER.wants))
    assert snap.kv_cache_capacity_tokens is None
    assert snap.kv_cache_usage_ratio == pytest.approx((0.5 + 0.1) / 2)


def test_a_rank_missing_from_a_family_makes_the_total_unknown_not_low() -> None:
    text = "\n".join(
        line
        for line in (FIXTURES / "dp-two-ranks.prom").read_text().splitlines()
        if not line.startswith('vllm:num_preemptions_total{engine="1"')
    )
    snap = ADAPTER.snapshot(parse_exposition(text, keep=ADAPTER.wants))
    assert snap.preemptions_total is None
    assert "vllm:num_preemptions_total" in snap.missing
    assert snap.ranks[0].preemptions_total == 3 and snap.ranks[1].preemptions_total is None


def test_missing_families_are_none_and_listed_never_zero() -> None:
    snap = load("missing-families")
    assert (snap.requests_running, snap.requests_waiting) == (0, 0)
    assert_unknown_exactly(snap, *(f for f in FAMILY if f not in ("requests_running", "requests_waiting")))
    assert snap.engine_config == {}
    assert snap.ttft_source is None and snap.tpot_source is None and snap.tpot_is_itl is False


def test_num_gpu_blocks_none_is_unknown_capacity_but_config_is_kept() -> None:
    snap = load("cache-config-none")
    assert snap.kv_cache_capacity_tokens is None
    assert "vllm:cache_config_info" in snap.missing
    assert snap.engine_config["num_gpu_blocks"] == "None"
    assert snap.kv_cache_usage_ratio == 0.0


def test_nan_gauges_are_unknown_and_listed() -> None:
    snap = load("nan-gauge")
    assert snap.kv_cache_usage_ratio is None and "vllm:kv_cache_usage_perc" in snap.missing
    assert snap.requests_running is None and "vllm:num_requests_running" in snap.missing
    assert snap.requests_waiting == 1
    assert snap.kv_cache_capacity_tokens == 32000


def test_multiprocess_pid_gauges_take_the_max_per_rank_not_the_sum() -> None:
    snap = load("multiprocess-pid")
    assert snap.kv_cache_usage_ratio == 0.3
    assert snap.requests_running == 7
    assert snap.requests_waiting == 2
    assert snap.preemptions_total == 1
    assert snap.ranks == ()


def test_the_first_model_is_read_and_the_others_are_listed() -> None:
    snap = load("two-models")
    assert snap.model == "org/model-a"
    assert (snap.requests_running, snap.requests_waiting) == (1, 3)
    assert 'model_name="org/model-b" (ignored)' in snap.missing
    snap_b = load("two-models", model="org/model-b")
    assert snap_b.model == "org/model-b"
    assert (snap_b.requests_running, snap_b.requests_waiting) == (2, 4)
    assert 'model_name="org/model-a" (ignored)' in snap_b.missing
    assert snap_b.kv_cache_capacity_tokens == 1600  # cache_config_info has no model_name: it applies


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1.5", None), ("-0.2", None), ("1.0000001", 1.0), ("+Inf", None)],
)
def test_usage_outside_zero_to_one_is_unknown(value: str, expected: float | None) -> None:
    text = f'vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} {value}\n'
    assert ADAPTER.snapshot(parse_exposition(text)).kv_cache_usage_ratio == expected


def test_a_histogram_without_inf_bucket_or_sum_is_unknown() -> None:
    base = 'vllm:time_to_first_token_seconds_{}{{engine="0",{}model_name="m"}} {}\n'
    no_inf = base.format("bucket", 'le="1.0",', 1) + base.format("count", "", 1) + base.format("sum", "", 0.5)
    no_sum = base.format("bucket", 'le="+Inf",', 1) + base.format("count", "", 1)
    for text in (no_inf, no_sum):
        snap = ADAPTER.snapshot(parse_exposition(text))
        assert snap.ttft is None and "vllm:time_to_first_token_seconds" in snap.missing


def test_ranks_with_different_bucket_bounds_do_not_merge() -> None:
    rows = [
        ("0", "1.0", 1),
        ("0", "+Inf", 1),
        ("1", "2.0", 1),
        ("1", "+Inf", 1),
    ]
    text = "".join(
        f'vllm:time_to_first_token_seconds_bucket{{engine="{r}",le="{le}",model_name="m"}} {v}\n' for r, le, v in rows
    ) + "".join(
        f'vllm:time_to_first_token_seconds_{k}{{engine="{r}",model_name="m"}} 1\n'
        for r in "01"
        for k in ("count", "sum")
    )
    assert ADAPTER.snapshot(parse_exposition(text)).ttft is None


def test_wants_covers_histogram_parts_and_skips_created() -> None:
    assert ADAPTER.wants("vllm:time_to_first_token_seconds_bucket")
    assert ADAPTER.wants("vllm:time_to_first_token_seconds_sum")
    assert ADAPTER.wants("vllm:cache_config_info")
    assert ADAPTER.wants("process_start_time_seconds")
    assert not ADAPTER.wants("vllm:num_preemptions_created")
    assert not ADAPTER.wants("python_gc_objects_collected_total")
    assert all(n.startswith(("vllm:", "process_")) for n in WANTED_SAMPLE_NAMES)


def test_an_empty_exposition_is_all_unknown() -> None:
    snap = ADAPTER.snapshot({})
    assert snap.model is None
    assert_unknown_exactly(snap, *FAMILY)


def test_samples_without_model_label_are_read_as_the_model() -> None:
    snap = ADAPTER.snapshot({"vllm:num_requests_running": [Sample("vllm:num_requests_running", {}, 4.0)]})
    assert snap.model is None and snap.requests_running == 4


def test_get_adapter_knows_vllm_and_names_the_known_engines_otherwise() -> None:
    assert ENGINES[0] == "vllm"
    assert get_adapter("vllm").engine == "vllm"
    with pytest.raises(ValueError, match="known engines: vllm, "):
        get_adapter("mlc")


def test_models_lists_every_model_name_in_exposition_order() -> None:
    text = (FIXTURES / "two-models.prom").read_text()
    assert ADAPTER.models(parse_exposition(text, keep=ADAPTER.wants)) == ["org/model-a", "org/model-b"]
