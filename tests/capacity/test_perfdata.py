"""The published-measurement table's format and the hold-out split (issue 17): the split is fixed by a hash of the
source URL, decided before any fit."""

from __future__ import annotations

import hashlib

import pytest

from advisor.capacity.perfdata import MEASUREMENT_FIELDS, held_out, measurements
from advisor.errors import CapacityError

HEADER = ",".join(MEASUREMENT_FIELDS)
ROW = (
    "a,https://example.org/t,tbl,vllm,0.6.0,serving,meta-llama/Llama-3.1-8B-Instruct,h100,1,1,bf16,auto,1,128,128,"
    "tpot_seconds,0.007,"
)


def test_the_split_is_a_third_by_the_hash_of_the_url() -> None:
    urls = [f"https://example.org/page/{i}" for i in range(3000)]
    out = [u for u in urls if held_out(u)]
    assert 900 < len(out) < 1100
    for u in urls[:50]:  # the rule, written out: sha256 of the URL, mod 3
        assert held_out(u) == (int(hashlib.sha256(u.encode()).hexdigest(), 16) % 3 == 0)


def test_the_shipped_table_parses() -> None:
    for row in measurements():
        assert row.source.startswith("http") and row.value > 0


@pytest.mark.parametrize(
    ("row", "words"),
    [
        (ROW.replace("tpot_seconds", "tokens"), "metric 'tokens'"),
        (ROW.replace("serving", "bench"), "setting 'bench'"),
        (ROW.replace(",0.007,", ",fast,"), "value is not a number"),
        (ROW.replace(",1,1,bf16", ",1,0,bf16"), "tp must be ≥ 1"),
        (ROW.replace("https://example.org/t", ""), "source is empty"),
    ],
)
def test_a_bad_row_is_refused_naming_the_line_and_field(row: str, words: str) -> None:
    with pytest.raises(CapacityError) as err:
        measurements(f"{HEADER}\n{row}\n")
    assert "line 2" in str(err.value) and words in str(err.value)


def test_a_duplicate_id_is_refused() -> None:
    with pytest.raises(CapacityError, match="line 3: duplicate id 'a'"):
        measurements(f"{HEADER}\n{ROW}\n{ROW}\n")
