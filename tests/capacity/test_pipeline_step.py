"""The decode step of a pipeline-parallel replica (``advisor.capacity.perf.decode_step_model``): the engine keeps PP
micro-batches in flight (vLLM V1 ``max_concurrent_batches`` = PP) and a sequence's next token needs its micro-batch
to pass every stage in turn, so the time between tokens is ``PP × stage(B ÷ PP)``. At batch 1 that is one GPU's
time to stream the whole model; at a compute-bound batch the stages work in parallel and serve PP times the
tokens. Before, the step was one stage's weights at the model's FLOPs: PP 2 decoded twice as fast as it does at
batch 1, and no faster than PP 1 when compute-bound."""

from __future__ import annotations

import dataclasses

import pytest

from advisor.capacity.hardware import get_gpu
from advisor.capacity.kv import CapacityInputs
from advisor.capacity.models import get_preset
from advisor.capacity.perf import (
    decode_step_seconds,
    decode_tokens_per_second,
    mixed_step_seconds,
    prefill_batch_seconds,
    prefill_seconds,
)
from advisor.sim.engine import StepCost

LLAMA_8B = get_preset("llama-3.1-8b")
H100 = get_gpu("h100-sxm")
ONE = CapacityInputs(model=LLAMA_8B, gpu_memory_bytes=H100.memory_bytes, max_model_len=8192)
PP2 = dataclasses.replace(ONE, pipeline_parallel_size=2)


def test_at_batch_one_a_token_streams_the_whole_model_once() -> None:
    # the two stages read 16.06 GB + 2 × the 32 MiB rotary cache (each stage keeps one) in turn: the PP 1 step plus
    # one more rotary cache, at the same bandwidth; never half of it
    one = decode_step_seconds(ONE, H100, batch=1, mean_context_tokens=1000)
    two = decode_step_seconds(PP2, H100, batch=1, mean_context_tokens=1000)
    rotary = 131072 * 128 * 2 / (3.35e12 * 0.8)
    assert two == pytest.approx(one + rotary, rel=0.02)
    assert two > 0.95 * one


def test_a_compute_bound_batch_is_served_by_both_stages_at_once() -> None:
    # at 4,096 sequences of 100 tokens the step is the GEMMs: each stage computes half the model for its half of the
    # batch while the other computes the other micro-batch, so PP 2 serves nearly twice the tokens of PP 1
    one = decode_tokens_per_second(ONE, H100, 4096, 100)
    two = decode_tokens_per_second(PP2, H100, 4096, 100)
    assert 1.8 < two / one <= 2.0


def test_the_mixed_step_is_the_decode_step_without_prompts() -> None:
    for inputs in (ONE, PP2):
        assert mixed_step_seconds(inputs, H100, 64, 1000, 0.0, 1000) == pytest.approx(
            decode_step_seconds(inputs, H100, 64, 1000)
        )
    # and a prompt's GEMMs share the stages as the decode's do: its added time at PP 2 is at most PP 1's
    added_one = mixed_step_seconds(ONE, H100, 64, 1000, 1.0, 4000) - decode_step_seconds(ONE, H100, 64, 1000)
    added_two = mixed_step_seconds(PP2, H100, 64, 1000, 1.0, 4000) - decode_step_seconds(PP2, H100, 64, 1000)
    assert 0 < added_two <= added_one


# --- fewer sequences than stages (found by a breaker): one sequence is one micro-batch that passes every stage ------

MIXTRAL = get_preset("mixtral-8x7b")
H200 = get_gpu("h200")


def _moe(pp: int) -> CapacityInputs:
    return CapacityInputs(
        model=MIXTRAL, gpu_memory_bytes=H200.memory_bytes, max_model_len=8192, pipeline_parallel_size=pp
    )


@pytest.mark.parametrize("pp", [2, 4])
def test_a_lone_sequence_of_a_moe_reads_its_experts_on_every_stage(pp: int) -> None:
    # one token picks 2 of 8 experts a layer, on whichever stage holds the layer: a PP replica streams the same
    # experts per token as PP 1 (plus a rotary cache a stage); it was priced at micro-batches of 1/PP of a token,
    # PP 2 then decoding faster than TP 2
    one = decode_step_seconds(_moe(1), H200, batch=1, mean_context_tokens=1000)
    staged = decode_step_seconds(_moe(pp), H200, batch=1, mean_context_tokens=1000)
    assert staged == pytest.approx(one, rel=0.02)


def test_fewer_sequences_than_stages_leave_stages_idle() -> None:
    # PP 4 with 2 sequences: two micro-batches in flight, each token still passes the 4 stages; the time between a
    # sequence's tokens is the same as with 4 sequences (each stage then holds one)
    pp4 = dataclasses.replace(ONE, pipeline_parallel_size=4)
    assert decode_step_seconds(pp4, H100, 2, 1000) == pytest.approx(decode_step_seconds(pp4, H100, 4, 1000))


@pytest.mark.parametrize("pp", [2, 4])
def test_a_lone_prompt_passes_the_stages_in_turn(pp: int) -> None:
    # a 4,096-token prompt alone: every stage's FLOPs in a row, the whole model's, as at PP 1 (not a quarter at PP 4)
    staged = dataclasses.replace(ONE, pipeline_parallel_size=pp)
    assert prefill_seconds(staged, H100, 4096) == pytest.approx(prefill_seconds(ONE, H100, 4096), rel=0.01)
    # and PP prompts at once fill the stages: about PP times the throughput of one at a time at PP 1's cost each
    many = prefill_batch_seconds(staged, H100, 4096, prompts=pp)
    assert many == pytest.approx(prefill_batch_seconds(ONE, H100, 4096, prompts=pp) / pp, rel=0.05)


@pytest.mark.parametrize("pp", [1, 2, 4])
def test_the_simulator_s_step_prices_a_lone_prompt_as_the_prefill_does(pp: int) -> None:
    staged = dataclasses.replace(ONE, pipeline_parallel_size=pp)
    cost = StepCost.from_capacity(staged, H100)
    tokens = 8192
    sim = cost.seconds(tokens, 1, tokens, tokens * tokens / 2)
    assert sim == pytest.approx(prefill_batch_seconds(staged, H100, tokens), rel=0.02)


def test_a_prompt_holds_each_stage_for_its_share_while_the_others_run_other_micro_batches() -> None:
    """A 3,000-token prompt at PP 4 takes the whole model's time to pass the stages (its latency, TTFT), but beside
    three other micro-batches it holds each stage for a quarter of that (vLLM V1 ``step_with_batch_queue``): its
    share of a loaded replica is the lone latency ÷ ~4, where it was the whole latency (breaker: a PP 4 replica on
    four GPUs served 1.17× one GPU's requests on a prefill-heavy load)."""
    from advisor.capacity.perf import prefill_occupancy_seconds

    pp4 = dataclasses.replace(ONE, pipeline_parallel_size=4)
    lone = prefill_batch_seconds(pp4, H100, 3000)
    assert prefill_occupancy_seconds(ONE, H100, 3000) == prefill_batch_seconds(ONE, H100, 3000)
    held = prefill_occupancy_seconds(pp4, H100, 3000)
    # 3,000 tokens × 2 × 8.03 G parameters ≈ 48 TFLOP: compute-bound, so four prompts in flight take about what one
    # takes alone (the stages work in parallel), a quarter each; the weights (16 GB) are read once per four prompts
    assert lone / 4 * 0.95 < held < lone / 4 * 1.1
    # with one other sequence in flight only two stages are busy at once: half
    assert prefill_occupancy_seconds(pp4, H100, 3000, concurrent=2) == pytest.approx(lone / 2, rel=0.1)


def test_a_pipeline_replica_serves_its_stages_worth_of_prompts() -> None:
    """``plan --concurrency 256`` with 3,000-token prompts (a prefill-heavy closed loop): four stages on four GPUs
    serve over three times one GPU's requests (their FLOPs are four GPUs'), not 1.17× as when each prompt was
    charged its whole latency as the replica's time; the lone prompt's TTFT term is the same."""
    import json

    from tests.inprocess import run_cli

    def point(pp: int) -> dict[str, object]:
        r = run_cli(
            "plan",
            "--model",
            "meta-llama/Llama-3.1-8B-Instruct",
            "--gpu",
            "a100-80gb",
            "--pp",
            str(pp),
            "--max-model-len",
            "8192",
            "--concurrency",
            "256",
            "--prompt-tokens",
            "3000",
            "--output-tokens",
            "150",
            "--json",
        )
        assert r.returncode == 0, r.stderr
        out: dict[str, object] = json.loads(r.stdout)
        return out

    one, four = point(1), point(4)
    ratio = float(four["output_tokens_per_second"]["per_replica"]) / float(
        one["output_tokens_per_second"]["per_replica"]
    )  # type: ignore[index]
    assert 3.0 < ratio <= 4.5


def test_an_open_loop_s_lone_prompts_stretch_decode_by_their_whole_latency() -> None:
    """At 1 request/s of 3,000-token prompts (λ·T_p ≈ 0.23: one prompt at a time) a prompt's micro-batch holds every
    batch behind it at each stage (vLLM V1 ``step_with_batch_queue`` blocks on the oldest batch), so each stretches
    the decode by its whole latency at PP 4 as at PP 1: the prefill's share is the same, not a quarter (breaker: the
    share 0.058 against 0.230, a TPOT 22 % better than PP 1's at the same step)."""
    import json

    from tests.inprocess import run_cli

    def share(pp: int) -> float:
        r = run_cli(
            *("plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "a100-80gb", "--pp", str(pp)),
            *("--max-model-len", "8192", "--arrival-rate", "1", "--prompt-tokens", "3000", "--output-tokens", "150"),
            "--json",
        )
        assert r.returncode == 0, r.stderr
        return float(json.loads(r.stdout)["prefill_share"])

    one, four = share(1), share(4)
    assert four == pytest.approx(one, rel=0.1)
