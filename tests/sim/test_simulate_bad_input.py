"""``capacity-advisor simulate`` given input it cannot take, as an operator runs it: one line naming the flag or dial,
exit code 2, no traceback; unknown shown as unknown; a closed pipe is not an error (a subprocess, its stdout a real
pipe). The rest run the CLI's entry point in-process (:func:`tests.inprocess.run_cli`), with the same time limit."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.simcmd import add_simulate_parser
from tests.conftest import REPO_ROOT
from tests.inprocess import CliRun, run_cli

TIMEOUT = 30  # each run here takes about a second; a run that does not stop in time fails the test


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """One Llama-3.1-8B replica on an H100-SXM; ``max_num_seqs`` left unset (vLLM's default there: 1024)."""
    path = tmp_path / "advisor.yaml"
    path.write_text(
        """
deployments:
  - name: chat-8b
    engine: vllm
    targets: ["http://10.0.0.5:8000/metrics"]
    model: meta-llama/Llama-3.1-8B-Instruct
    gpu: H100-SXM
    gpu_memory_utilization: 0.9
    max_model_len: 8192
    slo: {ttft_seconds: 2.5, tpot_seconds: 0.1, target_ratio: 0.95}
""",
        encoding="utf-8",
    )
    return path


def simulate(config: Path, *flags: str, duration: str = "5") -> CliRun:
    return run_cli("simulate", "--config", str(config), "--duration", duration, *flags, timeout=TIMEOUT)


def refused(r: CliRun, *words: str) -> str:
    """Exit 2, no traceback, and the error (the last stderr line; argparse prints its usage above) names ``words``."""
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert len(line) < 400, line
    for w in words:
        assert w in line, (w, line)
    return line


@pytest.mark.parametrize(
    ("flag", "value", "bound"),
    [
        ("--spec-tokens", "99999999999999999999999", "1 to 64"),  # was an OverflowError traceback
        ("--spec-tokens", "10000000", "1 to 64"),  # was 13 s
        ("--spec-tokens", "65", "1 to 64"),
        ("--replicas", "99999999", "1 to 10,000"),  # ran for minutes
        ("--replicas", "9" * 5000, "1 to 10,000"),  # beyond Python's 4,300-digit int() limit
        ("--spec-disable-by-batch-size", "0", "1 to 1,000,000"),
        ("--spec-disable-by-batch-size", "99999999999999999999999", "1 to 1,000,000"),
        ("--seed", "99999999999999999999999", "0 to 4,294,967,295"),
    ],
)
def test_integer_flags_have_an_upper_bound_and_say_it_in_one_line(
    config: Path, flag: str, value: str, bound: str
) -> None:
    refused(simulate(config, flag, value), f"argument {flag}:", "out of range", bound)  # a long number is cut


def test_the_help_states_the_bounds() -> None:
    r = run_cli("simulate", "--help", timeout=TIMEOUT)
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "1 to 64" in text and "1 to 10,000" in text and "1 to 1,000,000" in text


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--apply", "replicas=1000000"], ["--apply", "replicas", "1 to 10,000"]),  # ran for minutes
        (["--sweep", "replicas=1,1000000"], ["--sweep", "replicas", "1 to 10,000"]),
        (["--apply", "max_num_seqs=0"], ["--apply", "max_num_seqs", "1 to 1,000,000"]),  # ran the default, 1024
        (["--sweep", "max_num_seqs=1,0,2"], ["--sweep", "max_num_seqs", "'0'"]),  # row "0" was really 1024
        (["--apply", "max_num_seqs=-5"], ["--apply", "max_num_seqs"]),
        (["--apply", "max_num_seqs=99999999999999999999999"], ["--apply", "max_num_seqs", "out of range"]),
        (["--apply", "tensor_parallel_size=0"], ["--apply", "tensor_parallel_size", "1 to 64"]),
        (["--apply", "max_model_len=10"], ["--apply", "max_model_len", "16 to 10,000,000"]),
        (["--apply", "max_model_len=1000000"], ["--apply", "max_model_len", "context of 131072"]),
        (["--apply", "gpu_memory_utilization=nan"], ["--apply", "gpu_memory_utilization", "(0, 1]"]),
        (["--apply", "gpu_memory_utilization=0"], ["--apply", "gpu_memory_utilization", "(0, 1]"]),
        (["--sweep", "kv_cache_dtype=auto,fp9"], ["--sweep", "kv_cache_dtype", "'fp9'"]),
    ],
)
def test_a_value_a_dial_cannot_take_is_refused_naming_the_dial(
    config: Path, flags: list[str], words: list[str]
) -> None:
    refused(simulate(config, *flags), *words)


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--apply", ""], ["--apply", "empty", "DIAL=VALUE"]),  # was silently ignored
        (["--apply", "   "], ["--apply", "empty"]),
        (["--sweep", ""], ["--sweep", "empty", "DIAL=V1,V2"]),
        (["--apply", "=512"], ["--apply", "no dial"]),
        (["--apply", "max_num_seqs="], ["--apply", "no value for max_num_seqs"]),
        (["--apply", "max_num_seqs=256,512"], ["--apply", "one value"]),
        (["--sweep", "max_num_seqs=256,,512"], ["--sweep", "empty value"]),
    ],
)
def test_an_empty_or_malformed_dial_value_is_refused(config: Path, flags: list[str], words: list[str]) -> None:
    refused(simulate(config, *flags), *words)


def test_a_dial_at_the_engine_default_shows_the_default_s_number(config: Path) -> None:
    r = simulate(config, "--apply", "max_num_seqs=512")
    assert r.returncode == 0, r.stderr
    assert "max_num_seqs 1024 (default) → 512" in r.stdout
    assert "None" not in r.stdout
    r = simulate(config, "--apply", "max_num_seqs=512", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["current"] == 1024 and data["current_is_default"] is True and data["applied"] == 512
    assert data["before"]["max_num_seqs"] == 1024 and data["after"]["max_num_seqs"] == 512


def test_no_completed_request_gives_no_verdict(config: Path) -> None:
    r = simulate(config, duration="1e-300")
    assert r.returncode == 0, r.stderr
    goodput = next(line for line in r.stdout.splitlines() if line.startswith("goodput "))
    assert "no request completed in the simulated time; no verdict" in goodput
    assert "MISSED" not in r.stdout and "met)" not in r.stdout
    r = simulate(config, "--json", duration="1e-300")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["summary"]["goodput_ratio"] is None


@pytest.mark.parametrize(
    "flags",
    [[], ["--json"], ["--apply", "replicas=2"], ["--json", "--apply", "replicas=2"], ["--sweep", "replicas=1,2"]],
)
def test_a_reader_that_goes_away_is_not_an_error(config: Path, tmp_path: Path, flags: list[str]) -> None:
    argv = [sys.executable, "-m", "advisor.cli", "simulate", "--config", str(config), "--duration", "5", *flags]
    with (tmp_path / "stderr").open("w+", encoding="utf-8") as stderr:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, cwd=REPO_ROOT)
        assert proc.stdout is not None
        proc.stdout.close()  # the reader is gone before the report is written, as `| head -1` after its line
        try:
            rc = proc.wait(timeout=TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        stderr.seek(0)
        err = stderr.read()
    assert rc == 0, err
    assert "Broken pipe" not in err and "BrokenPipeError" not in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--window", "1h"], "--window needs --prometheus URL"),
        (["--latency-model", "calibrated"], "--latency-model needs --prometheus URL"),
        (["--prometheus", "http://127.0.0.1:1", "--arrival-rate", "3"], "--arrival-rate does not apply"),
        (["--prometheus", "http://127.0.0.1:1", "--sweep", "replicas=1,2"], "--sweep does not apply with --prometheus"),
        (["--prometheus", "http://127.0.0.1:1", "--prompt-tokens", "900"], "--prompt-tokens does not apply"),
    ],
)
def test_live_data_flags_are_refused_where_they_do_not_apply(
    tmp_path: Path, flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 17 part 4: the history flags need --prometheus; the traffic flags do not apply with it (the run takes
    the window's observed traffic). Refused before any query (port 1 answers nothing)."""
    config = tmp_path / "advisor.yaml"
    config.write_text(
        "deployments:\n  - name: a\n    engine: vllm\n    targets: ['http://127.0.0.1:1/metrics']\n"
        "    model: meta-llama/Llama-3.1-8B-Instruct\n    gpu: H100-SXM\n",
        encoding="utf-8",
    )
    p = argparse.ArgumentParser(prog="capacity-advisor")
    add_simulate_parser(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(["simulate", "--config", str(config), *flags])
    assert args.func(args) == 2
    assert message in capsys.readouterr().err
