"""Issue 19: the over_provisioned rule's text says what each of its figures is, and the figures printed side by
side agree. Seen: "30 running … (104% of the ceiling per replica)" beside a ceiling of 11.63 (30 ÷ 11.63 = 258 %),
"2 running … (0% of the ceiling per replica)" and "load ratio 0.0026 → 0.0078" with "load ratio" never defined.

What the percentage divides (advisor/rules/over_provisioned.py ``_read``): the window's peak of running requests,
summed over the answering replicas (``Evaluation.requests_running_max``, or the newest reading when higher), ÷ the
replicas answering, ÷ the per-replica concurrency ceiling. "30 running" was the deployment-wide peak, the
percentage per replica: the text now prints the per-replica figure and the ceiling beside it.

Snapshots built by hand (tests/rules/helpers.py: an engine-reported pool of 432,000 tokens per replica,
max-num-seqs 256):

* busy: 2 replicas up, newest reading 20 running, window peak 30. Finished requests: 0.5/s with 16,000 prompt +
  2,000 generated tokens/s → (16,000 + 2,000) ÷ 0.5 = 36,000 tokens a request → ceiling min(256, 432,000 ÷
  36,000) = 12 per replica. 30 ÷ 2 = 15 per replica; 15 ÷ 12 = 125 %.
* demo: 3 replicas, 2 running, no finished requests → ceiling 256. 2 ÷ 3 = 0.667 per replica; 0.667 ÷ 256 =
  0.26 % (not "0%"). One replica (⌈2 ÷ (0.5 × 256)⌉ = 1) carries 2 per replica, 2 ÷ 256 = 0.78 %; the share
  goes 2 ÷ (3 × 256) = 0.0026 → 0.0078.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from advisor.rules.common import effect_label, percent
from advisor.rules.over_provisioned import OverProvisionedRule
from tests.rules.helpers import ctx, ev, good

RULE = OverProvisionedRule(max_usage=0.3, max_load_ratio=0.25, target_load_ratio=0.5)

LOAD = re.compile(
    r"(?P<running>[\d,.]+) running at the window's peak across (?P<replicas>\d+) replica\(s\): "
    r"(?P<per>[\d,.]+) per replica, (?P<pct>[\d.]+)% of the ceiling (?P<ceiling>[\d,.]+)(?: \((?P<what>[^)]*)\))? per "
    r"replica "
    r"\(share of the ceiling[;)]"
)


def _quiet(**kw: Any) -> dict[str, Any]:
    stats: dict[str, Any] = {
        "goodput": good(0.95, 1.0),
        "requests_waiting": 0,
        "requests_waiting_first": 0,
        "kv_cache_usage_ratio": 0.05,
        "kv_cache_usage_ratio_max": 0.1,
    }
    stats.update(kw)
    return stats


def _figures(text: str) -> dict[str, float]:
    m = LOAD.search(text)
    assert m is not None, text
    return {k: float(v.replace(",", "")) for k, v in m.groupdict().items() if k != "what"}


def _agree(f: dict[str, float]) -> None:
    """The printed figures are one computation: running ÷ replicas = per replica; per replica ÷ ceiling = %."""
    assert f["per"] == pytest.approx(f["running"] / f["replicas"], rel=5e-3)
    assert f["pct"] == pytest.approx(100 * f["per"] / f["ceiling"], rel=1e-2)


def test_a_busy_window_prints_the_peak_per_replica_and_the_ceiling_it_is_a_share_of() -> None:
    # 36,000 tokens a request need a context that holds them (a reading past max-model-len is capped, breaker 23)
    e = ev(
        dep=ctx(replicas=2, max_model_len=65_536),
        replicas_up=2,
        **_quiet(
            requests_running=20,
            requests_finished_per_second=0.5,
            prompt_tokens_per_second=16_000.0,
            generation_tokens_per_second=2_000.0,
        ),
    )
    e = dataclasses.replace(e, requests_running_max=30.0)
    c = RULE.fires(e)
    assert c.holds is False  # 125 % is far above 25 %
    f = _figures(c.reason)
    assert f == {"running": 30, "replicas": 2, "per": 15, "pct": 125, "ceiling": 12}
    _agree(f)
    assert c.evidence["concurrency_ceiling_per_replica"] == 12.0 and c.evidence["load_ratio"] == 1.25
    assert "(share of the ceiling; fires below 25%)" in c.reason
    # what sets the ceiling is named (walkthrough, 2026-12-04: "the ceiling 256" and "the ceiling 28.97" read as one
    # quantity): 432,000 pool tokens ÷ (16,000 + 2,000) ÷ 0.5 = 36,000 tokens per request = 12 sequences
    assert "of the ceiling 12 (the KV pool at ~36,000 tokens per request) per replica" in c.reason


def test_the_demo_window_prints_a_small_share_as_it_is_and_the_effect_has_a_defined_name() -> None:
    e = ev(dep=ctx(replicas=3), replicas_up=3, **_quiet(requests_running=2))
    c = RULE.fires(e)
    assert c.holds is True
    f = _figures(c.reason)
    assert (f["running"], f["replicas"], f["ceiling"], f["pct"]) == (2, 3, 256, 0.26)
    assert f["per"] == pytest.approx(0.667, abs=1e-3)
    _agree(f)
    assert "(0% of" not in c.reason
    assert "of the ceiling 256 (max-num-seqs) per replica" in c.reason
    (p,) = RULE.propose(e)
    assert (p.current, p.suggested) == (3, 1)
    assert p.predicted_effect["load_ratio"]["before"] == pytest.approx(2 / (3 * 256), abs=1e-4)  # 0.0026
    assert p.predicted_effect["load_ratio"]["after"] == pytest.approx(2 / 256, abs=1e-4)  # 0.0078
    assert "1 replica(s) carry this load at 2 running per replica, 0.78% of the ceiling 256" in p.description
    _agree(_figures(p.description))  # the situation it opens with: 2 across 3, 0.667 each, 0.26 % of 256
    assert effect_label("load_ratio").startswith("share of the ceiling (running per replica ÷ ceiling)")
    # the walkthrough: "replicas 3 → 1" said nothing of losing redundancy
    assert "One replica leaves no redundancy" in p.description


def test_a_count_down_to_two_or_more_says_nothing_of_redundancy() -> None:
    e = ev(dep=ctx(replicas=8), replicas_up=8, **_quiet(requests_running=200))
    (p, *_) = RULE.propose(e)
    assert p.dial == "replicas" and p.suggested >= 2, (p.dial, p.suggested)
    assert "redundancy" not in p.description


@pytest.mark.parametrize(
    ("ratio", "said"), [(0.0, "0%"), (0.0026, "0.26%"), (0.026, "2.6%"), (0.25, "25%"), (1.25, "125%")]
)
def test_a_percentage_reads_zero_only_at_zero(ratio: float, said: str) -> None:
    assert percent(ratio) == said


def test_a_keda_floor_is_where_the_count_down_stops() -> None:
    """Breaker 18: with autoscaling.min_replica_count 2 the rule proposed 3 → 1, said "one replica leaves no
    redundancy … keep 2", and the KEDA text told the operator to lower the floor to 1. The floor is the operator's
    choice: the count down stops at it."""
    from advisor.rules.base import KedaScaling

    dep = dataclasses.replace(ctx(replicas=3), scaled_by_keda=KedaScaling("llama", None, 2, 10))
    (p, *_) = RULE.propose(ev(dep=dep, replicas_up=3, **_quiet(requests_running=2)))
    assert p.dial == "replicas" and (p.current, p.suggested) == (3, 2), (p.current, p.suggested)
    assert "redundancy" not in p.description
    floor = dataclasses.replace(ctx(replicas=2), scaled_by_keda=KedaScaling("llama", None, 2, 10))
    assert not [
        q for q in RULE.propose(ev(dep=floor, replicas_up=2, **_quiet(requests_running=2))) if q.dial == "replicas"
    ]


def test_a_request_length_read_past_max_model_len_is_capped_there() -> None:
    """Breaker 23: "the KV pool at ~11,663 tokens per request" at max-model-len 8,192 — generations outlasting the
    window count running requests' tokens against the few that finished. No request holds more than 8,192 tokens,
    so the pool's ceiling is at least 432,000 ÷ 8,192 = 52.73 sequences, not 432,000 ÷ 36,000 = 12."""
    busy = _quiet(requests_running=20, requests_finished_per_second=0.5)
    busy.update(prompt_tokens_per_second=16_000.0, generation_tokens_per_second=2_000.0)
    e = ev(dep=ctx(replicas=2, max_model_len=8_192), replicas_up=2, **busy)
    c = RULE.fires(dataclasses.replace(e, requests_running_max=30.0))
    assert c.evidence["concurrency_ceiling_per_replica"] == pytest.approx(432_000 / 8_192, abs=0.005)  # 2 decimals
    assert "the KV pool at ~8,192 tokens per request" in c.reason
