"""``plan``'s pass past the ceiling counts the prompts the engine refuses (breaker 26: ``--max-model-len 1850
--prompt-tokens 1500 --prompt-cv 1`` read "MEETS the SLO: goodput 100 %" with a quarter of the prompts over the
limit). Expected shares from :class:`statistics.NormalDist` on the log-lengths, not from the code under test."""

from __future__ import annotations

import json
import math
from statistics import NormalDist

import pytest

from advisor.capacity.queueing import share_at_least
from tests.inprocess import run_cli


def _lognormal_tail(mean: float, cv: float, limit: float) -> float:
    sigma2 = math.log(1 + cv * cv)
    return 1 - NormalDist(math.log(mean) - sigma2 / 2, math.sqrt(sigma2)).cdf(math.log(limit))


@pytest.mark.parametrize(("mean", "cv", "limit"), [(1500, 1.0, 1850), (1500, 0.5, 8192), (4000, 2.0, 4096)])
def test_share_at_least_is_the_lognormal_tail(mean: float, cv: float, limit: float) -> None:
    assert share_at_least(mean, cv, limit) == pytest.approx(_lognormal_tail(mean, cv, limit), abs=1e-9)
    assert share_at_least(1500, 0.0, 1850) == 0.0 and share_at_least(1850, 0.0, 1850) == 1.0


def test_plan_counts_refused_prompts_against_goodput_and_the_verdict() -> None:
    args = (
        "plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM", "--arrival-rate", "2",
        "--prompt-tokens", "1500", "--output-tokens", "300", "--prompt-cv", "1", "--ttft", "2.5", "--tpot", "0.1",
        "--json",
    )  # fmt: skip
    wide = json.loads(run_cli(*args, "--max-model-len", "8192").stdout)
    narrow = json.loads(run_cli(*args, "--max-model-len", "1850").stdout)
    tail = _lognormal_tail(1500, 1.0, 1850)  # 0.2520
    assert narrow["refused_ratio"] == pytest.approx(tail, rel=1e-6)
    assert narrow["meets_slo"] is False and narrow["goodput_ratio"] <= 1 - tail + 1e-9
    assert narrow["replicas_needed"] is None  # no replica count serves a refused prompt
    assert wide["refused_ratio"] == pytest.approx(_lognormal_tail(1500, 1.0, 8192), rel=1e-6)
    assert wide["meets_slo"] is True


def test_a_max_context_below_the_typical_request_names_the_flag() -> None:
    # breaker 26: the message named the model's field, max_context_tokens, instead of --max-context
    r = run_cli(
        "plan", "--search", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--arrival-rate", "2",
        "--prompt-tokens", "1500", "--output-tokens", "300", "--ttft", "2.5", "--tpot", "0.1", "--max-context", "100",
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert "--max-context 100" in r.stderr and "1,800" in r.stderr and "max_context_tokens" not in r.stderr
