"""`capacity-advisor plan` with the inputs a careless operator gives: labels, memory-only GPUs, versions,
impossible lengths and sizes. Each case is a one-line error (exit 2) or an explained result."""

from __future__ import annotations

import json
import os
from unittest.mock import patch

import pytest

from advisor.capacity.kv import CapacityInputs, non_torch_bytes_per_gpu, nvls_bytes_per_gpu
from advisor.capacity.models import get_preset
from tests.inprocess import CliRun, run_cli

GIB = 1 << 30
LLAMA_8B = ["--model", "meta-llama/Llama-3.1-8B-Instruct"]
R1_V0 = ["--model", "deepseek-ai/DeepSeek-R1", "--tp", "8", "--engine-version", "0.7.3", "--max-model-len", "16384"]


def _plan(*args: str, env: dict[str, str] | None = None) -> CliRun:
    """``capacity-advisor plan ARGS`` (:func:`tests.inprocess.run_cli`) with ``env`` added to the environment."""
    with patch.dict(os.environ, env or {}):
        return run_cli("plan", *args)


def test_a_gpu_name_outside_the_catalog_is_a_label_when_the_memory_is_given() -> None:
    r = _plan(*LLAMA_8B, "--gpu", "my-custom", "--gpu-memory-gib", "80", "--max-model-len", "4096", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["gpu"] == "my-custom"
    assert out["nvlink_sharp"] is None  # an unknown part: unknown, not "no"


def test_a_memory_only_one_gpu_has_is_named_and_its_nvls_memory_explained() -> None:
    r = _plan(*R1_V0, "--gpu-memory-gib", "139.81")
    assert r.returncode == 0, r.stderr
    assert "identified as           NVIDIA H200 SXM, the only catalog GPU with 139.81 GiB" in r.stdout
    assert "V0: vLLM 0.7.3 < 0.8 (V1 became the default engine in 0.8.0) [vllm-v0 start-up profile]" in r.stdout
    assert "4.95 GiB NCCL NVLink SHARP buffers" in r.stdout  # the measured 4.95 GiB of vllm-project/vllm#9699
    out = json.loads(_plan(*R1_V0, "--gpu-memory-gib", "139.81", "--json").stdout)
    assert (out["gpu"], out["nvlink_sharp"], out["accounting"]["generation"]) == ("NVIDIA H200 SXM", True, "v0")
    nearby = json.loads(_plan(*R1_V0, "--gpu-memory-gib", "139.80", "--json").stdout)
    assert nearby["nvlink_sharp"] is None  # no catalog part has 139.80 GiB: nothing assumed


def test_nccl_memory_stops_growing_at_one_nvlink_node() -> None:
    """Peers past 8 GPUs are on another node (network buffers), and NVLS has one head per GPU of the node."""
    model = get_preset("meta-llama/Llama-3.1-70B-Instruct")

    def inputs(tp: int) -> CapacityInputs:
        return CapacityInputs(
            model=model,
            gpu_memory_bytes=80 * GIB,
            tensor_parallel_size=tp,
            overhead_profile="vllm-v0",
            nvlink_sharp=True,
        )

    assert non_torch_bytes_per_gpu(inputs(16)) == non_torch_bytes_per_gpu(inputs(8))
    assert nvls_bytes_per_gpu(inputs(32)) == nvls_bytes_per_gpu(inputs(8)) > nvls_bytes_per_gpu(inputs(4))


@pytest.mark.parametrize("version", ["abc", "-1", "0,7,3", ""])
def test_an_engine_version_that_is_not_a_version_is_refused(version: str) -> None:
    r = _plan(*LLAMA_8B, "--gpu", "h100-sxm", "--max-model-len", "4096", "--engine-version", version)
    assert r.returncode == 2 and "--engine-version" in r.stderr


def test_a_release_candidate_is_its_release() -> None:
    rc = json.loads(_plan(*R1_V0, "--gpu", "h200", "--engine-version", "0.7.3rc1", "--json").stdout)
    assert (rc["accounting"]["generation"], rc["accounting"]["version"]) == ("v0", "0.7.3rc1")


def test_a_max_model_len_beyond_the_model_is_refused_as_vllm_does_unless_allowed() -> None:
    args = [*LLAMA_8B, "--gpu", "h100-sxm", "--max-model-len", "200000"]
    r = _plan(*args)
    assert r.returncode == 2
    assert "131,072" in r.stderr and "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in r.stderr
    assert _plan(*args, env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}).returncode == 0


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--block-size", "3", "vLLM takes 1, 8, 16"),
        ("--kv-cache-memory-gib", "100", "exceeds the GPU's 79.15 GiB"),
        ("--tp", "0", "between 1 and 512"),
        ("--max-num-seqs", "99999999999999999999", "between 1 and 1,000,000"),
        ("--block-size", "100000000", "between 1 and 1,024"),
    ],
)
def test_impossible_sizes_are_one_line_errors(flag: str, value: str, says: str) -> None:
    r = _plan(*LLAMA_8B, "--gpu", "h100-sxm", "--max-model-len", "4096", flag, value)
    assert r.returncode == 2, r.stdout
    assert says in r.stderr and "Traceback" not in r.stderr


def test_a_pool_that_holds_no_request_says_so() -> None:
    r = _plan(*LLAMA_8B, "--gpu", "h100-sxm", "--max-model-len", "4096", "--kv-cache-memory-gib", "0.0001", "--json")
    assert r.returncode == 3  # vLLM refuses to start: issue 19, acceptance 4
    assert json.loads(r.stdout)["max_concurrency"] < 1
    assert "cannot hold one request of max-model-len 4,096" in r.stderr


def test_running_out_of_memory_names_the_dial_that_caused_it() -> None:
    r = _plan(*LLAMA_8B, "--gpu", "h100-sxm", "--max-model-len", "4096", "--max-num-seqs", "100000")
    assert r.returncode == 3  # valid, but vLLM would not start (issue 19)
    assert "the overhead is mostly max_num_seqs 100,000: its sampler warm-up" in r.stderr  # the dial, in the reason


def test_flags_another_engine_does_not_read_are_named_not_silently_dropped() -> None:
    r = _plan(
        *LLAMA_8B,
        "--gpu",
        "h100-sxm",
        "--max-model-len",
        "4096",
        "--engine",
        "sglang",
        "--gpu-memory-utilization",
        "0.5",
        "--enforce-eager",
        "--json",
    )
    assert r.returncode == 2, r.stderr  # refused, not ignored (issue 19)
    assert "--gpu-memory-utilization, --enforce-eager do not apply to --engine sglang" in r.stderr


def test_an_overhead_an_engine_does_not_model_is_not_shown_as_zero() -> None:
    r = _plan(*LLAMA_8B, "--gpu", "h100-sxm", "--max-model-len", "4096", "--engine", "llamacpp")
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("overhead per GPU"))
    assert "not modelled" in line and "0.00" not in line


def test_an_alias_says_which_part_it_was_taken_for() -> None:
    r = _plan(*LLAMA_8B, "--gpu", "H100", "--max-model-len", "8192")
    assert r.returncode == 0, r.stderr
    assert "identified as           NVIDIA H100 SXM (from 'H100'" in r.stdout
    r = _plan(*LLAMA_8B, "--gpu", "h100-sxm", "--max-model-len", "8192")
    assert "identified as" not in r.stdout  # the catalog key itself needs no note


def test_the_search_header_accounts_for_every_configuration() -> None:
    import re

    r = _plan(
        "--search",
        *LLAMA_8B,
        "--arrival-rate",
        "2",
        "--prompt-tokens",
        "1000",
        "--output-tokens",
        "200",
        "--ttft",
        "2",
        "--tpot",
        "0.1",
        "--cloud",
        "aws",
    )
    assert r.returncode == 0, r.stderr
    m = re.search(r"(\d+) configurations: (\d+) cannot run .*?, (\d+) pruned by cost bound, (\d+) evaluated", r.stdout)
    assert m, r.stdout
    total, cannot, pruned, evaluated = map(int, m.groups())
    assert total == cannot + pruned + evaluated and evaluated > 0
