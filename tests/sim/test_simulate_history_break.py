"""Issue 17 part 4, adversarial ``simulate --prometheus`` input: refused in one line naming the flag, exit 2,
before any query (port 1 answers nothing, so a run that reached the network would exit 1 instead)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.inprocess import run_cli

CONFIG = (
    "deployments:\n  - name: a\n    engine: vllm\n    targets: ['http://127.0.0.1:1/metrics']\n"
    "    model: meta-llama/Llama-3.1-8B-Instruct\n    gpu: H100-SXM\n    max_model_len: 8192\n"
    "    slo: {ttft_seconds: 2, tpot_seconds: 0.1}\n"
)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "advisor.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


@pytest.mark.parametrize("command", ["simulate", "backtest"])
@pytest.mark.parametrize("url", ["ftp://prom:9090", "prom:9090", "http://"])
def test_a_prometheus_url_that_is_not_one_is_refused_naming_the_flag(config: Path, command: str, url: str) -> None:
    """``--prometheus ftp://x`` printed pydantic's four-line ValidationError (with its documentation link) and,
    with a config that has a ``prometheus`` section, was not checked at all (``model_copy`` does not validate)."""
    extra = ["--deployment", "a"] if command == "simulate" else ["--from", "now-1h", "--to", "now"]
    r = run_cli(command, "--config", str(config), *extra, "--prometheus", url)
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]  # argparse's usage, then one line: the error
    assert "--prometheus" in last and "http://" in last
    assert "pydantic" not in r.stderr and "validation error" not in r.stderr


def test_a_prometheus_url_is_checked_when_the_config_has_its_own(tmp_path: Path) -> None:
    path = tmp_path / "advisor.yaml"
    path.write_text("prometheus: {url: 'http://127.0.0.1:1'}\n" + CONFIG, encoding="utf-8")
    r = run_cli("simulate", "--config", str(path), "--deployment", "a", "--prometheus", "ftp://x")
    assert r.returncode == 2 and "--prometheus" in r.stderr


def test_a_window_ending_in_the_future_is_refused_naming_to(config: Path) -> None:
    """``--to 2999-01-01`` read an empty window and said "no target has two samples between 2998-12-31… and
    2999-01-01…", exit 1, as if the engines were down."""
    r = run_cli("simulate", "--config", str(config), "--deployment", "a", "--prometheus", "http://127.0.0.1:1",
                "--to", "2999-01-01T00:00:00Z")  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert "--to" in r.stderr and "future" in r.stderr


def test_a_step_longer_than_the_window_is_refused(config: Path) -> None:
    """``--step 1d --window 10m``: no evaluation falls in the window; it said "no target has two samples", exit 1."""
    r = run_cli("simulate", "--config", str(config), "--deployment", "a", "--prometheus", "http://127.0.0.1:1",
                "--window", "10m", "--step", "86400")  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert "--step" in r.stderr and "--window" in r.stderr
