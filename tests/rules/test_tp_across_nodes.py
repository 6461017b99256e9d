"""The tensor-parallel pool turn says when the doubled group leaves one NVLink domain (issue 17's cross-node
all-reduce): TP 8 → 16 on HGX H100 (8 GPUs a domain, ``gpus.csv``) spans two nodes, whose all-reduces run NCCL over
the network; vLLM's and TensorRT-LLM's docs put tensor parallelism within a node and pipeline parallelism across
nodes. TP 2 → 4 on H100, and TP 8 → 16 on GB200 NVL72 (72 a domain), stay in one domain and say nothing of it."""

from __future__ import annotations

from typing import Any

from advisor import conventions as c
from advisor.capacity.models import get_preset
from advisor.rules.common import pool_turns
from tests.rules.helpers import ctx, ev

SATURATED: dict[str, Any] = {
    "kv_cache_usage_ratio": 0.99,
    "requests_running": 40,
    "requests_waiting": 30,
    "preemptions_increase": 3,
    "kv_capacity_tokens": None,
}


def _tp_why(gpu: str, tp: int) -> str:
    e = ev(
        dep=ctx(gpu=gpu, model=get_preset("meta-llama/Llama-3.1-70B-Instruct"), tensor_parallel_size=tp),
        **SATURATED,
    )
    (cand,) = [x for x in pool_turns(e) if x.turn.dial == c.DIAL_TENSOR_PARALLEL_SIZE]
    assert cand.turn.after_inputs.tensor_parallel_size == 2 * tp
    return cand.why


def test_tp_16_on_eight_gpu_h100_nodes_names_the_two_nodes_and_the_network() -> None:
    why = _tp_why("h100-sxm", 8)
    assert "TP 16 spans 2 nodes of 8 h100-sxm GPUs" in why, why
    assert "47 µs" in why and "pipeline parallelism across nodes" in why, why


def test_a_group_inside_one_domain_says_nothing_of_nodes() -> None:
    assert "nodes" not in _tp_why("h100-sxm", 2)
    assert "nodes" not in _tp_why("gb200", 8)


def test_an_amd_group_names_infinity_fabric_not_nvlink() -> None:
    why = _tp_why("mi300x", 8)
    assert "TP 16 spans 2 nodes of 8 mi300x GPUs (one Infinity Fabric domain)" in why, why
