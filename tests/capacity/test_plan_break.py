"""Issue 17, adversarial inputs to ``plan``'s pass past the ceiling and the flags issue 16 added: each case is a
one-line error naming the flag at fault (exit 2), or a physically possible answer, never a silent plan of what
the engine would not run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.inprocess import run_cli

EIGHT_B = ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM", "--max-model-len", "8192"]


def _json(*args: str) -> dict[str, Any]:
    r = run_cli(*EIGHT_B, *args, "--json")
    assert r.returncode == 0, r.stderr

    def refuse(c: str) -> None:
        raise ValueError(c)

    out: dict[str, Any] = json.loads(r.stdout, parse_constant=refuse)
    return out


@pytest.mark.parametrize("load", [["--arrival-rate", "1"], ["--concurrency", "4"]])
def test_requests_longer_than_max_model_len_are_refused_naming_the_flags(load: list[str]) -> None:
    """vLLM refuses a request whose prompt + max_tokens exceeds max_model_len ("This model's maximum context
    length is 8192 tokens. However, you requested 8292 tokens", ``vllm/entrypoints/openai/serving_engine.py``
    ``_validate_prompt_and_tokenize``): 8,192 + 100 > 8,192 was planned as a served workload."""
    r = run_cli(*EIGHT_B, *load, "--prompt-tokens", "8192", "--output-tokens", "100")
    assert r.returncode == 2, r.stdout
    assert "--prompt-tokens" in r.stderr and "--output-tokens" in r.stderr and "--max-model-len" in r.stderr
    assert "8,292" in r.stderr and r.stdout == ""
    # exactly the context fits
    assert run_cli(*EIGHT_B, *load, "--prompt-tokens", "8092", "--output-tokens", "100").returncode == 0


def test_requests_longer_than_a_llamacpp_slot_are_refused() -> None:
    """llama.cpp splits ``-c 4096`` over ``-np 4`` slots of 1,024 tokens (``n_ctx_seq = n_ctx / n_seq_max``,
    ``tools/server/server.cpp``); a 1,300-token request fits no slot, yet was planned at a batch of
    floor(4,096 ÷ 1,300) = 3."""
    llama = ["--engine", "llamacpp", "--ctx-size", "4096", "--parallel", "4"]
    r = run_cli(*EIGHT_B, *llama, "--arrival-rate", "1", "--prompt-tokens", "1000", "--output-tokens", "300")
    assert r.returncode == 2, r.stdout
    assert "1,024" in r.stderr and "--prompt-tokens" in r.stderr
    out = _json(*llama, "--arrival-rate", "1", "--prompt-tokens", "700", "--output-tokens", "300")
    assert out["batch_cap"] == 4  # 1,000 tokens fit a 1,024-token slot: every slot serves


def test_fewer_users_than_data_parallel_ranks_run_at_batch_one_not_below() -> None:
    """One user over ``--dp 4`` ranks is one sequence on one engine: its TPOT is the batch-1 step, as one user on
    one engine (no other sequence's prefill stretches it). It came out below the step (7.46 ms against 7.60 ms),
    and its tokens/s above the single engine's, from a fractional batch of 0.25 per engine."""
    one = _json("--concurrency", "1", "--prompt-tokens", "1000", "--output-tokens", "300")
    dp4 = _json("--dp", "4", "--concurrency", "1", "--prompt-tokens", "1000", "--output-tokens", "300")
    assert dp4["tpot_seconds"]["mean"] == pytest.approx(one["tpot_seconds"]["mean"], rel=1e-9)
    assert dp4["ttft_seconds"]["mean"] == pytest.approx(one["ttft_seconds"]["mean"], rel=1e-9)
    assert dp4["output_tokens_per_second"]["per_replica"] == pytest.approx(
        one["output_tokens_per_second"]["per_replica"], rel=1e-9
    )
    assert dp4["batch"] == 1.0
    # 2 users over 4 ranks: two engines at batch 1, twice one user's tokens/s
    dp4_2 = _json("--dp", "4", "--concurrency", "2", "--prompt-tokens", "1000", "--output-tokens", "300")
    assert dp4_2["tpot_seconds"]["mean"] == pytest.approx(one["tpot_seconds"]["mean"], rel=1e-9)
    assert dp4_2["output_tokens_per_second"]["per_replica"] == pytest.approx(
        2 * one["output_tokens_per_second"]["per_replica"], rel=1e-9
    )


def test_multi_step_scheduling_without_a_version_is_refused_as_the_current_vllm_refuses_it() -> None:
    """``--num-scheduler-steps`` was removed in vLLM 0.10.1; unset, ``--engine-version`` means the current
    release, which rejects the argument, as ``--engine-version 0.12.0`` already did here. Without the version the
    flag was dropped without a word."""
    r = run_cli(*EIGHT_B, "--num-scheduler-steps", "8")
    assert r.returncode == 2, r.stdout
    assert "--num-scheduler-steps" in r.stderr and "--engine-version" in r.stderr
    # V0 forced (only 0.10.0 and earlier have it): multi-step is V0's, accepted
    assert run_cli(*EIGHT_B, "--num-scheduler-steps", "8", "--vllm-use-v1", "0").returncode == 0


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--max-loras", "4"), ("--max-lora-rank", "64"), ("--fully-sharded-loras", None), ("--lora-dtype", "float16")],
)
def test_lora_dials_without_enable_lora_are_refused(flag: str, value: str | None) -> None:
    """vLLM builds no ``LoRAConfig`` without ``--enable-lora`` (``EngineArgs.create_engine_config``), so the other
    LoRA dials do nothing there; ``plan`` dropped them silently, the operator believing the slots were costed.
    Issue 19: refused (exit 2), not noted and ignored."""
    r = run_cli(*EIGHT_B, flag, *(() if value is None else (value,)))
    assert r.returncode == 2, r.stderr
    assert flag in r.stderr and "--enable-lora" in r.stderr


@pytest.mark.parametrize("version", ["0.6.6", "0.11.2"])
def test_a_step_below_the_context_with_chunked_prefill_turned_off_is_refused_as_vllm_refuses_it(version: str) -> None:
    """Breaker 19: ``--no-enable-chunked-prefill`` with ``--max-num-batched-tokens 2048`` under ``--max-model-len
    8192`` was planned (exit 0) where vLLM refuses to start ("max_num_batched_tokens … is smaller than max_model_len
    …", ``SchedulerConfig._verify_args``: unchunked, a prompt must fit one step). A budget of the whole context, or
    chunking left on, is planned; so is the flag on 0.8.5-0.11.0, whose V1 chunks whatever was asked
    (:data:`advisor.capacity.profiles.V1_CHUNKED_PREFILL_OFF_SINCE`)."""
    off = ["--engine-version", version, "--no-enable-chunked-prefill"]
    r = run_cli(*EIGHT_B, *off, "--max-num-batched-tokens", "2048")
    assert r.returncode == 2, r.stdout
    assert "max_num_batched_tokens 2048 is below max_model_len 8192 with chunked prefill off" in r.stderr, r.stderr
    assert r.stdout == ""
    assert run_cli(*EIGHT_B, *off, "--max-num-batched-tokens", "8192").returncode == 0
    assert run_cli(*EIGHT_B, "--engine-version", version, "--max-num-batched-tokens", "2048").returncode == 0
    forced = ["--engine-version", "0.10.2", "--no-enable-chunked-prefill", "--max-num-batched-tokens", "2048"]
    assert run_cli(*EIGHT_B, *forced).returncode == 0


def test_llamacpp_says_when_its_slot_count_is_assumed_and_claims_no_log_check() -> None:
    """Walkthrough (2026-12-07): ``plan --engine llamacpp`` without ``--parallel`` printed "parallel 1" as if known
    (a llama-server without -np runs 4 slots sharing --ctx-size since ggml-org/llama.cpp PR #16736), and "KV checked
    against 3 published engine start-up log(s) of this model, vLLM's and SGLang's" — logs of other engines, about
    a pool llama.cpp does not profile. The assumption is said; the check row is not printed for llama.cpp; a
    stated --parallel carries no such note."""
    from tests.inprocess import run_cli

    base = ["plan", "--engine", "llamacpp", "--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "L4"]
    base += ["--max-model-len", "8192", "--gguf-file-type", "Q4_K_M"]
    r = run_cli(*base)
    assert r.returncode == 0, r.stderr
    assert "parallel 1 assumed (not given)" in r.stdout and "PR #16736" in r.stdout
    assert "KV checked against" not in r.stdout
    r = run_cli(*base, "--parallel", "4")
    assert r.returncode == 0, r.stderr
    assert "assumed (not given)" not in r.stdout
    vllm = run_cli("plan", "--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "L4", "--max-model-len", "8192")
    assert "KV checked against" in vllm.stdout
