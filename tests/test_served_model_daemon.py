"""A target serving several models, and a deployment that does not say which it is (``once --json``).

Found by a new-user walkthrough: a page re-exporting two models (Triton's vLLM backend, a multi-model router)
with no ``served_model`` in the config was read as its FIRST model, even when the deployment's ``model`` named
the second — every number, and the capacity-model drift warning, came from the wrong model. The daemon now
reads the model the deployment names (tests/test_observe.py), and otherwise makes the deployment
``unavailable`` with ``served_model_not_found`` naming the models seen; the other deployments go on.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.inprocess import run_cli
from tests.read_pages import TRITON_TWO_MODELS
from tests.states import TwoScrapeServer, VLLMEngine


def _once(tmp_path: Path, deployments: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    cfg = tmp_path / "advisor.yaml"
    cfg.write_text(yaml.safe_dump({"deployments": deployments}, sort_keys=False), encoding="utf-8")
    proc = run_cli("once", "--config", str(cfg), "--interval", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    return {d["name"]: d for d in json.loads(proc.stdout)["deployments"]}


def _dep(name: str, target: str, model: str) -> dict[str, object]:
    return {
        "name": name,
        "engine": "vllm",
        "targets": [target],
        "model": model,
        "gpu": "H100-SXM",
        "max_model_len": 4096,
        "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.1},
    }


def test_a_deployment_of_neither_model_is_unavailable_and_the_others_go_on(tmp_path: Path) -> None:
    two = TwoScrapeServer(TRITON_TWO_MODELS, TRITON_TWO_MODELS)
    eng = VLLMEngine(
        model_name="meta-llama/Llama-3.1-8B-Instruct",
        num_gpu_blocks=20000,
        max_model_len=4096,
        gpu_memory_utilization=0.9,
    )
    good = TwoScrapeServer(eng.render(), eng.render())
    try:
        out = _once(
            tmp_path,
            [
                _dep("two-models", two.url, "Qwen/Qwen2.5-7B-Instruct"),
                _dep("plain", good.url, "meta-llama/Llama-3.1-8B-Instruct"),
            ],
        )
    finally:
        two.stop()
        good.stop()
    bad = out["two-models"]
    assert bad["state"] == "unavailable", bad["state"]
    reason = json.dumps(bad)
    assert "served_model_not_found" in reason and "mistral7b" in reason and "llama2" in reason
    assert bad["snapshot"].get("requests_running") is None  # nothing of either model read
    assert out["plain"]["state"] == "fresh"
