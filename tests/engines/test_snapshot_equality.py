"""Every adapter's snapshots equal those of the reference code (commit c860c77), on every page shape.

The adapters' hot paths (``advisor.engines.common``, ``advisor.engines.vllm``, issue 15) were rewritten for speed;
this test holds them to the snapshots the straightforward code before the rewrite produced. The expected
snapshots (``snapshots_c860c77.json.gz``) were written by this module's ``__main__`` run against commit c860c77's
``advisor`` (``PYTHONPATH=<c860c77 tree> python tests/engines/test_snapshot_equality.py``): not by the code under
test, and no number in it was written by hand. One change since, on purpose: the 28 snapshots (12 ``bad-values`` /
``dp3-models-bad`` pages) where c860c77 raised ``ValueError('-inf + inf in fsum')`` (one rank's ``+Inf`` beside
another's ``-Inf``, or both in one rank) are the snapshots read now, with those sums unknown
(``advisor.engines.common.fsum_or_none``); every other snapshot of those pages was checked unchanged when they were
rewritten. A second, on purpose (issue 17): the llama.cpp adapter reads ``tokens_predicted_seconds_total`` and
``prompt_seconds_total`` now (the online calibration's TPOT without histograms), so a page that repeats them notes
those duplicates in ``missing`` too, as every adapter does for the families it reads since (the vLLM and llama.cpp
``spec_decode_*`` counters, SGLang's ``spec_*`` gauges, llama.cpp's ``n_tokens_max``, vLLM's and TGI's per-request
length histograms' ``_sum`` and ``_count``); :func:`_without_new_notes`
drops exactly those notes before comparing. A third
(issue 19): a page whose snapshot reads nothing because every value it holds is NaN is ``nan_values`` through
:func:`advisor.observe.observe` (4 ``nan-gauge``/``percent-nan`` variants); for those the snapshot read with that
check off must still equal the reference's, and read nothing (:func:`_observed_before_nan_values`). A fourth
(2026-12-05): the TensorRT-LLM adapters (Triton ``tensorrtllm``, ``trtllm-serve``) read running as what the last
iteration scheduled and waiting as ``active − scheduled`` (+ the executor's queue), with ``active − scheduled`` as the
capacity queue and the paused requests — the executor's ``IterationStats`` (``advisor/engines/trtllm.py``); the
reference read the active list as running. Those readings are checked by hand in
``tests/engines/test_triton_running_waiting.py`` and the conformance test; here every snapshot is compared with them
switched back to the reference's (:func:`_triton_as_reference`), so everything else still equals. With them, Triton's
``nv_inference_request_success`` (typed a counter without ``_total``, which the text parser renames) is read under
both spellings; the reference read neither on a scraped page; and the block counts are trusted when whole and at
most one block over ``max`` (a sum under ``max`` is a context's blocks in flight), where the reference asked
``|used + free − max| ≤ 1``.

Pages: every real capture in ``../shared/engine-metrics`` (``$ADVISOR_SHARED_DIR/engine-metrics`` when set; skipped
when absent), every hand-written fixture in
``tests/fixtures``, and, from each of them, generated variants (:data:`VARIANTS`): data-parallel ranks under every
engine's rank label (3 ranks, and 24 for the vLLM 0.33 capture), tensor-parallel replicas, a second and a
case-folded third model, Ray Serve's re-export (``ray_vllm_`` names, two ``ReplicaId`` replicas), NaN / ±Inf / negative
values, duplicate series (repeated lines, and an empty label), every other family missing, and a LoRA page. Each page
is read by every engine's adapter (``get_adapter``, so sanitized), for the default model and every model it lists,
and through :func:`advisor.observe.observe` (``engine: auto``); each snapshot is compared by its ``repr`` (exact
floats, histograms, ``missing`` in order).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import importlib.util
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from functools import cache, partial
from pathlib import Path
from typing import Any

import pytest

from advisor.observe import Observation

REPO = Path(__file__).resolve().parents[2]
CAPTURES = Path(os.environ.get("ADVISOR_SHARED_DIR") or REPO.parent / "shared") / "engine-metrics"
FIXTURES = REPO / "tests" / "fixtures"
GOLDEN = Path(__file__).with_name("snapshots_c860c77.json.gz")
MODELS_READ = 4
"""Models read per page and adapter (the default, then the first ``MODELS_READ`` listed)."""


# --- page generators (line-based; each keeps every family's lines together) ---------------------------------------


def _is_sample(line: str) -> bool:
    return bool(line) and not line.startswith("#")


def _map_samples(text: str, fn: Callable[[int, str], list[str]]) -> str:
    out: list[str] = []
    i = 0
    for line in text.splitlines():
        if _is_sample(line):
            out += fn(i, line)
            i += 1
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def _split(line: str) -> tuple[str, str, str]:
    """``name{labels} value [ts]`` → (name, labels without braces, the rest after the space)."""
    if "{" in line.split(" ", 1)[0] or ("{" in line and line.index("{") < line.index(" ")):
        name, rest = line.split("{", 1)
        labels, tail = rest.rsplit("}", 1)
        return name, labels, tail.lstrip(" ")
    name, tail = line.split(" ", 1)
    return name, "", tail


def _join(name: str, labels: str, tail: str) -> str:
    return f"{name}{{{labels}}} {tail}" if labels else f"{name} {tail}"


def _with_label(line: str, label: str, value: str) -> str:
    name, labels, tail = _split(line)
    return _join(name, f'{label}="{value}"' + ("," + labels if labels else ""), tail)


_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def _ranks(label: str, n: int) -> Callable[[str], str]:
    """Every labelled series repeated for ``label`` = 0 … n-1 (an existing value replaced)."""

    def page(text: str) -> str:
        def fn(_: int, line: str) -> list[str]:
            name, labels, tail = _split(line)
            if not labels:
                return [line]
            kept = ",".join(f'{k}="{v}"' for k, v in _LABEL.findall(labels) if k != label)
            return [_join(name, f'{label}="{r}"' + ("," + kept if kept else ""), tail) for r in range(n)]

        return _map_samples(text, fn)

    return page


def _models(text: str) -> str:
    """A second model (and a third, the second's spelling in another case) beside every model-labelled series."""

    def fn(_: int, line: str) -> list[str]:
        out = [line]
        for label in ("model_name", "model"):
            key = f'{label}="'
            if key in line:
                start = line.index(key) + len(key)
                end = line.index('"', start)
                out.append(line[:start] + "zz/Second-Model" + line[end:])
                out.append(line[:start] + "zz/second-model" + line[end:])
                break
        return out

    return _map_samples(text, fn)


def _bad_values(text: str) -> str:
    """NaN, +Inf, -Inf and negative values in place of some values."""
    swaps = {3: "NaN", 5: "+Inf", 7: "-1", 11: "-Inf"}

    def fn(i: int, line: str) -> list[str]:
        name, labels, tail = _split(line)
        for k, v in swaps.items():
            if i % k == k - 1:
                return [_join(name, labels, v + tail[len(tail.split(" ")[0]) :])]
        return [line]

    return _map_samples(text, fn)


def _duplicates(text: str) -> str:
    """Every other series repeated with another value; every third once more with an empty label added."""

    def fn(i: int, line: str) -> list[str]:
        name, labels, tail = _split(line)
        out = [line]
        if i % 2 == 0:
            out.append(_join(name, labels, "12345" + tail[len(tail.split(" ")[0]) :]))
        if i % 3 == 0:
            out.append(_with_label(_join(name, labels, "777" + tail[len(tail.split(" ")[0]) :]), "zz_empty", ""))
        return out

    return _map_samples(text, fn)


def _load_bench_parse() -> Any:
    """``bench/parse.py`` as a module: its ``_blocks`` (a page's lines per family) is the one the DP pages use."""
    spec = importlib.util.spec_from_file_location(
        "bench_parse", Path(__file__).resolve().parents[2] / "bench" / "parse.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_parse", module)  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


_blocks: Callable[[str], list[list[str]]] = _load_bench_parse()._blocks


def _missing(text: str) -> str:
    """Every other family dropped."""
    return "\n".join(x for i, b in enumerate(_blocks(text)) if i % 2 == 0 for x in b) + "\n"


def _ray(text: str) -> str:
    """Ray Serve's re-export: ``vllm:`` → ``ray_vllm_`` and two ``ReplicaId`` replicas (the second also DP rank 1)."""

    def fn(_: int, line: str) -> list[str]:
        if not line.startswith("vllm:"):
            return [line]
        line = "ray_vllm_" + line[len("vllm:") :]
        second = _with_label(line, "ReplicaId", "b2")
        second = second.replace('engine="0"', 'engine="1"')
        return [_with_label(line, "ReplicaId", "a1"), second]

    out = _map_samples(text, fn)
    return "\n".join(
        line.replace(" vllm:", " ray_vllm_", 1) if line.startswith("#") else line for line in out.splitlines()
    )


def _lora(text: str) -> str:
    """A ``vllm:lora_requests_info`` family of 40 series inserted halfway down."""
    name = "vllm:lora_requests_info"
    lines = [f"# HELP {name} Running stats on lora requests.", f"# TYPE {name} gauge"]
    for i in range(40):
        run = ",".join(f"lora-{(i * 7 + j) % 23}" for j in range(i % 5))
        lines.append(f'{name}{{max_lora="8",running_lora_adapters="{run}",waiting_lora_adapters="lora-{i}"}} {i}.5')
    blocks = _blocks(text)
    half = len(blocks) // 2
    return "\n".join([*(x for b in blocks[:half] for x in b), *lines, *(x for b in blocks[half:] for x in b)]) + "\n"


VARIANTS: dict[str, Callable[[str], str]] = {
    "dp3-engine": _ranks("engine", 3),
    "dp3-dp_rank": _ranks("dp_rank", 3),
    "tp2-tp_rank": _ranks("tp_rank", 2),
    "two-models": _models,
    "bad-values": _bad_values,
    "duplicates": _duplicates,
    "missing": _missing,
    "ray-replicas": _ray,
    "lora": _lora,
    "dp3-models-bad": lambda t: _bad_values(_models(_ranks("engine", 3)(t))),
    "dp2-dup-models": lambda t: _duplicates(_models(_ranks("dp_rank", 2)(t))),
}


@cache
def pages() -> dict[str, str]:
    """Name → text of every page compared: captures and fixtures, then their variants."""
    return dict(_pages())


def _pages() -> Iterator[tuple[str, str]]:
    sources: list[tuple[str, str]] = []
    if CAPTURES.is_dir():
        sources += [(f"capture/{p.name}", p.read_text()) for p in sorted(CAPTURES.glob("*.prom"))]
    sources += [(f"fixture/{p.relative_to(FIXTURES)}", p.read_text()) for p in sorted(FIXTURES.rglob("*.prom"))]
    for name, text in sources:
        yield name, text
        for variant, make in VARIANTS.items():
            page = make(text)
            if page != text:
                yield f"{name}+{variant}", page
        if name.startswith("capture/vllm-0.33"):
            yield f"{name}+dp24-engine", _ranks("engine", 24)(text)


def snapshots(text: str) -> dict[str, str]:
    """``"<engine> <model>"`` (and ``"observe"``) → ``repr`` of the snapshot (or of the error)."""
    from advisor.engines import ENGINES, get_adapter
    from advisor.observe import observe
    from advisor.sources.exposition import parse_exposition

    out: dict[str, str] = {}
    for engine in ENGINES:
        adapter = get_adapter(engine)
        try:
            expo = parse_exposition(text, keep=adapter.wants)
        except Exception as exc:  # a generated page the parser refuses: compared as such
            out[engine] = f"parse error {exc!r}"
            continue
        models = adapter.models(expo)
        out[f"{engine} models"] = repr(models)
        for model in (None, *models[:MODELS_READ]):
            out[f"{engine} {model}"] = _outcome(partial(adapter.snapshot, expo, model))
    out["observe"] = _outcome(lambda: _observed(observe(text, "auto", None, strict=False)))
    return out


def _observed(seen: Observation) -> tuple[object, ...]:
    return (seen.engine, seen.models, seen.error_reason, seen.snapshot)


def _observed_before_nan_values(text: str) -> str:
    """The ``observe`` outcome of ``text`` with the ``nan_values`` check off (the snapshot the reference read),
    asserting that snapshot reads nothing: the only pages the check may turn into ``nan_values``."""
    import advisor.observe as observe_module

    check = observe_module.reads_nothing
    seen: list[object] = []

    def recording(snap: Any) -> bool:
        assert check(snap), snap
        seen.append(snap)
        return False

    observe_module.reads_nothing = recording  # type: ignore[assignment]
    try:
        outcome = _outcome(lambda: _observed(observe_module.observe(text, "auto", None, strict=False)))
    finally:
        observe_module.reads_nothing = check
    assert seen, "nan_values without a snapshot that reads nothing"
    return outcome


def _outcome(read: Callable[[], object]) -> str:
    """``repr`` of what ``read`` returns, or of the exception it raises (an exception is an outcome too)."""
    try:
        return repr(read())
    except Exception as exc:  # compared, not handled
        return f"raises {exc!r}"


@cache
def _load() -> dict[str, dict[str, str]]:
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as f:
        data: dict[str, dict[str, str]] = json.load(f)
    return data


def test_the_pages_generated_are_the_pages_the_reference_read() -> None:
    """The generators above still make the pages the reference snapshots were taken of (else regenerate)."""
    golden = _load()
    digests = {name: hashlib.sha256(text.encode()).hexdigest() for name, text in pages().items()}
    if not CAPTURES.is_dir():
        pytest.skip(f"../shared/engine-metrics absent: {CAPTURES} is not a directory")
    assert digests == {name: entry["sha256"] for name, entry in golden.items()}


_NEW_NOTES = re.compile(
    r"'(?:llamacpp:(?:tokens_predicted_seconds_total|prompt_seconds_total|n_tokens_max(?:_total)?)"
    r"|(?:vllm|llamacpp):spec_decode_num_\w+_total|sglang:spec_(?:accept_length|num_draft_tokens|num_steps)"
    r"|vllm:request_(?:prompt|generation)_tokens_(?:sum|count)|tgi_request_(?:input_length|generated_tokens)_count)"
    r": \d+ duplicate series ignored \(the first sample kept\)', "
)
"""The duplicate notes of the families the adapters read since the reference (module docstring)."""


_SHIFT_NOTE = re.compile(r"\(used (\S+), free (\S+), max (\S+): values shifted\)")
"""The Triton block check's note as worded now; the reference's wording is ``(used u + free f ≠ max m: …)``."""


def _without_new_notes(got: dict[str, str]) -> dict[str, str]:
    return {
        key: _SHIFT_NOTE.sub(r"(used \1 + free \2 ≠ max \3: values shifted)", _NEW_NOTES.sub("", value))
        for key, value in got.items()
    }


@contextlib.contextmanager
def _triton_as_reference() -> Iterator[None]:
    """The TensorRT-LLM adapters' executor readings switched back to the reference's (module docstring): running and
    waiting as their tables' old first aliases say, no capacity queue, no paused requests."""
    from advisor.engines import trtllm
    from advisor.engines.tabular import TableAdapter
    from advisor.engines.trtllm import ExecutorStatsAdapter, TritonTRTLLMAdapter, TRTLLMServeAdapter
    from advisor.sources import selective_parser

    count, readings = ExecutorStatsAdapter.count, ExecutorStatsAdapter.extra_fields
    tables = {cls: cls.table for cls in (TritonTRTLLMAdapter, TRTLLMServeAdapter)}
    ExecutorStatsAdapter.count = TableAdapter.count  # type: ignore[method-assign]
    ExecutorStatsAdapter.extra_fields = lambda self, scope, ranks: {}  # type: ignore[method-assign]
    for cls, table in tables.items():
        running = tuple(a for a in cls.executor["active"])  # the reference read the active list as running
        cls.table = {k: v for k, v in table.items() if k not in ("requests_paused", "max_active_requests")}
        cls.table = {**cls.table, "requests_running": running}
    # Triton's success counter, typed without _total: the reference read only the name as written, which the text
    # parser renames (nv_inference_request_success_total); the fix reads both (advisor/engines/trtllm.py)
    finished = TritonTRTLLMAdapter.table["requests_finished_total"]
    TritonTRTLLMAdapter.table = {
        **TritonTRTLLMAdapter.table,
        "requests_finished_total": tuple(a for a in finished if not a.name.endswith("_total")),
    }
    # the selective parser remembers each engine's parse filter by engine id (advisor.observe._Keep): forget the
    # filters learnt with the tables in force, on both sides, so each side parses with its own
    # the Triton block check before it trusted a sum under max (a context's blocks in flight): |used + free − max| ≤ 1
    consistent, reason = trtllm.blocks_consistent, TritonTRTLLMAdapter.snapshot_missing_reason
    trtllm.blocks_consistent = lambda m, f, u: None not in (m, f, u) and abs(u + f - m) <= 1  # type: ignore[operator]

    def reference_reason(self: TritonTRTLLMAdapter, scope: Any, ranks: Any) -> str | None:
        values = {
            k: trtllm._first_gauge(scope, trtllm.TRITON_NAME_TABLE[k])
            for k in ("blocks_max", "blocks_free", "blocks_used")
        }
        for r in ranks:
            m, f, u = values["blocks_max"].get(r), values["blocks_free"].get(r), values["blocks_used"].get(r)
            if m is not None and f is not None and u is not None and abs(u + f - m) > 1:  # NaN: no note
                return f"nv_trt_llm_kv_cache_block_metrics (used {u:g}, free {f:g}, max {m:g}: values shifted)"
        return None

    TritonTRTLLMAdapter.snapshot_missing_reason = reference_reason  # type: ignore[method-assign]
    selective_parser._PLANS.clear()
    try:
        yield
    finally:
        trtllm.blocks_consistent = consistent
        TritonTRTLLMAdapter.snapshot_missing_reason = reason  # type: ignore[method-assign]
        selective_parser._PLANS.clear()
        ExecutorStatsAdapter.count = count  # type: ignore[method-assign]
        ExecutorStatsAdapter.extra_fields = readings  # type: ignore[method-assign]
        for cls, table in tables.items():
            cls.table = table


@pytest.mark.parametrize("name", list(pages()))
def test_snapshots_equal_the_reference_code(name: str) -> None:
    golden = _load()
    if name not in golden:
        pytest.skip(f"{name}: no reference snapshot")
    text = pages()[name]
    expected = dict(golden[name])
    expected.pop("sha256")
    with _triton_as_reference():
        got = _without_new_notes(snapshots(text))
        if "'nan_values'" in got["observe"]:
            got["observe"] = _observed_before_nan_values(text)
    for key in expected:
        assert got.get(key) == expected[key], f"{name}: {key}"
    assert got.keys() == expected.keys()


if __name__ == "__main__":  # write the reference file with the advisor on PYTHONPATH (commit c860c77's)
    import advisor

    print(f"advisor from {advisor.__file__}", file=sys.stderr)
    data = {
        name: {"sha256": hashlib.sha256(text.encode()).hexdigest(), **snapshots(text)} for name, text in pages().items()
    }
    with gzip.open(GOLDEN, "wt", encoding="utf-8") as f:
        json.dump(data, f, indent=0, sort_keys=True)
    print(f"{len(data)} pages, {sum(len(v) for v in data.values())} snapshots → {GOLDEN}", file=sys.stderr)
