"""Field states, round 62: SGLang on a consumer GPU — an RTX 5090 running MinerU's vision-language model at twenty
requests with the pool a quarter used and nothing queued — from a public report.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
the docstring names the stand-in and why), and two scrapes one second apart rendered as that engine printed them
then: SGLang 0.4.10 ``--enable-metrics`` (scheduler gauges and tokenizer counters of ``metrics/collector.py`` with
``engine_type``/``model_name`` labels; no ``max_total_num_tokens`` gauge before 0.5.23, catalog §2.1). The
assertions come from the report's numbers and verdict, never from the advisor's output:

* ``sglang-0.4.10-rtx5090-mineru-vlm-20-running-quarter-pool-no-queue`` — opendatalab/MinerU#3470: SGLang
  ``v0.4.10.post2-cu128-b200`` on one RTX 5090, 20 running, token usage 0.27, ``#queue-req: 0``, ~2,240 tokens/s;
  "25 % slower than RTX 4090". Busy but healthy by its own page: no advice at all.
"""

from __future__ import annotations

from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed

SLO = {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9}
"""Chosen: the report states no SLO."""


def _sglang_0410_page(
    model: str, *, running: float, queued: float, used: float, cap: float, gen_tps: float, prompt: float, gen: float,
    reqs: float, hit: float,
) -> str:  # fmt: skip
    """SGLang 0.4.10 ``--enable-metrics``: scheduler gauges (``num_running_reqs``, ``num_queue_reqs``,
    ``num_used_tokens``, ``token_usage`` as a fraction, ``gen_throughput``, ``cache_hit_rate``) and the tokenizer's
    token and request counters, labels ``engine_type="unified"`` + ``model_name``."""
    lab = f'{{engine_type="unified",model_name="{model}"}}'
    gauges = [
        ("num_running_reqs", "The number of running requests.", running),
        ("num_used_tokens", "The number of used tokens.", used),
        ("token_usage", "The token usage.", round(used / cap, 2)),
        ("gen_throughput", "The generation throughput (token/s).", gen_tps),
        ("num_queue_reqs", "The number of requests in the waiting queue.", queued),
        ("num_grammar_queue_reqs", "The number of requests in the grammar waiting queue.", 0.0),
        ("cache_hit_rate", "The prefix cache hit rate.", hit),
    ]
    counters = [
        ("prompt_tokens_total", "Number of prefill tokens processed.", prompt),
        ("generation_tokens_total", "Number of generation tokens processed.", gen),
        ("num_requests_total", "Number of requests processed.", reqs),
    ]
    out: list[str] = []
    for name, text, value in gauges:
        out += [f"# HELP sglang:{name} {text}", f"# TYPE sglang:{name} gauge", f"sglang:{name}{lab} {value:g}"]
    for name, text, value in counters:
        out += [f"# HELP sglang:{name} {text}", f"# TYPE sglang:{name} counter", f"sglang:{name}{lab} {value:g}"]
    return "\n".join(out) + "\n"


# --- 1. SGLang 0.4.10 on an RTX 5090: 20 running, a quarter of the pool, nothing queued -----------------------------


MINERU_VLM_CONFIG = """{
  "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "torch_dtype": "bfloat16",
  "num_hidden_layers": 24, "hidden_size": 896, "num_attention_heads": 14, "num_key_value_heads": 2,
  "intermediate_size": 4864, "vocab_size": 151936, "max_position_embeddings": 16384, "tie_word_embeddings": true
}
"""
"""Stand-in geometry for MinerU2.0-2505-0.9B's language model (a Qwen2-0.5B-sized decoder behind a vision tower;
not in the advisor's tables), in Qwen2 keys."""


def sglang_rtx5090_mineru_healthy() -> FieldState:
    """opendatalab/MinerU#3470 ("RTX 5090 underperforming on v0.4.10.post2-cu128-b200: 25 % slower than RTX 4090 –
    any Blackwell optimizations missing?", September 2025, closed): MinerU's ``vlm-sglang`` backend on the
    ``lmsysorg/sglang:v0.4.10.post2-cu128-b200`` image, one RTX 5090. The reporter's server log on the 5090, parsing a
    PDF whose pages share a ~7,400-token prefix ("#cached-token: 7406"): "Decode batch. #running-req: 20, #token:
    157401, token usage: 0.27, cuda graph: False, gen throughput (token/s): 2238.83, #queue-req: 0", then 19 running
    at 0.26 and ~2,110 tokens/s as pages finish.

    Arithmetic: 157,401 tokens at 0.27 is a pool of ~583,000 tokens; the 20 requests hold ~7,870 each, so the pool
    holds ~74 of them and 20 use a quarter; nothing waits. The verdict ("25 % slower than a 4090") is a comparison
    between two machines that no single ``/metrics`` page can show, and the thread names no dial — so nothing is
    asserted about a remedy. What the page does show is a busy server whose pool, batch and queue are all fine: no
    advice at all. In particular never a larger memory fraction (the pool is 27 % used), never more running requests
    (nothing is queued), never replicas (one second of history), never a restart (tokens flow).

    Not asserted: the ``cuda graph: False`` in the log line (the 0.4.10 page has no gauge for it), the GPU's speed.

    Chosen where the report is silent: MinerU2.0-2505-0.9B's decoder geometry (above); the moment: 2,000 pages
    answered before, prompts ~7,450 tokens (7,406 of them cached), ~130 tokens out; in the window ~2,200 tokens
    generated and one page finishes (20 → 19 running).
    """
    model = "opendatalab/MinerU2.0-2505-0.9B"
    cap = 583_000.0
    first = _sglang_0410_page(
        model, running=20, queued=0, used=157_401, cap=cap, gen_tps=2238.83, prompt=2000 * 7450.0,
        gen=2000 * 130.0 + 1500, reqs=2000, hit=0.99,
    )  # fmt: skip
    second = _sglang_0410_page(
        model, running=19, queued=0, used=151_853, cap=cap, gen_tps=2113.86, prompt=2001 * 7450.0,
        gen=2000 * 130.0 + 3700, reqs=2001, hit=0.99,
    )  # fmt: skip
    return FieldState(
        id="sglang-0.4.10-rtx5090-mineru-vlm-20-running-quarter-pool-no-queue",
        source="https://github.com/opendatalab/MinerU/issues/3470",
        engine_version="SGLang 0.4.10.post2 (cu128-b200 image; no max_total_num_tokens gauge)",
        deployment={
            "name": "mineru-vlm-sglang-rtx5090",
            "engine": "sglang",
            "model": "mineru-vlm.json",
            "gpu": "rtx5090",
            "max_model_len": 16_384,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        files={"mineru-vlm.json": MINERU_VLM_CONFIG},
        snapshot={"requests_waiting": 0},
        no_advice=True,
        must_never=[
            ("gpu_memory_utilization", "increase"),
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    sglang_rtx5090_mineru_healthy(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
