"""Issue 19, "flags that do not apply to a mode are refused, not ignored. This holds for every command":
``simulate``'s traffic flags that the chosen arrival process, a ``--trace`` replay or ``--lengths-csv`` do not
read were accepted and ignored (``--burstiness 5`` with the default Poisson arrivals changed nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.inprocess import run_cli
from tests.sim.test_simulate_bad_input import config, refused  # noqa: F401  (the fixture)

TIMEOUT = 30


def _simulate(cfg: Path, *flags: str) -> str:
    r = run_cli("simulate", "--config", str(cfg), "--duration", "5", *flags, timeout=TIMEOUT)
    return refused(r, flags[0] if flags[0] != "--arrivals" else flags[2])


@pytest.mark.parametrize(
    "flags",
    [
        ["--burstiness", "5"],
        ["--on-off", "10", "10"],
        ["--daily-period", "1h"],
        ["--arrivals", "gamma", "--daily-amplitude", "0.5"],
        ["--arrivals", "daily", "--burstiness", "3"],
    ],
)
def test_a_flag_of_another_arrival_process_is_refused(config: Path, flags: list[str]) -> None:  # noqa: F811
    line = _simulate(config, *flags)
    assert "applies to --arrivals" in line


@pytest.mark.parametrize("flag", ["--prompt-tokens", "--prompt-cv", "--output-cv"])
def test_length_flags_with_a_lengths_csv_are_refused(config: Path, tmp_path: Path, flag: str) -> None:  # noqa: F811
    lengths = tmp_path / "lengths.csv"
    lengths.write_text("prompt_tokens,output_tokens\n100,10\n", encoding="utf-8")
    r = run_cli(
        "simulate", "--config", str(config), "--duration", "5", "--lengths-csv", str(lengths), flag, "1",
        timeout=TIMEOUT,
    )  # fmt: skip
    assert "does not apply with --lengths-csv" in refused(r, flag)


@pytest.mark.parametrize(("flag", "value"), [("--arrivals", "gamma"), ("--lengths-csv", "x.csv"), ("--output-cv", "2")])
def test_traffic_flags_with_a_trace_are_refused(config: Path, tmp_path: Path, flag: str, value: str) -> None:  # noqa: F811
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_seconds,prompt_tokens,output_tokens\n0,100,10\n1,100,10\n", encoding="utf-8")
    r = run_cli(
        "simulate", "--config", str(config), "--duration", "5", "--trace", str(trace), flag, value, timeout=TIMEOUT
    )
    assert "does not apply with --trace" in refused(r, flag)


def test_the_flag_of_the_chosen_process_still_runs(config: Path) -> None:  # noqa: F811
    r = run_cli(
        "simulate", "--config", str(config), "--duration", "5", "--arrivals", "gamma", "--burstiness", "3",
        "--json", timeout=TIMEOUT,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
