"""``advisor.engines.common.ShapeMemo``: what is computed from label sets, remembered per sequence of label objects.

A value is found again only for the very same read-only label objects (``FrozenLabels``, as the parser's series cache
hands them out), in the same order, with the same ``extra``; the memo is bounded by two generations. And
``first_samples``, which keeps its verdict per family in one, keeps what it keeps without it when the same label
objects come back with other samples (values), or with equal label sets in other objects.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.domain import Sample
from advisor.engines.common import ShapeMemo, first_samples
from advisor.sources.selective_parser import FrozenLabels


def _labels(n: int) -> list[FrozenLabels]:
    return [FrozenLabels({"engine": str(i)}) for i in range(n)]


def test_the_same_label_objects_in_the_same_order_find_the_value() -> None:
    memo: ShapeMemo[str] = ShapeMemo(entries=8, labels=64)
    labels = _labels(3)
    memo.put("x", labels, "v")
    assert memo.get("x", list(labels)) == "v"
    assert memo.get("y", labels) is None  # another extra
    assert memo.get("x", labels[::-1]) is None  # another order
    assert memo.get("x", labels[:2]) is None  # fewer
    assert memo.get("x", [*labels[:2], FrozenLabels(labels[2])]) is None  # an equal set in another object


def test_plain_dicts_are_never_remembered() -> None:
    """A plain dict can be edited after: its identity says nothing about its labels."""
    memo: ShapeMemo[str] = ShapeMemo(entries=8, labels=64)
    plain = [{"engine": "0"}]
    memo.put(None, plain, "v")
    assert memo.get(None, plain) is None
    mixed = [*_labels(2), {"engine": "9"}]
    memo.put(None, mixed, "v")
    assert memo.get(None, mixed) is None


def test_two_generations_bound_the_entries_and_keep_what_is_still_asked_for() -> None:
    memo: ShapeMemo[int] = ShapeMemo(entries=2, labels=64)
    pages = [_labels(1) for _ in range(4)]
    memo.put(None, pages[0], 0)
    memo.put(None, pages[1], 1)
    memo.put(None, pages[2], 2)  # young was full: 0 and 1 are the old generation now
    assert len(memo.young) == 1 and len(memo.old) == 2
    assert memo.get(None, pages[0]) == 0  # found in old, moved to young (now full: 2 and 0)
    memo.put(None, pages[3], 3)  # rotates again: 1 is dropped with the old generation
    assert memo.get(None, pages[1]) is None
    assert [memo.get(None, p) for p in (pages[0], pages[2], pages[3])] == [0, 2, 3]


def test_label_references_bound_a_generation() -> None:
    memo: ShapeMemo[int] = ShapeMemo(entries=100, labels=5)
    big, small = _labels(6), _labels(3)
    memo.put(None, big, 1)  # more than a generation holds: not stored
    assert memo.get(None, big) is None
    memo.put(None, small, 2)
    memo.put(None, _labels(3), 3)  # 3 + 3 > 5: a new generation
    assert memo.young_labels == 3 and memo.get(None, small) == 2


LABEL_SETS = st.lists(
    st.fixed_dictionaries(
        {}, optional={"engine": st.sampled_from(["0", "1", ""]), "model_name": st.sampled_from(["a", ""])}
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(LABEL_SETS, st.lists(st.tuples(st.sampled_from("xyz"), st.integers(0, 3), st.floats()), max_size=16))
def test_first_samples_keeps_the_same_series_when_the_label_objects_come_back(
    sets: list[dict[str, str]], drawn: list[tuple[str, int, float]]
) -> None:
    """Label objects shared by two pages (each object maybe twice in a family, equal sets in distinct objects): the
    second page keeps the samples the first kept, at the same places, and says the same; as a page of plain dicts."""
    objects = [FrozenLabels(x) for x in sets]
    chosen = [(name, objects[i % len(objects)], v) for name, i, v in drawn]
    page1: dict[str, list[Sample]] = {}
    page2: dict[str, list[Sample]] = {}
    plain: dict[str, list[Sample]] = {}
    for name, labels, v in chosen:
        page1.setdefault(name, []).append(Sample(name, labels, v))
        page2.setdefault(name, []).append(Sample(name, labels, -v))
        plain.setdefault(name, []).append(Sample(name, dict(labels), v))
    kept1, notes1 = first_samples(page1)
    kept2, notes2 = first_samples(page2)
    want, want_notes = first_samples(plain)
    assert notes1 == notes2 == want_notes
    assert _kept_at(page1, kept1) == _kept_at(page2, kept2) == _kept_at(plain, want)


def _kept_at(page: dict[str, list[Sample]], kept: dict[str, list[Sample]]) -> dict[str, list[int]]:
    """Where each kept sample is in its family on ``page`` (``ValueError`` for a sample of another page)."""
    out: dict[str, list[int]] = {}
    for name, samples in kept.items():
        ids = [id(s) for s in page[name]]
        out[name] = [ids.index(id(s)) for s in samples]
    return out


def test_the_same_label_objects_cut_into_other_families_are_judged_afresh() -> None:
    """A page's verdicts are remembered with its families' sizes: the same label objects in the same order, cut
    elsewhere, are other families (``{engine="1"}`` twice, in two families on the first page, in one on the second)."""
    a, b, c, d, e, f = (FrozenLabels({"engine": v}) for v in ("0", "1", "1", "2", "3", "4"))

    def page(**families: list[FrozenLabels]) -> dict[str, list[Sample]]:
        return {name: [Sample(name, x, 1.0) for x in labels] for name, labels in families.items()}

    assert first_samples(page(x=[a, b], y=[c, d], z=[e, f]))[1] == []
    assert first_samples(page(x=[a, b, c], y=[d, e, f]))[1] == ["x: 1 duplicate series ignored (the first sample kept)"]
