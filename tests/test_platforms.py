"""Platform profiles (issue 18, point 2 and acceptance 2): every dial said in its platform's own terms.

The expected option names are copied by hand from each platform's documentation, cited beside each row — never
from :mod:`advisor.platforms`:

* SageMaker LMI — https://docs.djl.ai/docs/serving/serving/docs/lmi/deployment_guide/configurations.html
  ("LMI Common Configurations": ``option.max_rolling_batch_size``, ``option.tensor_parallel_degree``,
  ``option.rolling_batch`` = vllm | lmi-dist | trtllm) and
  https://docs.djl.ai/docs/serving/serving/docs/lmi/user_guides/vllm_user_guide.html (``OPTION_QUANTIZE``,
  ``option.max_rolling_batch_prefill_tokens`` for vLLM's ``max_num_batched_tokens``, and every other vLLM engine
  argument passed through as ``OPTION_<CONFIG>``, e.g. ``OPTION_ENABLE_PREFIX_CACHING=true``); the instance and
  its count: https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ProductionVariant.html
  (``InstanceType``, ``InitialInstanceCount``) and
  https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DesiredWeightAndCapacity.html
  (``DesiredInstanceCount``).
* Vertex AI — https://cloud.google.com/vertex-ai/docs/reference/rest/v1/ModelContainerSpec (``args``),
  https://cloud.google.com/vertex-ai/docs/reference/rest/v1/DedicatedResources (``machineSpec``,
  ``minReplicaCount``, ``maxReplicaCount``), https://cloud.google.com/vertex-ai/docs/reference/rest/v1/MachineSpec
  (``machineType``, ``acceleratorType``, ``acceleratorCount``).
* Azure ML — https://learn.microsoft.com/en-us/azure/machine-learning/reference-yaml-deployment-managed-online
  (``instance_type``, ``instance_count``, ``environment_variables``).
* systemd — https://www.freedesktop.org/software/systemd/man/latest/systemd.service.html (``ExecStart=``) and
  https://www.freedesktop.org/software/systemd/man/latest/systemd.unit.html (template instances ``name@N``).
* Kubernetes — https://kubernetes.io/docs/reference/kubectl/generated/kubectl_scale/ (``--replicas``); the
  engine flags are the container's args: vLLM's ``--max-num-seqs`` etc. (docs.vllm.ai "Engine Arguments").
* Bedrock — https://docs.aws.amazon.com/bedrock/latest/userguide/what-is-bedrock.html: a fully managed service,
  no engine, instance or replica setting.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from advisor.config import parse_config
from advisor.errors import ConfigError
from advisor.platforms import platform_flag
from tests.states import VLLMEngine
from tests.states.field import run_once_on

REASON = "flag_unavailable_reason"  # the new evidence / alternative key, spelled here by hand

# (dial, value, the vLLM flag the engine table writes) — vLLM "Engine Arguments"
VLLM_TURNS: list[tuple[str, Any, str]] = [
    ("max_num_seqs", 64, "--max-num-seqs 64"),
    ("max_num_batched_tokens", 8192, "--max-num-batched-tokens 8192"),
    ("gpu_memory_utilization", 0.95, "--gpu-memory-utilization 0.95"),
    ("weight_quantization", "awq", "--quantization awq"),
    ("kv_cache_dtype", "fp8", "--kv-cache-dtype fp8"),
    ("tensor_parallel_size", 2, "--tensor-parallel-size 2"),
    ("max_model_len", 8192, "--max-model-len 8192"),
    ("chunked_prefill", "on", "--enable-chunked-prefill"),
    ("prefix_caching", "on", "--enable-prefix-caching"),
]

# SageMaker LMI environment variable per dial, from the LMI pages cited above (option.X → OPTION_X)
SAGEMAKER_LMI = {
    "max_num_seqs": "OPTION_MAX_ROLLING_BATCH_SIZE=64",  # configurations.md: option.max_rolling_batch_size
    "max_num_batched_tokens": "OPTION_MAX_ROLLING_BATCH_PREFILL_TOKENS=8192",  # vllm_user_guide.md LMI table
    "gpu_memory_utilization": "OPTION_GPU_MEMORY_UTILIZATION=0.95",  # vllm_user_guide.md pass-through
    "weight_quantization": "OPTION_QUANTIZE=awq",  # vllm_user_guide.md: OPTION_QUANTIZE
    "kv_cache_dtype": "OPTION_KV_CACHE_DTYPE=fp8",  # pass-through of vLLM's kv_cache_dtype
    "tensor_parallel_size": "OPTION_TENSOR_PARALLEL_DEGREE=2",  # configurations.md: option.tensor_parallel_degree
    "max_model_len": "OPTION_MAX_MODEL_LEN=8192",  # pass-through of vLLM's max_model_len
    "chunked_prefill": "OPTION_ENABLE_CHUNKED_PREFILL=true",  # pass-through boolean
    "prefix_caching": "OPTION_ENABLE_PREFIX_CACHING=true",  # vllm_user_guide.md's own example
}

# what each platform's engine-argument change must name, beside the engine flag itself
ENGINE_ARG_PLACE = {
    "systemd": "ExecStart=",  # systemd.service(5)
    "vertex": "containerSpec.args",  # ModelContainerSpec.args
    "azure-ml": "environment_variables",  # managed online deployment YAML
}


@pytest.mark.parametrize(("dial", "value", "vllm_flag"), VLLM_TURNS)
def test_engine_dials_in_each_platforms_terms(dial: str, value: Any, vllm_flag: str) -> None:
    assert platform_flag("kubernetes", "vllm", dial, value, vllm_flag) == (vllm_flag, None)
    for platform, place in ENGINE_ARG_PLACE.items():
        flag, reason = platform_flag(platform, "vllm", dial, value, vllm_flag)
        assert reason is None and flag is not None, (platform, dial)
        assert place in flag and vllm_flag in flag, (platform, flag)
    flag, reason = platform_flag("sagemaker", "vllm", dial, value, vllm_flag)
    assert reason is None and flag is not None
    assert SAGEMAKER_LMI[dial] in flag.split() and "OPTION_ROLLING_BATCH=vllm" in flag, flag
    assert "--" not in flag, flag  # environment options, never the CLI flag
    flag, reason = platform_flag("bedrock", "vllm", dial, value, vllm_flag)
    assert flag is None and reason and "Bedrock" in reason


REPLICAS = "scale to 3 replica(s) (e.g. kubectl scale deployment/<name> --replicas=3)"  # flag_for's phrase


@pytest.mark.parametrize(
    ("platform", "names"),
    [
        ("kubernetes", ["kubectl scale", "--replicas=3"]),
        ("systemd", ["@3.service"]),
        ("sagemaker", ["DesiredInstanceCount=3", "InitialInstanceCount"]),
        ("vertex", ["minReplicaCount=3", "maxReplicaCount"]),
        ("azure-ml", ["instance_count: 3"]),
    ],
)
def test_replicas_in_each_platforms_terms(platform: str, names: list[str]) -> None:
    flag, reason = platform_flag(platform, "vllm", "replicas", 3, REPLICAS)
    assert reason is None and flag is not None
    for name in names:
        assert name in flag, (platform, flag)
    # a rule's own words around the replica phrase stay; only the phrase is restated
    wrapped, _ = platform_flag(platform, "vllm", "replicas", 3, "add one long-context replica; " + REPLICAS)
    assert wrapped is not None and wrapped.startswith("add one long-context replica; ") and names[0] in wrapped


@pytest.mark.parametrize(
    ("platform", "names"),
    [
        ("sagemaker", ["InstanceType", "ml."]),
        ("vertex", ["machineType", "acceleratorType", "acceleratorCount"]),
        ("azure-ml", ["instance_type"]),
    ],
)
def test_instance_in_each_platforms_terms(platform: str, names: list[str]) -> None:
    flag, reason = platform_flag(platform, "vllm", "instance_type", "L40S", "move to an instance with L40S GPUs")
    assert reason is None and flag is not None and "L40S" in flag
    for name in names:
        assert name in flag, (platform, flag)


def test_bedrock_offers_no_dial_and_sagemaker_no_non_lmi_engine() -> None:
    for dial, value in (("replicas", 3), ("instance_type", "L40S"), ("engine_process", "restarted")):
        flag, reason = platform_flag("bedrock", "vllm", dial, value, "x")
        assert flag is None and reason and "Bedrock" in reason, dial
    # SGLang is no LMI backend (configurations.md: vllm, lmi-dist, trtllm): its flag has no LMI option
    flag, reason = platform_flag("sagemaker", "sglang", "max_num_seqs", 64, "--max-running-requests 64")
    assert flag is None and reason and "OPTION_ROLLING_BATCH" in reason and "sglang" in reason
    # the instance count is still SageMaker's for any engine
    flag, _ = platform_flag("sagemaker", "sglang", "replicas", 3, REPLICAS)
    assert flag is not None and "DesiredInstanceCount=3" in flag


def test_platform_is_validated_naming_the_field() -> None:
    base = {
        "name": "a",
        "engine": "vllm",
        "model": "Qwen/Qwen2.5-14B-Instruct",
        "gpu": "a100-80gb",
        "max_model_len": 16384,
        "targets": ["http://127.0.0.1:1/metrics"],
        "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
    }
    assert parse_config({"deployments": [base]}).deployments[0].platform == "kubernetes"
    assert parse_config({"deployments": [dict(base, platform="azure-ml")]}).deployments[0].platform == "azure-ml"
    with pytest.raises(ConfigError) as err:
        parse_config({"deployments": [dict(base, platform="sagemkaer")]})
    (path, message), *_ = err.value.problems
    assert path == "deployments[0].platform" and "did you mean 'sagemaker'" in message


# --- acceptance 2: the same saturated deployment under each platform, through `once --json` -------------------

SLO = {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9}


def _saturated() -> tuple[str, str]:
    """A vLLM 0.33 stand-in whose pool is full (97 %) with 15 requests waiting and preemptions: the saturated
    state of tests/states/test_field_advice_evidence.py (vllm-project/vllm#10533), at the config's 0.9 budget."""
    eng = VLLMEngine(
        model_name="Qwen/Qwen2.5-14B-Instruct",
        num_gpu_blocks=1701,
        max_model_len=16384,
        gpu_memory_utilization=0.9,
        version="0.33",
    )
    eng.running, eng.waiting, eng.kv_usage = 18.0, 15.0, 0.97
    eng.prefill(2_000_000)
    eng.decode(300_000, 0.03)
    first = eng.render()
    eng.prefill(20_000)
    eng.decode(2_000, 0.03)
    eng.preempt(3.0)
    return first, eng.render()


PLATFORMS = ["kubernetes", "systemd", "sagemaker", "vertex", "azure-ml", "bedrock"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    scrapes = _saturated()

    dirs: dict[str, Path] = {p: tmp_path_factory.mktemp(p) for p in PLATFORMS}  # made here, not in the threads

    def once(platform: str) -> dict[str, Any]:
        dep = {
            "name": "qwen14b",
            "engine": "vllm",
            "model": "Qwen/Qwen2.5-14B-Instruct",
            "gpu": "a100-80gb",
            "max_model_len": 16384,
            "slo": SLO,
            "platform": platform,
        }
        return run_once_on(dirs[platform], dep, [scrapes])

    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {p: pool.submit(once, p) for p in PLATFORMS}
    return {p: f.result() for p, f in futures.items()}


def _turns(result: dict[str, Any]) -> list[tuple[str, Any, Any, Any]]:
    """``(dial, suggested, flag, reason)`` of every recommendation and alternative."""
    out = []
    for r in result.get("recommendations") or []:
        out.append((r["dial"], r["suggested"], r["flag"], (r.get("evidence") or {}).get(REASON)))
        out += [(a["dial"], a["suggested"], a["flag"], a.get(REASON)) for a in r.get("alternatives") or []]
    return out


@pytest.mark.integration
def test_once_json_says_each_flag_in_the_platforms_terms(runs: dict[str, dict[str, Any]]) -> None:
    k8s = _turns(runs["kubernetes"])
    assert {d for d, *_ in k8s} >= {"kv_cache_dtype", "gpu_memory_utilization", "tensor_parallel_size"}, k8s
    vllm_flag = {d: f for d, _, f, _ in k8s}
    assert vllm_flag["kv_cache_dtype"] == "--kv-cache-dtype fp8"  # Kubernetes: the container's args, as before
    for platform in PLATFORMS[1:]:
        turns = _turns(runs[platform])
        # the same advice, ranked the same, on every platform: only the words change
        assert [(d, s) for d, s, *_ in turns] == [(d, s) for d, s, *_ in k8s], platform
        for dial, _, flag, reason in turns:
            if platform == "bedrock":
                assert flag is None and reason and "Bedrock" in reason, (dial, flag)
            elif platform == "sagemaker":
                option = {
                    "kv_cache_dtype": "OPTION_KV_CACHE_DTYPE=fp8",
                    "tensor_parallel_size": "OPTION_TENSOR_PARALLEL_DEGREE=",
                }
                assert flag is not None and reason is None and "OPTION_ROLLING_BATCH=vllm" in flag, (dial, flag)
                if dial in option:
                    assert option[dial] in flag, flag
                if dial == "gpu_memory_utilization":
                    assert "OPTION_GPU_MEMORY_UTILIZATION=" in flag, flag
            else:
                assert flag is not None and reason is None, (platform, dial)
                assert ENGINE_ARG_PLACE[platform] in flag and vllm_flag[dial] in flag, (platform, flag)


# --- plan --platform: the configuration in the platform's terms -----------------------------------------------


def test_plan_says_the_configuration_in_the_platforms_terms() -> None:
    from tests.inprocess import run_cli

    base = ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM", "--max-model-len", "8192"]
    base += ["--tp", "2", "--max-num-seqs", "128", "--json"]
    proc = run_cli(*base, "--platform", "sagemaker")
    assert proc.returncode == 0, proc.stderr
    rows = {r["dial"]: r for r in json.loads(proc.stdout)["platform"]["settings"]}
    # LMI configurations.md: option.tensor_parallel_degree, option.max_rolling_batch_size; vLLM pass-through
    assert "OPTION_TENSOR_PARALLEL_DEGREE=2" in rows["tensor_parallel_size"]["flag"]
    assert "OPTION_MAX_ROLLING_BATCH_SIZE=128" in rows["max_num_seqs"]["flag"]
    assert "OPTION_MAX_MODEL_LEN=8192" in rows["max_model_len"]["flag"]
    assert "InitialInstanceCount" in rows["replicas"]["flag"]  # API_ProductionVariant
    proc = run_cli(*base, "--platform", "vertex")
    rows = {r["dial"]: r for r in json.loads(proc.stdout)["platform"]["settings"]}
    assert "containerSpec.args" in rows["max_num_seqs"]["flag"] and "--max-num-seqs 128" in rows["max_num_seqs"]["flag"]
    assert "minReplicaCount=1" in rows["replicas"]["flag"]  # DedicatedResources.minReplicaCount
    proc = run_cli(*base, "--platform", "bedrock")
    rows = {r["dial"]: r for r in json.loads(proc.stdout)["platform"]["settings"]}
    assert all(r["flag"] is None and "Bedrock" in r[REASON] for r in rows.values()), rows
    proc = run_cli(*base[:-1], "--platform", "azure-ml")  # the text output: its own heading
    assert "on Azure Machine Learning" in proc.stdout and "instance_count: 1" in proc.stdout, proc.stdout
    assert "platform" not in json.loads(run_cli(*base).stdout)  # without --platform: the output as before
