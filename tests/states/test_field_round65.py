"""Field states, round 65: a Triton TensorRT-LLM backend serving long prompts from a KV pool sized at half the free
memory, where the operator measured that a larger ``kv_cache_free_gpu_mem_fraction`` made long prompts faster —
from one public report.

The row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its model is not named, the docstring names the stand-in and why), and two scrapes one second apart
rendered as that engine prints them: Triton's ``tensorrtllm`` backend through
:func:`tests.states.test_field_round4_others._triton_trtllm` (the category-labelled ``nv_trt_llm_*_metrics`` gauges
of ``custom_metrics_reporter.cc`` of 2024, no ``request_type="waiting"``, and Triton core's
``nv_inference_request_success``). The assertions come from the report's numbers and verdict, never from the
advisor's output:

* ``triton-trtllm-h100-tp4-long-prompts-kv-fraction-0.5-raise-measured-faster`` —
  triton-inference-server/tensorrtllm_backend#575 ("why larger kv-cache memory will cause short prompt inference
  performance decrease?", August 2024, open): Llama-3 with a 32k context built for 4 GPUs on H100 with a paged KV
  cache, served by Triton per the backend's ``docs/llama.md``, "use the different ``KV_CACHE_FREE_GPU_MEM_FRACTION``
  value to test the inference performance … in long prompt case, it will increase the inference performance". The
  BEFORE page under long prompts: the pool full, requests held in the batcher. Must propose a larger memory
  fraction; never more sequences, never replicas.

This round holds one state, not three: within the round's time limit no unused vLLM V1 (0.8–0.11) report with a
measured preemption fix, nor an unused "looks alarming, needs nothing" report, was found (the candidates found —
vllm-project/vllm#14412, #18115, #21809, #44594, Tandemn-Labs/tandemn-system#11, tenstorrent/tt-xla#5874 — are
already rows of earlier rounds).

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

from tests.states.field import FieldState, round_tests
from tests.states.test_field_round4_others import _triton_trtllm


def triton_trtllm_long_prompts_half_fraction() -> FieldState:
    """triton-inference-server/tensorrtllm_backend#575 (August 2024, labelled bug, open): "NVIDIA-H100";
    ``trtllm-build --checkpoint_dir ./model/llama3_32k/fp16/4-gpu --gpt_attention_plugin float16
    --remove_input_padding enable --paged_kv_cache enable --context_fmha enable --gemm_plugin float16 --output_dir
    engines/fp16/4-gpu``, served "follow[ing] the llama example to run the trition server"; "use the different
    ``KV_CACHE_FREE_GPU_MEM_FRACTION`` value to test the inference performance. I notice that in long prompt case, it
    will increase the inference performance, but in short prompt case, it will decrease the performance". Expected:
    "larger kv-cache memory, in long prompt case, it should increase the inference performance" — which it did.

    The state is the BEFORE condition of the long-prompt case: the backend at the smaller fraction, long prompts
    arriving. What a long-prompt page at a pool too small for its batch shows: every block used, only a few of the
    active requests scheduled (the default ``GUARANTEED_NO_EVICT`` scheduler admits a request only when its blocks
    fit), the rest held in the batcher. The measured fix is one dial, the fraction raised: must propose a larger
    memory fraction (``gpu_memory_utilization`` increase, i.e. ``kv_cache_free_gpu_mem_fraction``). Must never:
    more sequences (the batch limit is not what holds them: the pool is), replicas (one second of history; the
    report's own fix is on the replica).

    Not asserted: the short-prompt regression the title asks about (a long-prompt page cannot show it); by how much
    the fraction should rise (the report quotes no values); any TTFT or throughput figure (the report gives none).

    Chosen where the report is silent: the model — Llama-3.1-70B-Instruct (the advisor's preset with Llama-3-70B's
    layers, KV heads and head size) as the stand-in for "llama3_32k" at TP 4 (the report names neither size nor
    fine-tune; 70B in fp16 needs the four H100s), ``max_model_len`` 32,768; the
    smaller fraction 0.5 (the value the backend's examples of 2024 fill in); the pool at 0.5 of the ~42 GB a GPU
    has left after 35 GB of weights and activations, at 80 KiB a token per GPU (320 KiB over four): 4,000 blocks of
    64 tokens (256,000 tokens); ``max_batch_size`` 64; long prompts of ~30,000 tokens with 512 out, so ~8 fit; the
    moment: 40 active, 8 scheduled, the pool 3,992 of 4,000 blocks used; one request finishes in the window, one
    context phase starts. Triton 24.08 (TRT-LLM 0.12, August 2024) with the 24.09 exposition (the same families).
    """
    blocks1 = {"tokens_per": 64.0, "used": 3_992.0, "free": 8.0, "max": 4_000.0}
    blocks2 = {"tokens_per": 64.0, "used": 3_996.0, "free": 4.0, "max": 4_000.0}
    first = _triton_trtllm(active=40, scheduled=8, context=0, max_batch=64, blocks=blocks1, success=900)
    second = _triton_trtllm(active=40, scheduled=8, context=1, max_batch=64, blocks=blocks2, success=901)
    return FieldState(
        id="triton-trtllm-h100-tp4-long-prompts-kv-fraction-0.5-raise-measured-faster",
        source="https://github.com/triton-inference-server/tensorrtllm_backend/issues/575",
        engine_version="Triton 24.08 tensorrtllm backend (TRT-LLM 0.12; 24.09 exposition, no waiting gauge)",
        deployment={
            "name": "llama3-70b-32k-triton-tp4",
            "engine": "triton-trtllm",
            "model": "meta-llama/Llama-3.1-70B-Instruct",
            "gpu": "h100-sxm",
            "tensor_parallel_size": 4,
            "max_model_len": 32_768,
            "max_num_seqs": 64,
            "kv_cache_config": {"free_gpu_memory_fraction": 0.5},
            "slo": {"ttft_seconds": 10.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 8, "kv_cache_capacity_tokens": 256_000},
        must_propose=[("gpu_memory_utilization", "increase")],
        must_never=[("max_num_seqs", "increase"), ("replicas", "increase")],
    )


STATES = [
    triton_trtllm_long_prompts_half_fraction(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails). The row of
tensorrtllm_backend#575 failed until admission_thrash offered the pool turns and TensorRT-LLM's budget dial became its
free-memory fraction (advisor.capacity.engines.memory_budget): only a 3 % context cap was proposed."""

once, test_field_state = round_tests(STATES, XFAIL)
