"""``plan`` for one configuration runs the whole pass (issue 17, acceptance 1).

Each binding-constraint case is argued from the physics with peak figures written here (datasheets), not from
our outputs: the H100 SXM's 3.35 TB/s HBM3 and 989.5 dense BF16 TFLOP/s (NVIDIA H100 datasheet); Llama-3.1's
config.json (8B: 32 layers, 8 KV heads × 128, 8.03 B parameters; 70B: 80 layers, 70.55 B parameters). Peak
figures give bounds the model cannot beat whatever efficiency factors the calibration later fits
(``advisor/capacity/perf.py`` ``assumptions_for``), so each case holds with a wide margin, not to the
millisecond. The rule itself: :func:`advisor.capacity.operating.binding_constraint`.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from tests.inprocess import run_cli

HBM = 3.35e12  # bytes/s, H100 SXM peak
BF16 = 989.5e12  # FLOP/s, H100 SXM dense peak
KV_8B = 2 * 32 * 8 * 128 * 2  # bytes per token: K and V × layers × KV heads × head_dim × bf16 = 131,072
W_8B = 8.03e9 * 2  # bytes of bf16 weights
W_70B = 70.55e9 * 2

EIGHT_B = ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM"]
KEYS = {
    "tpot_seconds",
    "ttft_seconds",
    "output_tokens_per_second",
    "batch",
    "replicas_needed",
    "goodput_ratio",
    "meets_slo",
    "binding_constraint",
    "breached",
}


def _plan(*args: str) -> dict[str, Any]:
    r = run_cli(*args, "--json")
    assert r.returncode == 0, r.stderr  # meets_slo false is an answer, not an error
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def test_a_long_context_workload_is_bound_by_the_kv_ceiling() -> None:
    """32 users of 32,000 + 1,000 tokens on one H100: a sequence holds 33,000 × 131,072 B = 4.03 GiB of KV.
    The pool is at most 0.9 × 79.15 GiB − 14.96 GiB of weights = 56.3 GiB → ≤ 13 sequences, and at least that
    minus 10 GiB of activations and runtime → ≥ 11: far below max-num-seqs (1,024). 19+ users wait for a slot.
    Their wait: the 13 running need 1,000 steps each, every step ≥ 16.06 GB ÷ 3.35 TB/s = 4.8 ms, so at most
    13 ÷ 4.8 s = 2.7 req/s leave and a waiting user waits ≥ 19 ÷ 2.7 ≈ 7 s, more than the prefill (32,000 tokens
    × 2 × 7.5 G FLOPs ≈ 0.5 PFLOP: 0.5–1.6 s at 30–100 % of peak)."""
    out = _plan(*EIGHT_B, "--max-model-len", "40000", "--concurrency", "32", "--prompt-tokens", "32000",
                "--output-tokens", "1000")  # fmt: skip
    gib = 2**30
    seq = 33_000 * KV_8B / gib
    assert (
        math.floor((0.9 * 79.15 - W_8B / gib - 10) / seq)
        <= out["batch"]
        <= math.floor((0.9 * 79.15 - W_8B / gib) / seq)
    )
    assert out["binding_constraint"] == "kv_ceiling"
    most_per_s = out["batch"] / (1000 * W_8B / HBM)
    assert out["ttft_seconds"]["mean"] >= (32 - out["batch"]) / most_per_s
    assert set(out) >= KEYS
    assert out["meets_slo"] is None and out["breached"] == []  # no SLO given: no verdict


def test_a_large_batch_of_a_small_model_is_bound_by_compute_in_prefill() -> None:
    """32 users of 8,000 + 16 tokens on an 8B: the pool holds ≥ 47 of them (8,016 × 131,072 B = 0.98 GiB each
    in ≥ 46 GiB), so none waits for a slot. Prefill: ≥ 2 × 8,000 × 7.5 G = 120 TFLOP → ≥ 121 ms at peak, and
    it moves only 16.06 GB + 8,000 × 131,072 B = 17.1 GB → 5.1 ms at peak bandwidth: compute-bound 24×. Decode
    per request: 16 tokens × step(32) ÷ 32, step(32) ≤ (16.06 + 32 × 8,008 × 131,072 B = 49.7 GB) ÷ 3.35 TB/s =
    14.8 ms at peak → 7.4 ms: the prefill's FLOPs hold > 90 % of a request's GPU time at any common efficiency."""
    out = _plan(*EIGHT_B, "--max-model-len", "8192", "--concurrency", "32", "--prompt-tokens", "8000",
                "--output-tokens", "16", "--ttft", "10", "--tpot", "1")  # fmt: skip
    assert out["batch"] == 32
    assert out["binding_constraint"] == "compute"
    assert out["ttft_seconds"]["p50"] >= 2 * 8000 * 7.5e9 / BF16
    assert out["meets_slo"] is True and out["breached"] == [] and out["goodput_ratio"] == 1.0


def test_a_70b_at_batch_1_is_bound_by_bandwidth() -> None:
    """Llama-3.1-70B bf16 on 4 H100s (TP 4), one user of 1,000 + 500 tokens: each step streams 141.1 GB ÷ 4 =
    35.3 GB per GPU, ≥ 10.5 ms at 3.35 TB/s, and computes 2 × 70.55 G ÷ 4 FLOPs = 0.04 ms at peak: memory-bound
    300×. 500 steps ≥ 5.3 s against a prefill of 2 × 1,000 × 70.55 G ÷ 4 = 35 TFLOP, ≤ 0.12 s even at 30 % of
    peak. A 10 ms TPOT target is below the 10.5 ms the bandwidth allows: TPOT is breached, and that is an answer
    (exit 0), not an error."""
    out = _plan("plan", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100-SXM", "--tp", "4",
                "--max-model-len", "8192", "--concurrency", "1", "--prompt-tokens", "1000", "--output-tokens",
                "500", "--ttft", "1", "--tpot", "0.01")  # fmt: skip
    step_floor = W_70B / 4 / HBM
    assert out["batch"] == 1
    assert out["binding_constraint"] == "bandwidth"
    assert out["tpot_seconds"]["mean"] >= step_floor
    assert out["output_tokens_per_second"]["per_replica"] <= 1 / step_floor
    assert out["meets_slo"] is False and out["breached"] == ["tpot"]


def test_a_rate_above_capacity_is_bound_by_the_queue() -> None:
    """100 req/s of 1,000 + 1,000 tokens at max-num-seqs 64 on one H100 (the pool holds ≥ 188 such sequences:
    ≥ 46 GiB ÷ 0.24 GiB, so the slot dial, not the pool, caps the batch). With every slot busy, each request
    needs 1,000 steps of ≥ 16.06 GB ÷ 3.35 TB/s = 4.8 ms: at most 64 ÷ 4.8 s = 13.3 req/s complete. 100 > 13.3:
    the queue grows without bound (TTFT unbounded, null in JSON), at least ⌈100 ÷ 13.3⌉ = 8 replicas are needed,
    and the verdict is a fail with exit 0."""
    out = _plan(*EIGHT_B, "--max-model-len", "4096", "--max-num-seqs", "64", "--arrival-rate", "100",
                "--prompt-tokens", "1000", "--output-tokens", "1000", "--ttft", "2", "--tpot", "0.05")  # fmt: skip
    most = 64 / (1000 * W_8B / HBM)
    assert out["binding_constraint"] == "queue"
    assert out["batch"] == 64
    assert out["ttft_seconds"] == {"mean": None, "p50": None, "p90": None, "p99": None}
    assert out["replicas_needed"] >= math.ceil(100 / most)
    assert out["utilization"] >= 100 / most
    assert out["output_tokens_per_second"]["total"] <= most * 1000
    assert out["meets_slo"] is False and "ttft" in out["breached"] and out["goodput_ratio"] == 0.0


def test_a_queue_behind_the_operators_own_sequence_cap_names_raising_it_before_replicas() -> None:
    """Breaker 13: max-num-seqs 2 on an H100 whose pool holds ≥ 188 sequences of 1,200 tokens (≥ 46 GiB ÷ 0.15 GiB)
    at 5 req/s: the queue binds behind the flag, which costs no GPU to raise; "more replicas" alone (8 of them)
    read as the answer."""
    out = _plan(*EIGHT_B, "--max-model-len", "8192", "--max-num-seqs", "2", "--arrival-rate", "5",
                "--prompt-tokens", "1000", "--output-tokens", "200", "--ttft", "2", "--tpot", "0.05")  # fmt: skip
    assert out["binding_constraint"] == "queue"
    reason = out["binding_reason"]
    assert "raise max-num-seqs" in reason and reason.index("raise max-num-seqs") < reason.index("more replicas")
    # the cap at what the pool holds needs no such sentence
    wide = _plan(*EIGHT_B, "--max-model-len", "8192", "--max-num-seqs", "256", "--arrival-rate", "100",
                 "--prompt-tokens", "1000", "--output-tokens", "200", "--ttft", "2", "--tpot", "0.05")  # fmt: skip
    assert "raise max-num-seqs" not in wide["binding_reason"], wide["binding_reason"]


def test_an_arrival_stream_that_fits_meets_the_slo_with_the_worked_example() -> None:
    """``predict_service``'s worked example (queueing.py): 4 req/s of 2,000 + 500 tokens on one H100 run about
    21 sequences, far below the ceiling; the step at that batch streams 16.06 GB + 21 × 2,250 × 131,072 B =
    22.3 GB (≥ 6.7 ms at peak), so output tokens/s = 4 × 500 = 2,000 (throughput equals the arrivals when
    stable), the TTFT median is the prefill alone (nobody waits for a slot) and one replica is enough."""
    out = _plan(*EIGHT_B, "--max-model-len", "8192", "--arrival-rate", "4", "--prompt-tokens", "2000",
                "--output-tokens", "500", "--ttft", "2", "--tpot", "0.05")  # fmt: skip
    assert out["output_tokens_per_second"] == pytest.approx({"per_replica": 2000.0, "total": 2000.0})
    assert out["tpot_seconds"]["mean"] >= (W_8B + 21 * 2250 * KV_8B) / HBM
    assert out["ttft_seconds"]["p50"] >= 2 * 2000 * 7.5e9 / BF16
    assert out["replicas_needed"] == 1 and out["meets_slo"] is True and out["breached"] == []
    assert out["binding_constraint"] in ("bandwidth", "compute")
    for q in ("mean", "p50", "p90", "p99"):
        assert out["ttft_seconds"][q] > 0 and out["tpot_seconds"][q] > 0
    assert out["kv_cache_tokens"] > 0  # the existing keys stay


def test_without_traffic_the_json_is_the_capacity_pass_alone() -> None:
    out = _plan(*EIGHT_B, "--max-model-len", "8192")
    assert not KEYS & set(out)


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--ttft", "2", "--tpot", "0.05"], "--ttft"),
        (["--prompt-tokens", "100"], "--prompt-tokens"),
        (["--target-ratio", "0.95"], "--target-ratio"),
        (["--prompt-cv", "0"], "--prompt-cv"),
        (["--replicas", "3"], "--replicas"),
        (["--arrival-rate", "1", "--prompt-tokens", "100"], "--output-tokens"),
        (["--arrival-rate", "1", "--prompt-tokens", "100", "--output-tokens", "10", "--ttft", "1"], "--tpot"),
        (["--concurrency", "4", "--prompt-tokens", "100", "--output-tokens", "10", "--output-cv", "1"], "--output-cv"),
        (
            ["--concurrency", "4", "--arrival-rate", "1", "--prompt-tokens", "1", "--output-tokens", "1"],
            "--concurrency",
        ),
        (
            ["--arrival-rate", "1", "--prompt-tokens", "100", "--output-tokens", "10", "--target-ratio", "0.9"],
            "--target-ratio",
        ),
        (["--cloud", "aws"], "--cloud"),
        (["--limit", "3"], "--limit"),
        (["--max-context", "9000"], "--max-context"),
    ],
)
def test_a_flag_without_what_it_needs_is_refused_naming_it(extra: list[str], named: str) -> None:
    """Before issue 17 each of these was accepted and silently ignored."""
    r = run_cli(*EIGHT_B, "--max-model-len", "8192", *extra)
    assert r.returncode == 2
    assert named in r.stderr and r.stdout == ""


def test_search_refuses_the_one_configuration_flags() -> None:
    r = run_cli("plan", "--search", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--arrival-rate", "1",
                "--prompt-tokens", "100", "--output-tokens", "10", "--ttft", "1", "--tpot", "0.1",
                "--concurrency", "4")  # fmt: skip
    assert r.returncode == 2 and "--concurrency" in r.stderr


def test_the_table_reads_at_3am() -> None:
    """The verdict first, every figure with its unit, the binding constraint with its numbers."""
    r = run_cli(*EIGHT_B, "--max-model-len", "4096", "--max-num-seqs", "64", "--arrival-rate", "100",
                "--prompt-tokens", "1000", "--output-tokens", "1000", "--ttft", "2", "--tpot", "0.05")  # fmt: skip
    assert r.returncode == 0, r.stderr
    tail = r.stdout.split("-- under load:", 1)[1].splitlines()[1:]
    assert tail[0].split()[0] == "verdict" and "FAILS" in tail[0] and "TTFT" in tail[0]
    text = "\n".join(tail)
    assert "binding constraint" in text and "queue" in text and "replicas needed" in text
    assert "TTFT" in text and "unbounded" in text and " ms" in text and "tokens/s" in text and "req/s" in text
