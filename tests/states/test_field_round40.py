"""Field states, round 40: llama.cpp server (``llama-server``) with one unified KV cache shared by its slots — too few
slots for the clients in front of a pool that has room, and many slots in front of a pool too small to fill them —
from two public reports of a project that deploys ``llama-server`` (Mesh-LLM).

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as ``llama-server --metrics`` prints them in 2026 (the rows of
:func:`tests.states.test_field_round3_others._llamacpp_rows`, no KV gauges after PR #13660). The assertions come from
the reports' numbers, the verdict each thread establishes and engine facts, never from the advisor's output:

* ``llamacpp-spark-unified-4-lanes-32-clients-ttft-80s-32-lanes-823ms`` — Qwen3-Coder-30B-A3B Q8_0 on a DGX Spark
  (GB10, 122 GB unified memory), four slots sharing one unified cache: at 32 concurrent 256-token chat completions
  86 tokens/s and TTFT p50 80 s; at 32 slots 210 tokens/s and 823 ms. All four slots busy, 28 deferred, the cache
  nearly empty. Propose more slots; never fewer, replicas, a pool turn or a restart.
* ``llamacpp-spark-unified-128-lanes-8192-cells-28-busy`` — the same node with ``parallel = 128`` whose launcher
  divided the KV budget by the lane count: an 8,192-cell unified cache, 28 slots busy during a 64-request burst,
  206 tokens/s (the 32-lane ceiling). The cells, not the slots, bind: never more slots, replicas, a lighter cache
  type (llama.cpp's cells are ``--ctx-size``, not bytes), a restart, or a per-request cap under the requests.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_others import _cap_at_least, _llamacpp, _llamacpp_rows
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all

SLO = {"ttft_seconds": 5.0, "tpot_seconds": 0.2, "target_ratio": 0.9}
"""Chosen: the reports give no SLO. TPOT 0.2 s is met by the 32-lane run the first report shipped (210 tokens/s over
32 streams ≈ 152 ms a token); TTFT 5 s is the 823 ms of that run with room, and far below the 4-lane run's 80 s."""

QWEN3_CODER_30B_CONFIG = """{
  "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "torch_dtype": "bfloat16",
  "num_hidden_layers": 48, "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 4,
  "head_dim": 128, "vocab_size": 151936, "intermediate_size": 6144, "max_position_embeddings": 262144,
  "tie_word_embeddings": false, "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768,
  "decoder_sparse_step": 1, "mlp_only_layers": []
}
"""
"""``Qwen/Qwen3-Coder-30B-A3B-Instruct``'s ``config.json`` (the advisor's table has Qwen3-30B-A3B, whose 40,960
positions are not the Coder's 262,144): Qwen3-30B-A3B's architecture — 48 layers, 4 KV heads of 128, 128 experts of
which 8 are active."""

SPARK = {"model": "qwen3-coder-30b-a3b.json", "gguf_file_type": "Q8_0", "gpu_memory_gib": 122.0}
"""Both rows: the checkpoint above as the reports' Q8_0 GGUF. The GB10 is not in the GPU catalog: its 122 GB of
unified memory, as the reports give it, stand for the device."""

SPARK_FILES = {"qwen3-coder-30b-a3b.json": QWEN3_CODER_30B_CONFIG}


def _longest(tokens: float) -> tuple[str, str, str, float]:
    """llama.cpp's ``n_tokens_max`` row (2026 ``to_metrics()``, typed a counter though a running maximum): the longest
    sequence (prompt + generation) a slot has held since start."""
    return ("n_tokens_max", "counter", "Largest observed sequence length (prompt + generation)", tokens)


def _counters(served: float, prompt: float, output: float, tpot: float, prompt_tps: float) -> dict[str, float]:
    """llama.cpp's counters after ``served`` requests of ``prompt`` + ``output`` tokens at ``tpot`` s a token."""
    return {
        "prompt": served * prompt,
        "prompt_s": served * prompt / prompt_tps,
        "gen": served * output,
        "gen_s": served * output * tpot,
        "decodes": served * output / 4.0,
        "busy_avg": 4.0,
        "prompt_tps": prompt_tps,
        "gen_tps": 1.0 / tpot,
    }


def _finish(c: dict[str, float], n: int, prompt: float, output: float, tpot: float, decodes: float) -> dict[str, float]:
    """``c`` after ``n`` more requests finished (llama.cpp adds a request's tokens when it ends) and ``decodes``
    more ``llama_decode`` calls."""
    return dict(
        c,
        prompt=c["prompt"] + n * prompt,
        prompt_s=c["prompt_s"] + n * prompt / c["prompt_tps"],
        gen=c["gen"] + n * output,
        gen_s=c["gen_s"] + n * output * tpot,
        decodes=c["decodes"] + decodes,
    )


# --- 1. four unified lanes, 32 clients: 28 deferred in front of a nearly empty cache -------------------------------


def llamacpp_spark_four_lanes_32_clients() -> FieldState:
    """Mesh-LLM/mesh-llm#1973 ("feat(cli): add --parallel to set serve lanes from the command line", merged): "The
    planner's auto default is 4 lanes, chosen conservatively because unified KV shares one context pool across lanes
    … That is right for a small box and leaves a lot on the table on a large one. Measured on a DGX Spark (GB10,
    122 GB unified) serving Qwen3-Coder-30B-A3B Q8_0, 256-token streamed chat completions":

        | Concurrency | 4 lanes (default)         | 32 lanes              |
        | 8           | 87 tok/s, TTFT p50 11.9 s | 98 tok/s, 453 ms      |
        | 16          | 86 tok/s, 34 s            | 145 tok/s, 605 ms     |
        | 32          | 86 tok/s, 80 s            | 210 tok/s, 823 ms     |

    The same node's auto plan holds a 131,072-cell cache (Mesh-LLM/mesh-llm#1974: "The auto plan on the same node
    holds 131,072").

    Engine facts: ``llama-server`` hands a task to an idle slot and defers it when none is idle
    (``requests_deferred``); with ``--kv-unified`` the slots share one cache of ``--ctx-size`` cells and each may grow
    to all of it (``n_ctx_seq = n_ctx``), so a slot costs no cells until its request writes them. Arithmetic: at 32
    clients four run and 28 wait for a slot; four streams hold 4 × (prompt + 256) ≈ 2,000 of 131,072 cells (~1.5 %).
    86 tokens/s over 4 streams is ~47 ms a token; a 256-token request holds its slot ~12 s, and 28 waiting ahead
    make the 80 s. At 32 lanes the same cache carries all 32 (~16,000 cells, 12 %) at 210 tokens/s, 2.4× the
    throughput and a hundredth of the TTFT. So the slot count binds, not the cells: propose more slots; never fewer
    (the cache is not what overflows: the requests are ~500 tokens), never replicas (one second), never a pool turn
    (98 % of the cells are free; llama.cpp's cells are ``--ctx-size``, a cache type only changes their bytes), never
    a restart or a stall claim (tokens flow), and a per-request cap, if any, not below the requests' ~500 tokens.

    Not asserted: how many slots (the report's 32 meets the SLO chosen here; the advisor's TPOT knee may stop lower).

    Chosen where the report is silent: prompts of 250 tokens (a coding chat's short turn); 2,000 requests served
    before the first scrape; in the window one request finishes (86 tokens/s ÷ 256 a request ≈ one each 3 s) and
    the next deferred one takes its slot, so the gauges stay at 4 busy and 28 deferred; the longest sequence since
    start (``n_tokens_max``) 1,200 tokens (a long turn's prompt and its 256).
    """
    prompt, output, tpot = 250.0, 256.0, 4 / 86
    c1 = _counters(2_000, prompt, output, tpot, prompt_tps=1_500.0)
    c2 = _finish(c1, 1, prompt, output, tpot, decodes=21.0)
    return FieldState(
        id="llamacpp-spark-unified-4-lanes-32-clients-ttft-80s-32-lanes-823ms",
        source="https://github.com/Mesh-LLM/mesh-llm/pull/1973",
        engine_version="llama.cpp server of September 2026 (no KV gauges)",
        deployment={
            "name": "mesh-spark-qwen3-coder-30b-4-lanes",
            "engine": "llamacpp",
            **SPARK,
            "max_model_len": 131_072,
            "ctx_size": 131_072,
            "parallel": 4,
            "kv_unified": True,
            "slo": SLO,
        },
        scrapes=[
            (
                _llamacpp([*_llamacpp_rows(c1, busy=4, deferred=28, kv=None), _longest(1_200.0)]),
                _llamacpp([*_llamacpp_rows(c2, busy=4, deferred=28, kv=None), _longest(1_200.0)]),
            )
        ],
        files=SPARK_FILES,
        snapshot={"requests_running": 4, "requests_waiting": 28},
        must_propose=[("max_num_seqs", "increase")],
        must_never=[
            ("replicas", "increase"),
            ("max_num_seqs", "decrease"),
            *POOL_TURNS,
            RESTART,
        ],
        extra_check=_all(_cap_at_least(506), no_stall_claimed),
    )


# --- 2. 128 unified lanes on 8,192 cells: 28 busy, the rest wait for cells -----------------------------------------


def llamacpp_spark_128_lanes_8192_cells() -> FieldState:
    """Mesh-LLM/mesh-llm#1974 ("fix(runtime): size the shared KV pool by budget, never by the lane override",
    merged): "``planned_context_length`` no longer divides the KV budget by ``parallel_override`` … Under
    ``kv_unified = true`` every lane shares one ``n_ctx`` allocation … Measured on a DGX Spark (GB10, 122 GB unified)
    serving Qwen3-Coder-30B-A3B Q8_0, read live from ``/api/runtime/llama`` during a c=64 burst with ``[gpu]
    parallel = 128``: ``slots_total`` 128, ``slots_busy`` 28, ``context_length`` 8,192. The auto plan on the same
    node holds 131,072. Admission reserves roughly prompt + 256 cells per request, so an 8k pool admits ~26
    sequences and the other ~100 lanes never fill. Aggregate throughput stalled at 206 tok/s, the same ceiling a
    32-lane server hit, which made a planner defect look like a hardware limit." The fix sizes the shared cache at
    the single-lane budget (131,072) whatever the lane count.

    Engine facts: with ``--kv-unified`` the 128 slots share ``--ctx-size`` = 8,192 cells; a request's cells are its
    prompt plus what it generates. Arithmetic: 8,192 ÷ 26 ≈ 315 cells a request (a ~60-token prompt and its 256
    tokens); 28 busy hold the cache; 64 − 28 = 36 wait. 100 slots stand idle: more slots add nothing, and fewer than
    the 28 the cells carry would cut throughput. The same node holds 131,072 cells (16×): the remedy is
    ``--ctx-size``, the cells, which the advisor names through its pool turns for llama.cpp (not asserted: which
    dial). Must never: more slots (128 already, 100 idle), replicas (one second), a lighter cache type (llama.cpp's
    cell count is ``--ctx-size``: q8_0 halves their bytes, not their number, and the GB10's 122 GB are not what
    binds), a restart, a stall claim (206 tokens/s flow), or a per-request cap under a request's ~315 tokens (the
    cap llama.cpp would need to hold 128 full slots in 8,192 cells is 64 tokens: it refuses every request).

    Chosen where the report is silent: the 36 requests the slots do not run are rendered as deferred (the report
    reads them as not admitted; where they wait, in llama-server's queue or Mesh-LLM's proxy, it does not say);
    prompts of 59 tokens; 5,000 requests served before the first scrape; in the window one request finishes and
    another starts (206 tokens/s ÷ 256 ≈ 0.8 a second); the longest sequence since start (``n_tokens_max``) 600
    tokens. ``max_model_len`` is the 8,192 cells a unified slot may grow to.
    """
    prompt, output, tpot = 59.0, 256.0, 28 / 206
    c1 = _counters(5_000, prompt, output, tpot, prompt_tps=1_500.0)
    c1["busy_avg"] = 28.0
    c2 = _finish(c1, 1, prompt, output, tpot, decodes=7.0)
    return FieldState(
        id="llamacpp-spark-unified-128-lanes-8192-cells-28-busy",
        source="https://github.com/Mesh-LLM/mesh-llm/pull/1974",
        engine_version="llama.cpp server of September 2026 (no KV gauges)",
        deployment={
            "name": "mesh-spark-qwen3-coder-30b-128-lanes",
            "engine": "llamacpp",
            **SPARK,
            "max_model_len": 8_192,
            "ctx_size": 8_192,
            "parallel": 128,
            "kv_unified": True,
            "slo": SLO,
        },
        scrapes=[
            (
                _llamacpp([*_llamacpp_rows(c1, busy=28, deferred=36, kv=None), _longest(600.0)]),
                _llamacpp([*_llamacpp_rows(c2, busy=28, deferred=36, kv=None), _longest(600.0)]),
            )
        ],
        files=SPARK_FILES,
        snapshot={"requests_running": 28, "requests_waiting": 36},
        must_never=[
            ("replicas", "increase"),
            ("max_num_seqs", "increase"),
            ("kv_cache_dtype", None),
            RESTART,
        ],
        extra_check=_all(_cap_at_least(315), no_stall_claimed),
    )


STATES = [
    llamacpp_spark_four_lanes_32_clients(),
    llamacpp_spark_128_lanes_8192_cells(),
]

XFAIL: dict[str, str] = {}

once, test_field_state = round_tests(STATES, XFAIL)
