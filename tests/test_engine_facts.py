"""Acceptance 5: no engine metric name, prefix or bucket-bound list is written outside ``advisor/engines/``.

Every ``advisor/**/*.py`` outside ``advisor/engines/`` is parsed with :mod:`ast`; every string constant (f-string
parts included) is split into metric-name tokens, and a token fails the test when it is

* a family name the engine catalog knows (:func:`advisor.engines.catalog.all_metric_names`, with the
  ``_total``/``_bucket``/``_count``/``_sum``/``_created`` sample suffixes), or
* an engine or wrapper prefix (the catalog's, plus the known ones below) or a name that starts with one.

Bucket bounds: a literal tuple or list holding :data:`RUN` consecutive bounds of a catalog bucket set fails.

Not scanned: docstrings and other bare string statements (they cite sources and never run), and the names
listed in ``__all__`` (Python identifiers such as ``sglang_capacity``, not metric names).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from advisor.engines import catalog

PACKAGE = Path(__file__).resolve().parents[1] / "advisor"
KNOWN_PREFIXES = (
    "vllm:",
    "sglang:",
    "sglang_",
    "tgi_",
    "nv_trt_llm_",
    "trtllm_",
    "llamacpp:",
    "dynamo_",
    "ray_vllm_",
)
SUFFIXES = ("", "_total", "_bucket", "_count", "_sum", "_created")
TOKEN = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def forbidden() -> tuple[frozenset[str], tuple[str, ...]]:
    names = {n + s for n in catalog.all_metric_names() for s in SUFFIXES}
    prefixes = tuple(sorted(set(KNOWN_PREFIXES) | catalog.all_prefixes()))
    return frozenset(names), prefixes


def _skipped_constants(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings / bare string statements or ``__all__`` entries."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            skip.add(id(node.value))
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            value = node.value  # type: ignore[union-attr]
            if value is not None:
                skip.update(id(c) for c in ast.walk(value) if isinstance(c, ast.Constant))
    return skip


def engine_facts_in(source: str, filename: str) -> Iterator[tuple[int, str, str]]:
    """``(line, token, constant)`` for every engine name or prefix written in ``source``."""
    names, prefixes = forbidden()
    tree = ast.parse(source, filename)
    skip = _skipped_constants(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in skip:
            continue
        for token in TOKEN.findall(node.value):
            if token in names or token.startswith(prefixes):
                yield node.lineno, token, node.value


def package_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "engines" not in p.relative_to(PACKAGE).parts[:1])


def test_the_scan_sees_the_package_and_the_catalog() -> None:
    names, prefixes = forbidden()
    files = package_files()
    assert len(files) > 50, files
    assert not any(p.is_relative_to(PACKAGE / "engines") for p in files)
    # the catalog must hand the scan real names: the ones every adapter reads
    read = ("vllm:num_requests_running", "sglang:num_running_reqs", "tgi_queue_size", "llamacpp:requests_deferred")
    assert set(read) <= names
    assert "sglang_num_running_reqs" in names  # SGLang's second spelling
    assert {"vllm:", "sglang_", "nv_trt_llm_", "dynamo_frontend_"} <= set(prefixes)


@pytest.mark.parametrize(
    "source",
    [
        'X = "vllm:num_requests_running"',
        'def f(dep: str) -> str:\n    return f"tgi_batch_max_total_tokens{{{dep}}}"',
        'P = ("sglang:", "sglang_")',
        'N = "nv_trt_llm_kv_cache_block_metrics"',
        "def f() -> None:\n    g(name='trtllm_kv_cache_used_blocks')",
    ],
)
def test_the_scan_finds_an_engine_fact_written_in_code(source: str) -> None:
    assert list(engine_facts_in(source, "<test>"))


@pytest.mark.parametrize(
    "source",
    [
        '"""Reads ``vllm:num_requests_running`` (vllm/v1/metrics/loggers.py)."""',
        'X = 1\n"""``sglang:token_usage`` is rounded."""',
        '__all__ = ["sglang_capacity", "tgi_capacity"]',
        'E = "vllm"\nF = "--max-num-seqs"',
    ],
)
def test_docstrings_all_lists_and_engine_ids_are_not_engine_facts(source: str) -> None:
    assert not list(engine_facts_in(source, "<test>"))


def test_no_engine_metric_name_or_prefix_is_written_outside_advisor_engines() -> None:
    found = []
    for path in package_files():
        for line, token, constant in engine_facts_in(path.read_text(encoding="utf-8"), str(path)):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {token!r} in {constant[:80]!r}")
    assert not found, "engine facts outside advisor/engines/ (read them from the catalog):\n" + "\n".join(found)


RUN: Final = 8
"""Consecutive bounds that make a copy: shorter runs occur by chance (powers of two, the advisor's own buckets)."""


def bucket_runs() -> set[tuple[float, ...]]:
    """Every run of :data:`RUN` consecutive bounds in the catalog's bucket sets (latency buckets, reference
    families)."""
    sequences: list[tuple[float, ...]] = []
    for e in catalog.entries():
        sequences += [e.buckets.ttft, e.buckets.tpot]
        if e.exposition is not None:
            sequences += [f.buckets for f in e.exposition.families.values()]
    return {tuple(float(b) for b in s[i : i + RUN]) for s in sequences for i in range(len(s) - RUN + 1)}


def bucket_bounds_in(source: str, filename: str) -> Iterator[tuple[int, tuple[float, ...]]]:
    """``(line, run)`` for every literal tuple or list of numbers holding :data:`RUN` consecutive catalog bounds."""
    runs = bucket_runs()
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Tuple | ast.List):
            continue
        values = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, int | float)]
        if len(values) != len(node.elts) or len(values) < RUN:
            continue
        for i in range(len(values) - RUN + 1):
            run = tuple(float(v) for v in values[i : i + RUN])
            if run in runs:
                yield node.lineno, run
                break


def test_the_bucket_scan_finds_a_copied_bound_list() -> None:
    assert list(bucket_bounds_in("TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25)", "<test>"))
    assert list(
        bucket_bounds_in("def f() -> list[float]:\n    return [0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0]", "<t>")
    )
    assert not list(bucket_bounds_in("BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)", "<test>"))


def test_no_engine_bucket_bound_list_is_written_outside_advisor_engines() -> None:
    found = []
    for path in package_files():
        for line, run in bucket_bounds_in(path.read_text(encoding="utf-8"), str(path)):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {run}")
    assert not found, "engine bucket bounds outside advisor/engines/ (read them from the catalog):\n" + "\n".join(found)


# --- engine ids and vLLM's block sizes -------------------------------------------------------------------------

ENGINE_ID_RUN: Final = 4
"""Catalog engine ids in one literal that make a copy of the id list (a pair or three name which engines read
one key, as config.py's ENGINE_KEYS does)."""

OWN_ID_LISTS: Final = {
    "advisor/capacity/": "capacity is pure and lowest: it keeps its own ids (tests/engines/test_catalog.py checks "
    "they are catalog ids)",
    "advisor/config.py": "ENGINE_KEYS: which engines read each deployment key (a subset per key)",
}


def engine_id_lists_in(source: str, filename: str) -> Iterator[tuple[int, tuple[str, ...]]]:
    """``(line, ids)`` for every literal tuple, list or set of strings (``Literal[...]`` included) naming
    :data:`ENGINE_ID_RUN` or more catalog engine ids."""
    ids = set(catalog.engine_ids())
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Tuple | ast.List | ast.Set):
            continue
        values = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        named = tuple(v for v in values if v in ids)
        if len(values) == len(node.elts) and len(named) >= ENGINE_ID_RUN:
            yield node.lineno, named


def block_size_lists_in(source: str, filename: str) -> Iterator[int]:
    """Lines of every literal tuple or list of numbers holding vLLM's block sizes
    (:data:`advisor.engines.vllm.BLOCK_SIZES`) in order."""
    from advisor.engines.vllm import BLOCK_SIZES

    want = tuple(float(b) for b in BLOCK_SIZES)
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Tuple | ast.List):
            continue
        values = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, int | float)]
        if len(values) != len(node.elts) or len(values) < len(want):
            continue
        runs = (tuple(float(v) for v in values[i : i + len(want)]) for i in range(len(values) - len(want) + 1))
        if want in runs:
            yield node.lineno


def test_the_id_and_block_size_scans_find_copies() -> None:
    assert list(engine_id_lists_in('p.add_argument("--engine", choices=["vllm", "sglang", "tgi", "trtllm"])', "<t>"))
    assert list(engine_id_lists_in('E = Literal["vllm", "sglang", "tgi", "llamacpp", "dynamo"]', "<t>"))
    assert not list(engine_id_lists_in('K = {"ctx_size": ("llamacpp", "auto")}', "<t>"))
    assert list(block_size_lists_in("VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)", "<t>"))
    assert not list(block_size_lists_in("BUCKETS = (1, 8, 16, 32, 64, 128, 512)", "<t>"))


def test_no_engine_id_list_or_block_size_list_is_written_outside_advisor_engines() -> None:
    found = []
    for path in package_files():
        rel = path.relative_to(PACKAGE.parent).as_posix()
        text = path.read_text(encoding="utf-8")
        found += [f"{rel}:{line}: vLLM block sizes" for line in block_size_lists_in(text, rel)]
        if not rel.startswith(tuple(OWN_ID_LISTS)):
            found += [f"{rel}:{line}: engine ids {ids}" for line, ids in engine_id_lists_in(text, rel)]
    assert not found, "engine facts outside advisor/engines/ (read them from the catalog):\n" + "\n".join(found)
