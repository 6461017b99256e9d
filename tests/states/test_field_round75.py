"""Field states, round 75: three SGLang and TGI pages where the thread measured a dial — an fp8 (e5m2) KV cache for a
ShareGPT burst of Llama-2-13B on one A100 (7.04 → 8.30 requests/s, +17.8 %), a fourth-to-eighth shard for
Llama-2-70B on a p4de's NVLinked A100s (15 % slower on average), and an EAGLE-3 draft for one stream of
Llama-3.3-70B at TP 8 on H100 (88.61 → 234.54 tokens/s) — each rendered as the page BEFORE that turn, from three
public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its model or GPU is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as that engine prints them: SGLang through :class:`tests.states.SGLangEngine` (the 0.5.x
exposition, as rounds 47, 69 and 72 replay the 0.4 releases), TGI through :class:`tests.states.
test_field_round3_others.TGIRouter` (no ``tgi_batch_max_total_tokens`` before v2.3.1, as rounds 3, 53, 57, 71 and 73
render TGI 1.x). The assertions come from the reports' numbers and the verdict each thread establishes, never from
the advisor's output:

* ``sglang-0.2-a100-llama2-13b-sharegpt-burst-pool-full-fp8-e5m2-kv-measured-17.8pct`` — sgl-project/sglang#1204
  ("[Feature] Support fp8 e5m2 kv cache with flashinfer", August 2024): "Add ``--kv-cache-dtype fp8_e5m2`` to enable
  this feature"; "Tested with llama2-13b-chat on A100, the throughput increased by 17.8% without accuracy
  degradation": 7.04 → 8.30 req/s, 1,000 ShareGPT prompts at ``--request-rate 128``, ``--tp=1``. Before the turn:
  the pool full, 80 running and ~500 queued. Must propose an fp8 KV cache, named ``fp8_e5m2`` (the measured value,
  the only fp8 one that release's ``--kv-cache-dtype`` accepts); never more sequences, replicas or a restart.
* ``tgi-1.1-p4de-llama2-70b-4-shards-one-stream-8-shards-measured-15pct-slower-never-more-shards`` —
  huggingface/text-generation-inference#1129 ("Questions on multi-gpu inference performance", October 2023), the
  reporter's 70B follow-up: "when I ran the same benchmark with ``llama-2-70b-hf-chat`` on ``p4de.24xlarge`` (4gpu vs
  8 gpu), I observed some performance slowdown (15% on average) when model is sharded over multiple GPUs and I've
  verified that the instance has nVlink" (TGI v1.1.0, prompts sent one at a time). Before the turn: four shards, one
  stream. Never more shards; never replicas or a restart.
* ``sglang-0.4.4-8xh100-tp8-llama3.3-70b-one-stream-eagle3-measured-2.65x-enable-speculation`` —
  sgl-project/sglang#4716 ("Fix EAGLE3 for llama3.3 70b", March 2025): ``meta-llama/Llama-3.3-70B-Instruct`` "on H100
  TP8", ``--cuda-graph-max-bs 1``, MT-bench's 80 questions: "w/o spec: … Throughput: 88.61 token/s"; "EAGLE3: …
  Throughput: 234.54 token/s, Acceptance length: 5.88". Before the turn: one stream at 11.3 ms a token. Must propose
  speculative decoding; never replicas or a restart.

One row fails today (``XFAIL``): ``speculative_decoding`` withholds the enable turn because it drafts only by n-gram
lookup (or a checkpoint's own MTP layers), never with the trained EAGLE-3 head the thread measured at 2.65× (a missed
turn). The SGLang row failed when written: ``kv_saturation`` proposed the fp8 cache as ``--kv-cache-dtype fp8_e4m3``, a
value that release refuses (the right turn, a flag the engine cannot take); since 2026-12-07 the flag is spelled by the
deployment's ``engine_version`` (``advisor.engines.flags``: ``fp8_e5m2`` before SGLang 0.4.2, sgl-project/sglang PR
#2786). The TGI row failed when written (``--num-shard 8`` offered, the turn the thread measured 15 % slower); since
2026-12-07 ``goodput_below_target`` lists the small-batch TP turn withheld
(``advisor.rules.goodput.SMALL_BATCH_TP_WITHHELD``: no report collected measured it winning).

Candidates set aside (within the round's time limit): NVIDIA/TensorRT-LLM#1875 (starcoder2-3b on A10G, TP 2 at 549 ms
against 568 ms on one GPU — 1,600 prompt and 200 generated tokens in 568 ms is not a full fp16 decode on an A10G, so
what was timed is not established), huggingface/text-generation-inference#515 (``--num-shard`` > 1 no faster on 24 GB
cards — no figures returned), #1641 (Medusa slower on an H100 — results as a screenshot), #1227 (TGI 1.1.0 against
1.0.3 — a release regression, not a dial), sgl-project/sglang#3002 (Qwen-72B on 8 × A100: TP 8 at 1.5× of TP 4, two
TP-4 instances "2x (apparently)" — the replica arm not measured), #5502 (EAGLE-3 ~1.5× on DeepSeek-R1-Distill-Llama-8B
— GPU and launch line not returned), #922 (16k-token TTFT on an A6000 — no dial measured), #3847 (throughput above
batch 128 — results as an image), ishandhanani/srt-slurm#210 (a PD prefill worker with four dials turned at once),
Tanguille/cluster#3735 (``--schedule-conservativeness`` — not a dial of the advisor's), predibase/lorax#259 (TGI
``--speculate 3`` "around 2X" on Mixtral — no GPU or workload); sgl-project/sglang#11045, #30815, #2087 and #4022,
huggingface/text-generation-inference#2007 and #1503 (set aside by rounds 68–71, for the reasons given there);
sgl-project/sglang#29358, #3471, #2150, #6995, #6949, #30160, huggingface/text-generation-inference#1315, #1221, #1493,
llm-d/llm-d#1840, #1887, 0xSero/GLM-5.3-Flash-DGX-Spark#1 — already rows of earlier rounds.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

from typing import Any

from tests.states import SGLangEngine
from tests.states.field import FieldState, matching, round_tests
from tests.states.test_field_round3_others import TGIRouter
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round5 import _all
from tests.states.test_field_round47 import _sglang_gauges


def _kv_dtype_named(value: str) -> Any:
    """Every proposed ``kv_cache_dtype`` turn names ``value`` (as its suggestion or in its flag)."""

    def check(result: dict[str, Any]) -> None:
        turns = matching(result.get("recommendations") or [], ("kv_cache_dtype", None))
        bad = [t for t in turns if value not in f"{t.get('suggested')} {t.get('flag')}"]
        assert not bad, f"kv_cache_dtype turn not {value}: {[(t.get('suggested'), t.get('flag')) for t in bad]}"

    return check


# --- 1. SGLang 0.2 (August 2024), Llama-2-13B on one A100, a ShareGPT burst, the pool full: fp8 e5m2 KV +17.8 %


def sglang_a100_llama2_13b_sharegpt_burst_fp16_kv() -> FieldState:
    """sgl-project/sglang#1204 ("[Feature] Support fp8 e5m2 kv cache with flashinfer", ispobock, 2024-08-25, merged):
    "Add ``--kv-cache-dtype fp8_e5m2`` to enable this feature. Currently it only works when flashinfer is not
    disabled"; "Tested with llama2-13b-chat on A100, the throughput increased by **17.8%** without accuracy
    degradation": "| N | 7.04 req/s | 0.487 | 0.340 |", "| Y | 8.30 req/s | 0.488 | 0.334 |" (fp8_e5m2 KV, throughput,
    MMLU, gsm8k); reproduced with ``python3 -m sglang.launch_server --model-path meta-llama/Llama-2-13b-chat-hf
    --port 30000 --trust-remote-code --disable-radix-cache --tp=1`` (and ``--kv-cache-dtype fp8_e5m2``) against
    ``python3 -m sglang.bench_serving --backend sglang --tokenizer meta-llama/Llama-2-13b-chat-hf --dataset-path
    ShareGPT_V3_unfiltered_cleaned_split.json --num-prompts 1000 --request-rate 128``. The e4m3 cache came five months
    later (sgl-project/sglang#2786, "Support FP8 E4M3 KV Cache", January 2025); until then SGLang's ``server_args.py``
    declared ``--kv-cache-dtype`` with ``choices=["auto", "fp8_e5m2"]``.

    The turn that helped, measured: on the same A100, model, flags and burst, an 8-bit KV cache took the run from 7.04
    to 8.30 requests/s (+17.8 %) at unchanged accuracy. The state is the page BEFORE it: the fp16 cache, the burst a
    minute in. Arithmetic: Llama-2-13B keeps 40 layers × 40 KV heads × 128 × 2 × 2 B = 800 KiB a token; SGLang's
    default ``mem_fraction_static`` at TP 1 (0.88) of an 80 GB card less 24.2 GiB of fp16 weights leaves ~45 GiB,
    ~58,000 tokens once activations are set aside. A thousand prompts at 128 a second have all arrived after 7.8 s; at
    7.04 answered a second the run lasts ~142 s, so hundreds wait for most of it, and the ~80 residents — ShareGPT's
    long conversations stay longest — hold ~678 tokens each, 93 % of the pool. Half the bytes a token doubles the
    residents the pool admits; the measured gain (+17.8 %) is what that buys once the larger batch's longer step is
    paid. Must propose the KV cache to fp8, named ``fp8_e5m2`` (the value measured, and the only fp8 value this release
    accepts: ``fp8_e4m3`` is refused at launch). Must never: more sequences (80 run under a request ceiling in the
    thousands — the pool, not the cap, holds the queue); replicas (one second of history); a restart (tokens flow).

    Not asserted: a larger ``mem_fraction_static`` (0.88 → 0.9 adds ~3 % of pool; not measured), 4-bit weights or a
    second GPU (not measured), the TTFT the burst produces (a benchmark of throughput).

    Chosen where the report is silent: the GPU — ``a100-80gb`` (the PR says "A100"; the 58,000-token pool needs the
    80 GB card); the model — ``meta-llama/Llama-2-13b-hf`` (the tables' Llama-2-13B: the chat model's geometry); the
    pool, 58,000 tokens (an input); ``max_num_seqs`` 4,096 (``--max-running-requests`` was left unset; SGLang derives
    its ceiling from the pool, far above the ~80 the pool holds: a stand-in); ``context_len`` 4,096 (the model's); the
    load — ShareGPT's ~215 prompt and ~198 generated tokens a request, answered after ~28 s (~27 s of it queued) at
    ~55 ms a token (80 streams: 80 ÷ 0.055 s ≈ 1,450 tokens/s against the ~1,390 of 7.04 requests/s, prefills taking
    the rest); the moment ~60 s in: 420 answered, 80 running, 500 queued, the pool 93 % used; the window: 7 answered
    and 7 admitted (7.04 a second), ~1,450 tokens decoded. SGLang of late August 2024 (``engine_version`` 0.2.14 stands
    in for the 0.2 release that carried the PR) replayed with the 0.5.x exposition. SLO: TTFT 10 s, TPOT 0.1 s.
    """
    model = "meta-llama/Llama-2-13b-hf"
    pool = 58_000
    tpot, prompt, output = 0.055, 215.0, 198.0
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=4_096, swa_tokens=0)
    eng.finish(420, prompt=prompt, output=output, ttft=28.0, tpot=tpot, queue=27.0)
    eng.prompt["true"] = 500 * prompt
    eng.generation["true"] = 420 * output + 80 * 300.0
    eng.itl.observe(tpot, 420 * (output - 1) + 80 * 299)
    _sglang_gauges(eng, running=80.0, queued=500.0, used=0.93 * pool, gen=80 / tpot)
    first = eng.render()
    eng.finish(7, prompt=prompt, output=output, ttft=30.0, tpot=tpot, queue=29.0)
    eng.prompt["true"] += 7 * prompt
    eng.generation["true"] += 80 / tpot
    eng.itl.observe(tpot, round(80 / tpot))
    _sglang_gauges(eng, running=80.0, queued=493.0, used=0.935 * pool, gen=80 / tpot)
    return FieldState(
        id="sglang-0.2-a100-llama2-13b-sharegpt-burst-pool-full-fp8-e5m2-kv-measured-17.8pct",
        source="https://github.com/sgl-project/sglang/pull/1204",
        engine_version="SGLang of late August 2024 (0.2 line), replayed with the 0.5.x exposition",
        deployment={
            "name": "llama2-13b-chat-sglang-a100",
            "engine": "sglang",
            "engine_version": "0.2.14",
            "model": model,
            "gpu": "a100-80gb",
            "tensor_parallel_size": 1,
            "mem_fraction_static": 0.88,
            "max_model_len": 4_096,
            "max_num_seqs": 4_096,
            "slo": {"ttft_seconds": 10.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 80, "requests_waiting": 493, "kv_cache_capacity_tokens": pool},
        must_propose=[("kv_cache_dtype", None)],
        must_never=[("max_num_seqs", "increase"), ("replicas", "increase"), RESTART],
        extra_check=_all(_kv_dtype_named("fp8_e5m2"), no_stall_claimed),
    )


# --- 2. TGI 1.1.0, Llama-2-70B on four of a p4de's eight A100s, one stream: eight shards measured 15 % slower ---------


def tgi_p4de_llama2_70b_tp4_one_stream() -> FieldState:
    """huggingface/text-generation-inference#1129 ("Questions on multi-gpu inference performance", Rogerwyf,
    2023-10-10, closed stale): "I have done some benchmarking with TGI ``v1.1.0`` on EKS … All tokens in the input
    prompts are fixed-length and generated randomly from the model's tokenizer. For each configuration I ran the
    inference **non-concurrently** for 100 prompts"; the reporter's follow-up (2023-10-22): "For some of the big models
    (e.g, 34b, 70b), single GPU is simply not an option, so my the purpose of my benchmark here is to see the tradeoff
    between having one big instance over 8 GPUs or two instances with each over 4 GPUs. Surprisingly, when I ran the
    same benchmark with ``llama-2-70b-hf-chat`` on ``p4de.24xlarge`` (4gpu vs 8 gpu), I observed some **performance
    slowdown (15% on average)** when model is sharded over multiple GPUs and I've verified that the instance has
    nVlink." The reporter's next thread (#1315, a row of round 71) measured the same shape on CodeLlama-34B (H100: 1, 2
    and 4 shards at 27.98, 28.02 and 31.77 ms a token). Round 71 set this thread aside for its A10G table; this row is
    its 70B comment, which #1315 does not carry.

    The turn that did not help, measured: on the same p4de (eight A100-80GB on NVSwitch), model and serial load, the
    70B sharded over eight GPUs ran 15 % slower on average than over four. The state is the page BEFORE it:
    ``--num-shard 4``, one request decoding, nothing queued. Arithmetic: Llama-2-70B in fp16 is ~138 GB, 34.5 GB a
    shard at four, read in ~17 ms at an A100's 2.0 TB/s; eight shards halve that read but double the all-reduce
    participants of the 160 collectives (two a layer) every token pays, and at one stream the collectives' latency,
    not bandwidth, is what they cost — the measured sum went the wrong way. Must never: more shards (tensor parallelism
    8, measured slower); replicas (one second of history, one stream); a restart (tokens flow).

    Not asserted: weight quantization (not measured), the serial latency itself (the thread gives the ratio only).

    Chosen where the report is silent: the model — ``meta-llama/Llama-2-70b-hf`` (the tables' Llama-2-70B, the chat
    model's geometry); the GPU ``a100-80gb`` (a p4de's); TPOT at four shards 30 ms (what a 70B decodes at over four
    A100s under TGI 1.1; the advisor's own prior puts it at 31 ms); the prompts — 500 random tokens, 200 generated
    (TGI 1.1's defaults ``--max-input-length 1024``, ``--max-total-tokens 2048``); the history — 100 prompts answered
    one after another; the window: one answered, the next admitted. TGI 1.1.0 (October 2023: no
    ``tgi_batch_max_total_tokens``). SLO: TTFT 2 s; TPOT 25 ms — the reporter was weighing eight GPUs against four,
    so the target sits under the 30 ms the page shows, where a tempted advisor reaches for more shards.
    """
    tpot, prompt, generated = 0.030, 500, 200
    tgi = TGIRouter(max_input=1_024, max_total=2_048, budget=None)
    tgi.arrive(101, prompt=prompt, max_new=generated)
    tgi.finish(100, generated=generated, tpot=tpot, queue=0.002)
    tgi.queue, tgi.batch, tgi.reserved = 0.0, 1.0, float(prompt + generated)
    first = tgi.render()
    tgi.arrive(1, prompt=prompt, max_new=generated)
    tgi.finish(1, generated=generated, tpot=tpot, queue=0.002)
    second = tgi.render()
    return FieldState(
        id="tgi-1.1-p4de-llama2-70b-4-shards-one-stream-8-shards-measured-15pct-slower-never-more-shards",
        source="https://github.com/huggingface/text-generation-inference/issues/1129",
        engine_version="TGI 1.1.0 (October 2023; no tgi_batch_max_total_tokens)",
        deployment={
            "name": "llama2-70b-chat-tgi-p4de-4-shards",
            "engine": "tgi",
            "engine_version": "1.1.0",
            "model": "meta-llama/Llama-2-70b-hf",
            "gpu": "a100-80gb",
            "tensor_parallel_size": 4,
            "max_model_len": 2_048,
            "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.025, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 1, "requests_waiting": 0},
        must_never=[("tensor_parallel_size", "increase"), ("replicas", "increase"), RESTART],
        extra_check=no_stall_claimed,
    )


# --- 3. SGLang 0.4.4 (March 2025), Llama-3.3-70B at TP 8 on H100, one stream: EAGLE-3 measured 88.61 → 234.54 tokens/s


def sglang_h100_tp8_llama33_70b_one_stream_no_spec() -> FieldState:
    """sgl-project/sglang#4716 ("Fix EAGLE3 for llama3.3 70b", ispobock, 2025-03-24, merged): "The
    [EAGLE3-LLaMA3.3-Instruct-70B](yuhuili/EAGLE3-LLaMA3.3-Instruct-70B) draft model has a different hidden size with
    the target model. It should be handled in fc layer"; "Tested ``meta-llama/Llama-3.3-70B-Instruct`` on H100 TP8:
    ``python3 -m sglang.launch_server --model meta-llama/Llama-3.3-70B-Instruct --speculative-algo EAGLE3
    --speculative-draft /sgl-workspace/EAGLE3-LLaMA3.3-Instruct-70B --speculative-num-steps 8 --speculative-eagle-topk
    8 --speculative-num-draft-tokens 64 --cuda-graph-max-bs 1 --dtype float16 --port 30000 --tp 8``"; "w/o spec:
    #questions: 80, Throughput: 88.61 token/s, Acceptance length: 1.00"; "EAGLE3: #questions: 80, Throughput: 234.54
    token/s, Acceptance length: 5.88"; and: "If use ``python3 -m sglang.test.send_one`` to test. The speedup is not
    significant for EAGLE3: acc_length=2.42 speed=100.43 token/s. After adjusting the system prompt, the speedup can
    keep align with the result with the MT-bench test."

    The turn that helped, measured: on the same eight H100s, model and MT-bench questions, the published EAGLE-3 draft
    took one stream from 88.61 to 234.54 tokens/s (2.65×; 5.88 tokens a verification round); the one-prompt probe with
    the wrong system prompt still gained (88.61 → 100.43). The state is the page BEFORE it: no speculation, one stream.
    Arithmetic: 88.61 tokens/s is 11.3 ms a token; Llama-3.3-70B in fp16 is ~141 GB, 17.6 GB a GPU at TP 8, read in
    ~5.3 ms at 3.35 TB/s, and the rest of the step is the 160 all-reduces and launches a token pays at batch 1 — costs
    a verification round amortizes over every accepted token (234.54 tokens/s: 4.3 ms a token, a ~25 ms round
    yielding 5.88). Must propose speculative decoding. Must never: replicas (one second of history, one stream); a
    restart (tokens flow).

    Not asserted: fp8 weights or more GPUs (not measured; TP 8 already fills the node), the draft's length (the thread
    measured 8 steps, top-k 8, 64 draft tokens; the advisor's speculation dial is on/off here).

    Chosen where the report is silent: the GPU ``h100-sxm`` (the PR's "H100"); ``mem_fraction_static`` 0.81 (SGLang's
    default at TP ≥ 8 in that line's ``server_args.py``); the pool, 1,200,000 tokens (0.81 of 79 GiB a GPU less 16.4
    GiB of weights at 40 KiB a token a GPU — Llama-3.3-70B keeps 80 layers × 8 KV heads × 128 × 2 × 2 B = 320 KiB a
    token, one KV head a GPU; an input); ``context_len`` 131,072 (the model's); the load — MT-bench's questions one at
    a time (the benchmark's single stream, ``--cuda-graph-max-bs 1``), ~150 prompt tokens with the system prompt and
    ~480 generated (stand-ins), 60 answered, TTFT 50 ms; the window: one answer ends and the next begins, 88 tokens
    decoded. SGLang of March 2025 (``engine_version`` 0.4.4) replayed with the 0.5.x exposition. SLO: TTFT 1 s; TPOT
    6 ms — between the 11.3 ms plain decoding and the 4.3 ms EAGLE-3 measured.
    """
    model = "meta-llama/Llama-3.3-70B-Instruct"
    pool = 1_200_000
    tpot, prompt, output = 1 / 88.61, 150.0, 480.0
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=131_072, swa_tokens=0)

    def gauges(used: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = 1.0, 0.0
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["token_usage"] = eng.g["full_token_usage"] = round(used / pool, 6)
        eng.g["gen_throughput"] = 88.61

    eng.finish(60, prompt=prompt, output=output, ttft=0.05, tpot=tpot, queue=0.0)
    eng.prompt["true"], eng.generation["true"] = 61 * prompt, 60 * output + 200.0
    eng.itl.observe(tpot, 60 * (output - 1) + 200)
    gauges(prompt + 200.0)
    first = eng.render()
    eng.finish(1, prompt=prompt, output=output, ttft=0.05, tpot=tpot, queue=0.0)
    eng.prompt["true"] += prompt
    eng.generation["true"] += 88.0
    eng.itl.observe(tpot, 88)
    gauges(prompt + 8.0)
    return FieldState(
        id="sglang-0.4.4-8xh100-tp8-llama3.3-70b-one-stream-eagle3-measured-2.65x-enable-speculation",
        source="https://github.com/sgl-project/sglang/pull/4716",
        engine_version="SGLang of March 2025 (0.4.4), replayed with the 0.5.x exposition",
        deployment={
            "name": "llama33-70b-sglang-8xh100",
            "engine": "sglang",
            "engine_version": "0.4.4",
            "model": model,
            "gpu": "h100-sxm",
            "tensor_parallel_size": 8,
            "mem_fraction_static": 0.81,
            "max_model_len": 131_072,
            "slo": {"ttft_seconds": 1.0, "tpot_seconds": 0.006, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 1, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        must_propose=[("speculative_decoding", "enable")],
        must_never=[("replicas", "increase"), RESTART],
        extra_check=no_stall_claimed,
    )


STATES = [
    sglang_a100_llama2_13b_sharegpt_burst_fp16_kv(),
    tgi_p4de_llama2_70b_tp4_one_stream(),
    sglang_h100_tp8_llama33_70b_one_stream_no_spec(),
]

XFAIL: dict[str, str] = {
    "sglang-0.4.4-8xh100-tp8-llama3.3-70b-one-stream-eagle3-measured-2.65x-enable-speculation": (
        "speculative_decoding (advisor/rules/speculative.py `_enable` / `_enable_withheld`) drafts only by n-gram "
        "lookup unless the checkpoint ships MTP layers, and withholds that n-gram turn here ('the requests read "
        "0.32 prompt tokens per token they generate … an n-gram draft proposes only spans the output repeats from its "
        "prompt'); goodput_below_target instead offers weight_quantization → fp8 ('the prior roofline TPOT from ~12 "
        "ms to ~8 ms', not measured). sgl-project/sglang#4716 measured the turn the rule cannot name: the published "
        "EAGLE-3 draft for this model (yuhuili/EAGLE3-LLaMA3.3-Instruct-70B) took one stream at TP 8 on H100 from "
        "88.61 to 234.54 tokens/s (acceptance length 5.88). Kind: a missed turn — no speculation proposed where a "
        "trained draft head was measured at 2.65×"
    ),
}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
