"""Issue 14, acceptance 3: ``bench/fleet.py`` runs the daemon over moving stand-in pages and reads its figures
from outside (``/proc`` and the advisor's ``/metrics``). A smoke run at a tiny size: the mechanics are checked,
never the figures' speed."""

from __future__ import annotations

import importlib.util
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_fleet", REPO / "bench" / "fleet.py")
assert _spec is not None and _spec.loader is not None
fleet = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fleet)
MovingPage, advisor_figures = fleet.MovingPage, fleet.advisor_figures


PAGE = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 4.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 1000.0
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{engine="0",model_name="m"} 1.7e+09
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="m"} 8.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 10.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 10.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 4.0
"""


def _values(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line[:1] != "#"}


def test_a_moving_page_moves_every_scrape_and_stays_a_valid_histogram() -> None:
    page = MovingPage(PAGE)
    pages = [_values(page.render(3, k).decode()) for k in range(4)]
    bucket = 'vllm:time_to_first_token_seconds_bucket{engine="0",le="%s",model_name="m"}'
    for older, newer in itertools.pairwise(pages):
        assert (
            newer['vllm:prompt_tokens_total{engine="0",model_name="m"}']
            > older['vllm:prompt_tokens_total{engine="0",model_name="m"}']
        )
        for le in ("1.0", "+Inf"):
            assert newer[bucket % le] > older[bucket % le]
        assert (
            newer['vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"}']
            > older['vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"}']
        )
        assert newer['vllm:prompt_tokens_created{engine="0",model_name="m"}'] == 1.7e9
    for p in pages:
        counts = [p[bucket % le] for le in ("0.1", "1.0", "+Inf")]
        assert counts == sorted(counts)  # cumulative
        assert p['vllm:time_to_first_token_seconds_count{engine="0",model_name="m"}'] == counts[-1]
    assert page.render(3, 2) != page.render(4, 2)  # targets differ


def test_the_figures_are_read_from_the_advisors_own_metrics() -> None:
    text = "\n".join(
        [
            "advisor_cycles_total 3.0",
            'advisor_cycle_step_duration_seconds_sum{step="scrape"} 1.5',
            'advisor_cycle_step_duration_seconds_sum{step="evaluate"} 0.5',
            'advisor_cycle_step_duration_seconds_sum{step="notify"} 9.0',
            'advisor_target_up{deployment="d",target="a"} 1.0',
            'advisor_target_up{deployment="d",target="b"} 0.0',
        ]
    )
    got = advisor_figures(text)
    assert got["cycles"] == 3.0 and got["up"] == 1.0
    assert got["steps"] == 2.0  # tick to the last deployment published: notify is after it
    assert "duration" not in got


def test_fleet_runs_the_daemon_at_a_tiny_size_and_reports_every_figure() -> None:
    done = subprocess.run(
        [sys.executable, "bench/fleet.py", "--sizes", "5", "--duration", "6", "--interval", "2", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("{")]
    r = json.loads(line)
    assert r["targets"] == 5 and r["up"] == 5
    assert r["cycles"] >= 2
    assert r["cpu_ms_per_target"] > 0 and r["rss_peak_mib"] >= r["rss_steady_mib"] > 0
    assert r["cycle_p99"] >= r["cycle_p50"] > 0
    assert r["standin_cpu_seconds"] >= 0
