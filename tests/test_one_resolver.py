"""One deployment, every way the config allows to state its GPU, through every path that sizes it: the daemon
(``service.deployment_context``), the API (``POST /api/v1/plan`` to the real server on loopback), ``plan --json``
and ``simulate --json`` (the CLI's entry point, in-process). All must name the same GPU, the same interconnect and
the same KV pool (issue 13: for a 139.81 GiB part the API found an H200 with NVLink SHARP and the daemon did not).

The deployment is Llama-3.1-70B at TP 4, where NCCL's NVLink SHARP buffers (when the profile allocates them, see the
pure resolver's test below) come out of every GPU's budget.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from advisor.assembly import deployment_context
from advisor.capacity.deployment import DeploymentSpec, resolve_deployment
from advisor.capacity.hardware import GIB
from advisor.capacity.models import get_preset
from advisor.config import load_config
from advisor.standin import StandInEngine, StandInServer
from tests.http.conftest import SATURATED, Daemon, config, start_daemon, stop_daemon
from tests.inprocess import run_cli

pytestmark = pytest.mark.integration

MODEL = "meta-llama/Llama-3.1-70B-Instruct"
TP = 4
MAX_MODEL_LEN = 8192
H200 = "NVIDIA H200 SXM"

FORMS: dict[str, dict[str, Any]] = {
    "by-memory": {"gpu_memory_gib": 139.81},  # CUDA's total for the H200 SXM, as vLLM prints it; no other part
    "by-key": {"gpu": "h200"},
    "by-catalog-name": {"gpu": H200},
    "by-alias": {"gpu": "nvidia-h200"},
    "by-key-and-memory": {"gpu": "h200", "gpu_memory_gib": 139.81},
}
"""Each way a deployment states the GPU (config ``deployments[]`` and the API's ``deployment`` alike)."""


@pytest.fixture(scope="module")
def api() -> Iterator[Daemon]:
    srv = StandInServer(StandInEngine(phases=SATURATED, speed=1.0, num_gpu_blocks=1000))
    srv.start_background()
    d = start_daemon(config(srv.url()))
    try:
        yield d
    finally:
        stop_daemon(d)
        srv.shutdown()
        srv.server_close()


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    deployments = [
        {
            "name": name,
            "engine": "vllm",
            "targets": ["http://127.0.0.1:9/metrics"],
            "model": MODEL,
            "tensor_parallel_size": TP,
            "max_model_len": MAX_MODEL_LEN,
            "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
            **gpu,
        }
        for name, gpu in FORMS.items()
    ]
    path = tmp_path_factory.mktemp("resolver") / "advisor.yaml"
    path.write_text(yaml.safe_dump({"deployments": deployments}), encoding="utf-8")
    return path


def _cli(*args: str) -> dict[str, Any]:
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def _plan_flags(gpu: dict[str, Any]) -> list[str]:
    flags = ["--gpu", gpu["gpu"]] if "gpu" in gpu else []
    return flags + (["--gpu-memory-gib", str(gpu["gpu_memory_gib"])] if "gpu_memory_gib" in gpu else [])


@pytest.mark.parametrize("form", list(FORMS))
def test_every_path_names_the_same_gpu_interconnect_and_pool(form: str, config_file: Path, api: Daemon) -> None:
    gpu = FORMS[form]
    ctx = deployment_context(
        next(d for d in load_config(config_file).deployments if d.name == form), config_file.parent
    )
    assert ctx.gpu is not None, "the daemon did not identify the part"
    daemon = (ctx.gpu.name, ctx.inputs.nvlink_sharp, ctx.capacity.kv_cache_tokens)

    body = {"deployment": {"model": MODEL, "tensor_parallel_size": TP, "max_model_len": MAX_MODEL_LEN, **gpu}}
    r = requests.post(api.url + "/api/v1/plan", json=body, timeout=30)
    assert r.status_code == 200, r.text
    before = r.json()["before"]
    via_api = (before["gpu"], before["nvlink_sharp"], before["kv_cache_tokens"])

    out = _cli("plan", "--model", MODEL, "--tp", str(TP), "--max-model-len", str(MAX_MODEL_LEN), "--json",
               *_plan_flags(gpu))  # fmt: skip
    via_plan = (out["gpu"], out["nvlink_sharp"], out["kv_cache_tokens"])

    sim = _cli("simulate", "--config", str(config_file), "--deployment", form, "--duration", "5s",
               "--arrival-rate", "0.2", "--prompt-tokens", "100", "--output-tokens", "20", "--json")  # fmt: skip
    via_simulate = (sim["gpu"], sim["nvlink_sharp"], sim["summary"]["kv_cache_tokens"])

    assert daemon == via_api == via_plan == via_simulate
    assert daemon[:2] == (H200, True)


def test_the_resolver_carries_the_identified_interconnect_into_the_pool() -> None:
    """Under the vLLM V0 profile (NCCL allocating NVLS buffers at start-up) the interconnect moves the pool: the
    139.81 GiB part given by memory alone is sized as the H200 SXM it is, with 4.95 GiB of NVLS buffers per GPU at
    TP 8 (vllm-project/vllm#9699), not as an unknown part of the same memory."""
    r1 = get_preset("deepseek-ai/DeepSeek-R1")
    common: dict[str, Any] = {"engine": "vllm", "model": r1, "gpu_memory_bytes": int(139.81 * GIB),
                              "tensor_parallel_size": 8, "max_model_len": 16384, "engine_version": "0.7.3"}  # fmt: skip
    by_memory = resolve_deployment(DeploymentSpec(**common))
    labelled = resolve_deployment(DeploymentSpec(gpu="my-h200-like", **common))
    assert (by_memory.gpu.name, by_memory.gpu.nvlink_sharp, by_memory.inputs.nvlink_sharp) == (H200, True, True)
    assert by_memory.gpu.identified == "NVIDIA H200 SXM, the only catalog GPU with 139.81 GiB"
    assert (labelled.gpu.name, labelled.gpu.part, labelled.gpu.nvlink_sharp) == ("my-h200-like", None, None)
    freed = labelled.result.kv_pool_bytes_per_gpu - by_memory.result.kv_pool_bytes_per_gpu
    assert freed == pytest.approx(4.95 * GIB, rel=0.01)


def test_a_memory_no_one_part_has_names_none_on_every_path(api: Daemon, tmp_path: Path) -> None:
    """79.15 GiB is an A100 80GB or an H100: nothing is assumed about the interconnect anywhere."""
    gpu = {"gpu_memory_gib": 79.15}
    data = {
        "deployments": [
            {"name": "d", "targets": ["http://127.0.0.1:9/metrics"], "model": MODEL, "tensor_parallel_size": TP,
             "max_model_len": MAX_MODEL_LEN, "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1}, **gpu}
        ]
    }  # fmt: skip
    path = tmp_path / "advisor.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    ctx = deployment_context(load_config(path).deployments[0], tmp_path)
    body = {"deployment": {"model": MODEL, "tensor_parallel_size": TP, "max_model_len": MAX_MODEL_LEN, **gpu}}
    before = requests.post(api.url + "/api/v1/plan", json=body, timeout=30).json()["before"]
    out = _cli("plan", "--model", MODEL, "--tp", str(TP), "--max-model-len", str(MAX_MODEL_LEN), "--json",
               *_plan_flags(gpu))  # fmt: skip
    assert ctx.gpu is None and not ctx.inputs.nvlink_sharp
    assert before["nvlink_sharp"] is None is out["nvlink_sharp"]
    assert before["gpu"] == out["gpu"] == "79.15 GiB"
    assert ctx.capacity.kv_cache_tokens == before["kv_cache_tokens"] == out["kv_cache_tokens"]


def test_the_search_sizes_each_candidate_as_the_resolver_does() -> None:
    """The search's candidates are the deployments `plan` and the daemon would size: an MLA model gets vLLM V1's
    64-token blocks, and a part with NVLink SHARP its interconnect (issue 13: one resolver for the search too)."""
    from advisor.capacity.queueing import SLO, Workload
    from advisor.capacity.search import SearchSpace, search_deployments

    model = get_preset("deepseek-ai/DeepSeek-V2-Lite")
    space = SearchSpace(weight_precisions=(None,), kv_cache_dtypes=("auto",), tensor_parallel_sizes=(1, 4),
                        max_num_seqs=(128,))  # fmt: skip
    found = search_deployments(model, Workload(arrival_rate=1, prompt_tokens=1000, output_tokens=200),
                               SLO(ttft_seconds=2.5, tpot_seconds=0.1), cloud="aws", space=space, limit=50)  # fmt: skip
    assert found.feasible
    for cand in found.feasible:
        cfg = cand.config
        resolved = resolve_deployment(
            DeploymentSpec(
                engine="vllm",
                model=model,
                gpu=cfg.gpu_key,
                tensor_parallel_size=cfg.tensor_parallel_size,
                max_model_len=cfg.max_model_len,
                max_num_seqs=cfg.max_num_seqs,
            )
        )
        assert resolved.inputs.block_size == 64
        assert cand.kv_cache_tokens == resolved.result.kv_cache_tokens, cfg
