"""The engine catalog: one entry per engine id, read by every consumer, and checked against real pages.

The simulator renders the catalog's reference expositions; if the catalog held a wrong name the simulator would
serve the same wrong name and a simulator-only test would pass. So the served family sets, and the names the
catalog says a release exposes, are held against real captures in ``../shared/engine-metrics`` (skipped with
the reason when ``../shared`` is absent; ``ADVISOR_SHARED_DIR`` points elsewhere).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from advisor import conventions as c
from advisor.capacity import engines as capacity_engines
from advisor.config import parse_config
from advisor.engines import ENGINES, catalog, get_adapter
from advisor.engines.catalog import CatalogEntry
from advisor.errors import ConfigError
from advisor.sim.engine import PrefixCaching
from advisor.sim.exposition import SGLangCollector, VLLMCollector, render
from advisor.sim.fleet import Fleet
from advisor.sim.metrics import SGLangMetrics, VLLMMetrics
from advisor.sim.traffic import LognormalLengths, Poisson, TrafficProfile
from tests.sim.conftest import llama_engine

SHARED = Path(os.environ.get("ADVISOR_SHARED_DIR") or Path(__file__).resolve().parents[2].parent / "shared")
CAPTURES = SHARED / "engine-metrics"
VLLM_0_33 = CAPTURES / "vllm-0.33.0-engine-code-healthy-llama3.1-8b.prom"
SGLANG_0_5_23 = CAPTURES / "sglang-0.5.23-engine-code-healthy-llama3.1-8b.prom"
LLAMACPP_2025_06 = CAPTURES / "llamacpp-unknown-2025-06-vulkan-pr13196-excerpt.prom"
DEPLOYMENT: dict[str, Any] = {
    "name": "chat",
    "targets": ["http://127.0.0.1:8000/metrics"],
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "gpu": "H100-SXM",
    "max_model_len": 8192,
    "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
}


def read_capture(path: Path) -> str:
    if not path.is_file():
        pytest.skip(f"{path} is absent (../shared is not checked out beside the repository)")
    return path.read_text(encoding="utf-8")


def families(text: str) -> dict[str, tuple[str, str, tuple[str, ...]]]:
    """family → (type, help, sorted le values)."""
    out: dict[str, tuple[str, str, tuple[str, ...]]] = {}
    for fam in text_string_to_metric_families(text):
        les = {s.labels["le"] for s in fam.samples if "le" in s.labels}
        out[fam.name] = (fam.type, fam.documentation, tuple(sorted(les, key=float)))
    return out


def sample_names(text: str) -> set[str]:
    return {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}


def simulated(engine: str) -> str:
    cfg = llama_engine()
    cfg = type(cfg)(**{**cfg.__dict__, "prefix_caching": PrefixCaching(0.1)})
    profile = TrafficProfile(Poisson(3.0), LognormalLengths(1500, 0.5, 300, 1.0))
    fleet = Fleet(cfg, profile, seed=7, observers=lambda i: [VLLMMetrics(cfg.max_model_len), SGLangMetrics()])
    fleet.advance(60.0)
    replica = fleet.replicas[0]
    v, s = replica.observers
    assert isinstance(v, VLLMMetrics) and isinstance(s, SGLangMetrics)
    if engine == "vllm":
        return render(VLLMCollector(replica, v, created=1.7e9)).decode()
    return render(SGLangCollector(replica, s, pid=4242)).decode()


# --- one catalog ------------------------------------------------------------------------------------------------


def test_every_engine_id_is_one_catalog_entry_and_every_consumer_reads_the_same_ids() -> None:
    ids = catalog.engine_ids()
    assert ids == ENGINES == ("vllm", "sglang", "tgi", "triton-trtllm", "trtllm", "llamacpp", "dynamo")
    # config validation accepts exactly the catalog's ids (and auto)
    for engine in ("auto", *ids):
        assert parse_config({"deployments": [dict(DEPLOYMENT, engine=engine)]}).deployments[0].engine == engine
    for e in catalog.entries():
        assert get_adapter(e.engine).engine == e.engine
        assert e.prefixes and all(isinstance(p, str) and p for p in e.prefixes)
    # the capacity pass (pure: it may not import the catalog) sizes a subset of the same ids
    assert set(capacity_engines.ENGINES) <= set(ids)


def test_an_unknown_engine_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"deployments": [dict(DEPLOYMENT, engine="vlm")]})
    [(where, message)] = err.value.problems
    assert where == "deployments[0].engine"
    assert "unknown engine 'vlm'" in message and "did you mean 'vllm'?" in message
    assert ", ".join(catalog.engine_ids()) in message
    with pytest.raises(ValueError, match=r"unknown engine 'vlm'; known engines: vllm, sglang"):
        catalog.entry("vlm")
    with pytest.raises(ValueError, match="unknown engine"):
        get_adapter("auto")


def test_each_engine_module_declares_its_own_entries() -> None:
    by_module = {
        m: [e.engine for e in __import__(f"advisor.engines.{m}", fromlist=["x"]).CATALOG_ENTRIES]
        for m in catalog.ENGINE_MODULES
    }
    assert by_module == {
        "vllm": ["vllm"],
        "sglang": ["sglang"],
        "tgi": ["tgi"],
        "trtllm": ["triton-trtllm", "trtllm"],
        "llamacpp": ["llamacpp"],
        "dynamo": ["dynamo"],
    }


@pytest.mark.parametrize("entry", catalog.entries(), ids=lambda e: e.engine)
def test_an_entry_is_complete(entry: CatalogEntry) -> None:
    # flags for every dial (the Dynamo frontend has none: the dials live on its workers)
    if entry.frontend_only:
        assert entry.flags is None
    else:
        assert entry.flags is not None and set(entry.flags) == set(c.DIALS)
    # every name the table reads carries the engine's prefix, a wrapper's, or is prometheus_client's / Triton core's
    for field, aliases in entry.name_table.items():
        assert aliases, field
        for s in aliases:
            assert s.source and s.versions, s
    # the PromQL model label is the adapter's
    assert entry.labels.get("model", (None,))[0] == entry.promql.model_label
    # bucket bounds strictly increasing, in seconds
    for bounds in (entry.buckets.ttft, entry.buckets.tpot):
        assert list(bounds) == sorted(set(bounds))
    assert entry.kv.usage and entry.kv.capacity
    for term in entry.kv.derived:
        assert term.used in entry.name_table and term.maximum in entry.name_table
        assert term.free is None or term.free in entry.name_table


def test_wrappers_are_named_as_wrappers_of_their_engine() -> None:
    wrapped = {w.name: e.engine for e in catalog.entries() for w in e.wrappers}
    assert wrapped["Triton vLLM backend"] == "vllm"
    assert wrapped["Ray Serve LLM"] == "vllm"
    assert wrapped["vLLM production-stack"] == "vllm"
    assert {wrapped[n] for n in wrapped if n.startswith("Dynamo")} == {"vllm", "sglang", "trtllm"}
    for e in catalog.entries():
        for w in e.wrappers:
            assert f"engine: {e.engine}" in w.note, w


def test_rules_generate_reads_the_catalog_s_buckets_and_promql_handling() -> None:
    from advisor import rulesgen

    assert {k: v for k, v in rulesgen.ENGINE_BUCKETS.items()} == {e.engine: e.buckets for e in catalog.entries()}
    sglang = catalog.entry("sglang")
    text = "\n".join(rulesgen._kv_usage_terms())
    assert sglang.promql.alt_prefix is not None
    for prefix in sglang.promql.alt_prefix:
        assert prefix + "full_token_usage" in text
    # the derived terms come from the catalog's KV accounting: TGI's reservation ratio, Triton's checked blocks
    tgi = catalog.entry("tgi")
    for term in tgi.kv.derived:
        assert tgi.name_table[term.used][0].name in text and tgi.name_table[term.maximum][0].name in text
    # Triton's checked blocks: one whole-number check of the free count per alias generation
    assert text.count("== floor(") == 2 * len(catalog.entry("triton-trtllm").name_table["blocks_used"])


# --- the simulator's family sets against real pages ----------------------------------------------------------------


@pytest.mark.parametrize(("engine", "capture"), [("vllm", VLLM_0_33), ("sglang", SGLANG_0_5_23)])
def test_every_family_the_simulator_serves_is_on_the_real_page_with_its_type_help_and_buckets(
    engine: str, capture: Path
) -> None:
    real = families(read_capture(capture))
    served = families(simulated(engine))
    problems = [
        f"{name}: simulated {served[name]} != real {real.get(name)}"
        for name in sorted(served)
        if real.get(name) != served[name]
        and not (name in real and real[name][:2] == served[name][:2] and not real[name][2])
    ]
    # token-count histograms are sized by max_model_len (1-2-5 series): compare their bounds only where fixed
    problems = [p for p in problems if not _is_sized_by_model_len(engine, p)]
    assert not problems, "\n".join(problems)


def _is_sized_by_model_len(engine: str, problem: str) -> bool:
    name = problem.split(":", 2)[0] + ":" + problem.split(":", 2)[1] if engine == "vllm" else problem
    family = catalog.reference_exposition(engine).families
    fixed = {f.name for f in family.values() if f.buckets or f.kind != "histogram"}
    return engine == "vllm" and name not in fixed


@pytest.mark.parametrize(("engine", "capture"), [("vllm", VLLM_0_33), ("sglang", SGLANG_0_5_23)])
def test_the_catalog_s_reference_families_are_on_the_real_page(engine: str, capture: Path) -> None:
    real = families(read_capture(capture))
    exposition = catalog.reference_exposition(engine)
    missing = [
        f"{f.name} ({f.kind}; real: {real[f.name][0] if f.name in real else 'absent'})"
        for role, f in exposition.families.items()
        if (f.name not in real and not role.startswith(("spec_", "num_retracted_")))
        or (f.name in real and real[f.name][0] != f.kind)
    ]
    assert not missing, f"the {engine} catalog names families the {exposition.version} page does not have: {missing}"


_SINCE = re.compile(r"→\s*(?P<last>[0-9][0-9.]*)")


@pytest.mark.parametrize(
    ("engine", "capture", "release"), [("vllm", VLLM_0_33, "0.33"), ("sglang", SGLANG_0_5_23, "0.5.23")]
)
def test_names_the_catalog_dates_to_a_release_are_exactly_the_ones_its_page_has(
    engine: str, capture: Path, release: str
) -> None:
    """A name whose version range ends at the release (``0.9 → 0.33``) must be on that release's page; a name
    whose range ends earlier (``0.3 → 0.4.3``, ``gone 0.14``) must not be. Families a healthy engine leaves out
    of its page (SGLang's never-incremented retraction counter; vLLM's speculative-decoding counters, registered only
    with a ``speculative_config``) are exempt."""
    names = sample_names(read_capture(capture))
    entry = catalog.entry(engine)
    wrong = []
    for field, aliases in entry.name_table.items():
        for s in aliases:
            if s.source.startswith("prometheus_client") or "retracted" in s.name or "spec_decode" in s.name:
                continue
            sample = s.name + "_count" if s.kind == "histogram" else s.name
            ranges = [m.group("last") for m in _SINCE.finditer(s.versions)]
            current = release in ranges or s.versions.split(" ")[0] == release
            gone = "gone" in s.versions or "hidden" in s.versions or (ranges and release not in ranges)
            if current and not gone and sample not in names:
                wrong.append(f"{field}: {s.name} ({s.versions}) is not on the {release} page")
            if gone and not current and sample in names:
                wrong.append(f"{field}: {s.name} ({s.versions}) is on the {release} page")
    assert not wrong, "\n".join(wrong)


def test_the_llama_cpp_names_hold_against_the_2025_06_page() -> None:
    names = sample_names(read_capture(LLAMACPP_2025_06))
    table = catalog.entry("llamacpp").name_table
    # the counters the catalog reads are on the (excerpted) page
    for field in ("prompt_tokens_total", "generation_tokens_total"):
        assert table[field][0].name in names, field
    # names the catalog says were removed in May 2025 are not
    removed = [s.name for aliases in table.values() for s in aliases if "removed" in s.versions]
    assert removed and not (set(removed) & names)
    # and every llamacpp family on the page that the adapter reads is in the catalog
    known = catalog.entry("llamacpp").metric_names()
    adapter = get_adapter("llamacpp")
    assert {n for n in names if adapter.wants(n)} <= known


def test_the_docs_say_what_engine_accepts_for_every_engine_and_wrapper() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "engines.md").read_text(encoding="utf-8")
    for e in catalog.entries():
        assert f"| `{e.engine}` |" in doc, e.engine
        for prefix in e.prefixes[:1]:
            assert f"`{prefix}*`" in doc, prefix
        for w in e.wrappers:
            first = w.name.split()[0]
            rows = [line for line in doc.splitlines() if line.startswith(f"| {first}") and "engine: " in line]
            assert any(e.engine in row for row in rows), f"no row says what to write for {w.name}"


@pytest.mark.parametrize("entry", catalog.entries(), ids=lambda e: e.engine)
def test_detection_names_the_catalog_s_engine_for_each_of_its_prefixes(entry: CatalogEntry) -> None:
    from advisor.engines import detect_engine

    for engine, prefixes in catalog.detection_prefixes():
        if engine == entry.engine:
            assert prefixes == entry.prefixes
    for prefix in entry.prefixes:
        assert detect_engine([prefix + "num_requests_running", "process_start_time_seconds"]) == entry.engine
    if entry.frontend_only:  # a worker page with the frontend's families is still the engine's
        assert detect_engine([entry.prefixes[0] + "x", "vllm:num_requests_running"]) == "vllm"
