"""Field states, round 54: speculative decoding and LoRA adapters — an MTP draft that doubles one stream on a Strix
Halo box and turns into a net loss once four slots share it (speculation off or shorter, never more hardware), an MTP
draft that wins 52 % on one stream under vLLM on an RTX PRO 6000 (never taken away), and eight LoRA adapters
round-robined over seven GPU adapter slots, so every admission evicts the adapter the next request wants (more
adapter slots, not more GPUs) — from three public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its model or GPU is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as that engine prints them: llama.cpp through :func:`tests.states.test_field_round32.
_llamacpp_2026` (``to_metrics()`` of 2026: no labels, no KV gauges) with the server's ``spec_decode_*`` counters,
vLLM through :class:`tests.states.VLLMEngine` (V1; the 0.11 label set for the 2025 releases, the 0.33 label set for
the 2026 ones) with V1's speculative-decoding counters and ``vllm:lora_requests_info``. The assertions come from the
reports' numbers, the verdict each thread establishes and engine facts, never from the advisor's output:

* ``llamacpp-strix-halo-mtp-np4-26-vs-34-tps-speculation-net-loss`` — ggml-org/llama.cpp#27342 (a measured comment
  on the DFlash2 PR): Ryzen AI MAX+ 395, one Q4_K_M target, ``-np N --ctx-size 4096*N``, N simultaneous requests of
  ``max_tokens=300``: aggregate "MTP Q4_0 | 22.10 | 16.52 | 26.35" against "none | 11.11 | 20.14 | 34.14" at
  np = 1 / 2 / 4 — "Speculation is a net loss at np≥2 here". Must propose speculation off or shorter; never more
  slots, replicas, TP, a budget turn, a longer draft or a restart.
* ``vllm-0.27.1-rtx-pro-6000-mtp-n2-bs1-96-vs-63-tps`` — sudoingX/qwen38-mtp#11: one RTX PRO 6000 Blackwell Max-Q,
  vLLM 0.27.1, NVFP4 weights, ``--speculative-config '{"method":"mtp","num_speculative_tokens":N}'``, one stream:
  baseline 63.3 tokens/s, N = 2 96.1 (+52 %, acceptance 0.59), N = 4 116.3 (+84 %, 0.42). Speculation pays at
  batch 1: never off or shorter, never more sequences, a pool turn, TP, replicas or a restart.
* ``vllm-gpt-oss-20b-8-loras-over-7-gpu-slots-every-admission-swaps`` — vllm-project/vllm#31317: ``vllm serve
  openai/gpt-oss-20b … --enable-lora`` with "8 LoRAs, with only one on CPU, causing frequent swapping in from CPU to
  GPU during runtime"; pinning the copies cut median TTFT ~40 %. With as many GPU adapter slots as adapters nothing
  swaps: must propose ``max_loras`` up to at least 8; never replicas, TP, a pool turn, more sequences or a restart.
  (``check-config`` refuses LoRA keys on a MoE model: the adapters reach the advisor through
  ``vllm:lora_requests_info`` only.)

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from tests.states import VLLMEngine, go_float
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_vllm import RESTART, _spec_decode_lines, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all, _suggests
from tests.states.test_field_round32 import _llamacpp_2026
from tests.states.test_field_round35 import _lora_info
from tests.states.test_field_round52 import _proposes_any
from tests.states.test_field_round53 import _llamacpp_rows

# --- 1. llama.cpp on Strix Halo: MTP doubles one stream, loses to plain decoding at four slots -----------------------


def _llamacpp_spec_rows(drafts: float, draft_tokens: float, accepted: Sequence[float]) -> str:
    """llama-server's speculative counters (``to_metrics()``, 2026): drafts, draft tokens, accepted tokens, and the
    accepted tokens by draft position (the only labelled family, label ``position``)."""
    out: list[str] = []
    for name, text, value in (
        ("spec_decode_num_drafts_total", "Number of speculative drafts.", drafts),
        ("spec_decode_num_draft_tokens_total", "Number of draft tokens.", draft_tokens),
        ("spec_decode_num_accepted_tokens_total", "Number of accepted draft tokens.", sum(accepted)),
    ):
        out += [f"# HELP llamacpp:{name} {text}", f"# TYPE llamacpp:{name} counter"]
        out.append(f"llamacpp:{name} {go_float(value)}")
    name = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"
    out += [f"# HELP {name} Accepted draft tokens by position.", f"# TYPE {name} counter"]
    out += [f'{name}{{position="{i}"}} {go_float(v)}' for i, v in enumerate(accepted)]
    return "\n".join(out) + "\n"


def llamacpp_strix_halo_mtp_np4_net_loss() -> FieldState:
    """ggml-org/llama.cpp#27342 ("spec : add DFlash2 support (local convolution + candidate selector)", merged; the
    comment of 2026-08-20 by Zeldatales): "Following up on my earlier Strix Halo numbers with the concurrency data
    @KaruroChori and @treo asked about. Same machine (Ryzen AI MAX+ 395, gfx1151, Vulkan/RADV), same build (this PR @
    ``5ecbe1ac1``), same Q4_K_M target. Server started with ``-np N`` and ``--ctx-size 4096*N`` so per-slot context
    stays constant. Each cell is 3 rounds of N simultaneous requests, code-generation prompt, ``max_tokens=300``,
    ``temperature=0``." Aggregate throughput (tokens/s) at np = 1 / 2 / 4: "DFlash2 Q8_0 | 21.22 | 15.87 | 25.32",
    "MTP Q4_0 | 22.10 | 16.52 | 26.35", "none | 11.11 | 20.14 | 34.14"; per request: "MTP Q4_0 | 22.10 | 8.33 |
    6.80", "none | 11.11 | 10.07 | 8.54". "The baseline scales, the drafted paths don't … the regression is specific
    to speculative decoding"; "**Speculation is a net loss at np≥2 here.** At np=4 both drafters land at 25–26 tok/s
    aggregate against 34.14 with no drafter at all."

    Engine facts (``tools/server``, ``common/speculative.cpp``): each busy slot drafts its own tokens and the target
    verifies every slot's draft in one batch; a verify batch of 4 slots × (n_max + 1) tokens costs a compute-bound
    iGPU far more than a plain step of 4 tokens, while a plain step of 4 costs about what a step of 1 does (the
    baseline's 11.11 → 34.14). Arithmetic: at np = 4 the MTP server gives each stream 6.80 tokens/s (147 ms a token)
    where plain decoding gives 8.54 (117 ms): speculation costs every stream 20 % and the box 23 % of its output
    (26.35 against 34.14) — on the same GPU, at the same four slots. So the turn is the draft: must propose
    speculation off (the thread's measured 34.14) or a shorter draft; must never: a longer draft or speculation on
    (it runs), more slots (np = 2 was the worst cell with the draft: 16.52), replicas (one second; and each would
    carry the same loss), more TP, a memory-budget turn (llama.cpp's cache is ``--ctx-size``), a restart (tokens
    flow); no stall claimed.

    Not asserted: fewer slots (one slot with the draft gives one stream 22.10 tokens/s but the box 22.10, below
    34.14 — a trade the thread does not settle).

    Chosen where the report is silent: the target is only "the same Q4_K_M target" of the commenter's earlier numbers
    (not quoted); Qwen3-32B (a dense model in the advisor's tables, ~19.8 GB at Q4_K_M: one stream bound near the
    11 tokens/s measured on a 256 GB/s LPDDR5X box) stands in as a Q4_K_M GGUF; the 128 GB of unified memory with
    ~120 GiB to the GPU (``gpu_memory_gib`` 120); ``-np 4 --ctx-size 16384``; the MTP draft at ``--spec-draft-n-max
    3`` with acceptance by position 0.80 / 0.60 / 0.40 (2.8 tokens a round, matching np = 1's 1.99×); prompts of ~180
    tokens. The moment: the np = 4 cell's second round ends, its four slots release (llama.cpp moves the token and
    speculative counters when a slot's task completes: 300 tokens each in 44.1 slot-seconds), the third round's
    four prompts are processed. llama.cpp of August 2026 exposition. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    n_slots, out_tokens, prompt = 4, 300.0, 180.0
    per_token = 1 / 6.80
    probs = (0.80, 0.60, 0.40)
    rounds_per_request = out_tokens / (1 + sum(probs))

    def page(done_rounds: int, prompts_in: int, decodes: float) -> str:
        done = n_slots * done_rounds
        rounds = done * rounds_per_request
        rows = _llamacpp_rows(
            prompt=prompts_in * prompt,
            cached=0.0,
            prompt_s=prompts_in * 0.9,
            gen=done * out_tokens,
            gen_s=done * out_tokens * per_token,
            decodes=decodes,
            longest=prompt + out_tokens,
            busy=float(n_slots),
            deferred=0.0,
            per_decode=float(n_slots),
        )
        return _llamacpp_2026(rows) + _llamacpp_spec_rows(rounds, 3 * rounds, [p * rounds for p in probs])

    first = page(done_rounds=1, prompts_in=8, decodes=860.0)
    second = page(done_rounds=2, prompts_in=12, decodes=866.0)
    return FieldState(
        id="llamacpp-strix-halo-mtp-np4-26-vs-34-tps-speculation-net-loss",
        source="https://github.com/ggml-org/llama.cpp/pull/27342",
        engine_version="llama.cpp of August 2026 (DFlash2 PR build; no KV gauges; spec_decode_* counters)",
        deployment={
            "name": "strix-halo-llamacpp-mtp-np4",
            "engine": "llamacpp",
            "model": "Qwen/Qwen3-32B",
            "gguf_file_type": "Q4_K_M",
            "gpu_memory_gib": 120.0,
            "max_model_len": 4_096,
            "ctx_size": 16_384,
            "parallel": n_slots,
            "speculative_decoding": True,
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": n_slots, "requests_waiting": 0},
        must_never=[
            ("speculative_decoding", "increase"),
            ("speculative_decoding", "enable"),
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            ("tensor_parallel_size", "increase"),
            ("gpu_memory_utilization", "increase"),
            RESTART,
        ],
        extra_check=_all(
            _proposes_any(("speculative_decoding", "disable"), ("speculative_decoding", "decrease")),
            no_stall_claimed,
        ),
    )


# --- 2. vLLM 0.27.1 on one RTX PRO 6000 Blackwell Max-Q: MTP N=2 at one stream, 96.1 against 63.3 tokens/s ---------


def vllm_rtx_pro_6000_mtp_bs1_wins() -> FieldState:
    """sudoingX/qwen38-mtp#11 ("Add RTX PRO 6000 Blackwell 96GB row (vLLM engine): 63.3 → 96.1 tok/s, n-max 2",
    August 2026): "Paired A/B on a single RTX PRO 6000 Blackwell Max-Q 96GB, following the repo method: same box,
    same model, same config both sides, only the speculative flag flipped between serves; streaming client clocking
    every delta, per-prompt medians, thinking off. | | Baseline | With flag | n-max | Acceptance | | this row | 63.3 |
    96.1 (+52%) | 2 | 0.59 | | same box | 63.3 | 116.3 (+84%) | 4 | 0.42 |"; "this is the **vLLM stack** — vLLM
    0.27.1 with unsloth's NVFP4 (compressed-tensors) build and ``--speculative-config
    '{"method":"mtp","num_speculative_tokens":N}'``". The repository's method (its README): one stream, ``--parallel
    1``-equivalent, "Speculative decode is a single-stream optimization".

    Engine facts and arithmetic: one stream of a ~27B model in 4-bit weights is bound by reading ~15 GB a step —
    63.3 tokens/s is 15.8 ms a token; with MTP N = 2 a round (one MTP-layer draft of two tokens, one verify of
    three) lands 1 + 0.59 × 2 ≈ 2.2 tokens in ~22.7 ms, 10.4 ms a token; at batch 1 the verify of three tokens costs
    about one plain step (the weights are read once either way), so every accepted draft token is nearly free. The
    same box measured N = 4 faster still (116.3). So: never speculation off or shorter (measured: +52 % at N = 2, and
    the longer N = 4 +84 %), never "enable" (it runs), never more sequences (one stream, nothing waits), a pool turn
    (one stream in a nearly empty pool), more TP or replicas (one GPU already serves the stream at 96 tokens/s; one
    second of history), a restart (tokens flow).

    Not asserted: a longer draft (N = 4 measured better; the advisor may or may not propose it).

    Chosen where the report is silent, and the stand-ins: Qwen3.8-27B (the repository's model, a hybrid-attention
    checkpoint with MTP layers) is not in the advisor's tables; Qwen3-32B (a dense Qwen3 the tables hold) stands in
    with ``quantization: nvfp4``, the MTP draft given as one decoder layer of ~0.85 B parameters; ``max_model_len``
    32,768, ``gpu_memory_utilization`` 0.9 (vLLM's default), a pool of 16,600 blocks of 16 (an input); the probe's
    prompts ~60 tokens, answers ~600 tokens; acceptance by position 0.72 / 0.46 (mean 0.59, the row's). History: 8
    answers of the N = 2 arm (3 prompts × 3 runs, the ninth decoding); the window: 96 tokens in 44 rounds. vLLM 0.27.1
    (2026) rendered with the 0.33 label set and V1's speculative counters; V1 observes the inter-token latency once
    per engine step (a whole round here) and the per-request TPOT at finish. SLO: TTFT 1 s, TPOT 25 ms (both arms
    meet it: the state asks only that a measured win is not taken away).
    """
    served = "unsloth/Qwen3.8-27B-NVFP4"
    blocks = 16_600
    tps = 96.1
    probs = (0.72, 0.46)
    per_round = 1 + sum(probs)
    round_s = per_round / tps
    eng = VLLMEngine(
        model_name=served,
        num_gpu_blocks=blocks,
        max_model_len=32_768,
        gpu_memory_utilization=0.9,
        version="0.33",
        started=time.time() - 900.0,
    )

    def decode(tokens: float) -> float:
        rounds = tokens / per_round
        eng.counters["vllm:generation_tokens"] += tokens
        eng.hists["vllm:inter_token_latency_seconds"].observe(round_s, rounds)
        eng.hists["vllm:iteration_tokens_total"].observe(1 + len(probs), rounds)
        return rounds

    eng.prefill(9 * 60)
    eng.first_tokens([0.05] * 9)
    eng.finish(8, prompt=60, output=600, ttft=0.05, tpot=1 / tps, queue=0.002, max_tokens=2_048)
    rounds = decode(8 * 599 + 300)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 0.0, 360 / (blocks * 16)
    first = eng.render() + _spec_decode_lines(eng, rounds, 2 * rounds, [p * rounds for p in probs])
    rounds += decode(tps)
    eng.kv_usage = 456 / (blocks * 16)
    second = eng.render() + _spec_decode_lines(eng, rounds, 2 * rounds, [p * rounds for p in probs])
    return FieldState(
        id="vllm-0.27.1-rtx-pro-6000-mtp-n2-bs1-96-vs-63-tps",
        source="https://github.com/sudoingX/qwen38-mtp/pull/11",
        engine_version="vLLM 0.27.1 (V1; 0.33 label set), MTP num_speculative_tokens 2",
        deployment={
            "name": "qwen38-27b-nvfp4-mtp-rtx-pro-6000",
            "engine": "vllm",
            "engine_version": "0.27.1",
            "model": "Qwen/Qwen3-32B",
            "served_model": served,
            "quantization": "nvfp4",
            "gpu": "rtx-pro-6000-blackwell",
            "tensor_parallel_size": 1,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 32_768,
            "speculative_decoding": True,
            "speculative_config": {
                "method": "mtp",
                "num_speculative_tokens": 2,
                "draft_layers": 1,
                "draft_parameters": 850_000_000,
            },
            "slo": {"ttft_seconds": 1.0, "tpot_seconds": 0.025, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 1, "requests_waiting": 0},
        must_never=[
            ("speculative_decoding", "disable"),
            ("speculative_decoding", "decrease"),
            ("speculative_decoding", "enable"),
            ("max_num_seqs", "increase"),
            *POOL_TURNS,
            ("tensor_parallel_size", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 3. vLLM: gpt-oss-20b with 8 LoRA adapters over 7 GPU adapter slots — every admission swaps one in -------------


def vllm_gpt_oss_8_loras_over_7_slots() -> FieldState:
    """vllm-project/vllm#31317 ("pin lora_b moe weights on cpu", merged December 2025): "The current weight loading
    logic in ``FusedMoE3DWithLoRA`` permutes the LoRA B weights on CPU before copying to GPU, this results in a slow
    copy of non-contigous, pageable memory … This ensures that all LoRA weight copies from CPU to GPU use pinned,
    contiguous memory, reducing the total transfer time by ~40%"; "Benchmarked e2e TTFT when loading LoRAs from CPU
    to GPU — **tl;dr** - benchmarking shows a ~40% decrease in median TTFT when frequently loading LoRA adapters from
    CPU to GPU. Server command (loads 8 LoRAs, with only one on CPU, causing frequent swapping in from CPU to GPU
    during runtime): ``vllm serve openai/gpt-oss-20b --trust-remote-code --enable-lora --max-l…``".

    Engine facts (vLLM V1 ``lora/worker_manager.py`` ``LRUCacheWorkerLoRAManager``, ``v1/core/sched/scheduler.py``):
    ``--max-loras`` is the number of GPU adapter slots, ``--max-cpu-loras`` the CPU cache behind them; a step's batch
    may hold requests of at most ``max_loras`` distinct adapters, and a request for an adapter not in a GPU slot waits
    until a slot frees, then evicts the least recently used adapter and copies its own in (the copy the PR speeds up,
    paid before the request's prefill: its TTFT). Arithmetic: 8 adapters in 7 slots, "only one on CPU" at a time; with
    traffic spread over all eight, the adapter just evicted is the one a later request wants, so every admission of that
    request waits for a slot and a CPU→GPU copy — the PR's faster copy alone cut median TTFT ~40 %: the copy is much of
    it. With ``max_loras`` ≥ 8 every adapter stays resident: nothing waits for a slot and nothing copies (one more slot
    costs a rank-16 adapter's buffers, well under 1 GiB for gpt-oss-20b's attention and 32 experts, against a pool that
    is ~3 % used). So must propose ``max_loras`` increase to at least 8. Must never: replicas (one second; and each
    replica would thrash the same seven slots), more TP, a pool turn (3 % of the pool used: requests wait for an adapter
    slot, not for blocks), more sequences (28 of 256 run: the cap does not bind), a restart (tokens flow); no stall
    claimed.

    Not asserted: ``max_cpu_loras`` (8 holds every adapter on the CPU already), the fix itself (a code change).

    Chosen where the report is silent: the flags after ``--max-l`` are cut off in what could be read; "8 LoRAs, with
    only one on CPU" read as ``--max-loras 7 --max-cpu-loras 8``, ``--max-lora-rank 16``. The deployment states no LoRA
    key: ``check-config`` refuses ``enable_lora``/``max_loras`` on a MoE model ("LoRA on MoE models is not modelled"),
    so the adapters, and ``max_lora="7"``, reach the advisor only through ``vllm:lora_requests_info``; one H100 SXM (the
    GPU is not named), vLLM's defaults (``gpu_memory_utilization`` 0.9, ``max_num_seqs`` 256; ``max_model_len`` 8,192
    chosen); the pool 66,000 blocks of 16 (an input); ``vllm bench serve`` with 1,024-token prompts and 128-token
    answers round-robined over adapters ``lora-0`` … ``lora-7`` at concurrency 32: 28 running (4 for each of 7 resident
    adapters), 4 waiting for ``lora-7``'s slot; TTFT ~1.6 s (the swap and the wait), 18 ms a token; 2,000 answered
    before. The window: 8 finish, 8 are admitted (their 8 × 1,024 prompt tokens prefilled), 28 streams decode 55 tokens
    each. vLLM of December 2025 (0.13) rendered with the 0.11 label set and ``vllm:lora_requests_info`` (its value the
    time of the last update). SLO: TTFT 1 s, TPOT 50 ms.
    """
    model = "openai/gpt-oss-20b"
    blocks = 66_000
    pool = blocks * 16
    now = time.time()
    running, waiting = 28.0, 4.0
    ttft, tpot = 1.6, 0.018
    eng = VLLMEngine(
        model_name=model,
        num_gpu_blocks=blocks,
        max_model_len=8_192,
        gpu_memory_utilization=0.9,
        version="0.11",
        started=now - 3_600.0,
    )
    eng.prefill((2_000 + running) * 1_024)
    eng.first_tokens([ttft] * int(2_000 + running))
    eng.finish(2_000, prompt=1_024, output=128, ttft=ttft, tpot=tpot, queue=0.9, max_tokens=128)
    generated = 2_000 * 127 + running * 64
    eng.decode(generated, tpot, steps=generated / running, batch=running)
    eng.running, eng.waiting, eng.kv_usage = running, waiting, running * 1_090 / pool
    resident = ",".join(f"lora-{i}" for i in range(7))
    first = eng.render() + _lora_info(resident, "lora-7", 7, now - 1.0)
    eng.finish(8, prompt=1_024, output=128, ttft=ttft, tpot=tpot, queue=0.9, max_tokens=128)
    eng.prefill(8 * 1_024)
    eng.first_tokens([ttft] * 8)
    eng.decode(running * 55, tpot, steps=55, batch=running)
    eng.kv_usage = running * 1_095 / pool
    second = eng.render() + _lora_info(resident, "lora-7", 7, now)
    return FieldState(
        id="vllm-gpt-oss-20b-8-loras-over-7-gpu-slots-every-admission-swaps",
        source="https://github.com/vllm-project/vllm/pull/31317",
        engine_version="vLLM of December 2025 (0.13; V1, 0.11 label set), --enable-lora --max-loras 7",
        deployment={
            "name": "gpt-oss-20b-8-loras-h100",
            "engine": "vllm",
            "engine_version": "0.13.0",
            "model": model,
            "gpu": "h100-sxm",
            "tensor_parallel_size": 1,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8_192,
            "max_num_seqs": 256,
            "slo": {"ttft_seconds": 1.0, "tpot_seconds": 0.05, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 28, "requests_waiting": 4, "kv_cache_capacity_tokens": pool},
        must_never=[
            ("replicas", "increase"),
            ("tensor_parallel_size", "increase"),
            *POOL_TURNS,
            ("max_num_seqs", "increase"),
            RESTART,
        ],
        extra_check=_all(
            _proposes_any(("max_loras", "increase")),
            _suggests("max_loras", "increase", at_least=8),
            no_stall_claimed,
        ),
    )


STATES = [
    llamacpp_strix_halo_mtp_np4_net_loss(),
    vllm_rtx_pro_6000_mtp_bs1_wins(),
    vllm_gpt_oss_8_loras_over_7_slots(),
]

XFAIL: dict[str, str] = {
    "llamacpp-strix-halo-mtp-np4-26-vs-34-tps-speculation-net-loss": (
        "speculative_decoding (advisor/rules/speculative.py) could not run ('running requests or TPOT unknown'): "
        "SpeculativeRule.measure() and _per_token() return None without a catalog GPU (the Strix Halo's Radeon "
        "8060S is not in advisor/data/gpus.csv; the deployment gives gpu_memory_gib 120), although the window holds "
        "428 drafts (1,286 draft tokens, 771 accepted: 2.8 tokens a round at 4 slots) and tokens_predicted_seconds / "
        "tokens_predicted gives 147 ms a token a slot; the unmeasured branch needs a TPOT histogram llama.cpp does "
        "not serve. No advice at all: speculation off or shorter (the thread measured 34.14 tokens/s without the "
        "draft against 26.35 with it at np 4, 8.54 against 6.80 a stream) is never proposed"
    ),
    "vllm-gpt-oss-20b-8-loras-over-7-gpu-slots-every-admission-swaps": (
        "missed fix (no rule): nothing proposes max_loras — advisor/rules/ has no LoRA rule and advisor/engines/"
        "vllm.py does not read vllm:lora_requests_info (max_lora 7, running adapters lora-0..lora-6, lora-7 "
        "waiting), and check-config refuses the reported deployment's LoRA keys on gpt-oss-20b ('LoRA on MoE models "
        "is not modelled'). With 4 requests waiting for an adapter slot beside a KV pool 2.9 % used the advisor "
        "gives no advice at all (goodput_below_target withheld: 'no dial turn to suggest'; seq_cap inactive: '28 "
        "running of a cap of 256, 4 waiting for a slot'): max_loras >= 8 (every adapter resident, nothing swapped "
        "CPU->GPU) is never proposed"
    ),
}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
