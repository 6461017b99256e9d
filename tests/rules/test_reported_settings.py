"""Turns start from what the engine runs: where vLLM reports a capacity-pass dial in ``cache_config_info``
(``gpu_memory_utilization``, ``cache_dtype``, the two pool overrides), the rules' inputs hold the engine's value,
not the advisor config's (:func:`advisor.evaluate.running_context`).

Found by a walkthrough: config ``gpu_memory_utilization`` 0.9 (the default, not written) while the engine ran 0.5;
preemptions under that budget opened nothing from ``kv_budget`` (0.9 is not below its 0.9 target) and
``kv_saturation`` proposed "0.9 → 0.95", a turn that starts from a budget the engine does not run.

Hand-computed figures (Llama-3.1-8B-Instruct bf16 on one H100-SXM, :mod:`tests.rules.helpers`): at 0.9 the pool is
449,920 tokens; at 0.5: 84,986,665,370 × 0.5 = 42,493,332,685 B − weights 16,094,076,928 − overhead 1,420,094,341
= 24,979,161,416 B → ⌊÷ 2,097,152⌋ = 11,910 blocks = 190,560 tokens.
"""

from __future__ import annotations

import pytest

from advisor import conventions as c
from advisor.engines.vllm import reported_settings
from advisor.evaluate import running_context
from advisor.rules.common import pool_turns
from advisor.rules.drift import ModelDriftRule
from advisor.rules.kv_budget import KVBudgetRule
from tests.rules.helpers import H100_POOL_TOKENS, ctx, ev

POOL_AT_HALF = 190_560


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"gpu_memory_utilization": "0.5"}, {"gpu_memory_utilization": 0.5}),
        ({"gpu_memory_utilization": "1.5"}, {}),
        ({"gpu_memory_utilization": "0"}, {}),
        ({"gpu_memory_utilization": "x"}, {}),
        ({"cache_dtype": "fp8_e4m3"}, {"kv_cache_dtype": "fp8_e4m3"}),
        ({"kv_cache_memory_bytes": "None", "num_gpu_blocks_override": "100"},
         {"kv_cache_memory_bytes": None, "num_gpu_blocks_override": 100}),
        ({"num_gpu_blocks_override": "1.5"}, {}),
        ({"kv_cache_memory_bytes": "0"}, {"kv_cache_memory_bytes": None}),
        ({"block_size": "16", "engine": "0"}, {}),
    ],
    ids=["a budget", "a budget above 1 is unreadable", "a zero budget is unreadable", "text is unreadable",
         "the KV dtype as printed", "None means the engine runs without the override", "a fractional block count",
         "a byte budget of 0 is no pin (vLLM profiles then)",
         "labels that are no capacity dial"],
)  # fmt: skip
def test_reported_settings_reads_only_what_reads_cleanly(labels: dict[str, str], expected: dict[str, object]) -> None:
    assert reported_settings(labels) == expected


def test_kv_budget_raises_from_the_budget_the_engine_runs() -> None:
    e = ev(engine_config={"gpu_memory_utilization": "0.5"}, preemptions_increase=5.0, kv_capacity_tokens=POOL_AT_HALF)
    rule = KVBudgetRule()
    assert rule.fires(e).holds is True
    (p,) = rule.propose(e)
    assert (p.dial, p.current, p.suggested) == (c.DIAL_GPU_MEMORY_UTILIZATION, 0.5, 0.9)
    kv = p.predicted_effect["kv_cache_tokens"]
    assert (kv["model_before"], kv["model_after"]) == (POOL_AT_HALF, H100_POOL_TOKENS)
    assert kv["before"] == POOL_AT_HALF  # the engine's pool; the model agrees once it starts from 0.5


def test_no_budget_turn_to_a_budget_the_engine_already_runs() -> None:
    # the config omits the budget (0.9) while the engine runs 0.95: "0.9 → 0.95" would be a turn to where it is
    e = ev(engine_config={"gpu_memory_utilization": "0.95"}, preemptions_increase=5.0)
    assert [cand.turn.dial for cand in pool_turns(e) if cand.turn.dial == c.DIAL_GPU_MEMORY_UTILIZATION] == []
    assert KVBudgetRule().propose(e) == []


def test_no_fp8_kv_turn_for_an_engine_that_caches_in_fp8() -> None:
    assert c.DIAL_KV_CACHE_DTYPE not in [t.turn.dial for t in pool_turns(ev(engine_config={"cache_dtype": "fp8"}))]
    # and the other way round: the config says fp8, the engine caches in bf16 → fp8 is a turn still to make
    fp8_configured = ev(dep=ctx(kv_cache_dtype="fp8"), engine_config={"cache_dtype": "auto"})
    assert c.DIAL_KV_CACHE_DTYPE in [t.turn.dial for t in pool_turns(fp8_configured)]


def test_one_setting_spelt_two_ways_is_no_drift() -> None:
    e = ev(engine_config={"cache_dtype": "bfloat16", "gpu_memory_utilization": "0.903"})  # config: auto on bf16, 0.9
    assert e.config_drift == {}
    assert e.ctx.inputs.kv_cache_dtype == "auto"


def test_drift_proposes_each_differing_setting_for_the_advisor_config() -> None:
    e = ev(capacity_model_error_ratio=0.4, engine_config={"gpu_memory_utilization": "0.5", "cache_dtype": "fp8"})
    props = {p.dial: p for p in ModelDriftRule().propose(e)}
    assert set(props) == {c.DIAL_GPU_MEMORY_UTILIZATION, c.DIAL_KV_CACHE_DTYPE}
    assert (props[c.DIAL_GPU_MEMORY_UTILIZATION].current, props[c.DIAL_GPU_MEMORY_UTILIZATION].suggested) == (0.9, 0.5)
    assert (props[c.DIAL_KV_CACHE_DTYPE].current, props[c.DIAL_KV_CACHE_DTYPE].suggested) == ("auto", "fp8")
    assert all(p.flag.startswith("advisor config:") for p in props.values())


def test_a_reported_budget_that_cannot_hold_the_weights_keeps_the_configured_pass() -> None:
    # 0.1 × 79 GiB cannot hold 16 GB of weights: the capacity pass refuses it; the drift is still reported
    e = ev(engine_config={"gpu_memory_utilization": "0.1"})
    assert e.config_drift == {"gpu_memory_utilization": (0.9, 0.1)}
    assert e.ctx.inputs.gpu_memory_utilization == 0.9


# --- what cannot be used (adversarial review of the above) -----------------------------------------------------


@pytest.mark.parametrize(
    "labels",
    [
        {"gpu_memory_utilization": "0.9_5"},  # float() reads 0.95
        {"gpu_memory_utilization": "\u0660.\u0665"},  # Arabic-Indic digits: float() reads 0.5
        {"gpu_memory_utilization": " 0.5"},
        {"gpu_memory_utilization": "nan"},
        {"cache_dtype": "fp8\n2026-12-03 00:00:00 CRITICAL forged line\x1b[31m"},
        {"cache_dtype": "x" * 200_000},
        {"num_gpu_blocks_override": "1e400"},
    ],
    ids=["an underscore", "other scripts' digits", "a space", "nan", "control characters", "200 KB", "past float"],
)
def test_a_label_that_is_no_plain_value_is_unknown(labels: dict[str, str]) -> None:
    assert reported_settings(labels) == {}


@pytest.mark.parametrize(
    ("labels", "field"),
    [
        ({"cache_dtype": "fp8_inc"}, "kv_cache_dtype"),  # a vLLM name the capacity pass does not know
        ({"num_gpu_blocks_override": "1" + "0" * 308}, "num_gpu_blocks_override"),  # past MAX_NUM_GPU_BLOCKS
        ({"kv_cache_memory_bytes": "1" + "0" * 30}, "kv_cache_memory_bytes"),
        ({"gpu_memory_utilization": "1e-300"}, "gpu_memory_utilization"),  # cannot hold the weights
    ],
    ids=["an unknown KV dtype", "a block count past the bound", "bytes past the bound", "a budget below the weights"],
)
def test_a_reported_value_the_capacity_pass_refuses_is_unknown_and_no_turn_or_config_value_rests_on_it(
    labels: dict[str, str], field: str
) -> None:
    """Before: an unknown dtype was taken as the config's ``auto`` and fp8 proposed (×2 pool, confidence 0.9) while
    model_drift told the operator to write ``fp8_inc`` into a config that refuses it; 1e308 blocks crashed the
    deployment's evaluation (OverflowError) and it vanished from the API."""
    e = ev(engine_config=labels, preemptions_increase=5.0, capacity_model_error_ratio=0.5)
    assert field in e.config_unmodelled, e.config_unmodelled
    dials = [cand.turn.dial for cand in pool_turns(e)]
    if field == "kv_cache_dtype":
        assert c.DIAL_KV_CACHE_DTYPE not in dials
    else:
        assert c.DIAL_GPU_MEMORY_UTILIZATION not in dials
        assert KVBudgetRule().fires(e).holds is None
    assert [p for p in ModelDriftRule().propose(e) if p.dial in (field, c.DIAL_KV_CACHE_DTYPE)] == []


def test_replicas_that_disagree_leave_the_setting_unknown() -> None:
    """Before: the first answering replica decided (0.5 first: a budget raise; 0.9 first: an fp8 turn)."""
    base = ev(preemptions_increase=5.0)
    for order in (["0.5", "0.9"], ["0.9", "0.5"]):
        configs = [{"gpu_memory_utilization": u} for u in order]
        running, drift, unmodelled = running_context(base.ctx, configs)
        assert "different gpu_memory_utilization (0.5, 0.9)" in unmodelled["gpu_memory_utilization"]
        assert drift == {} and running is base.ctx
