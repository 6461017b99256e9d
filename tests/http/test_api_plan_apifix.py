"""Issue 19 follow-ups on ``POST /api/v1/plan`` through the real server on loopback: a deployment vLLM would not
start answers as ``plan --json`` does (200, ``feasible: false``, ``reason``, ``fixes``) and a turn that fixes it is
answered; loose JSON (booleans as numbers, numbers as strings, repeated keys) is refused naming the field."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from tests.http.conftest import Daemon

pytestmark = pytest.mark.integration

LLAMA = {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100-SXM", "max_model_len": 8192}
BIG = {"model": "meta-llama/Llama-3.1-70B-Instruct", "gpu": "L4", "max_model_len": 8192}
"""70.6 B parameters × 2 bytes (bf16) = 131.4 GiB of weights; an L4 has 24 GB = 22.07 GiB (NVIDIA's L4 datasheet),
0.9 of it 19.86 GiB: the weights do not fit one GPU (nor 2 or 4: 65.7, 32.9 GiB); 8 hold 16.4 GiB each."""


def _post(api: Daemon, body: dict[str, Any]) -> requests.Response:
    return requests.post(api.url + "/api/v1/plan", json=body, timeout=60)


def _raw(api: Daemon, text: str) -> requests.Response:
    return requests.post(
        api.url + "/api/v1/plan", data=text.encode(), headers={"Content-Type": "application/json"}, timeout=60
    )


def test_weights_that_do_not_fit_answer_as_plan_json_does_and_a_fixing_turn_is_answered(api: Daemon) -> None:
    """Seen: 400 "the capacity pass cannot run this deployment" while ``plan --json`` said feasible false with
    fixes. Now 200: feasible false, the reason, the fixes (``--tp 8`` among them), and the turn to TP 8 plans."""
    r = _post(api, {"deployment": BIG, "turn": {"dial": "tensor_parallel_size", "value": 8}})
    assert r.status_code == 200, r.text
    out = r.json()
    before = out["before"]
    assert before["feasible"] is False and before["reason"]
    assert any(f["change"] == "--tp 8" for f in before["fixes"]), before["fixes"]
    # the reason's remedy is the fixes found, nothing else: fp8 (65.7 GiB) and AWQ (~35 GiB) do not fit one L4
    assert [f["change"] for f in before["fixes"]] == ["--tp 8"] and before["reason"].endswith("; `--tp 8` fits")
    assert out["after_error"] is None, out["after_error"]
    assert out["after"]["feasible"] is True and out["after"]["kv_cache_tokens"] > 8192


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"cpu_offload_gb": True}, "deployment.cpu_offload_gb"),
        ({"max_model_len": "8192"}, "deployment.max_model_len"),
        ({"gpu_memory_utilization": "0.9"}, "deployment.gpu_memory_utilization"),
        ({"tensor_parallel_size": True}, "deployment.tensor_parallel_size"),
        ({"kv_cache_dtype": "nope"}, "deployment.kv_cache_dtype"),
        (
            {"speculative_config": {"method": "ngram", "num_speculative_tokens": 3, "nope": 1}},
            "deployment.speculative_config",
        ),
    ],
)
def test_loose_values_are_refused_naming_the_field(api: Daemon, change: dict[str, Any], path: str) -> None:
    """A boolean is not a number, a string is not an integer (as the config refuses them); an unknown KV cache
    dtype or speculative_config key names its field, not "deployment"."""
    r = _post(api, {"deployment": {**LLAMA, **change}})
    assert r.status_code == 400, r.text
    assert r.json()["details"][0]["path"] == path, r.json()


def test_a_repeated_json_key_is_refused_naming_it(api: Daemon) -> None:
    """``json.loads`` keeps the last of a repeated key silently; YAML (the config) refuses it, so does the API."""
    r = _raw(
        api,
        '{"deployment": {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100-SXM", "max_model_len": 8192,'
        ' "max_model_len": 4096}}',
    )
    assert r.status_code == 400, r.text
    assert "max_model_len" in r.json()["error"] and "repeated" in r.json()["error"]
