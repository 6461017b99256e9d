"""Issue 16, acceptance 1 and 2: ``plan --json`` against published vLLM and SGLang start-up logs.

The cases and how they are run: :mod:`tests.capacity.truthtable`. Expected numbers are the engines' own, copied
from each log; nothing here is computed by the code under test except the figures being judged.
"""

from __future__ import annotations

import math
import re

import pytest

from tests.capacity import truthtable as tt

KINDS = set("ABCDEFGHI")
VLLM = [("vllm_v0", c) for c in tt.load("vllm_v0")] + [("vllm_v1", c) for c in tt.load("vllm_v1")]
SGLANG = [("sglang", c) for c in tt.load("sglang")]


@pytest.mark.parametrize(("file", "case"), VLLM + SGLANG, ids=lambda v: v if isinstance(v, str) else v.get("id"))
def test_each_case_is_a_linked_published_log_with_the_engines_own_number(file: str, case: dict[str, object]) -> None:
    assert re.fullmatch(r"[a-z0-9][a-z0-9._-]*", str(case.get("id"))), case.get("id")
    assert re.match(r"https?://\S+$", str(case.get("source"))), f"{case['id']}: source must be a link"
    assert str(case.get("quote", "")).strip(), f"{case['id']}: quote the log lines"
    assert tt.engine_tokens(case), f"{case['id']}: the engine's KV tokens (or blocks) must be printed"
    assert set(case.get("kinds") or []) <= KINDS, case["id"]  # type: ignore[arg-type]
    for key, spec in (case.get("inferred") or {}).items():  # type: ignore[attr-defined]
        assert isinstance(spec, dict) and spec.get("why"), f"{case['id']}: inferred {key} needs a why"


def test_case_ids_are_unique() -> None:
    ids = [c["id"] for _, c in VLLM + SGLANG]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


def test_the_vllm_table_spans_versions_generations_gpus_and_kinds() -> None:
    """Acceptance 1: ≥ 30 logs, vLLM 0.6 to today, V0 and V1, ≥ 6 GPUs, TP 1 up, every kind."""
    cases = [c for _, c in VLLM]
    assert len(cases) >= 30, len(cases)
    files = {f for f, _ in VLLM}
    assert files == {"vllm_v0", "vllm_v1"}
    gpus = {str(c.get("gpu") or c.get("gpu_name") or c.get("gpu_memory_gib")).lower() for c in cases}
    assert len(gpus) >= 6, gpus
    tps = {int((c.get("args") or {}).get("tensor_parallel_size") or 1) for c in cases}
    assert 1 in tps and max(tps) >= 8, tps
    versions = {str(c.get("engine_version") or "") for c in cases}
    assert any(v.startswith("0.6") for v in versions), versions
    covered = {k for c in cases for k in c.get("kinds") or []}
    assert covered >= KINDS - {"H"}, sorted(KINDS - {"H"} - covered)


def test_the_sglang_table_has_at_least_eight_logs() -> None:
    assert len(SGLANG) >= 8, len(SGLANG)


def _stated(rows: list[tt.Outcome]) -> list[tt.Outcome]:
    return [r for r in rows if not r.inferred]


@pytest.mark.xfail(
    strict=True,
    reason="measured on 32 stated rows since truth round 74c (2026-12-07): median 0.9 %, p90 8.5 % — "
    "Qwen3-235B-A22B-FP8 at PP 4 on four RTX PRO 6000s (vLLM 0.27.1) +9.0 % beside the same post's TP 4 (+1.1 %) and "
    "TP 4 + EP (−0.8 %): each stage's non-KV memory is ~4.4 GiB where TP 4's is ~2.5 and the pass gives 2.2 for both "
    "(likeliest the stage's unsharded FP8 MoE at 8,192 tokens; vLLM 0.19's PP 2 logs put the pipeline communicator at "
    "0.07 GiB; the post's table does not split the terms); then the RTX 3060 8k row (−14.4 %) and the two MiniMax "
    "AWQ rows (no config.json)",
)
def test_vllm_kv_tokens_are_within_3_percent_at_the_median_and_8_at_p90() -> None:
    """Acceptance 1, on the rows whose inputs the sources state (a case with no answer counts as 100 %); the rows
    with an inferred input are reported apart (docs/capacity.md). Strict xfail until 2026-12-07 (25 stated rows:
    median 0.6 %, p90 10.2 %); passing on 29 once four more published logs were added (0.9 %, 6.1 %); an expected
    failure again on 32 since three more stated rows (round 74c), one of them the PP 4 row above."""
    rows = _stated(tt.outcomes("vllm_v0", "vllm") + tt.outcomes("vllm_v1", "vllm"))
    s = tt.summary(rows)
    worst = sorted(rows, key=lambda r: -abs(r.error))[:8]
    detail = "; ".join(f"{r.case['id']} {r.error * 100:+.1f} % {r.reason[:100]}" for r in worst)
    assert s["median"] <= 0.03 and s["p90"] <= 0.08, f"{s} worst: {detail}"


def test_sglang_max_total_num_tokens_within_5_percent_at_the_median() -> None:
    """Acceptance 2."""
    rows = _stated(tt.outcomes("sglang", "sglang"))
    s = tt.summary(rows)
    worst = sorted(rows, key=lambda r: -abs(r.error))[:6]
    detail = "; ".join(f"{r.case['id']} {r.error * 100:+.1f} % {r.reason[:100]}" for r in worst)
    assert s["median"] <= 0.05, f"{s} worst: {detail}"


def _block_math_case(file: str, case: dict[str, object]) -> object:
    """The case, marked as an expected failure where plan cannot run it yet (the reason says why)."""
    why = ""
    if case.get("model_config") == "missing":
        why = "no published config.json of the model was found"
    elif " " in str(((case.get("inferred") or {}).get("model") or {}).get("value", "")):  # type: ignore[union-attr]
        why = "the inferred model is a description, not a preset id or config.json plan can load"
    elif "minimum" in str(case.get("notes") or "") and "rank" in str(case.get("notes") or ""):
        why = "the quoted KV GiB is one rank's; the engine keeps the smallest rank's blocks"
    marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
    return pytest.param(file, case, marks=marks, id=str(case.get("id")))


@pytest.mark.parametrize(
    ("file", "case"),
    [_block_math_case(f, c) for f, c in VLLM if (c.get("engine") or {}).get("kv_cache_gib")],
)
def test_with_the_logged_kv_memory_the_block_math_is_within_the_printed_rounding(
    file: str, case: dict[str, object]
) -> None:
    """Acceptance 1: ``--kv-cache-memory-gib`` = the logged KV GiB gives the engine's tokens to within what the
    two-decimal rounding of that GiB figure allows (± 0.005 GiB of per-GPU cache: the tokens' share ``0.005 ÷ GiB``),
    plus one block."""
    engine = case["engine"]
    gib = float(engine["kv_cache_gib"])  # type: ignore[index]
    got = tt.run(case, "vllm", "--kv-cache-memory-gib", f"{gib}")
    assert got.ours is not None, f"{case['id']}: {got.reason}"
    # the tokens are proportional to the cache (vLLM ≥ 0.21 prints hybrids' as concurrency × max-model-len, not
    # cache ÷ bytes per token), so ± 0.005 GiB moves them by that share of the whole
    block = got.out["block_size"]
    slack = math.ceil(got.ours * 0.005 / gib) + block
    if got.out.get("data_parallel_size", 1) > 1:
        slack *= got.out["data_parallel_size"]
    assert abs(got.ours - got.engine_tokens) <= slack, (
        f"{case['id']}: {got.ours:,} tokens vs the engine's {got.engine_tokens:,} (± {slack:,})"
    )
