"""Issue 16, acceptance 1, 2 and 5: the capacity pass against operators' published start-up logs.

The cases live in ``tests/capacity/truth/*.yaml`` (one published log each, linked, with the log lines quoted; format
in ``tests/capacity/truth/README.md``). Every expected number is the engine's own, copied from the log; the
inputs are the engine arguments the source states. An input the source does not state is listed under
``inferred`` and such rows are reported apart. A case ``plan`` cannot answer (it refuses the configuration, or an
argument the source states has no ``plan`` equivalent) counts as a 100 % error.

Run ``python -m tests.capacity.truthtable`` for the table by case and by kind (what docs/capacity.md quotes).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from advisor.cli import main

TRUTH = Path(__file__).resolve().parent / "truth"
REPO = Path(__file__).resolve().parents[2]
GIB = 1 << 30

FLAG_OF: dict[str, dict[str, str]] = {
    "vllm": {
        "tensor_parallel_size": "--tp",
        "pipeline_parallel_size": "--pp",
        "data_parallel_size": "--dp",
    },
    "sglang": {
        "tp_size": "--tp",
        "tensor_parallel_size": "--tp",
        "dp_size": "--dp",
        "context_length": "--max-model-len",
        "page_size": "--block-size",
        "max_running_requests": "--max-num-seqs",
        "ep_size": "--enable-expert-parallel",
        "enable_ep_moe": "--enable-expert-parallel",
    },
}
"""Engine argument → ``plan`` flag where the names differ; every other argument maps to ``--`` + its dashed name."""

NO_MEMORY_EFFECT: dict[str, str] = {
    key: "serving front-end or logging: no effect on what the engine allocates"
    for key in (
        "host",
        "port",
        "served_model_name",
        "trust_remote_code",
        "disable_log_requests",
        "disable_log_stats",
        "api_key",
        "uvicorn_log_level",
        "log_level",
        "chat_template",
        "tokenizer",
        "tokenizer_mode",
        "download_dir",
        "seed",
        "revision",
        "load_format",
        "disable_custom_all_reduce",
        "enable_auto_tool_choice",
        "tool_call_parser",
        "reasoning_parser",
        "disable_radix_cache",
        "max_log_len",
        "distributed_executor_backend",
        "worker_use_ray",
        "model_path",
        "model",
    )
} | {
    "swap_space": "CPU swap space for preempted sequences: host memory, not the GPU's",
}
"""Stated arguments that change nothing the capacity pass counts (the reason each is dropped)."""

ENGINE_NO_MEMORY_EFFECT: dict[str, dict[str, str]] = {
    "sglang": {
        key: "no term of profile_max_num_token (SGLang model_runner.py): max_total_num_tokens = (free after load − "
        "free before load × (1 − mem_fraction_static)) ÷ cell size; these shape scheduling, compilation or launch"
        for key in (
            "max_prefill_tokens",
            "enable_p2p_check",
            "nnodes",
            "node_rank",
            "dist_init_addr",
            "torch_compile_max_bs",
            "enable_torch_compile",
            "schedule_policy",
            "schedule_conservativeness",
            "attention_backend",
            "sampling_backend",
            "enable_mixed_chunk",
        )
    },
}
"""Per engine, stated arguments with no term in its KV accounting."""

BOOLEAN_FLAGS = frozenset({"enforce_eager", "enable_expert_parallel", "ep_size", "enable_ep_moe", "kv_unified"})

NEGATABLE_FLAGS = frozenset({"enable_chunked_prefill", "enable_prefix_caching"})
"""Boolean engine arguments whose stated False differs from leaving them unset (the engine's default may turn them
on): ``plan`` takes them as ``--no-<flag>``."""


@dataclass
class Outcome:
    """One case run through ``plan --json``: the engine's tokens, ours (None = no answer) and why not."""

    case: dict[str, Any]
    engine_tokens: int
    ours: int | None
    reason: str = ""
    out: dict[str, Any] = field(default_factory=dict)

    @property
    def error(self) -> float:
        """Relative error of our KV tokens (ours ÷ engine − 1); no answer = 1.0 (100 %)."""
        if self.ours is None:
            return 1.0
        return self.ours / self.engine_tokens - 1.0

    @property
    def inferred(self) -> bool:
        return bool(self.case.get("inferred"))


def load(name: str) -> list[dict[str, Any]]:
    """The cases of ``tests/capacity/truth/<name>.yaml`` (``[]`` when the file is absent)."""
    path = TRUTH / f"{name}.yaml"
    if not path.exists():
        return []
    cases = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    assert isinstance(cases, list), f"{path}: a YAML list of cases"
    return cases


def engine_tokens(case: dict[str, Any]) -> int | None:
    """The engine's KV tokens: ``kv_cache_tokens``, else ``blocks × block_size`` (block 16 unless stated)."""
    eng = case.get("engine") or {}
    if eng.get("kv_cache_tokens"):
        return int(eng["kv_cache_tokens"])
    if eng.get("blocks"):
        return int(eng["blocks"]) * int(eng.get("block_size") or case.get("args", {}).get("block_size") or 16)
    return None


def stated_or_inferred(case: dict[str, Any], key: str) -> Any:
    """``case[key]``, else the value inferred for it (``inferred: {key: {value, why}}``), else None."""
    if case.get(key) not in (None, "", "missing"):
        return case[key]
    spec = (case.get("inferred") or {}).get(key)
    return spec.get("value") if isinstance(spec, dict) else None


TOP_LEVEL = frozenset(
    {"model", "model_config", "gpu", "gpu_name", "gpu_memory_gib", "engine_version", "generation", "args"}
)
"""``inferred`` keys that are not one engine argument: the case's own fields (``args``: the arguments listed under
``args`` were inferred as a whole, the why says from where)."""

OBSERVATIONS = frozenset({"avail_mem_before_load_gib"})
"""``inferred`` keys that record an engine reading the source trims, not an input (kept as evidence)."""


def plan_argv(case: dict[str, Any], engine: str) -> tuple[list[str], str]:
    """``plan`` arguments for the case (``--json`` added by the caller), and a reason when it cannot be planned."""
    argv = ["--engine", engine]
    config = stated_or_inferred(case, "model_config")
    model = str(REPO / config) if config else stated_or_inferred(case, "model")
    if case.get("model_config") == "missing" or not model:
        return [], "no model config.json"
    argv += ["--model", str(model)]
    gpu, gib, name = (stated_or_inferred(case, k) for k in ("gpu", "gpu_memory_gib", "gpu_name"))
    if gpu:
        argv += ["--gpu", str(gpu)]
    if gib:
        argv += ["--gpu-memory-gib", str(gib)]
    if not gpu and not gib:
        if not name:
            return [], "no GPU"
        argv += ["--gpu", str(name)]
    version = _release(case)
    if version:
        argv += ["--engine-version", str(version)]
    args = dict(case.get("args") or {})
    for key, spec in (case.get("inferred") or {}).items():
        if key in TOP_LEVEL or key in OBSERVATIONS:
            continue
        if not isinstance(spec, dict) or "value" not in spec or isinstance(spec["value"], dict | list):
            return [], f"inferred {key!r} is not one argument's value"
        args.setdefault(key, spec["value"])
    names = FLAG_OF.get(engine, {})
    dropped = NO_MEMORY_EFFECT | ENGINE_NO_MEMORY_EFFECT.get(engine, {})
    if engine == "sglang" and (args.get("mem_fraction_static") or _before(version, (0, 5, 3))):
        # they only enter the default mem_fraction_static of SGLang ≥ 0.5.3 (server_args.py
        # _handle_gpu_memory_settings); with the fraction known, or before 0.5.3, they size nothing
        dropped = dropped | {"chunked_prefill_size": "", "cuda_graph_max_bs": ""}
    for key, value in args.items():
        if key in dropped or value is None:
            continue
        flag = names.get(key, "--" + key.replace("_", "-"))
        if key in BOOLEAN_FLAGS or isinstance(value, bool):
            if value in (True, "true", "True") or (key == "ep_size" and int(value) > 1):
                argv.append(flag)
            elif key in NEGATABLE_FLAGS and value in (False, "false", "False"):
                argv.append("--no-" + flag.removeprefix("--"))
            continue
        if isinstance(value, dict | list):
            value = json.dumps(value)
        argv += [flag, str(value)]
    if "--max-model-len" not in argv:
        length = _model_max_len(str(model))
        if length is None:
            return [], f"model {model} unknown to plan (no preset, no config.json)"
        argv += ["--max-model-len", str(length)]
    return argv, ""


def _release(case: dict[str, Any]) -> str | None:
    """The engine release: the stated version when it names one, else the inferred one's first word (a source
    build prints setuptools-scm's ``0.1.devN``, which names none; the why says which release it was cut from)."""
    from advisor.capacity.kv import parse_version

    stated = case.get("engine_version")
    if stated and parse_version(str(stated)) is not None:
        return str(stated)
    spec = (case.get("inferred") or {}).get("engine_version")
    if isinstance(spec, dict) and spec.get("value"):
        return str(spec["value"]).split()[0]
    return str(stated) if stated else None


def _before(version: object, release: tuple[int, ...]) -> bool:
    from advisor.capacity.kv import parse_version

    parsed = parse_version(str(version)) if version else None
    return parsed is not None and parsed < release


def _model_max_len(model: str) -> int | None:
    """The engine's default ``max_model_len`` when the source states none: the model's own context (None: the
    model cannot be read)."""
    from advisor.errors import AdvisorError
    from advisor.modelfile import resolve_model

    try:
        return resolve_model(model, REPO).max_position_embeddings
    except (AdvisorError, OSError, ValueError):
        return None


def plan(argv: list[str]) -> tuple[dict[str, Any] | None, str]:
    """``capacity-advisor plan ARGV --json`` in process: (its JSON, "") or (None, what it said)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["plan", *argv, "--json"])
        except SystemExit as exc:  # argparse: an argument plan does not know
            code = int(exc.code or 2)
    if code == 3:  # vLLM would refuse to start (issue 19): the pool is still an answer when the pass got that far
        said = json.loads(out.getvalue())
        if "kv_cache_tokens" in said:
            return said, ""
    if code != 0:
        return None, (err.getvalue().strip().splitlines() or [f"exit {code}"])[-1]
    return json.loads(out.getvalue()), ""


def run(case: dict[str, Any], engine: str, *extra: str) -> Outcome:
    """One case through ``plan --json`` (plus ``extra`` arguments)."""
    tokens = engine_tokens(case)
    assert tokens, f"{case.get('id')}: no engine KV tokens"
    argv, why = plan_argv(case, engine)
    if why:
        return Outcome(case, tokens, None, why)
    out, said = plan([*argv, *extra])
    if out is None:
        return Outcome(case, tokens, None, said)
    return Outcome(case, tokens, int(out["kv_cache_tokens"]), "", out)


def outcomes(name: str, engine: str) -> list[Outcome]:
    """Every complete case of ``truth/<name>.yaml`` run."""
    return [run(c, engine) for c in load(name) if engine_tokens(c)]


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (linear interpolation, as numpy's default)."""
    s = sorted(values)
    if not s:
        return math.nan
    pos = (len(s) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summary(rows: list[Outcome]) -> dict[str, float]:
    """Median and p90 of |error|, and the count."""
    errs = [abs(r.error) for r in rows]
    return {
        "n": len(errs),
        "median": statistics.median(errs) if errs else math.nan,
        "p90": quantile(errs, 0.9),
    }


def _table(name: str, engine: str) -> Iterator[str]:
    rows = outcomes(name, engine)
    yield f"## {name} ({engine}): {len(rows)} cases"
    yield "| case | version | GPU | TP | kinds | engine tokens | ours | error |"
    yield "|---|---|---|---|---|---|---|---|"
    for r in rows:
        c = r.case
        tp = (c.get("args") or {}).get("tensor_parallel_size") or (c.get("args") or {}).get("tp_size") or 1
        ours = f"{r.ours:,}" if r.ours is not None else f"no answer ({r.reason[:80]})"
        yield (
            f"| [{c['id']}]({c['source']}){' (inferred)' if r.inferred else ''} | {c.get('engine_version', '?')} | "
            f"{c.get('gpu') or c.get('gpu_name') or c.get('gpu_memory_gib')} | {tp} | {','.join(c.get('kinds', []))} "
            f"| {r.engine_tokens:,} | {ours} | {r.error * 100:+.1f} % |"
        )
    yield from summary_lines(rows)


def summary_lines(rows: list[Outcome]) -> Iterator[str]:
    """The summary the docs quote: all rows (no answer = 100 %), stated vs inferred inputs, the answered rows
    alone, and by kind (all rows, then answered)."""

    def line(label: str, part: list[Outcome]) -> str:
        s = summary(part)
        return f"- {label}: n={s['n']}, median |error| {s['median'] * 100:.1f} %, p90 {s['p90'] * 100:.1f} %"

    answered = [r for r in rows if r.ours is not None]
    yield line("all (no answer = 100 %)", rows)
    yield line("stated inputs only", [r for r in rows if not r.inferred])
    yield line("with inferred inputs", [r for r in rows if r.inferred])
    yield line("answered", answered)
    reasons: dict[str, int] = {}
    for r in rows:
        if r.ours is None:
            key = "no config.json" if "config.json" in r.reason else r.reason.split(":")[-1].strip()[:60]
            reasons[key] = reasons.get(key, 0) + 1
    if reasons:
        yield "- no answer: " + "; ".join(f"{n} × {why}" for why, n in sorted(reasons.items(), key=lambda x: -x[1]))
    for k in sorted({k for r in rows for k in r.case.get("kinds", [])}):
        of_kind = [r for r in rows if k in r.case.get("kinds", [])]
        yield line(f"kind {k}", of_kind) + "; " + line("answered", [r for r in of_kind if r.ours is not None])[2:]


if __name__ == "__main__":
    for name, engine in (("vllm_v0", "vllm"), ("vllm_v1", "vllm"), ("sglang", "sglang")):
        for text in _table(name, engine):
            print(text)
        print()
    print("## vLLM, V0 and V1 together (acceptance 1)")
    for text in summary_lines(outcomes("vllm_v0", "vllm") + outcomes("vllm_v1", "vllm")):
        print(text)
    sys.exit(0)
