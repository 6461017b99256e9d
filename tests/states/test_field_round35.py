"""Field states, round 35: fleets of two or more replicas whose pages, read as one deployment, invite fleet advice that
is wrong — a LoRA adapter loaded on the first pod only after KEDA scaled the deployment out, a prefill/decode pair
whose prefill pod is idle by its role, one backend of a proxy's pool whose engine core deadlocked behind a healthy API
server, and a prefix-aware router that pins each prompt family to the pod holding its prefix — from four public
reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
per replica one second apart rendered through :class:`tests.states.VLLMEngine` (V1; the 0.11 label set for 2025
releases, the 0.33 set for 2026 ones), several data-parallel engines of one pod merged by
:func:`tests.states.test_field_pools.vllm_dp_text`, plus the families that class does not render written here from
the engine's source (``vllm:lora_requests_info``, ``vllm/v1/metrics/loggers.py``). The assertions come from the
reports' numbers, the verdict each thread establishes and engine facts, never from the advisor's output:

* ``vllm-aibrix-lora-adapter-on-first-pod-keda-scaled-base-spread`` — KEDA scaled an AIBrix deployment out under a
  LoRA load test: "all the traffic to the lora adapter always goes to the pod that initially was there when the
  ModelAdapter was created. Requests to the base model are still load balanced across the new backends"; "The
  controller is not triggering the adapter load for the new pods"; the fix loads the adapter on every pod and lists
  them all in its EndpointSlice. The first pod runs 96 and queues 24 at 93 % of its pool, the two new pods run 8
  base-model requests each. The autoscaler already added the pods the adapter cannot reach: propose spreading the
  load; never replicas either way, a pool turn, more sequences, more TP or a restart.
* ``vllm-0.22-dynamo-pd-kimi-k2.5-decode-pool-holds-17-of-96-per-rank`` — Kimi-K2.5-NVFP4 disaggregated on 8 × B200
  (a DP 4 + EP prefill pod, a DP 4 decode pod, NixlConnector), configured for 384 concurrent requests at 96 a decode
  rank: "the decode worker can hold ~29 seqs/rank standalone (~17/rank with the NIXL buffers), not the 96/rank";
  measured "effective concurrency (192.44*8/44.59 ≈ 34.5 vs the configured 384)". The prefill pod runs 0–1 a rank
  by its role (a prefill request lives for its prefill; its finished handoffs wait in its pool for the decode side to
  pull them). A prefill pod beside a decode pod is not a router's skew: never "spread the load", never replicas
  either way, more sequences, more TP or a restart.
* ``vllm-0.26-proxy-pool-one-backend-engine-core-deadlocked-two-serve`` — three self-hosted vLLM backends on DGX
  Sparks behind a proxy; one "deadlocked in its EngineCore during tool-call constrained decoding … The API server
  process kept serving ``GET /v1/models`` with 200": "engine frozen: ``Running: 2 reqs, 0.0 tokens/s``
  indefinitely", kept in rotation for 85 minutes until "an operator restarted the container", then "back in
  rotation, healthy". The others are "healthy-but-busy" with 100k-token prefills queued, deepened by retries that
  re-prefill the same prompts. The frozen page makes the data ``stale`` (the repository's reading of a page whose
  requests run while no counter moves); the restart comes first and names the frozen backend alone; never replicas,
  a pool turn, a context cap below the agents' prompts, or "spread the load".
* ``vllm-aibrix-prefix-aware-routing-four-l20-one-pod-queues-one-idle`` — ten request families of ~8,500 tokens
  sharing 8,000 each at 10 requests/s over four L20s: "prefix-aware routing has many failed requests (time out) due to
  load imbalance. It happens in prefix-aware routing because it prefers the prefix cached pod regardless of load
  imbalance"; the prefix-and-load-aware policy is the fix. One pod holds five families and queues at its pool's and
  its sequence cap's end while another holds none. Spread the load first; never replicas either way, a pool turn,
  prefix caching off, more sequences or more TP.

``once`` sees about one second of history, so no replica count may be proposed either way (it needs ≥ 30 s of
history to measure an arrival rate, and a fleet change is the autoscaler's or the rollout's, not one second's); every
row says so with ``("replicas", "increase")`` and ``("replicas", "decrease")`` in ``must_never``.
"""

from __future__ import annotations

import json
import time

from tests.states import VLLMEngine, go_float
from tests.states.field import REPO_ROOT, FieldState, round_tests
from tests.states.test_field_advice_states import STALL_RULES, _stalled_targets
from tests.states.test_field_pools import vllm_dp_text
from tests.states.test_field_round3_others import _cap_at_least
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all
from tests.states.test_field_round14 import _hybrid_pool

INTERACTIVE = {"ttft_seconds": 2.5, "tpot_seconds": 0.025, "target_ratio": 0.9}
"""An interactive chat SLO (25 ms a token; TTFT on a vLLM bucket bound): chosen where the reports state none."""

REPLICAS_EITHER_WAY = [("replicas", "increase"), ("replicas", "decrease")]


def _lora_info(running: str, waiting: str, max_lora: int, stamp: float) -> str:
    """``vllm:lora_requests_info`` as V1 serves it with ``--enable-lora`` (``vllm/v1/metrics/loggers.py``): a gauge
    whose value is the time of the last update and whose labels name the adapters of the running and waiting
    requests (comma-joined), no ``engine`` or ``model_name`` label."""
    labels = f'max_lora="{max_lora}",running_lora_adapters="{running}",waiting_lora_adapters="{waiting}"'
    return (
        "# HELP vllm:lora_requests_info Running stats on lora requests.\n"
        "# TYPE vllm:lora_requests_info gauge\n"
        f"vllm:lora_requests_info{{{labels}}} {go_float(stamp)}\n"
    )


# --- 1. AIBrix + KEDA: the adapter stays on the first pod, the scaled-out pods get base-model requests only ----------


def vllm_aibrix_lora_on_first_pod() -> FieldState:
    """vllm-project/aibrix#1095 ("ModelAdapters do not dynamically route to new pods", closed): "When I scale up my
    deployment using a lora adapter I see that all the traffic to the lora adapter always goes to the pod that
    initially was there when the ModelAdapter was created. Requests to the base model are still load balanced across
    the new backends … Steps to Reproduce: 1. Deploy a lora adapter with HPA on deployment 2. Load test to trigger
    scale up 3. Observe the number of running requests per pod are all on one pod. Expected behavior: Load should be
    balanced across all running pods"; "I am using a keda autoscaler on my backends"; a second operator: "The
    controller is not triggering the adapter load for the new pods." The fix (vllm-project/aibrix#1132, "Support
    adapter scaling to all replicas"): "allow controller to sync adapter instances with all active pods; load adapter
    on each pod; update EndpointSlice with all pod IPs".

    Engine and platform facts: the ModelAdapter controller loads the adapter into one pod (``/v1/load_lora_adapter``)
    and publishes that pod alone as the adapter's endpoint, so the gateway can send adapter requests nowhere else; a
    pod without the adapter cannot serve them at any load. vLLM V1 labels every family with the engine's served base
    name (adapter requests included) and serves ``vllm:lora_requests_info`` with the adapters its running and waiting
    requests use. KEDA's scale-up made the Deployment three pods; the two new ones started minutes ago. Arithmetic:
    Llama-3.1-8B keeps 128 KiB a token; an H100 at 0.9 with LoRA slots holds 419,920 tokens (26,245 blocks of 16, the
    capacity pass's figure for this deployment: an input here). The load test's requests hold ~3,500 prompt tokens and
    ~550 generated on average: the first pod's 96 running hold ~389,000 tokens, 93 % of its pool, and its 24 waiting
    wait for blocks; at batch 96 its step is ~28 ms (the weights' 16 GB and ~50 GB of KV read a step). Each new pod
    runs 8 base-model requests (its third of the base traffic, as the first pod does) at 7.7 % of its pool and ~9 ms
    a token. So the fleet has capacity the adapter cannot use: a replica count sized on the queue adds pods the
    controller never loads either (the autoscaler already did that twice), one sized on the fleet's average removes a
    pod the fix will spread the adapter to; a pool turn or more sequences on the first pod, more TP, or a restart
    answers none of it. The report's expected state — the load balanced across all running pods — is the turn.

    Not asserted: any turn on the first pod alone (its 28 ms a token is above the 25 ms chosen below; the thread's fix
    is the adapter's placement, not that pod's settings).

    Chosen where the report is silent: the base model (Llama-3.1-8B-Instruct) on one H100 SXM a pod at
    ``gpu_memory_utilization`` 0.9, ``max_model_len`` 8,192, ``--enable-lora --max-loras 1 --max-lora-rank 16``; the
    adapter's name (``lora-name``, the report's placeholder); the load test: adapter requests of ~3,500 prompt and
    ~1,100 output tokens at ~3 a second, base-model chat at ~2.4 a second; the first pod up three hours (9,000
    answered before the test), the new pods up six minutes (250 answered each). The window: the first pod finishes 3
    and admits 3 while 3 arrive (24 → 24 waiting); each new pod finishes and admits one. vLLM 0.9 of May 2025
    rendered with the 0.11 label set. SLO: :data:`INTERACTIVE`.
    """
    model = "meta-llama/Llama-3.1-8B-Instruct"
    blocks = 26_245
    pool = blocks * 16
    now = time.time()

    def pod(started: float, served: int, running: float, waiting: float, tpot: float, ttft: float) -> VLLMEngine:
        eng = VLLMEngine(
            model_name=model,
            num_gpu_blocks=blocks,
            max_model_len=8_192,
            gpu_memory_utilization=0.9,
            started=started,
        )
        eng.finish(served, prompt=3_500, output=1_100, ttft=ttft, tpot=tpot, queue=max(0.005, ttft - 0.3))
        eng.first_tokens([ttft] * (served + int(running)))
        eng.prefill((served + running) * 3_500, cached=(served + running) * 900)
        generated = served * 1_100 + running * 550
        eng.decode(generated, tpot, steps=generated / max(running, 1.0), batch=running)
        eng.running, eng.waiting, eng.kv_usage = running, waiting, running * 4_050 / pool
        return eng

    def window(eng: VLLMEngine, n: int, tpot: float, ttft: float) -> None:
        eng.finish(n, prompt=3_500, output=1_100, ttft=ttft, tpot=tpot, queue=max(0.005, ttft - 0.3))
        eng.first_tokens([ttft] * n)
        eng.prefill(n * 3_500, cached=n * 900)
        tokens = eng.running / tpot
        eng.decode(tokens, tpot, steps=1.0 / tpot, batch=eng.running)
        eng.kv_usage = eng.running * 4_060 / pool

    first = pod(now - 3 * 3_600.0, 9_000, 96.0, 24.0, tpot=0.028, ttft=8.0)
    first_a = first.render() + _lora_info("lora-name", "lora-name", 1, now - 1.0)
    window(first, 3, tpot=0.028, ttft=8.0)
    first_b = first.render() + _lora_info("lora-name", "lora-name", 1, now)
    scrapes = [(first_a, first_b)]
    for _ in range(2):
        new = pod(now - 360.0, 250, 8.0, 0.0, tpot=0.009, ttft=0.25)
        a = new.render() + _lora_info("", "", 1, now - 1.0)
        window(new, 1, tpot=0.009, ttft=0.25)
        scrapes.append((a, new.render() + _lora_info("", "", 1, now)))
    return FieldState(
        id="vllm-aibrix-lora-adapter-on-first-pod-keda-scaled-base-spread",
        source="https://github.com/vllm-project/aibrix/issues/1095",
        engine_version="vLLM 0.9 under AIBrix (KEDA on the Deployment), rendered with the 0.11 label set",
        deployment={
            "name": "llama31-8b-lora-aibrix",
            "engine": "vllm",
            "model": model,
            "gpu": "h100-sxm",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8_192,
            "enable_lora": True,
            "max_loras": 1,
            "max_lora_rank": 16,
            "slo": INTERACTIVE,
        },
        scrapes=scrapes,
        snapshot={"requests_running": 96 + 2 * 8, "requests_waiting": 24, "kv_cache_capacity_tokens": 3 * pool},
        must_first=("load_balancer", "set"),
        must_never=[
            *REPLICAS_EITHER_WAY,
            *POOL_TURNS,
            ("max_num_seqs", "increase"),
            ("tensor_parallel_size", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 2. Dynamo + vLLM 0.22, P/D on 8 × B200: the decode pool holds 17 a rank of the 96 configured -------------------

KIMI_K2_CONFIG = REPO_ROOT / "tests" / "fixtures" / "hf_configs" / "moonshotai__Kimi-K2-Instruct.json"


def _kimi_k25_nvfp4_config() -> str:
    """Kimi-K2's published text ``config.json`` (Kimi-K2.5 keeps its language model: 61 layers, MLA, 384 experts of
    which 8 a token) with the NVFP4 checkpoint's ``quantization_config`` (ModelOpt, attention and ``lm_head`` left in
    BF16: the report's "this checkpoint keeps all ``self_attn`` + ``lm_head`` in BF16 (see
    ``quantization_config.ignore``)")."""
    cfg = json.loads(KIMI_K2_CONFIG.read_text(encoding="utf-8"))
    ignore = ["lm_head", "*self_attn*"]
    cfg["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": ignore}
    return json.dumps(cfg, indent=1)


def vllm_dynamo_pd_kimi_decode_pool() -> FieldState:
    """ai-dynamo/aiconfigurator#1396 ("AIConfigurator's prediction fidelity is far from actual GPU benchmarking on
    Kimi-K2.5-NVFP4", open), the maintainer's reproduction on 8 × B200: "the vLLM sweep skips the KV-cache budget
    check … vLLM only exposes ``gpu_memory_utilization=0.92`` of 179 GiB, and this checkpoint keeps all ``self_attn``
    + ``lm_head`` in BF16 … so weights are 152 GiB/GPU … Net effect: top2's decode worker can hold ~29 seqs/rank
    standalone (~17/rank with the NIXL buffers), not the 96/rank the search selected. That matches your measured
    effective concurrency (192.44*8/44.59 ≈ 34.5 vs the configured 384). Fix direction: … so the search only picks
    KV-feasible batch sizes"; later: "| 1.0 … | 384 | 96 | 179.7 GiB of 180 … | 0.92 (version default) | 72 | 18 |
    161.7 GiB | The engine admits 28.98 seq/rank there, so the first row is the exact configuration this issue
    reported." The setup (ai-dynamo/aiconfigurator#1380, the same maintainer): "8×B200, Kimi-K2.5-NVFP4 … dynamo
    ``1.3.0-dev.1`` (vLLM 0.22.0), NixlConnector. Disagg 4 prefill GPUs (dp4 + EP) / 4 decode GPUs (dp4, tp1). ISL
    8150, OSL 1024, fp8 KV, ``max_model_len`` 9216 … a request in ``WAITING_FOR_REMOTE_KVS`` occupies full-prompt KV
    **out of the same pool as the running batch**".

    Engine facts: a prefill worker runs each request with ``max_tokens`` 1 (it finishes ``length`` after its one
    token) and keeps its blocks until the decode side has pulled them (NixlConnector ``delay_free_blocks``); the
    decode worker allocates a request's full prompt before pulling it (counted waiting, reason ``deferred``, 0.20+)
    and runs it for its 1,024 tokens. So a prefill rank's running count is the requests in their prefill at that
    instant, a decode rank's the requests decoding: the two pods' counts differ by their roles, not by a router.
    Arithmetic: 17 sequences of 9,216 tokens are 156,672 tokens a rank (2,448 blocks of 64, the MLA block), the
    engine's pool with the NIXL buffers; 34.5 requests decoding are ~8.6 a decode rank (9 + 8 + 9 + 8), each holding
    ~8,660 tokens, and 9 staged pulls a rank hold 8,150 each: (8.5 × 8,660 + 9 × 8,150) ÷ 156,672 = 94 %; the rest of
    the 384 wait: 40 for decode blocks, 76 handoffs pinned on the prefill pod (19 a rank, its pool full), 270 queued at
    the prefill ranks. 1,539 tokens/s over 34 streams is 22.4 ms a token; ~1.5 requests finish a second, so ~1.5 are
    pulled and ~1.5 prefilled (8,150 tokens each, ~0.4 s on a DP rank): a prefill rank runs 0 or 1 at any instant.
    Read as one fleet, the decode pod runs 34 and the prefill pod 2 — "one busy beside one idle" — but no balancer
    can send a decode stream to a prefill worker, and the prefill pod is not idle capacity. So must never: the load
    balancer (a role split, not a skew), fewer replicas (the prefill pod is half the pipeline), more replicas (one
    second; and the queue is the decode pool's configuration, the report's finding), more sequences (96 a rank is
    already five times what the pool holds), more TP, a restart (both pods move tokens).

    Not asserted: the concurrency cap itself (``max_num_seqs`` down to the pool's 17–18 a rank, the thread's
    operating point of 18) — one configuration serves both pods here, and the prefill pod's cap is not the decode
    pod's; a pool turn (the operator runs vLLM's default 0.92 and fp8 KV).

    Chosen where the report is silent: the SLO (TTFT 10 s, TPOT 50 ms: the report's 22.4 ms decodes on target, its
    queue of ~330 does not); the prefill pod's pool equal to the decode pod's (the NIXL buffers on both sides); the
    benchmark's requests finishing ``length`` at 1,024 (fixed OSL); the history: 2,000 requests answered on each side,
    TTFT ~180 s at the prefill pod (its queue ÷ the pipeline's 1.5 a second) and ~27 s at the decode pod (its wait for
    blocks and the pull). The window: on the decode pod 2 finish, 2 pulls complete and 2 are staged, 34 streams decode
    45 tokens each; on the prefill pod 2 prefills complete and 2 handoffs are pulled. Kimi-K2.5 is not in the
    advisor's tables: Kimi-K2's published config with the NVFP4 quantization config stands in (the same language
    model). vLLM 0.22.0 rendered with the 0.33 label set.
    """
    served = "nvidia/Kimi-K2.5-NVFP4"
    blocks, block, max_len = 2_448, 64, 9_216
    pool = blocks * block
    now = time.time()

    def engine() -> VLLMEngine:
        eng = VLLMEngine(
            model_name=served,
            num_gpu_blocks=blocks,
            block_size=block,
            max_model_len=max_len,
            gpu_memory_utilization=0.92,
            version="0.33",
            started=now - 2 * 3_600.0,
        )
        eng.cache_labels["cache_dtype"] = "fp8"
        return eng

    # prefill ranks: 2,000 handoffs done (TTFT ~180 s: the queue), 19 pinned each, ~68 queued each
    prefill = [engine() for _ in range(4)]
    for eng in prefill:
        eng.finish(500, prompt=8_150, output=1, ttft=180.0, tpot=0.0, queue=179.6, reason="length", max_tokens=1)
        eng.first_tokens([180.0] * 500)
        eng.prefill(500 * 8_150)
        eng.counters["vllm:generation_tokens"] += 500
        eng.hists["vllm:iteration_tokens_total"].observe(8_192, 500)
        eng.waiting = 68.0
        eng.kv_usage = 19 * 8_150 / (blocks - 1) / block
    for eng, running in zip(prefill, (1.0, 0.0, 0.0, 1.0), strict=True):
        eng.running = running
    prefill_first = vllm_dp_text(prefill)
    for eng, (done, running) in zip(prefill, ((1, 0.0), (0, 1.0), (1, 1.0), (0, 0.0)), strict=True):
        if done:
            eng.finish(done, prompt=8_150, output=1, ttft=180.0, tpot=0.0, queue=179.6, reason="length", max_tokens=1)
            eng.first_tokens([180.0] * done)
            eng.prefill(done * 8_150)
            eng.counters["vllm:generation_tokens"] += done
            eng.hists["vllm:iteration_tokens_total"].observe(8_192, done)
        eng.running = running

    # decode ranks: 2,000 answered (1,024 tokens at 22.4 ms, TTFT ~27 s), ~8.5 decoding, 9 staged, 10 waiting for blocks
    tpot = 1 / 44.59
    decode = [engine() for _ in range(4)]
    for eng, running in zip(decode, (9.0, 8.0, 9.0, 8.0), strict=True):
        eng.finish(500, prompt=8_150, output=1_024, ttft=27.0, tpot=tpot, queue=26.0, reason="length", max_tokens=1_024)
        eng.first_tokens([27.0] * int(500 + running))
        eng.prefill((500 + running) * 8_150, cached=(500 + running) * 8_150)  # the prompt arrives by pull
        generated = 500 * 1_024 + running * 512
        eng.decode(generated, tpot, steps=generated / running, batch=running)
        eng.running, eng.waiting, eng.deferred = running, 19.0, 9.0
        eng.kv_usage = (running * 8_660 + 9 * 8_150) / ((blocks - 1) * block)
    decode_first = vllm_dp_text(decode)
    for i, eng in enumerate(decode):
        done = 1 if i in (0, 2) else 0
        if done:
            eng.finish(done, prompt=8_150, output=1_024, ttft=27.0, tpot=tpot, queue=26.0, reason="length")
            eng.first_tokens([27.0] * done)
            eng.prefill(done * 8_150, cached=done * 8_150)
        eng.decode(eng.running * 45, tpot, steps=45, batch=eng.running)
        eng.kv_usage = (eng.running * 8_705 + 9 * 8_150) / ((blocks - 1) * block)
    return FieldState(
        id="vllm-0.22-dynamo-pd-kimi-k2.5-decode-pool-holds-17-of-96-per-rank",
        source="https://github.com/ai-dynamo/aiconfigurator/issues/1396",
        engine_version="vLLM 0.22.0 under Dynamo 1.3.0-dev.1, P/D with NixlConnector, DP 4 a pod (0.33 label set)",
        deployment={
            "name": "kimi-k25-nvfp4-pd-8xb200",
            "engine": "vllm",
            "engine_version": "0.22.0",
            "model": "kimi-k2.5-nvfp4-text.json",
            "served_model": served,
            "gpu": "b200",
            "data_parallel_size": 4,
            "enable_expert_parallel": True,
            "kv_cache_dtype": "fp8",
            "gpu_memory_utilization": 0.92,
            "max_model_len": max_len,
            "max_num_seqs": 96,
            "slo": {"ttft_seconds": 10.0, "tpot_seconds": 0.05, "target_ratio": 0.9},
        },
        files={"kimi-k2.5-nvfp4-text.json": _kimi_k25_nvfp4_config()},
        scrapes=[(prefill_first, vllm_dp_text(prefill)), (decode_first, vllm_dp_text(decode))],
        snapshot={
            "requests_running": 2 + 34,
            "requests_waiting": 4 * 68 + 4 * 19,
            "kv_cache_capacity_tokens": 8 * pool,
        },
        must_never=[
            ("load_balancer", None),
            *REPLICAS_EITHER_WAY,
            ("max_num_seqs", "increase"),
            ("tensor_parallel_size", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 3. a proxy's pool of three DGX Sparks: one engine core deadlocked behind a healthy API server ------------------


def vllm_proxy_pool_one_backend_deadlocked() -> FieldState:
    """azrtydxb/Fastllm-proxy#19 ("Health sweep (GET /v1/models) cannot detect vLLM engine-core deadlocks — hung
    backend stayed in rotation for 85 minutes", closed): "A production vLLM backend (Qwen3.6-35B on GB10, eugr nightly
    0.26.1rc1) deadlocked in its EngineCore during tool-call constrained decoding (xgrammar ``Failed to advance FSM``
    errors, then frozen scheduler). The API server process kept serving ``GET /v1/models`` with 200 … ``07:37:07`` —
    engine frozen: ``Running: 2 reqs, 0.0 tokens/s`` indefinitely … ``09:01:54`` — backend finally ejected — not by
    hang detection, but because an operator restarted the container … ``09:04:54`` — back in rotation, healthy. 85
    minutes of agent traffic was routed to a dead engine. Every request burned the full ``--upstream-timeout=120``
    and failed, and client-side retries re-prefilled huge prompts against the frozen engine". The same incident in
    its companions: the other self-hosted backends were "healthy-but-busy … 100k+ token prefills queue behind each
    other" (#20), and "Headers-timeout failover re-dispatches the **full request body** to the next backend … the
    entire prompt (50k–150k tokens) … failover converts one expensive request into up to ``1 + max_retries``
    expensive requests, each landing on a different backend of the pool" (#21).

    Engine facts: V1's API server answers ``/v1/models`` and ``/metrics`` from its own process; the gauges and counters
    are updated from the engine core's scheduler stats, so a frozen engine core leaves its page unchanged (2 running,
    0 waiting: requests the API server accepted since never reached the scheduler) while the process keeps
    answering. A long prompt's tokens are counted at its first token, so a backend mid-prefill moves only its decoding
    streams' counters. A page with requests running and no counter moving is ``stale`` data in this repository's
    reading (tests/states/test_field_advice_states.py, ``vllm-hang-one-request-running``): no capacity rule may read
    its gauges, and the stalled rule still speaks. Arithmetic: the stand-in's pool is 1,124,352 tokens a backend (549
    blocks of 2,048; the capacity pass's figure for this deployment is 1,125,392: an input here); the frozen backend's
    two requests hold ~176,000 tokens (16 %); each busy backend prefills one ~120,000-token prompt (8,192-token chunks,
    ~2,500 tokens/s: ~48 s) while two streams decode at ~25 ms and two more prompts wait (~45 % of its pool). So the
    restart the operator made is the advice, naming the frozen backend alone; and must never: more replicas (one
    second; the busy backends' queues are the frozen one's share failing over and the retries' second prefills),
    fewer, a pool turn (16–45 % used), a context cap below the agents' 150,000-token prompts, the load balancer (the
    proxy routes to the frozen backend evenly: its fault is its engine, not the routing), more sequences.

    Not asserted: the proxy's own fixes (a forward-progress probe, per-backend timeouts, no failover after the body
    was sent) — not the advisor's dials.

    Chosen where the report is silent: three backends (the report names one, "the fleet", "the pool"); Qwen3.6-35B-A3B
    and the GB10 are not in the advisor's tables: Qwen3-Next-80B-A3B in fp8 (the same hybrid Gated-DeltaNet MoE layout
    with ~3B active) stands in on the GB10's ~121 GiB (``gpu_memory_gib``), ``gpu_memory_utilization`` 0.85,
    ``max_model_len`` 262,144 (the report's 262k context), prefix caching on (Mamba ``align`` mode); each backend up a
    day, 300 agent turns answered (~60,000-token prompts, 80 % from the prefix cache, ~1,200 generated, TTFT ~40 s),
    the frozen one's counters standing since the freeze. The window: on each busy backend the two streams decode 40
    tokens each and the prefill advances a chunk (no prompt completes); the frozen backend serves the same page.
    vLLM 0.26.1rc1 rendered with the 0.33 label set. SLO: TTFT 80 s (below the proxy's 120 s timeout, on a vLLM
    bucket bound), TPOT 0.1 s.
    """
    served = "qwen3.6-35b-a3b"
    block, blocks, max_len = 2_048, 549, 262_144
    pool = block * blocks
    now = time.time()

    def backend() -> VLLMEngine:
        eng = VLLMEngine(
            model_name=served,
            num_gpu_blocks=blocks,
            block_size=block,
            max_model_len=max_len,
            gpu_memory_utilization=0.85,
            version="0.33",
            started=now - 86_400.0,
        )
        _hybrid_pool(eng, pool, max_len, "auto")
        eng.finish(300, prompt=60_000, output=1_200, ttft=40.0, tpot=0.025, queue=10.0)
        eng.first_tokens([40.0] * 302)
        eng.prefill(302 * 60_000, cached=302 * 48_000)
        eng.decode(300 * 1_199 + 2 * 600, 0.025, steps=300 * 1_199 / 2, batch=2)
        return eng

    frozen = backend()
    frozen.running, frozen.waiting, frozen.kv_usage = 2.0, 0.0, 86 / blocks
    frozen_page = frozen.render()
    busy = []
    for held in (250, 242):
        eng = backend()
        eng.running, eng.waiting, eng.kv_usage = 3.0, 2.0, held / blocks
        a = eng.render()
        eng.decode(2 * 40, 0.025, steps=40, batch=2)
        eng.kv_usage = (held + 4) / blocks  # the prefill's next chunks and the streams' tokens
        busy.append((a, eng.render()))
    return FieldState(
        id="vllm-0.26-proxy-pool-one-backend-engine-core-deadlocked-two-serve",
        source="https://github.com/azrtydxb/Fastllm-proxy/issues/19",
        engine_version="vLLM 0.26.1rc1 (eugr nightly) on DGX Spark, three backends behind a proxy (0.33 label set)",
        deployment={
            "name": "qwen36-35b-spark-pool",
            "engine": "vllm",
            "engine_version": "0.26.1",
            "model": "Qwen/Qwen3-Next-80B-A3B-Instruct",
            "served_model": served,
            "gpu_memory_gib": 121.0,
            "quantization": "fp8",
            "gpu_memory_utilization": 0.85,
            "max_model_len": max_len,
            "slo": {"ttft_seconds": 80.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        extra_config=STALL_RULES,
        scrapes=[(frozen_page, frozen_page), *busy],
        state="stale",
        state_reason_contains=("frozen",),
        snapshot={"requests_running": 2 + 3 + 3, "requests_waiting": 4, "kv_cache_capacity_tokens": 3 * pool},
        must_first=RESTART,
        must_never=[
            *REPLICAS_EITHER_WAY,
            *POOL_TURNS,
            ("load_balancer", None),
            ("max_num_seqs", "increase"),
        ],
        extra_check=_all(_stalled_targets(1), _cap_at_least(150_000)),
    )


# --- 4. AIBrix prefix-aware routing on four L20s: five prompt families on one pod, none on another ------------------


def vllm_aibrix_prefix_aware_one_pod_queues() -> FieldState:
    """vllm-project/aibrix#842 ("Ask for testing suggestions"), the AIBrix developer's benchmark: "The workload is
    sharing large portion of prefix. The workload has 10 different request types. All requests have ~8,500 sequence
    length. Within each request type, 8000 tokens are shared. This workload was created to show how far the
    prefix-and-load-aware routing can outperform non-prefix-aware routings such as least request and random. We used
    four NVIDIA L20 GPUs and average 10 RPS. … there are **prefix-aware** and **prefix-and-load-aware**. they are not
    the same. More importantly, prefix-aware routing has many failed requests (time out) due to load imbalance. It
    happens in prefix-aware routing because it prefers the prefix cached pod regardless of load imbalance."

    Engine and router facts: the prefix-aware policy sends a request to the pod whose cache holds its prefix; a family's
    first request lands by the fallback and every later one follows it, so each pod's load is the families it happened
    to collect, whatever its queue. vLLM's prefix cache serves the shared 8,000 tokens from blocks the family's
    requests share (the pool holds each family's prefix once), but every decode step still reads each sequence's whole
    context. Arithmetic: 10 families at 1 request/s each; the chosen placement puts five on pod A, three on B, two on C
    and none on D. With ~200 generated tokens a request, A must produce 1,000 tokens/s: at its cap of 256 sequences
    of ~8,600 tokens a step reads ~288 GB of KV (128 KiB a token) beside the 16 GB of weights — ~350 ms on an L20's 864
    GB/s, 730 tokens/s: its queue grows (60 → 61) and its pool is full (5 × 8,000 shared + 256 × ~600 private ≈ 99.9 %
    of 193,872); B (3 families) settles at ~50 running and 84 ms a token, C at ~15 and 38 ms, D runs nothing. Spread by
    the prefix-and-load-aware policy each pod runs ~80. So the turn is the router's; and must never: more replicas (a
    fifth pod gets no family either, like D; and one second), fewer (D is the capacity the fix uses), a pool turn or
    more sequences on A's numbers (a larger pool or cap adds more sequences to a step that is already ~350 ms), prefix
    caching off (the 8,000 shared tokens are the workload's point and the fix keeps them), more TP.

    Not asserted: TTFT or timeouts per pod beyond the histograms' (the report's curves are figures).

    Chosen where the report is silent: the model (Llama-3.1-8B-Instruct, AIBrix's benchmark model family, for the
    8,500-token requests), ``gpu_memory_utilization`` 0.9 and ``max_model_len`` 16,384 on one L20 a pod (12,117 blocks
    of 16, the capacity pass's figure for this deployment: an input here); ~200 generated tokens a request; the
    placement of the families (5/3/2/0: a draw the fallback makes about one time in four leaves a pod without any);
    ten minutes in: A answered 1,900 and 300 timed out (``abort``), B 1,800, C 1,200, D 4 warm-up requests. The
    window: A finishes 4 and admits 4 while 5 arrive, B finishes and admits 3, C 2. vLLM 0.8 of March 2025 rendered
    with the 0.11 label set. SLO: TTFT 2.5 s, TPOT 0.1 s.
    """
    model = "meta-llama/Llama-3.1-8B-Instruct"
    blocks = 12_117
    pool = blocks * 16
    now = time.time()

    def pod(
        served: int, aborted: int, running: float, waiting: float, tpot: float, ttft: float, shared: int
    ) -> VLLMEngine:
        eng = VLLMEngine(
            model_name=model, num_gpu_blocks=blocks, max_model_len=16_384, gpu_memory_utilization=0.9, started=now - 900
        )
        if served:
            eng.finish(served, prompt=8_500, output=200, ttft=ttft, tpot=tpot, queue=max(0.005, ttft - 0.2))
        if aborted:
            eng.finish(aborted, prompt=8_500, output=40, ttft=ttft, tpot=tpot, queue=ttft - 0.2, reason="abort")
        n = served + aborted + int(running)
        eng.first_tokens([ttft] * n)
        eng.prefill(n * 8_500, cached=(n - shared) * 8_000)
        generated = served * 200 + aborted * 40 + running * 100
        eng.decode(generated, tpot, steps=generated / max(running, 1.0), batch=running)
        eng.running, eng.waiting = running, waiting
        eng.kv_usage = (shared * 8_000 + running * 600) / pool
        return eng

    def window(eng: VLLMEngine, n: int, tpot: float, ttft: float, shared: int) -> None:
        eng.finish(n, prompt=8_500, output=200, ttft=ttft, tpot=tpot, queue=max(0.005, ttft - 0.2))
        eng.first_tokens([ttft] * n)
        eng.prefill(n * 8_500, cached=n * 8_000)
        eng.decode(eng.running / tpot, tpot, steps=1 / tpot, batch=eng.running)
        eng.kv_usage = (shared * 8_000 + eng.running * 602) / pool

    scrapes = []
    a = pod(1_900, 300, 256.0, 60.0, tpot=0.35, ttft=14.0, shared=5)
    first = a.render()
    window(a, 4, tpot=0.35, ttft=14.0, shared=5)
    a.waiting = 61.0
    scrapes.append((first, a.render()))
    for served, running, tpot, shared, n in ((1_800, 50.0, 0.084, 3, 3), (1_200, 15.0, 0.038, 2, 2)):
        eng = pod(served, 0, running, 0.0, tpot=tpot, ttft=0.6, shared=shared)
        first = eng.render()
        window(eng, n, tpot=tpot, ttft=0.6, shared=shared)
        scrapes.append((first, eng.render()))
    idle = pod(4, 0, 0.0, 0.0, tpot=0.02, ttft=0.6, shared=0)
    page = idle.render()
    scrapes.append((page, page))
    return FieldState(
        id="vllm-aibrix-prefix-aware-routing-four-l20-one-pod-queues-one-idle",
        source="https://github.com/vllm-project/aibrix/issues/842",
        engine_version="vLLM 0.8 under the AIBrix gateway (prefix-cache routing), rendered with the 0.11 label set",
        deployment={
            "name": "llama31-8b-aibrix-4xl20",
            "engine": "vllm",
            "model": model,
            "gpu": "l20",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 16_384,
            "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=scrapes,
        snapshot={"requests_running": 256 + 50 + 15, "requests_waiting": 61, "kv_cache_capacity_tokens": 4 * pool},
        must_first=("load_balancer", "set"),
        must_never=[
            *REPLICAS_EITHER_WAY,
            *POOL_TURNS,
            ("prefix_caching", "disable"),
            ("max_num_seqs", "increase"),
            ("tensor_parallel_size", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    vllm_aibrix_lora_on_first_pod(),
    vllm_dynamo_pd_kimi_decode_pool(),
    vllm_proxy_pool_one_backend_deadlocked(),
    vllm_aibrix_prefix_aware_one_pod_queues(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
