"""A sum of ``+Inf`` and ``-Inf`` is unknown, never an adapter error.

``math.fsum`` raises ``ValueError: -inf + inf in fsum`` for such a sum; before, that escaped ``Scope.counter``
(within one rank, over ``finished_reason``) and ``sum_all`` (across ranks), so the whole page read as
``parse_error`` ("adapter error: ValueError"). The window code (``advisor.telemetry``) already reads such a sum as
unknown; the adapters now do too, field by field, and read every other field of the page.
"""

from __future__ import annotations

import math

from advisor.engines import get_adapter, vllm
from advisor.engines.common import Scope, Series, sum_all, sum_known, weighted_usage
from advisor.observe import observe
from advisor.sources.exposition import parse_exposition

PAGE = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3
vllm:num_requests_running{engine="1",model_name="m"} 4
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} +Inf
vllm:prompt_tokens_total{engine="1",model_name="m"} -Inf
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} +Inf
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} -Inf
vllm:request_success_total{engine="1",finished_reason="stop",model_name="m"} 2
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="m"} 1
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 2
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 2
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.5
vllm:time_to_first_token_seconds_bucket{engine="1",le="1.0",model_name="m"} 1
vllm:time_to_first_token_seconds_bucket{engine="1",le="+Inf",model_name="m"} 2
vllm:time_to_first_token_seconds_count{engine="1",model_name="m"} 2
vllm:time_to_first_token_seconds_sum{engine="1",finished_reason="a",model_name="m"} +Inf
vllm:time_to_first_token_seconds_sum{engine="1",finished_reason="b",model_name="m"} -Inf
"""


def test_a_vllm_page_with_opposite_infinities_reads_them_as_unknown() -> None:
    adapter = get_adapter("vllm")
    snap = adapter.snapshot(parse_exposition(PAGE, keep=adapter.wants))
    assert snap.prompt_tokens_total is None  # rank 0 +Inf, rank 1 -Inf
    assert snap.requests_finished_total is None  # rank 0: +Inf and -Inf over finished_reason
    assert snap.ttft is None  # rank 1's _sum: +Inf and -Inf
    assert snap.requests_running == 7.0  # the rest of the page still reads
    raw = vllm.VLLMAdapter().snapshot(parse_exposition(PAGE, keep=adapter.wants))  # unsanitized: ranks as read
    by_rank = {r.rank: r.prompt_tokens_total for r in raw.ranks}
    assert by_rank == {"0": math.inf, "1": -math.inf} and raw.prompt_tokens_total is None


def test_observe_gives_a_snapshot_not_an_adapter_error() -> None:
    seen = observe(PAGE, "auto", None, strict=True)
    assert seen.error_reason is None and seen.snapshot is not None
    assert seen.snapshot.requests_running == 7.0


def test_the_shared_sums_read_opposite_infinities_as_unknown() -> None:
    from advisor.engines.common import fsum_or_none

    assert fsum_or_none([math.inf, -math.inf]) is None
    assert fsum_or_none([math.inf, 1.0]) == math.inf
    assert fsum_or_none([3.0, 4.0]) == 7.0
    assert sum_all({"0": math.inf, "1": -math.inf}, ("0", "1")) is None
    assert sum_known([math.inf, None, -math.inf]) is None
    # capacities of +Inf and -Inf weigh nothing: the plain mean, as with an unknown capacity
    assert weighted_usage({"0": 0.5, "1": 0.1}, {"0": math.inf, "1": -math.inf}, ("0", "1")) == 0.3
    series = Series("c", "counter", "", "")
    page = parse_exposition('c{a="1"} +Inf\nc{a="2"} -Inf\nc{a="3",dp_rank="1"} 5\n')
    assert Scope(page, wanted=frozenset({"c"}), rank_label="dp_rank").counter(series) == {"0": None, "1": 5.0}


def test_finite_values_whose_sum_overflows_are_unknown_and_the_rest_of_the_page_reads() -> None:
    """``math.fsum([1.7e308, 1.7e308])`` raises OverflowError ("intermediate overflow"); it was the same
    "adapter error" as ±Inf. Unknown now, field by field."""
    page = PAGE.replace("+Inf\nvllm:prompt_tokens_total", "1.7e308\nvllm:prompt_tokens_total").replace(
        'vllm:prompt_tokens_total{engine="1",model_name="m"} -Inf',
        'vllm:prompt_tokens_total{engine="1",model_name="m"} 1.7e308',
    )
    assert 'prompt_tokens_total{engine="0",model_name="m"} 1.7e308' in page
    assert 'prompt_tokens_total{engine="1",model_name="m"} 1.7e308' in page
    assert sum_all({"0": 1.7e308, "1": 1.7e308}, ("0", "1")) is None
    seen = observe(page, "auto", None, strict=True)
    assert seen.error_reason is None and seen.snapshot is not None, seen.error_message
    assert seen.snapshot.prompt_tokens_total is None
    assert seen.snapshot.requests_running == 7.0
