"""``FederationReader`` hands out one read-only labels object per series (``FrozenLabels``, as the selective parser's
series cache does on the direct path), so the adapters' shape memos (``advisor.engines.common.ShapeMemo``: the vLLM
adapter's layouts) recognise a ``/federate`` page too: the next read of an instance, and every instance of the same
series set, take the layout of the first. A changed series set (another label value, a series added or removed,
another instance's own series set) never takes a wrong one: what the adapter reads of each point is what it reads of
the reference path's point (``groups_from_federation``, plain dicts, no memo).

Pages: the vLLM 0.33 capture (``../shared/engine-metrics``, skipped when absent) cut to the series the vLLM adapter
reads, one block per instance, as the bench's ``/federate`` answer (``bench/prom_source.py``)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path

import pytest

from advisor.domain import Exposition, Sample
from advisor.engines import get_adapter, vllm
from advisor.engines.common import first_samples
from advisor.observe import observe
from advisor.sources.prometheus import FederationReader, MatrixHistories, groups_from_federation
from advisor.sources.selective_parser import FrozenLabels

REPO = Path(__file__).resolve().parents[2]
CAPTURE = (
    Path(os.environ.get("ADVISOR_SHARED_DIR") or REPO.parent / "shared")
    / "engine-metrics"
    / "vllm-0.33.0-engine-code-healthy-llama3.1-8b.prom"
)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
T0 = 1_700_000_000_000

Line = tuple[str, tuple[str, ...], float]
"""(sample name, its label pairs as text, value) of one series of an instance's block."""


@cache
def _capture_block() -> tuple[Line, ...]:
    if not CAPTURE.is_file():
        pytest.skip(f"../shared/engine-metrics absent: {CAPTURE} is not a file")
    adapter = get_adapter("vllm")
    out: list[Line] = []
    for line in CAPTURE.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        series, value = line.rsplit(" ", 1)
        name, _, body = series.partition("{")
        if adapter.wants(name):
            out.append((name, tuple(f'{k}="{v}"' for k, v in _LABEL.findall(body)), float(value)))
    assert len(out) > 100  # the 132 series the bench reads per instance
    return tuple(out)


def block(edit: Callable[[list[Line]], list[Line]] | None = None) -> list[Line]:
    """The capture's block, changed by ``edit``."""
    lines = list(_capture_block())
    return edit(lines) if edit is not None else lines


def federation(instances: Mapping[str, Sequence[Line]], stamp_ms: int, grow: float = 1.0, pods: bool = False) -> str:
    """A ``/federate`` answer: families in the block's order under their ``# TYPE`` line, one line per instance and
    series with ``instance`` and ``job="fleet"``, labels sorted, values times ``grow``. ``pods``: every series and
    an ``up`` line per instance (listed first) carry ``pod="p-<instance>"``, a target label of its own."""
    families: dict[str, list[str]] = {}
    if pods:
        families["up"] = [f'up{{instance="{i}",job="fleet",pod="p-{i}"}} 1 {stamp_ms}' for i in instances]
    for inst, lines in instances.items():
        pod = [f'pod="p-{inst}"'] if pods else []
        for name, labels, value in lines:
            body = ",".join(sorted([*labels, f'instance="{inst}"', 'job="fleet"', *pod]))
            families.setdefault(name, []).append(f"{name}{{{body}}} {value * grow!r} {stamp_ms}")
    return "".join(f"# TYPE {n} untyped\n" + "\n".join(ls) + "\n" for n, ls in families.items())


def points(shaped: MatrixHistories) -> dict[str, Exposition]:
    """Each target's one point."""
    return {g.target: g.points[0][1] for g in shaped.groups}


def layout(expo: Exposition) -> object:
    """The vLLM layout the adapter reads ``expo`` through (``VLLMAdapter.models``: first_samples, then the scope)."""
    return vllm.indexed_scope(first_samples(vllm.normalize(expo))[0], None).layout


def observed(shaped: MatrixHistories) -> dict[str, str]:
    """What ``observe`` (the daemon's call) reads of each target's point: snapshot, refusal, notes."""
    adapter = get_adapter("vllm")
    out: dict[str, str] = {}
    for target, expo in points(shaped).items():
        o = observe(expo, adapter, None, configured_model="meta-llama/Llama-3.1-8B-Instruct", strict=True)
        out[target] = repr((o.snapshot, o.error_reason, o.error_message, o.duplicate_series, o.models))
    return out


def test_every_read_and_every_instance_of_one_series_set_takes_the_first_reads_layout() -> None:
    reader = FederationReader()
    fleet = {f"e-{i}": block() for i in range(3)}
    first = reader.read(federation(fleet, T0))
    again = reader.read(federation(fleet, T0 + 15_000, grow=1.5))
    assert reader.fallbacks == 0
    one, two = points(first), points(again)
    name = "vllm:num_requests_running"
    labels = one["e-0"][name][0].labels
    assert type(labels) is FrozenLabels
    assert two["e-2"][name][0].labels is labels  # another instance, the next read: the same object
    taken = layout(one["e-0"])
    assert [layout(expo) for expo in (*one.values(), *two.values())] == [taken] * 6
    assert all(layout(expo) is taken for expo in (*one.values(), *two.values()))
    text = federation(fleet, T0 + 30_000, grow=2.0)  # the values are read again, through the same layout
    assert observed(reader.read(text)) == observed(groups_from_federation(text))


def _relabel(name: str, old: str, new: str) -> Callable[[list[Line]], list[Line]]:
    """Every series of family ``name`` with label pair ``old`` gets ``new`` instead."""
    return lambda lines: [(n, tuple(new if n == name and x == old else x for x in labels), v) for n, labels, v in lines]


def _first_le(lines: list[Line]) -> str:
    return next(x for n, ls, _ in lines if n == "vllm:time_to_first_token_seconds_bucket" for x in ls if x[:3] == "le=")


def _other_bound(lines: list[Line]) -> list[Line]:
    """TTFT's first bucket bound moved (``le="0.001"`` → ``le="0.0015"``): other bounds, another histogram plan."""
    old = _first_le(lines)
    return _relabel("vllm:time_to_first_token_seconds_bucket", old, 'le="0.0015"')(lines)


def _second_engine(lines: list[Line]) -> list[Line]:
    """A second data-parallel rank's running gauge added."""
    name = "vllm:num_requests_running"
    (running,) = [x for x in lines if x[0] == name]
    extra = (name, tuple('engine="1"' if x.startswith("engine=") else x for x in running[1]), 7.0)
    return [*lines, extra]


def _no_inf_bucket(lines: list[Line]) -> list[Line]:
    """TTFT's ``+Inf`` bucket removed: the histogram is unknown."""
    return [x for x in lines if not (x[0] == "vllm:time_to_first_token_seconds_bucket" and 'le="+Inf"' in x[1])]


def _no_kv_usage(lines: list[Line]) -> list[Line]:
    """A whole family removed (the KV cache usage gauge)."""
    return [x for x in lines if x[0] != "vllm:kv_cache_usage_perc"]


def _other_model(lines: list[Line]) -> list[Line]:
    """Another served model on every series."""
    return [(n, tuple('model_name="m2"' if x.startswith("model_name=") else x for x in ls), v) for n, ls, v in lines]


CHANGES: dict[str, Callable[[list[Line]], list[Line]]] = {
    "another rank label value": _relabel("vllm:num_requests_waiting", 'engine="0"', 'engine="3"'),
    "another bucket bound": _other_bound,
    "another model on every series": _other_model,
    "a series added": _second_engine,
    "a bucket removed": _no_inf_bucket,
    "a family removed": _no_kv_usage,
}


@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_a_changed_series_set_never_reads_through_a_wrong_layout(change: str) -> None:
    """Read 1: three instances of the capture's series set (the layout memo learns it). Read 2: e-1's series set
    changed, e-0 and e-2 not. Read 3: e-1 back as it was, e-2 changed as e-1 was. Every read, every instance: what
    the adapter reads equals the reference path's reading, and a changed instance has a layout of its own."""
    same, changed = block(), block(CHANGES[change])
    reader = FederationReader()
    reads = [
        {"e-0": same, "e-1": same, "e-2": same},
        {"e-0": same, "e-1": changed, "e-2": same},
        {"e-0": same, "e-1": same, "e-2": changed},
    ]
    for k, fleet in enumerate(reads):
        text = federation(fleet, T0 + 15_000 * k, grow=1.0 + k)
        shaped = reader.read(text)
        assert reader.fallbacks == 0  # read from the cache, not handed to the reference
        assert observed(shaped) == observed(groups_from_federation(text)), f"read {k + 1}"
        layouts = {target: layout(expo) for target, expo in points(shaped).items()}
        for target, lines in fleet.items():
            assert (layouts[target] is layouts["e-0"]) is (lines is same), (k, target)


def test_an_instance_with_a_series_set_of_its_own_in_the_same_read_reads_its_own_values() -> None:
    """Four instances of four series sets in one answer, read twice: each reading is the reference's."""
    reader = FederationReader()
    fleet: dict[str, Sequence[Line]] = {
        "e-0": block(),
        "e-1": block(_no_kv_usage),
        "e-2": block(_second_engine),
        "e-3": block(),
    }
    for k in range(2):
        text = federation(fleet, T0 + 15_000 * k, grow=1.0 + k)
        shaped = reader.read(text)
        assert observed(shaped) == observed(groups_from_federation(text))
        layouts = [layout(expo) for expo in points(shaped).values()]
        assert layouts[0] is layouts[3] and len({id(x) for x in layouts}) == 3


def test_targets_told_apart_only_by_a_pod_label_share_one_labels_object_per_series() -> None:
    """A pod label of its own on every series and on ``up`` is a target label, dropped: each pod's line has a shape
    of its own, and all hand out the one labels object of their series, so the pods share the layout too."""
    lines = block()
    reader = FederationReader()
    for k in range(2):
        text = federation({f"e-{i}": lines for i in range(3)}, T0 + 15_000 * k, grow=1.0 + k, pods=True)
        assert text.count('pod="p-e-2"') == len(lines) + 1
        shaped = reader.read(text)
        assert reader.fallbacks == 0
        assert observed(shaped) == observed(groups_from_federation(text))
        expos = list(points(shaped).values())
        assert expos[0]["vllm:num_requests_running"][0].labels is expos[2]["vllm:num_requests_running"][0].labels
        assert len({id(layout(expo)) for expo in expos}) == 1


def test_the_samples_handed_out_equal_the_reference_paths_and_their_labels_refuse_edits() -> None:
    """``Sample`` objects (as the selective parser builds them, not through ``__init__``), equal to the reference's
    sample for sample; labels read-only."""
    text = federation({"e-0": block(), "e-1": block(_second_engine)}, T0)
    cached, reference = points(FederationReader().read(text)), points(groups_from_federation(text))
    assert cached == reference
    assert {type(s) for expo in cached.values() for ss in expo.values() for s in ss} == {Sample}
    with pytest.raises(TypeError, match="read-only"):
        cached["e-0"]["vllm:num_requests_running"][0].labels["engine"] = "9"  # type: ignore[index]
