"""Hardware guards on turns the roofline prices but operators measured the other way (field-state round 48).

* fp8 KV on an AMD part without FP8 hardware (the catalog's MI210 has no FP8 rate): vllm-project/vllm#3981, four
  MI100s, 4,916 → 2,405 tokens/s with ``--kv-cache-dtype fp8``. NVIDIA parts without FP8 tensor cores (A100) keep
  the turn; so does an AMD part with FP8 (MI300X).
* A larger TP degree as a latency turn on a consumer card (RTX 4090: PCIe, no peer-to-peer):
  vllm-project/vllm#6955 (TP 2 → 4 on PCIe RTX 3090 Ti: prefill 525 → 490 tokens/s) and noonghunna/club-3090#356
  (TP 2 on PCIe Gen3 without P2P: ~50 tokens/s against 66–71). An H100 SXM (NVLink 900 GB/s) keeps it.
"""

from __future__ import annotations

from advisor import conventions as c
from advisor.rules.base import SLOTargets
from advisor.rules.common import fp8_kv_emulated, pool_turns
from advisor.rules.goodput import SMALL_BATCH_TP_WITHHELD, GoodputRule
from tests.rules.helpers import ROOFLINE, ctx, ev, good, requests


def _fp8_offered(gpu: str) -> bool:
    e = ev(dep=ctx(gpu=gpu), requests_running=100, kv_cache_usage_ratio=1.0)
    return any(cand.turn.dial == c.DIAL_KV_CACHE_DTYPE for cand in pool_turns(e))


def test_fp8_kv_is_not_offered_on_an_amd_part_without_fp8_hardware() -> None:
    assert fp8_kv_emulated(ctx(gpu="mi210").gpu) is True
    assert not _fp8_offered("mi210")
    assert _fp8_offered("mi300x")  # CDNA3 has FP8
    assert _fp8_offered("A100-SXM-80GB")  # NVIDIA stores an fp8 cache without FP8 tensor cores
    assert fp8_kv_emulated(None) is False  # an unknown GPU is not this case


def _tp_turn(gpu: str) -> object:
    # 2 running, TPOT target 5 ms: the small-batch branch offers weight quantization and TP × 2
    dep = ctx(gpu=gpu, slo=SLOTargets(2.5, 0.005, 0.9), perf=ROOFLINE)
    e = ev(dep=dep, goodput=good(1.0, 0.2), requests_running=2, kv_cache_usage_ratio=0.01, **requests(100))
    (tp,) = [p for p in GoodputRule().propose(e) if p.dial == c.DIAL_TENSOR_PARALLEL_SIZE]
    return tp


def test_a_latency_tp_turn_is_withheld_on_a_consumer_card() -> None:
    pcie = _tp_turn("rtx4090")
    assert pcie.withheld is not None and "vllm#6955" in pcie.withheld, pcie.withheld  # type: ignore[attr-defined]
    # elsewhere the small-batch TP turn is withheld too, on what operators measured (goodput.SMALL_BATCH_TP_WITHHELD:
    # no gain or a loss in every report collected), not on a link figure the catalog has or lacks
    for gpu in ("H100-SXM", "l4"):
        assert _tp_turn(gpu).withheld == SMALL_BATCH_TP_WITHHELD  # type: ignore[attr-defined]
