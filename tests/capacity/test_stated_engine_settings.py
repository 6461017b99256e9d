"""The daemon's and the API's capacity pass take the engine settings ``plan`` takes (issue 16): a deployment
stating ``engine_version``, ``enable_chunked_prefill``, ``pipeline_parallel_size``, ``enforce_eager`` or
``vllm_use_v1`` in the config file, or ``cpu_offload_gb`` / ``speculative_config`` in ``POST /api/v1/plan``, is
sized by that version's accounting. Before, the config refused the keys and the API had no way to say them, so a
deployment on vLLM 0.6.3 (V0) was sized by the current V1 rules.

The figures are the engine's own, from a published start-up log (tests/capacity/truth/vllm_v0.yaml,
``llama2-7b-chat-mi300x-tp1-v063dev``: vLLM 0.6.3 on one MI300X of 191.98 GiB, Llama-2-7B, max_model_len 4096,
chunked prefill off: ``# GPU blocks: 20186`` × 16 = 322,976 tokens,
https://github.com/AUGMXNT/llm-tracker.info-vault/blob/b56234c471c29f4e766ebccb0a6fcdfaa2c79b82/MI300X%20Testing.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from advisor.api_models import PlanRequest
from advisor.capacity.deployment import resolve_deployment
from advisor.config import deployment_spec, parse_config
from advisor.server import plan

REPO = Path(__file__).resolve().parents[2]
LLAMA2_7B_CONFIG = REPO / "tests/fixtures/truth_models/meta-llama__Llama-2-7b-chat-hf.json"
ENGINE_TOKENS = 20186 * 16  # "# GPU blocks: 20186", block 16 (the log's concurrency line: 20186 × 16 / 4096 = 78.85)
LOGGED = {
    "gpu": "mi300x",
    "gpu_memory_gib": 191.98,
    "tensor_parallel_size": 1,
    "gpu_memory_utilization": 0.9,
    "max_model_len": 4096,
    "block_size": 16,
}


def _deployment(**extra: Any) -> dict[str, Any]:
    return {
        "name": "llama2",
        "engine": "vllm",
        "targets": ["http://127.0.0.1:9/metrics"],
        "model": str(LLAMA2_7B_CONFIG),
        "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.1},
        **LOGGED,
        **extra,
    }


def _daemon_pass(**extra: Any) -> Any:
    cfg = parse_config({"deployments": [_deployment(**extra)]})
    return resolve_deployment(deployment_spec(cfg.deployments[0])).result


def test_a_configured_engine_version_sizes_the_deployment_by_that_release() -> None:
    stated = _daemon_pass(engine_version="0.6.3.dev114+g4f95ffee", enable_chunked_prefill=False)
    assert stated.accounting.generation == "v0"
    assert stated.accounting.version == "0.6.3.dev114+g4f95ffee"
    assert abs(stated.kv_cache_tokens / ENGINE_TOKENS - 1) <= 0.03
    unstated = _daemon_pass()
    assert unstated.accounting.generation == "v1"  # the current release's rules, said as such


def test_the_config_refuses_a_version_that_names_no_release() -> None:
    for bad, words in (("abc", "not a version like 0.7.3"), ("0.1.dev7548+gbaba038", "names no release")):
        with pytest.raises(Exception) as err:
            parse_config({"deployments": [_deployment(engine_version=bad)]})
        assert "engine_version" in str(err.value) and words in str(err.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [("enforce_eager", True), ("enable_chunked_prefill", False), ("vllm_use_v1", False), ("pipeline_parallel_size", 2)],
)
def test_vllm_only_settings_are_refused_for_another_engine(key: str, value: Any) -> None:
    dep = {**_deployment(**{key: value}), "engine": "sglang"}
    with pytest.raises(Exception) as err:
        parse_config({"deployments": [dep]})
    assert f"{key}: a setting of vllm" in str(err.value)


def _api(**extra: Any) -> dict[str, Any]:
    body = {"model": "meta-llama/Llama-2-7b-hf", **LOGGED, **extra}
    return plan(PlanRequest.model_validate({"deployment": body}))["before"]


def test_the_api_plan_takes_the_engine_version() -> None:
    """Llama-2-7b-hf (the preset) has the chat model's shapes; the API sizes it as 0.6.3 does."""
    out = _api(engine_version="0.6.3", enable_chunked_prefill=False)
    assert out["accounting"]["generation"] == "v0"
    assert abs(out["kv_cache_tokens"] / ENGINE_TOKENS - 1) <= 0.03


def test_the_api_plan_takes_cpu_offload_and_a_draft() -> None:
    """``--cpu-offload-gb 4`` moves whole parameters, layer by layer, while the running total is below 4 GiB
    (vllm/model_executor/models/utils.py ``maybe_offload_to_cpu``): the weights on the GPU fall by what was moved,
    and the pool grows by as much. An EAGLE draft's layers load on the GPU.

    Llama-2-7B fp16 (hidden 4096, intermediate 11008): a layer is qkv 3·4096²·2 = 100,663,296 + o 33,554,432 +
    gate_up 2·11008·4096·2 = 180,355,072 + down 90,177,536 + norms 2·4096·2 = 16,384 = 404,766,720 B; ten layers
    = 4,047,667,200 < 4 GiB (4,294,967,296); the 11th's qkv and o stay below, its gate_up crosses: 4,362,240,000 B.
    """
    base, offloaded = _api(engine_version="0.11.2"), _api(engine_version="0.11.2", cpu_offload_gb=4)
    moved = offloaded["cpu_offload_bytes_per_gpu"]
    assert moved == 10 * 404_766_720 + 100_663_296 + 33_554_432 + 180_355_072 == 4_362_240_000
    assert base["weights_bytes_per_gpu"] - offloaded["weights_bytes_per_gpu"] == moved
    assert offloaded["kv_pool_bytes_per_gpu"] - base["kv_pool_bytes_per_gpu"] == moved
    draft = _api(
        engine_version="0.11.2",
        speculative_config={"method": "eagle", "model": "yuhuili/EAGLE-llama2-chat-7B", "num_speculative_tokens": 3},
    )
    assert draft["draft_weights_bytes_per_gpu"] > 0


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"engine_version": "abc"}, "engine_version"),
        ({"speculative_config": {"method": "nonsense"}}, "speculative_config"),
        ({"engine": "sglang", "cpu_offload_gb": 2.0}, "cpu_offload_gb: a setting of vllm"),
        ({"engine": "sglang", "enforce_eager": True}, "enforce_eager: a setting of vllm"),
    ],
)
def test_the_api_plan_refuses_what_the_engine_would_not_read(extra: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError) as err:
        PlanRequest.model_validate({"deployment": {"model": "meta-llama/Llama-2-7b-hf", **LOGGED, **extra}})
    assert words in str(err.value)
