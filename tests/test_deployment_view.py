"""The typed deployment view (issue 13, Structure): one frozen :class:`DeploymentView` per deployment and cycle,
built in ``evaluate_deployment``; the exporter reads its typed fields, never the untyped snapshot dict, and the
``snapshot`` JSON of ``once --json`` and the API is derived from it with the same keys as before."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from advisor.config import parse_config
from advisor.deployment_view import DeploymentView, EngineView
from advisor.exporter import make_registry
from advisor.results import DeploymentResult
from advisor.service import Service
from tests.conftest import REPO_ROOT
from tests.states import TwoScrapeServer
from tests.test_exporter_pools import _sglang

SNAPSHOT_KEYS = [
    "state_reason", "model", "replicas", "replicas_up", "requests_running", "requests_waiting", "preemptions_total",
    "prompt_tokens_total", "generation_tokens_total", "kv_cache_usage_ratio", "kv_cache_capacity_tokens",
    "ttft_seconds", "tpot_seconds", "window_seconds", "generation_tokens_per_second", "prompt_tokens_per_second",
    "preemptions_per_second", "counter_resets", "ranks", "kv_cache_capacity_tokens_largest_rank", "pools",
    "requests_waiting_by_reason", "disaggregation_queues", "kv_cache_hybrid", "ranks_excluded", "missing",
    "kv_cache_capacity_tokens_predicted", "capacity_model_error_ratio", "goodput_ratio", "goodput_ratio_bounds",
    "goodput_tokens_per_second", "ttft_within_target_ratio", "tpot_within_target_ratio", "max_model_len",
    "max_model_len_ceiling_requests", "pool_usage",
]  # fmt: skip
"""The ``snapshot`` object's keys, in order, as 8db4a05 wrote them (an SGLang deployment, no rank, exact bounds)."""


@pytest.fixture(scope="module")
def cycle() -> Iterator[tuple[DeploymentResult, str]]:
    """One SGLang deployment after two cycles against a stand-in on loopback: its result and ``/metrics``."""
    server = TwoScrapeServer(_sglang(5, 0.96, 2), _sglang(9, 0.98, 3))
    cfg = parse_config(
        {
            "deployments": [
                {
                    "name": "d",
                    "engine": "sglang",
                    "targets": [server.url],
                    "model": "ai21labs/Jamba-v0.1",
                    "gpu": "H100-SXM",
                    "tensor_parallel_size": 2,
                    "max_model_len": 65536,
                    "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
                }
            ]
        }
    )
    registry, collector, metrics = make_registry()
    svc = Service(cfg, collector, metrics)
    try:
        svc.run_once()
        res = svc.run_once()
    finally:
        svc.close()
        server.stop()
    (d,) = res.deployments
    yield d, generate_latest(registry).decode()


def _gauges(text: str) -> dict[str, float]:
    return {
        s.name: s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.labels == {"deployment": "d"}
    }


def test_the_view_is_typed_and_frozen(cycle: tuple[DeploymentResult, str]) -> None:
    d, _ = cycle
    view = d.snapshot
    assert isinstance(view, DeploymentView) and isinstance(view.reported, EngineView)
    # what the stand-in's second scrape says (sglang:num_running_reqs 8, num_queue_reqs 9, full_token_usage 0.31)
    assert (view.reported.requests_running, view.reported.requests_waiting) == (8.0, 9.0)
    assert view.reported.kv_cache_usage_ratio == pytest.approx(0.31)
    assert view.reported.kv_cache_capacity_tokens == 183240
    assert view.max_model_len == 65536
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.max_model_len = 1  # type: ignore[misc]


def test_the_snapshot_json_is_derived_from_the_view_with_the_same_keys(cycle: tuple[DeploymentResult, str]) -> None:
    d, _ = cycle
    snap = d.as_dict()["snapshot"]
    assert list(snap) == SNAPSHOT_KEYS
    view = d.snapshot
    assert snap["requests_waiting"] == view.reported.requests_waiting == 9.0
    assert snap["pool_usage"] == dict(view.pool_usage)
    assert snap["pools"] == [p.as_dict() for p in view.reported.pools]
    assert snap["goodput_ratio_bounds"] == list(view.goodput_ratio_bounds)
    assert (
        snap["kv_cache_capacity_tokens_predicted"]
        == view.kv_cache_capacity_tokens_predicted
        == d.capacity.kv_cache_tokens
    )
    assert dict(view) == snap  # the view still reads as the JSON mapping, for callers that read it by key


def test_the_exporter_gauges_are_the_typed_fields(cycle: tuple[DeploymentResult, str]) -> None:
    d, text = cycle
    gauges, view = _gauges(text), d.snapshot
    assert gauges["advisor_requests_running"] == view.reported.requests_running
    assert gauges["advisor_requests_waiting"] == view.reported.requests_waiting
    assert gauges["advisor_kv_cache_usage_ratio"] == view.reported.kv_cache_usage_ratio
    assert gauges["advisor_kv_cache_capacity_tokens"] == view.reported.kv_cache_capacity_tokens
    assert view.capacity_model_error_ratio is not None
    assert gauges["advisor_capacity_model_error_ratio"] == pytest.approx(view.capacity_model_error_ratio)


def test_the_exporter_reads_no_untyped_snapshot_key() -> None:
    """No ``x.get("key")`` or ``x["key"]`` on the deployment's snapshot in the exporter: every gauge comes from
    a typed field, so a renamed key is a type error, not a silently missing series."""
    tree = ast.parse((Path(REPO_ROOT) / "advisor" / "exporter.py").read_text(encoding="utf-8"))
    keyed = [
        ast.unparse(node)
        for node in ast.walk(tree)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        )
        or (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        )
    ]
    assert keyed == []
