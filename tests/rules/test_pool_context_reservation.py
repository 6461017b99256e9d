"""pool_context on an engine that reserves a request's whole length at admission (TensorRT-LLM's default
GUARANTEED_NO_EVICT scheduler; NVIDIA/TensorRT-LLM#9412, "Requests to ``trtllm-serve serve`` are executed sequentially
if ``max_tokens`` is not provided"; field state ``trtllm-serve-gemma3-27b-no-max-tokens-one-at-a-time``).

Figures by hand: a 198,112-token pool and max-model-len 131,072 hold ⌊198,112 ÷ 131,072⌋ = 1 reservation; 1 runs
and 7 wait with 0.4 % of the blocks written. 8 requests at once want reservations of 198,112 ÷ 8 = 24,764 tokens,
rounded down to 24,576 (a multiple of 1,024), which admits ⌊198,112 ÷ 24,576⌋ = 8.
"""

from __future__ import annotations

from typing import Any

from advisor import conventions as c
from advisor.rules.pool_context import PoolContextRule
from tests.rules.helpers import ctx, ev

POOL = 198_112.0
MML = 131_072


def _ev(engine: str = "trtllm", running: float = 1, waiting: float = 7, usage: float = 0.004, **kw: Any) -> Any:
    return ev(
        dep=ctx(gpu="a100-80gb", engine=engine, max_model_len=MML, max_num_seqs=32),
        requests_running=running,
        requests_waiting=waiting,
        kv_cache_usage_ratio=usage,
        kv_capacity_tokens=POOL,
        **kw,
    )


def test_a_queue_behind_one_reservation_caps_the_context_to_admit_it() -> None:
    e = _ev()
    cond = PoolContextRule().fires(e)
    assert cond.holds is True
    assert cond.evidence["max_length_reservations_held"] == 1
    assert cond.evidence["reservation_bound_requests_wanted"] == 8
    props = PoolContextRule().propose(e)
    # the cap is the cure; a pool turn would buy one reservation for a multiple of the pool
    assert [(p.dial, p.action, p.suggested) for p in props] == [(c.DIAL_MAX_MODEL_LEN, "decrease", 24_576)]
    (p,) = props
    assert p.withheld is None
    assert p.flag == "--max_seq_len 24576"
    assert "admits 8 at once instead of 1" in p.description


def test_the_same_numbers_on_vllm_are_not_a_reservation() -> None:
    # vLLM allocates blocks as tokens arrive: 1.51 max-length requests fit, and its queue is another rule's
    assert PoolContextRule().fires(_ev(engine="vllm")).holds is False


def test_more_running_than_reservations_means_the_clients_send_max_tokens() -> None:
    assert PoolContextRule().fires(_ev(running=3, waiting=7)).holds is False


def test_a_pool_whose_blocks_are_written_or_an_empty_queue_is_not_reservation_bound() -> None:
    assert PoolContextRule().fires(_ev(usage=0.6)).holds is False
    assert PoolContextRule().fires(_ev(waiting=0)).holds is False


def test_the_cap_never_cuts_the_observed_requests() -> None:
    # finished requests of 5,000 tokens (4,000 prompt + 1,000 generated at 1 a second): 8 × 5,000 = 40,000 > 24,764,
    # so the cap is 39,936 (40,000 rounded down to 1,024s), admitting ⌊198,112 ÷ 39,936⌋ = 4
    e = _ev(requests_finished_per_second=1.0, prompt_tokens_per_second=4_000.0, generation_tokens_per_second=1_000.0)
    (p,) = PoolContextRule().propose(e)
    assert p.suggested == 39_936
    assert "admits 4 at once" in p.description


def test_long_documents_one_at_a_time_are_bound_by_the_pool_not_the_reservation() -> None:
    # second breaker, 2026-12-05: clients send max_tokens ~8,000 with ~95,000-token documents: each reservation
    # (~103k) is really used, two do not fit 198,112, 48 % of the blocks are written. 8 × the observed 96,000 tokens
    # is past max-model-len: a cap that cuts no request admits no more, so this is not reservation-bound (and
    # pool_context must not fire with nothing to propose, superseding the load rules' advice)
    e = _ev(
        usage=0.48,
        requests_finished_per_second=0.05,
        prompt_tokens_per_second=4_750.0,
        generation_tokens_per_second=50.0,
    )
    assert PoolContextRule().fires(e).holds is False


def test_a_pool_below_max_model_len_with_a_queue_behind_a_reservation_gets_no_pool_turn() -> None:
    # NVIDIA/TensorRT-LLM#2866: one request's large max_tokens reserves the 8,096-token pool (max_seq_len 12,288);
    # 1 of 16 slots runs, 5 wait, 20 % of the blocks are written. The cap stands (the pool holds no max-length
    # request); more memory or GPUs would admit one more such reservation, so no pool turn is offered
    def small(engine: str) -> Any:
        return ev(
            dep=ctx(gpu="a100-80gb", engine=engine, max_model_len=12_288, max_num_seqs=16),
            requests_running=1,
            requests_waiting=5,
            kv_cache_usage_ratio=0.2,
            kv_capacity_tokens=8_096.0,
        )

    props = PoolContextRule().propose(small("trtllm"))
    assert [(p.dial, p.action) for p in props] == [(c.DIAL_MAX_MODEL_LEN, "decrease")]
    # vLLM allocates as tokens arrive: its pool turns stay
    assert len(PoolContextRule().propose(small("vllm"))) > 1
