"""Pools other than the KV pool (SGLang ``swa``/``mamba``, llama.cpp ``slots``) get the checks every other
value gets: a usage outside [0, 1] or not finite, a negative or non-finite count is unknown and named in
``missing``; never exported, never used to withhold a rule. Expositions hand-written from SGLang 0.5.23's
scheduler gauges (python/sglang/srt/metrics/collector.py: ``swa_token_usage``, ``mamba_usage``,
``mamba_used_tokens``, ``mamba_available_tokens``) and llama.cpp's ``requests_processing``/``requests_deferred``
(tools/server/server.cpp).
"""

from __future__ import annotations

import json
import math

import pytest

from advisor.domain import EngineSnapshot, PoolReading
from advisor.engines import get_adapter
from advisor.evaluate import pool_usage
from advisor.results import json_text
from advisor.sources.exposition import parse_exposition

_L = '{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"}'


def sglang(**gauges: str) -> EngineSnapshot:
    base = {
        "num_running_reqs": "4",
        "num_queue_reqs": "0",
        "full_token_usage": "0.3",
        "token_usage": "0.3",
        "max_total_num_tokens": "10000",
    }
    text = "".join(f"sglang:{k}{_L} {v}\n" for k, v in {**base, **gauges}.items())
    adapter = get_adapter("sglang")
    return adapter.snapshot(parse_exposition(text, keep=adapter.wants))


def pool(snap: EngineSnapshot, name: str) -> PoolReading:
    (p,) = [p for p in snap.pools if p.pool == name]
    return p


def test_a_sound_mamba_pool_is_read() -> None:
    snap = sglang(mamba_usage="0.98", mamba_used_tokens="49", mamba_available_tokens="1")
    p = pool(snap, "mamba")
    assert (p.usage_ratio, p.used, p.capacity) == (0.98, 49.0, 50.0)
    assert not any("pool" in m for m in snap.missing)


@pytest.mark.parametrize("value", ["7.5", "-0.5", "+Inf", "-Inf", "1.5"])
@pytest.mark.parametrize("name", ["mamba_usage", "swa_token_usage"])
def test_an_impossible_pool_usage_is_unknown_and_named(name: str, value: str) -> None:
    snap = sglang(**{name: value})
    which = "mamba" if name.startswith("mamba") else "swa"
    assert pool(snap, which).usage_ratio is None
    assert any(m.startswith(f"pool {which} usage_ratio (value") for m in snap.missing), snap.missing
    assert pool_usage([snap], None).get(which) is None


@pytest.mark.parametrize("value", ["-10", "+Inf"])
def test_an_impossible_pool_count_is_unknown_and_named(value: str) -> None:
    snap = sglang(mamba_usage="0.5", mamba_used_tokens=value, mamba_available_tokens="40")
    p = pool(snap, "mamba")
    assert p.used is None
    assert p.capacity is None  # used + available is no pool size when used is impossible
    assert p.usage_ratio == 0.5
    assert any(m.startswith("pool mamba used (value") for m in snap.missing), snap.missing


def test_one_rank_impossible_is_not_hidden_under_the_max_over_ranks() -> None:
    text = (
        'sglang:full_token_usage{model_name="m",dp_rank="0",tp_rank="0"} 0.3\n'
        'sglang:full_token_usage{model_name="m",dp_rank="1",tp_rank="0"} 0.3\n'
        'sglang:mamba_usage{model_name="m",dp_rank="0",tp_rank="0"} 0.4\n'
        'sglang:mamba_usage{model_name="m",dp_rank="1",tp_rank="0"} -0.5\n'
    )
    adapter = get_adapter("sglang")
    snap = adapter.snapshot(parse_exposition(text, keep=adapter.wants))
    assert pool(snap, "mamba").usage_ratio is None
    assert any(m.startswith("pool mamba usage_ratio (value -0.5") for m in snap.missing), snap.missing


def test_llamacpp_negative_busy_slots_are_unknown() -> None:
    adapter = get_adapter("llamacpp")
    snap = adapter.snapshot(
        parse_exposition("llamacpp:requests_processing -3\nllamacpp:requests_deferred 0\n", keep=adapter.wants)
    )
    assert pool(snap, "slots").used is None
    assert pool_usage([snap], 4).get("slots") is None
    assert any(m.startswith("pool slots used (value -3") for m in snap.missing), snap.missing


def test_pool_usage_never_passes_an_impossible_usage_on() -> None:
    snaps = [EngineSnapshot(engine="sglang", pools=(PoolReading("swa", math.inf), PoolReading("mamba", 7.5)))]
    assert pool_usage(snaps, None) == {"swa": None, "mamba": None}


def _strict(text: str) -> object:
    def refuse(token: str) -> object:
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_json_text_writes_null_for_nan_and_infinity() -> None:
    doc = {"a": math.inf, "b": [0.5, math.nan, (-math.inf,)], "c": {"d": 1}}
    assert _strict(json_text(doc)) == {"a": None, "b": [0.5, None, [None]], "c": {"d": 1}}
