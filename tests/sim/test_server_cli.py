"""The simulated fleet over HTTP (loopback, free ports) and the ``simulate`` command."""

from __future__ import annotations

import argparse
import io
import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from advisor.engines import get_adapter
from advisor.sim.scenarios import DEMO_SCENARIOS
from advisor.sim.server import start_fleet
from advisor.simcmd import _Progress, add_simulate_parser
from advisor.sources.exposition import parse_exposition


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.mark.integration
def test_the_demo_fleet_serves_each_replica_s_metrics_on_the_simulated_clock() -> None:
    clock = FakeClock()
    with start_fleet(DEMO_SCENARIOS, speed=10.0, clock=clock, tick_seconds=3600) as fleet:
        names = [n for n, _ in fleet.targets]
        assert names == ["healthy", "kv-saturated", "over-provisioned", "over-provisioned", "over-provisioned"]
        clock.t = 30.0  # 300 simulated seconds
        adapter = get_adapter("vllm")
        snaps = {}
        for name, url in fleet.targets:
            with urllib.request.urlopen(url, timeout=10) as resp:
                assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
                text = resp.read().decode()
            snaps.setdefault(name, adapter.snapshot(parse_exposition(text, adapter.wants)))
        assert snaps["kv-saturated"].kv_cache_usage_ratio is not None
        assert snaps["kv-saturated"].kv_cache_usage_ratio > 0.8
        assert (snaps["kv-saturated"].preemptions_total or 0) > 0
        assert (snaps["healthy"].kv_cache_usage_ratio or 0) < 0.3
        assert snaps["healthy"].generation_tokens_total
        base = fleet.urls("healthy")[0].rsplit("/", 1)[0]
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(base + "/nope", timeout=10)
        assert err.value.code == 404
        err.value.close()
        fields = DEMO_SCENARIOS[1].deployment_fields(fleet.urls("kv-saturated"))
        assert fields["gpu_memory_utilization"] == 0.5 and fields["targets"] == fleet.urls("kv-saturated")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    p = argparse.ArgumentParser(prog="capacity-advisor")
    add_simulate_parser(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    rc = args.func(args)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "advisor.yaml"
    path.write_text(
        """
deployments:
  - name: chat-8b
    engine: vllm
    targets: ["http://10.0.0.5:8000/metrics"]
    model: meta-llama/Llama-3.1-8B-Instruct
    gpu: H100-SXM
    gpu_memory_utilization: 0.5
    max_model_len: 8192
    max_num_seqs: 256
    slo: {ttft_seconds: 2.5, tpot_seconds: 0.1, target_ratio: 0.9}
""",
        encoding="utf-8",
    )
    return path


def test_simulate_prints_quantiles_goodput_throughput_kv_and_preemptions(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = run(["simulate", "--config", str(config), "--duration", "60s", "--arrival-rate", "3"], capsys)
    assert rc == 0
    for label in ("TTFT p50 / p90 / p99", "TPOT p50", "goodput", "output tokens/s", "KV usage", "preemptions"):
        assert label in out


def test_simulate_json_has_the_summary(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["simulate", "--config", str(config), "--duration", "30", "--json"], capsys)
    assert rc == 0
    data = json.loads(out)
    assert data["deployment"] == "chat-8b"
    assert data["summary"]["kv_cache_blocks"] > 0
    assert 0 <= data["summary"]["goodput_ratio"] <= 1


def test_the_sweep_prints_one_row_per_value_and_marks_the_frontier(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["simulate", "--config", str(config), "--duration", "60", "--arrival-rate", "2.5", "--prompt-tokens", "6000"]
    rc, out, _ = run([*argv, "--sweep", "gpu_memory_utilization=0.5,0.7,0.9"], capsys)
    assert rc == 0
    rows = [line for line in out.splitlines() if line[2:].strip().startswith(("0.5 ", "0.7 ", "0.9 "))]
    assert len(rows) == 3
    assert any(r.startswith("*") for r in rows)


def test_apply_runs_the_dial_turned_beside_the_unchanged_run(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "--config", str(config), "--duration", "120", "--arrival-rate", "2.5", "--json"]
    rc, out, _ = run([*argv, "--prompt-tokens", "6000", "--apply", "gpu_memory_utilization=0.9"], capsys)
    assert rc == 0
    data = json.loads(out)
    assert data["current"] == 0.5 and data["applied"] == 0.9
    assert data["after"]["kv_cache_blocks"] > data["before"]["kv_cache_blocks"]
    assert data["after"]["goodput_ratio"] >= data["before"]["goodput_ratio"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--apply", "rec-123"], "recommendation id is not implemented yet"),
        (["--sweep", "block_size=16,32"], "unknown dial 'block_size'"),
        (["--sweep", "max_num_seqs=64,lots"], "not a valid int"),
        (["--plot", "x.png"], "--plot needs --sweep"),
        (["--deployment", "nope"], "no deployment 'nope'"),
    ],
)
def test_bad_what_if_flags_are_refused_clearly(
    config: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    p = argparse.ArgumentParser(prog="capacity-advisor")
    add_simulate_parser(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(["simulate", "--config", str(config), "--duration", "10", *flags])
    try:
        rc = args.func(args)
    except ValueError as exc:  # the CLI's main() turns these into exit code 2
        rc, err = 2, str(exc)
    else:
        err = capsys.readouterr().err
    assert rc == 2
    assert message in err


def test_the_progress_bar_draws_only_after_a_second() -> None:
    clock = FakeClock()
    stream = io.StringIO()
    bar = _Progress("simulate x", stream, force=True, clock=clock)
    bar(0.1)
    assert stream.getvalue() == ""
    clock.t = 1.5
    bar(0.5)
    assert "[###############...............]  50%" in stream.getvalue()
    bar.done()
    assert stream.getvalue().endswith("\r")
