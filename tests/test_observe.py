"""``advisor.observe.observe``: one page → one snapshot, parsed once, detected once, adapted once (issue 12).

Pages are written here from the engines' own metric definitions (names and labels checked in their source):
Triton ``vllm_backend`` ``src/utils/metrics.py`` (labels ``model``, ``version``), vLLM
``vllm/v1/metrics/ray_wrappers.py`` as Ray exports it (``ray_vllm_*``, ``ReplicaId``), Dynamo
``lib/runtime/src/metrics/prometheus_names.rs`` (``dynamo_component_total_blocks``,
``dynamo_component_gpu_cache_usage_percent``), DCGM exporter ``etc/default-counters.csv``.
"""

from __future__ import annotations

import pytest

import advisor.observe as observe_module
from advisor.domain import Sample
from advisor.engines import get_adapter
from advisor.observe import observe
from advisor.sources.exposition import parse_exposition
from tests.read_pages import DCGM, DYNAMO_WORKER, RAY_TWO_REPLICAS, TRITON_TWO_MODELS


def test_triton_served_model_reads_only_that_model() -> None:
    seen = observe(TRITON_TWO_MODELS, "auto", "mistral7b")
    assert seen.engine == "vllm" and seen.models == ("mistral7b", "llama2")
    s = seen.snapshot
    assert s is not None and s.model == "mistral7b"
    # nothing of llama2 leaks in: no max of gauges, no sum of counters
    assert (s.requests_running, s.requests_waiting, s.preemptions_total) == (2, 0, 0)
    assert s.kv_cache_usage_ratio == pytest.approx(0.05)
    assert s.generation_tokens_total == 1000
    assert 'model="llama2" (ignored)' in s.missing


def test_triton_other_model_picked_by_name() -> None:
    s = observe(TRITON_TWO_MODELS, "vllm", "llama2").snapshot
    assert s is not None and (s.model, s.requests_running, s.kv_cache_usage_ratio) == ("llama2", 48, 0.99)
    assert s.replicas == ()  # one version of one model: one engine


def test_served_model_not_found_names_the_models_seen() -> None:
    seen = observe(TRITON_TWO_MODELS, "auto", "mixtral")
    assert seen.snapshot is None and seen.error_reason == "served_model_not_found"
    assert seen.error_message is not None and "mistral7b" in seen.error_message and "llama2" in seen.error_message


def test_served_model_matches_ignoring_case_when_unique() -> None:
    s = observe(TRITON_TWO_MODELS, "auto", "Mistral7B").snapshot
    assert s is not None and s.model == "mistral7b" and s.requests_running == 2


def test_two_models_without_served_model_name_the_flag() -> None:
    seen = observe(TRITON_TWO_MODELS)
    hint = seen.hint("http://h/metrics")
    assert hint is not None and "--served-model" in hint and "mistral7b" in hint and "llama2" in hint


def test_ray_serve_replicas_are_ranks_not_duplicates() -> None:
    seen = observe(RAY_TWO_REPLICAS)
    assert seen.engine == "vllm"
    s = seen.snapshot
    assert s is not None and s.model == "qwen-0.5b"
    # summed over replicas (not the max of the gauges), usage the mean over replicas (capacities unknown)
    assert (s.requests_running, s.requests_waiting, s.prompt_tokens_total) == (33, 12, 5700)
    assert s.kv_cache_usage_ratio == pytest.approx(0.5)
    assert s.replicas == ("ReplicaId=3r4e76ag", "ReplicaId=9xk2p1qd")
    by_rank = {r.rank: r for r in s.ranks}
    assert set(by_rank) == {"ReplicaId=3r4e76ag", "ReplicaId=9xk2p1qd"}
    assert by_rank["ReplicaId=3r4e76ag"].kv_cache_usage_ratio == pytest.approx(0.9)
    assert by_rank["ReplicaId=9xk2p1qd"].requests_running == 3


def test_ray_unsanitized_names_read_as_vllm() -> None:
    page = RAY_TWO_REPLICAS.replace("ray_vllm_", "ray_vllm:")
    s = observe(page, "vllm").snapshot
    assert s is not None and s.requests_running == 33


def test_dcgm_page_is_unrecognized_naming_prefixes() -> None:
    seen = observe(DCGM)
    assert seen.snapshot is None and seen.error_reason == "unrecognized"
    assert seen.error_message is not None
    assert "GPU telemetry" in seen.error_message and "DCGM_FI_" in seen.error_message and "go_" in seen.error_message


def test_pinned_engine_on_another_engines_page_is_unrecognized() -> None:
    seen = observe("# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 3\nprocess_open_fds 9\n", "vllm")
    assert seen.error_reason == "unrecognized"
    assert seen.error_message is not None and "sglang" in seen.error_message and "process_" in seen.error_message


VLLM_PAGE_WITH_PROCESS_COLLECTOR = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 3
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m"} 0.5
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.79e9
"""


@pytest.mark.parametrize("engine", ["sglang", "tgi", "trtllm", "triton-trtllm", "llamacpp", "dynamo"])
def test_a_pinned_engine_on_a_vllm_page_with_the_process_collector_is_unrecognized(engine: str) -> None:
    """Breaker, 2026-12-03: ``engine: sglang`` on a vLLM page read fresh, every reading unknown, because SGLang's
    adapter reads ``process_start_time_seconds`` too; a name every exporter has is no proof of the engine."""
    seen = observe(VLLM_PAGE_WITH_PROCESS_COLLECTOR, engine)
    assert seen.snapshot is None and seen.error_reason == "unrecognized"
    assert seen.error_message is not None
    assert f"no {engine} metrics (the page looks like vllm; set engine: vllm or auto)" in seen.error_message
    assert observe(VLLM_PAGE_WITH_PROCESS_COLLECTOR, "vllm").snapshot is not None


def test_not_prometheus_text_is_still_a_parse_error() -> None:
    assert observe("<html><body>502 Bad Gateway</body></html>").error_reason == "parse_error"


def test_empty_page_is_unrecognized() -> None:
    seen = observe("", "vllm")
    assert seen.error_reason == "unrecognized" and seen.error_message == "no metrics at all (empty page)"


def test_dynamo_worker_current_kv_gauges_are_read() -> None:
    seen = observe(DYNAMO_WORKER)
    assert seen.engine == "dynamo"
    s = seen.snapshot
    assert s is not None and s.kv_cache_usage_ratio == pytest.approx(0.62)
    assert s.engine_config.get("dynamo_total_kv_blocks") == "12894"


def test_dynamo_worker_gauges_fill_an_engine_that_lacks_them() -> None:
    """A Dynamo vLLM worker: vLLM's families pass through, here without a usage gauge of their own."""
    page = (
        '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-0.6B"} 4\n'
        "# TYPE vllm:cache_config_info gauge\n"
        'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="None"} 1.0\n' + DYNAMO_WORKER
    )
    s = observe(page, "vllm").snapshot
    assert s is not None and s.requests_running == 4
    assert s.kv_cache_usage_ratio == pytest.approx(0.62)
    assert s.kv_cache_capacity_tokens == 12894 * 16
    assert "vllm:kv_cache_usage_perc" not in s.missing


def test_samples_are_observed_like_text() -> None:
    expo = {"vllm:num_requests_running": [Sample("vllm:num_requests_running", {"model_name": "m"}, 7.0)]}
    s = observe(expo, get_adapter("vllm"), "m").snapshot
    assert s is not None and s.requests_running == 7


_VLLM_BESIDE_OTHERS = (
    "# TYPE vllm:num_requests_running gauge\n"
    'vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-0.6B"} 4\n'
    'vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-0.6B"} 5\n'
    "# TYPE vllm:cache_config_info gauge\n"
    'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="None"} 1.0\n'
    + DYNAMO_WORKER
    + 'dynamo_component_total_blocks{dynamo_component="backend",dynamo_namespace="dynamo",model="Qwen/Qwen3-0.6B"} 7\n'
    + DCGM
    + "go_goroutines 13\n"
)
"""vLLM beside a Dynamo worker's KV gauges and DCGM's, each with a repeated series."""


@pytest.mark.parametrize("page", [_VLLM_BESIDE_OTHERS, RAY_TWO_REPLICAS, TRITON_TWO_MODELS, DYNAMO_WORKER])
@pytest.mark.parametrize("engine", ["vllm", "dynamo"])
def test_a_pinned_engine_reads_the_page_as_it_reads_all_its_samples(page: str, engine: str) -> None:
    """Parsed with the engine's filter (the text) or not at all (every sample, filtered in ``observe``): one reading,
    with the Dynamo worker gauges and the repeats of the families read, and none of the others'."""
    from_text = observe(page, engine, strict=True)
    from_samples = observe(parse_exposition(page), get_adapter(engine), strict=True)
    assert from_text.error_reason == from_samples.error_reason
    assert (from_text.models, from_text.duplicate_series) == (from_samples.models, from_samples.duplicate_series)
    assert from_text.snapshot == from_samples.snapshot


def test_auto_parses_a_page_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = observe_module.parse_exposition

    def counting(text: str, keep: object = None) -> object:
        calls.append(text)
        return real(text, keep)  # type: ignore[arg-type]

    monkeypatch.setattr(observe_module, "parse_exposition", counting)
    seen = observe(RAY_TWO_REPLICAS)
    assert seen.ok and len(calls) == 1


def test_readme_lists_every_scrape_error_reason() -> None:
    """``advisor_scrape_errors_total{reason}`` is exported for every reason; the README names each one."""
    from advisor.conventions import SCRAPE_ERROR_REASONS
    from tests.conftest import REPO_ROOT

    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert "unrecognized" in SCRAPE_ERROR_REASONS and "served_model_not_found" in SCRAPE_ERROR_REASONS
    assert [r for r in SCRAPE_ERROR_REASONS if f"`{r}`" not in readme] == []


def test_daemon_reads_the_model_the_deployment_names_when_several_are_served() -> None:
    # no served_model, but the deployment's model is one of the two: that one, never the first on the page
    s = observe(TRITON_TWO_MODELS, "auto", configured_model="LLAMA2", strict=True).snapshot
    assert s is not None and (s.model, s.requests_running) == ("llama2", 48)


def test_daemon_never_guesses_between_several_models() -> None:
    # the first model on the page is mistral7b; a deployment of another model must not silently read it
    seen = observe(TRITON_TWO_MODELS, "auto", configured_model="Qwen/Qwen2.5-7B-Instruct", strict=True)
    assert seen.snapshot is None and seen.error_reason == "served_model_not_found"
    msg = seen.error_message or ""
    assert "mistral7b" in msg and "llama2" in msg and "served_model" in msg and "Qwen/Qwen2.5-7B-Instruct" in msg
    # inspect (not strict) still reads the first and says how to pick
    loose = observe(TRITON_TWO_MODELS, "auto", configured_model="Qwen/Qwen2.5-7B-Instruct")
    assert loose.snapshot is not None and loose.snapshot.model == "mistral7b" and loose.hint() is not None
