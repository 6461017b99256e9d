"""speculative_decoding: enable at ≤ ``max_batch_per_replica`` with TPOT missing; disable above
``disable_above_batch_per_replica`` when speculation is on and TPOT misses."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from advisor.rules.base import SLOTargets
from advisor.rules.speculative import SpeculativeRule
from tests.rules.helpers import ctx, ev, hist, opens_after

RULE = SpeculativeRule(max_batch_per_replica=4, disable_by_batch_size=8, disable_above_batch_per_replica=32)
ON = ctx(speculative=True)
# TPOT median: 100 observations all in (0.05, 0.1] → rank 50 → 0.05 + 0.05 × 50 ÷ 100 = 0.075 s
TPOT = hist((0.05, 0), (0.1, 100), total_sum=7.5)


def _ev(**kw: Any) -> Any:
    stats: dict[str, Any] = {"requests_running": 2, "tpot_ok": 0.5, "tpot": TPOT}
    stats.update(kw)
    return ev(**stats)


@pytest.mark.parametrize(
    ("rule", "stats", "fires"),
    [
        (RULE, {"requests_running": 4}, True),  # 4 per replica = max_batch_per_replica
        (RULE, {"requests_running": 5}, False),
        (RULE, {"requests_running": 8, "replicas_up": 2}, True),  # 4 per replica
        (RULE, {"requests_running": 9, "replicas_up": 2}, False),  # 4.5 per replica
        (RULE, {"requests_running": 0}, False),  # idle: nothing to speed up
        (RULE, {"tpot_ok": 0.8999}, True),  # under the 0.9 target ratio
        (RULE, {"tpot_ok": 0.9}, False),  # at it: TPOT is met
        (SpeculativeRule(max_batch_per_replica=1), {"requests_running": 1}, True),
        (SpeculativeRule(max_batch_per_replica=1), {"requests_running": 2}, False),
        (RULE, {"dep": ON, "requests_running": 33}, True),  # on, 33 > 32: disable
        (RULE, {"dep": ON, "requests_running": 32}, False),  # on, at 32: keep
        (RULE, {"dep": ON, "requests_running": 33, "tpot_ok": 0.95}, False),  # on, big batch, TPOT met
        (RULE, {"dep": ON, "requests_running": 2}, False),  # on and small: nothing to enable
    ],
    ids=[
        "batch at max_batch_per_replica fires",
        "batch above max_batch_per_replica does not fire",
        "the batch is per replica (at it)",
        "the batch is per replica (over it)",
        "no running requests does not fire",
        "tpot attainment just under target fires",
        "tpot attainment at target does not fire",
        "max_batch_per_replica 1 at it fires",
        "max_batch_per_replica 1 over it does not fire",
        "speculation on above disable_above fires (disable)",
        "speculation on at disable_above does not fire",
        "speculation on with TPOT met does not fire",
        "speculation on at a small batch does not fire",
    ],
)
def test_fire_table(rule: SpeculativeRule, stats: dict[str, Any], fires: bool) -> None:
    e = _ev(**stats)
    assert rule.fires(e).holds is fires
    assert rule.clears(e).holds is (not fires)


@pytest.mark.parametrize(
    "e",
    [_ev(requests_running=None), ev(requests_running=2, tpot=TPOT)],
    ids=["running unknown", "tpot attainment unknown"],
)
def test_cannot_tell(e: Any) -> None:
    assert RULE.fires(e).holds is None
    assert RULE.clears(e).holds is None
    assert RULE.propose(e) == []


def test_enable_predicts_tpot_from_tokens_per_step() -> None:
    (p,) = RULE.propose(_ev())
    # tokens per step (Leviathan et al.) at α = 0.6, k = 4: (1 − 0.6⁵) ÷ 0.4 = 0.92224 ÷ 0.4 = 2.3056
    # TPOT p50 0.075 s × 1.1 draft overhead ÷ 2.3056 = 0.035782 s
    assert (p.dial, p.action) == ("speculative_decoding", "enable")
    assert p.predicted_effect["tpot_seconds"] == {"before": 0.075, "after": 0.0358}
    assert p.score == pytest.approx(2.3056 / 1.1, abs=1e-4)
    # vLLM ≥ 0.10 ignores disable_by_batch_size (PR #35060 removed it): the threshold is advice in the text
    config = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}
    assert p.flag == f"--speculative-config '{json.dumps(config)}'"
    assert "above ~8 running sequences" in p.description


def test_disable_when_on_with_a_big_batch() -> None:
    (p,) = RULE.propose(_ev(dep=ON, requests_running=40))
    assert (p.action, p.current, p.suggested, p.flag) == ("disable", "on", "off", "remove --speculative-config")


def test_never_enables_at_a_large_batch() -> None:
    for running in (5, 40, 200):
        assert RULE.fires(_ev(requests_running=running)).holds is False


@pytest.mark.parametrize(("held", "opens"), [(299.5, False), (300.0, True)], ids=["just short of 300 s", "at 300 s"])
def test_for_duration(held: float, opens: bool) -> None:
    rule = SpeculativeRule(for_seconds=300)
    assert opens_after(rule, lambda now: _ev(now=now, dep=WEIGHT_BOUND), held) is opens


WEIGHT_BOUND = ctx(slo=SLOTargets(2.5, 0.005, 0.9))
"""A TPOT target of 5 ms, below the ~6 ms the roofline gives Llama-3.1-8B's step at batch 2 on an H100 (16 GB of
weights at 0.8 × 3.35 TB/s): the weights' read is what misses it, speculation's premise."""


def test_enable_is_withheld_on_a_tgi_release_without_speculation() -> None:
    """TGI's ``--speculate`` arrived in v1.3.0 (commit 9ecfa16b, "Speculative (#1308)"): 1.2.0 cannot, 1.3.0 can."""
    for version, held in (("1.2.0", True), ("1.3.0", False)):
        dep = dataclasses.replace(
            WEIGHT_BOUND,
            engine="tgi",
            inputs=dataclasses.replace(WEIGHT_BOUND.inputs, engine="tgi", engine_version=version),
        )
        (p,) = RULE.propose(_ev(dep=dep))
        assert (p.withheld is not None) is held, (version, p.withheld)
        if held:
            assert p.withheld is not None and "cannot speculate" in p.withheld


def _with_mtp(engine: str) -> Any:
    """The default deployment with a checkpoint that ships one MTP layer (``num_nextn_predict_layers`` 1, as
    DeepSeek-V3/R1), on ``engine``."""
    base = ctx(engine=engine)
    model = dataclasses.replace(base.inputs.model, mtp_layers=1)
    return dataclasses.replace(base, inputs=dataclasses.replace(base.inputs, model=model))


@pytest.mark.parametrize(
    ("engine", "flag"),
    [
        ("vllm", """--speculative-config '{"method": "mtp", "num_speculative_tokens": 1}'"""),
        (
            "sglang",
            "--speculative-algorithm EAGLE --speculative-num-steps 1 --speculative-eagle-topk 1 "
            "--speculative-num-draft-tokens 2",
        ),
    ],
)
def test_a_checkpoint_with_its_own_mtp_layer_drafts_with_it(engine: str, flag: str) -> None:
    # sgl-project/sglang#3196 → #3582: DeepSeek-V3's fix at batch 1 was its NextN layer, not prompt lookup.
    # One layer at the reported acceptance 0.85 (DeepSeek-V3 report §5.4.3): (1 − 0.85²) ÷ 0.15 = 1.85 tokens a step;
    # TPOT p50 0.075 s × 1.1 ÷ 1.85 = 0.044595 s
    (p,) = RULE.propose(_ev(dep=_with_mtp(engine)))
    assert (p.dial, p.action, p.flag) == ("speculative_decoding", "enable", flag)
    assert p.suggested == {"method": "mtp", "num_speculative_tokens": 1}
    assert p.predicted_effect["tpot_seconds"] == {"before": 0.075, "after": 0.0446}
    assert p.evidence["mtp_layers"] == 1


def test_an_engine_that_does_not_load_mtp_layers_keeps_prompt_lookup() -> None:
    (p,) = RULE.propose(_ev(dep=_with_mtp("tgi")))
    assert p.flag == "--speculate 4" and p.suggested["method"] == "ngram"


@pytest.mark.parametrize(
    ("version", "model_type", "method"),
    [
        ("0.10.1", "deepseek_v3", "deepseek_mtp"),  # before vllm#25232 folded the per-model names into "mtp"
        ("0.10.1", "qwen3_next", "qwen3_next_mtp"),
        ("0.11.0", "deepseek_v3", "mtp"),
        ("0.10.1", "llama", "ngram"),  # no MTP name for it in that release: prompt lookup, as before
    ],
)
def test_vllm_s_mtp_method_name_follows_its_release(version: str, model_type: str, method: str) -> None:
    base = _with_mtp("vllm")
    model = dataclasses.replace(base.inputs.model, model_type=model_type)
    dep = dataclasses.replace(base, inputs=dataclasses.replace(base.inputs, model=model, engine_version=version))
    (p,) = RULE.propose(_ev(dep=dep))
    assert p.suggested["method"] == method
    assert f'"method": "{method}"' in p.flag


def test_more_mtp_layers_still_draft_the_one_token_whose_acceptance_is_reported() -> None:
    # later MTP depths accept far less (MiMo-7B: 0.88 then 0.18, vllm#25136): one draft token, the same 1.85 a step
    base = _with_mtp("vllm")
    model = dataclasses.replace(base.inputs.model, mtp_layers=3)
    (p,) = RULE.propose(_ev(dep=dataclasses.replace(base, inputs=dataclasses.replace(base.inputs, model=model))))
    assert p.suggested == {"method": "mtp", "num_speculative_tokens": 1}
    assert p.predicted_effect["tpot_seconds"] == {"before": 0.075, "after": 0.0446}
    assert p.evidence["mtp_layers"] == 3


@pytest.mark.parametrize(
    ("version", "model_type", "method", "flag"),
    [
        # 0.7.3's V0 reads DeepSeek's MTP layer with the draft length alone (vllm#12755)
        ("0.7.3", "deepseek_v3", "deepseek_mtp", "--num-speculative-tokens 1 (this release loads"),
        # before it, and for any other model before 0.8: n-gram with the flags of that release (removed by #15466)
        ("0.7.2", "deepseek_v3", "ngram", "--speculative-model '[ngram]' --num-speculative-tokens 4"),
        ("0.6.4", "llama", "ngram", "--speculative-model '[ngram]' --num-speculative-tokens 4"),
    ],
)
def test_a_vllm_before_the_speculative_config_gets_that_release_s_flags(
    version: str, model_type: str, method: str, flag: str
) -> None:
    base = _with_mtp("vllm")
    model = dataclasses.replace(base.inputs.model, model_type=model_type)
    dep = dataclasses.replace(base, inputs=dataclasses.replace(base.inputs, model=model, engine_version=version))
    (p,) = RULE.propose(_ev(dep=dep))
    assert p.suggested["method"] == method
    assert p.flag.startswith(flag) and "--speculative-config" not in p.flag


@pytest.mark.parametrize(
    ("mix", "withheld"),
    [(0.2, True), (1.99, True), (2.0, False), (8.0, False), (None, False)],
    ids=["chat-like 0.2", "just under 2", "at 2", "summaries 8", "unknown"],
)
def test_an_ngram_draft_is_withheld_on_free_form_traffic(mix: float | None, withheld: bool) -> None:
    """Field-state round 70, vllm-project/vllm#8439: one stream of Qwen2-7B generating 1,000 tokens from a short
    prompt decoded 69.8 → 61.8 tokens/s with n-gram drafts. A prompt lookup drafts only spans the output repeats from
    its prompt; traffic that writes more than half of what it reads (prompt ÷ generated < 2) gets no assumed-acceptance
    n-gram turn. Summaries and document answers (reading several times what they write) still do; unknown keeps it."""
    e = dataclasses.replace(_ev(dep=WEIGHT_BOUND), lifetime_prompt_per_generated_token=mix)
    (p,) = RULE.propose(e)
    assert (p.dial, p.action, p.suggested["method"]) == ("speculative_decoding", "enable", "ngram")
    if withheld:
        assert p.withheld is not None and f"read {mix:.2f} prompt tokens per token they generate" in p.withheld
    else:
        assert p.withheld is None


def test_a_checkpoints_own_mtp_layer_is_not_withheld_on_free_form_traffic() -> None:
    """The MTP layer was trained as the model's own draft: its acceptance is the makers' measure on free-form text
    (DeepSeek-V3 Technical Report §5.4.3), not a prompt lookup's overlap."""
    e = dataclasses.replace(_ev(dep=_with_mtp("vllm")), lifetime_prompt_per_generated_token=0.2)
    (p,) = RULE.propose(e)
    assert p.suggested == {"method": "mtp", "num_speculative_tokens": 1} and p.withheld is None
