"""Issue 19 follow-ups found by a breaker, on ``plan`` and ``plan --search``: values that can run nothing are
refused up front naming their flag (exit 2), not searched and rejected one by one (exit 0); "best rejected" rows keep
their instance name.

Hand arithmetic: a 500-token prompt with 200 output tokens is a 700-token request, longer than --max-model-len 100.
"""

from __future__ import annotations

from advisor.capacity.models import get_preset
from advisor.capacity.queueing import SLO, Workload
from advisor.capacity.search import SearchSpace, search_deployments
from tests.inprocess import run_cli

SEARCH = [
    "plan",
    "--search",
    "--model",
    "llama-3.1-8b-instruct",
    "--arrival-rate",
    "2",
    "--prompt-tokens",
    "500",
    "--output-tokens",
    "200",
    "--ttft",
    "2",
    "--tpot",
    "0.1",
    "--cloud",
    "aws",
]


def test_an_unknown_kv_cache_dtype_is_refused_before_the_search_naming_the_flag() -> None:
    """Seen: exit 0 after every configuration was rejected with "unknown kv_cache_dtype 'nope'"."""
    r = run_cli(*SEARCH, "--kv-cache-dtype", "nope")
    assert r.returncode == 2, r.stdout
    assert "--kv-cache-dtype" in r.stderr and "fp8" in r.stderr, r.stderr
    assert r.stdout == ""


def test_a_max_model_len_below_the_request_is_refused_naming_the_flag() -> None:
    r = run_cli(*SEARCH, "--max-model-len", "100")
    assert r.returncode == 2, r.stdout
    assert "--max-model-len 100" in r.stderr and "700" in r.stderr, r.stderr
    assert run_cli(*SEARCH, "--max-model-len", "700", "--gpu", "L4", "--tp", "1").returncode == 0  # exactly fits


def test_a_rejection_for_the_context_keeps_its_instance_name() -> None:
    """Seen: "best rejected" rows printed as ``   (L4) TP1 …`` with no instance."""
    model = get_preset("meta-llama/Llama-3.1-8B-Instruct")
    result = search_deployments(
        model,
        Workload(arrival_rate=2, prompt_tokens=500, output_tokens=200),
        SLO(2.0, 0.1, 0.9),
        cloud="aws",
        space=SearchSpace(max_model_lens=(100,), gpu_keys=("l4",), tensor_parallel_sizes=(1,)),
    )
    assert result.rejected and not result.feasible
    assert all(r.instance.startswith("g6") for r in result.rejected), [r.instance for r in result.rejected]


def test_an_unknown_speculative_config_key_is_refused_naming_it() -> None:
    """vLLM builds ``SpeculativeConfig(**config)``: an unknown key stops it at start-up, so ``plan`` refuses it."""
    r = run_cli(
        "plan",
        "--model",
        "llama-3.1-8b-instruct",
        "--gpu",
        "H100-SXM",
        "--max-model-len",
        "8192",
        "--speculative-config",
        '{"method": "ngram", "num_speculative_tokens": 3, "nope": 1}',
    )
    assert r.returncode == 2, r.stdout
    assert "speculative_config.nope" in r.stderr, r.stderr


PLAN_8B = ["plan", "--model", "llama-3.1-8b-instruct", "--gpu", "H100-SXM", "--max-model-len", "8192", "--json"]


def _fixes(*extra: str) -> list[str]:
    import json

    r = run_cli(*PLAN_8B, *extra)
    assert r.returncode == 3, r.stderr
    out = json.loads(r.stdout)
    assert out["feasible"] is False
    return [f["change"] for f in out["fixes"]]


def test_a_pool_fixed_by_blocks_is_fixed_by_that_flag() -> None:
    """Seen: "use a larger GPU" for one block on an H100. One max-length request is 8,192 / 16 = 512 blocks of
    vLLM's default 16 tokens."""
    assert _fixes("--num-gpu-blocks-override", "1")[0] == "--num-gpu-blocks-override 512"


def test_a_pool_fixed_by_bytes_is_fixed_by_the_flag_given() -> None:
    """Llama-3.1-8B caches 32 layers × 8 KV heads × 128 × 2 (K and V) × 2 bytes = 131,072 bytes a token (its
    config.json); 8,192 tokens are 2³⁰ bytes = 1 GiB. The fix names the flag typed."""
    assert _fixes("--kv-cache-memory-bytes", "1")[0] == "--kv-cache-memory-bytes 1073741824"
    gib = _fixes("--kv-cache-memory-gib", "0.5")
    assert gib[0] == "--kv-cache-memory-gib 1.0" and "--max-model-len 4096" in gib, gib
    r = run_cli(*PLAN_8B[:-1], "--kv-cache-memory-bytes", "1")
    assert "fixed by --kv-cache-memory-bytes" in r.stdout and "--kv-cache-memory-gib" not in r.stdout, r.stdout


def test_a_byte_budget_too_large_for_the_gpu_is_fixed_by_the_budget_s_pool_not_by_one_request() -> None:
    """Found by a breaker: 80 GB asked beside 14.99 GiB of weights on a 79.15 GiB H100 was 'fixed' by
    ``--kv-cache-memory-bytes 1073741824`` (1 GiB, one 8,192-token request), cutting the pool 75-fold. The fix is
    the pool the default 0.9 budget gives without the pin (``plan``'s own ``kv_pool_bytes_per_gpu`` then), whole
    MiB."""
    import json

    unpinned = json.loads(run_cli(*PLAN_8B).stdout)["kv_pool_bytes_per_gpu"]
    expected = unpinned // 2**20 * 2**20
    assert expected > 50 * 2**30
    assert _fixes("--kv-cache-memory-bytes", "80000000000")[0] == f"--kv-cache-memory-bytes {expected}"


def test_a_mean_arrival_rate_far_below_the_peak_is_refused_naming_the_flag() -> None:
    """Seen: 1e-300 accepted (absurd $/Mtok), 1e-320 an error naming no flag. A peak of 2 req/s over a mean at
    most 1,000× lower: 2 / 1,000 = 0.002 req/s is the least taken."""
    managed = [*SEARCH, "--compare-managed", "--mean-arrival-rate"]
    for tiny in ("1e-300", "1e-320", "0.00199"):
        r = run_cli(*managed, tiny)
        assert r.returncode == 2, (tiny, r.stdout)
        assert "--mean-arrival-rate" in r.stderr and "0.002" in r.stderr, r.stderr
    assert run_cli(*managed, "0.002", "--gpu", "L4", "--tp", "1").returncode == 0


def test_own_given_twice_or_with_a_non_ascii_count_is_refused() -> None:
    """Seen: the second --own silently replaced the first; ``int('٣')`` is 3 (Arabic-Indic digit three)."""
    base = [a for a in SEARCH if a not in ("--cloud", "aws")]
    twice = run_cli(*base, "--own", "H100-SXM:8", "--own", "A100-80GB:2")
    assert twice.returncode == 2 and "--own given twice" in twice.stderr, twice.stderr
    arabic = run_cli(*base, "--own", "H100-SXM:\u0663")
    assert arabic.returncode == 2 and "ASCII digits" in arabic.stderr, arabic.stderr
    assert run_cli(*base, "--own", "H100-SXM:3").returncode == 0


def test_a_platform_on_another_cloud_is_said_as_a_conflict() -> None:
    """Seen: "nothing to search" for ``--platform sagemaker --cloud gcp``. SageMaker's ml.* instances are AWS
    instances (https://aws.amazon.com/sagemaker/pricing/)."""
    base = [a for a in SEARCH if a not in ("--cloud", "aws")]
    r = run_cli(*base, "--platform", "sagemaker", "--cloud", "gcp")
    assert r.returncode == 2
    assert "--platform sagemaker runs on AWS" in r.stderr and "--cloud gcp" in r.stderr, r.stderr


def test_fixes_are_said_in_the_platforms_terms() -> None:
    """Seen: ``--platform sagemaker`` fixes said as ``--tp 8`` only. SageMaker LMI names tensor parallelism
    ``option.tensor_parallel_degree`` (https://docs.djl.ai/master/docs/serving/serving/docs/lmi/deployment_guide/
    configurations.html); Bedrock has no engine to set. Llama-3.1-70B's 131.4 GiB of bf16 weights need 8 L4s
    (19.86 GiB usable each)."""
    import json

    base = ["plan", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "L4", "--max-model-len", "8192"]
    r = run_cli(*base, "--platform", "sagemaker", "--json")
    assert r.returncode == 3, r.stderr
    tp = [f for f in json.loads(r.stdout)["fixes"] if f["change"] == "--tp 8"]
    assert tp and "OPTION_TENSOR_PARALLEL_DEGREE=8" in tp[0]["platform_flag"], tp
    bedrock = run_cli(*base, "--platform", "bedrock")
    assert bedrock.returncode == 3
    assert "on bedrock" in bedrock.stdout and "not offered" in bedrock.stdout, bedrock.stdout
    pool = run_cli(*PLAN_8B, "--num-gpu-blocks-override", "1", "--platform", "sagemaker")
    assert "OPTION_NUM_GPU_BLOCKS_OVERRIDE=512" in pool.stdout, pool.stdout


def test_llama_cpp_split_slots_warn_about_the_slot_not_the_pool() -> None:
    """Found by a README walkthrough: 16,384 cells over 4 slots warned that "the KV cache (16,384 tokens) cannot hold
    one request of 8,192 tokens" — the cache can; one slot, 16,384 ÷ 4 = 4,096 tokens, cannot."""
    base = ["plan", "--engine", "llamacpp", "--model", "llama-3.1-8b-instruct", "--gpu", "H100-SXM"]
    split = run_cli(*base, "--max-model-len", "8192", "--ctx-size", "16384", "--parallel", "4")
    assert "warning: one slot (4,096 tokens: --ctx-size ÷ --parallel) cannot hold one request of 8,192" in split.stderr
    whole = run_cli(*base, "--max-model-len", "8192", "--ctx-size", "4096", "--parallel", "1")
    assert "warning: the KV cache (4,096 tokens) cannot hold one request of 8,192 tokens" in whole.stderr
