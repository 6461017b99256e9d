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
