"""Issue 17, adversarial ``POST /api/v1/plan`` bodies through the real server on loopback: what a config file and
``plan`` refuse, the API refuses too (400 naming the field), never a plan of what vLLM would not start."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from tests.http.conftest import Daemon

pytestmark = pytest.mark.integration

LLAMA = {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100-SXM", "max_model_len": 8192}
CONTEXT = 131_072  # Llama-3.1's max_position_embeddings (its config.json)


def _post(api: Daemon, body: dict[str, Any]) -> requests.Response:
    return requests.post(api.url + "/api/v1/plan", json=body, timeout=30)


def test_a_max_model_len_beyond_the_models_context_is_refused_as_the_config_refuses_it(api: Daemon) -> None:
    """vLLM refuses ``--max-model-len`` above ``max_position_embeddings`` (``_get_and_verify_max_len``) unless
    ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` is set; a config file and ``plan`` refused 1,000,000 for Llama-3.1-8B, the
    API answered 200 with a plan (max concurrency 0.42)."""
    r = _post(api, {"deployment": {**LLAMA, "max_model_len": 1_000_000}})
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["details"][0]["path"] == "deployment.max_model_len"
    assert f"{CONTEXT}" in body["error"]
    assert _post(api, {"deployment": {**LLAMA, "max_model_len": CONTEXT}}).status_code == 200  # exactly fits
    # a turn past the context: the deployment as it is still plans, the turn says why it cannot run
    turned = _post(api, {"deployment": LLAMA, "turn": {"dial": "max_model_len", "value": CONTEXT + 1}})
    assert turned.status_code == 200, turned.text
    out = turned.json()
    assert out["after"] is None and f"{CONTEXT}" in out["after_error"] and out["before"] is not None


@pytest.mark.parametrize(
    ("dial", "value", "named"),
    [
        ("kv_cache_dtype", "fp9", "unknown kv_cache_dtype 'fp9'"),
        ("weight_quantization", "awq9", "unknown quantization"),
    ],
)
def test_a_turn_to_a_name_no_engine_has_is_bad_input_not_a_deployment_that_cannot_run(
    api: Daemon, dial: str, value: str, named: str
) -> None:
    """Walkthrough, 2026-12-07: ``turn: {kv_cache_dtype: fp9}`` answered 200 with ``after: null`` and
    ``after_error: "the deployment cannot run: unknown kv_cache_dtype 'fp9'"`` — a typo read as an infeasible
    configuration, where the same name on the deployment answers 400 and an unknown dial 400. A real turn that does
    not fit stays 200 with ``after_error`` (above)."""
    r = _post(api, {"deployment": LLAMA, "turn": {"dial": dial, "value": value}})
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["details"] == [{"path": "turn.value", "message": body["details"][0]["message"]}]
    assert named in body["details"][0]["message"] and "known:" in body["details"][0]["message"]
    ok = _post(api, {"deployment": LLAMA, "turn": {"dial": "kv_cache_dtype", "value": "fp8"}})
    assert ok.status_code == 200 and ok.json()["after_error"] is None


def test_a_vllm_budget_on_an_engine_that_does_not_read_it_is_refused_as_the_config_refuses_it(api: Daemon) -> None:
    """Breaker 26: ``gpu_memory_utilization: 0.5`` on SGLang answered 200 with the default fraction's pool (414,558
    tokens either way), while a config file refuses the key there and a turn of the same dial halves the pool."""
    sglang = {**LLAMA, "engine": "sglang"}
    r = _post(api, {"deployment": {**sglang, "gpu_memory_utilization": 0.5}})
    assert r.status_code == 400, r.text
    assert r.json()["details"][0]["path"] == "deployment.gpu_memory_utilization"
    assert "mem_fraction_static" in r.json()["error"] or "SGLang" in r.json()["error"]
    assert _post(api, {"deployment": {**sglang, "mem_fraction_static": 0.5}}).status_code == 200
    assert _post(api, {"deployment": {**LLAMA, "gpu_memory_utilization": 0.5}}).status_code == 200  # vLLM reads it


def test_a_turn_is_the_deployment_with_the_dial_set_through_the_engines_own_mapping(api: Daemon) -> None:
    """Breaker 26: on llama.cpp (no ctx_size/parallel given, so the cells are max_model_len × the slots) a turn of
    max_num_seqs to 4 kept one slot's 8,192 cells and answered "concurrency 1.0", where the deployment with
    max_num_seqs 4 holds 4 × 8,192 = 32,768 cells and 4 full-length requests."""
    lcpp = {**LLAMA, "engine": "llamacpp"}
    turned = _post(api, {"deployment": lcpp, "turn": {"dial": "max_num_seqs", "value": 4}})
    assert turned.status_code == 200, turned.text
    direct = _post(api, {"deployment": {**lcpp, "max_num_seqs": 4}})
    assert direct.status_code == 200, direct.text
    after, stated = turned.json()["after"], direct.json()["before"]
    assert after["kv_cache_tokens"] == stated["kv_cache_tokens"] == 4 * 8192
    assert after["max_concurrency"] == stated["max_concurrency"] == 4.0
