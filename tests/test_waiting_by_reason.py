"""The waiting queue's split by reason is the deployment's only when every answering engine splits it (field state
round 29, vllm-project/vllm#54003): mid-upgrade a 0.28 pod splits (``vllm:num_requests_waiting_by_reason``, 0.20+)
and a 0.14 pod does not, and the sum of the splits left the old pod's 4 waiting requests out of every reason."""

from __future__ import annotations

from advisor.domain import EngineSnapshot
from advisor.evaluate import waiting_by_reason


def test_the_split_is_summed_only_when_every_engine_splits() -> None:
    split = {"capacity": 1.0, "deferred": 0.0}
    new = EngineSnapshot(engine="vllm", requests_waiting=1.0, requests_waiting_by_reason=split)
    old = EngineSnapshot(engine="vllm", requests_waiting=4.0)
    assert waiting_by_reason([new, old]) == {}  # unknown, not {capacity: 1} beside 5 waiting
    assert waiting_by_reason([new, new]) == {"capacity": 2.0, "deferred": 0.0}
    assert waiting_by_reason([]) == {}
