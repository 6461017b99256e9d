"""Issue 14, acceptance 3: ``bench/fleet.py`` runs the daemon over moving stand-in pages and reads its figures
from outside (``/proc`` and the advisor's ``/metrics``). A smoke run at a tiny size: the mechanics are checked,
never the figures' speed.

Issue 15, acceptance 1: beside a real Prometheus over the same pages (CPU per scrape, the ratio), pre-rendered
pages from several loopback addresses, memory as PSS sampled while the advisor runs (never after it closed)."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("fleet", REPO / "bench" / "fleet.py")  # importable by that name

assert _spec is not None and _spec.loader is not None
fleet = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("fleet", fleet)  # so its functions pickle for the spawned stand-ins
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


def test_the_cpu_window_runs_between_whole_cycles() -> None:
    def read(cycles: float, scrapes: float) -> dict[str, dict[str, float]]:
        return {"fig": {"cycles": cycles}, "stats": {"advisor": scrapes}}

    n = 10
    # the first cycle overran: at the first read it was still running (0 done, 10 scrapes answered), at the second
    # the second cycle was mid-scrape (1 done, 14 answered); the third and the last fell between cycles
    reads = [read(0, 10), read(1, 14), read(2, 20), read(2, 25), read(4, 40)]
    assert fleet.cpu_window(reads, n) == (2, 4, True)
    assert fleet.cpu_window(reads[:3], n) == (0, 2, False)  # one read between cycles: no exact window


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "bench/fleet.py", *args], cwd=REPO, capture_output=True, text=True, timeout=180
    )


def _json(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("{")]
    r: dict[str, object] = json.loads(line)
    return r


def test_fleet_runs_the_daemon_at_a_tiny_size_and_reports_every_figure() -> None:
    # pre-rendered pages from two stand-in processes on two loopback addresses (the 5,000/10,000 set-up)
    # 8 cycles of 1 s: /proc counts CPU in clock ticks (10 ms), and one cycle over 6 pre-rendered pages costs about
    # one tick, so a window of one or two cycles could read 0 (it did, in CI: 0.0 ms per target)
    done = _bench("--sizes", "6", "--duration", "8", "--interval", "1", "--json", "--servers", "2", "--prerendered")
    assert done.returncode == 0, done.stderr + done.stdout
    r = _json(done)
    assert r["targets"] == 6 and r["up"] == 6
    if r["window_between_cycles"]:  # reads between whole cycles (not guaranteed on a loaded machine)
        assert r["advisor_scrapes"] == 6 * r["window_cycles"]  # type: ignore[operator]
    assert isinstance(r["cycles"], int) and r["cycles"] >= 2
    assert isinstance(r["cycle_p99"], float) and isinstance(r["cycle_p50"], float)
    assert r["cycle_p99"] >= r["cycle_p50"] > 0
    assert r["cpu_ms_per_target"] > 0  # type: ignore[operator]
    # the figure's resolution (one clock tick over the window's scrapes) is reported beside it
    assert r["cpu_resolution_ms_per_target"] == pytest.approx(  # type: ignore[operator]
        1000 / os.sysconf("SC_CLK_TCK") / r["advisor_scrapes"]  # type: ignore[operator]
    )
    assert r["pss_peak_mib"] >= r["pss_steady_mib"] > 0  # type: ignore[operator]
    assert r["pss_kb_per_target"] == pytest.approx(r["pss_peak_mib"] * 1048.576 / 6)  # type: ignore[operator]
    assert r["standin_cpu_seconds"] >= 0  # type: ignore[operator]
    assert r["series_per_page"] == sum(1 for x in fleet._sim_page().decode().splitlines() if x and x[0] != "#")
    assert re.fullmatch(r"\d+/\d+", str(r["nofile"]))  # the advisor's descriptor limit, soft/hard
    assert "http://127.0.0.2:" in done.stdout and "http://127.0.0.3:" in done.stdout
    assert "RLIMIT_NOFILE soft" in done.stdout and "pre-rendered" in done.stdout


def test_pre_rendered_pages_move_per_target_and_scrapers_are_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO / "bench"))  # the stand-ins are spawned: they import ``fleet``
    servers = fleet.StandIns(PAGE.encode(), count=2, variants=3)
    try:
        assert [b.split(":")[1] for b in servers.bases] == ["//127.0.0.2", "//127.0.0.3"]

        def get(i: int, agent: str) -> bytes:
            req = urllib.request.Request(servers.url(i), headers={"User-Agent": agent})
            with urllib.request.urlopen(req, timeout=10) as resp:
                return bytes(resp.read())

        pages = [get(1, "python-requests/2.32") for _ in range(3)]
        assert pages[0] != pages[1] != pages[2]  # moves on every scrape
        assert get(1, "Prometheus/2.42.0") == pages[0]  # scrape 3 of 3 variants: they rotate
        assert get(2, "Prometheus/2.42.0") != pages[0]  # another target class
        stats = servers.stats()
        assert (stats["advisor"], stats["prometheus"], stats["requests"]) == (3, 2, 5)
        assert 0 < stats["first"] <= time.time()
    finally:
        servers.close()


def test_memory_is_sampled_while_the_work_runs_not_after_it() -> None:
    """The defect: the in-process measure read RSS after ``svc.close()``, missing what a cycle holds."""

    def work() -> dict[str, object]:
        held = bytearray(96 * 1024 * 1024)
        held[::4096] = b"x" * len(held[::4096])  # touch every page
        time.sleep(0.5)
        del held
        return {"done": True}

    r = fleet.sampled(work)
    after = fleet._pss_kib("self") / 1024
    assert r["done"] is True
    assert r["pss_peak_mib"] >= after + 80  # the 96 MiB held mid-run is in the figure


def test_the_in_process_measure_reports_memory_sampled_while_it_ran() -> None:
    done = _bench("--in-process", "--sizes", "3", "--cycles", "1", "--json")
    assert done.returncode == 0, done.stderr + done.stdout
    r = _json(done)
    assert r["targets"] == 3 and r["up"] == 3
    assert r["pss_peak_mib"] > 10  # type: ignore[operator]
    assert "rss_mib" not in r  # the figure read after close is gone


def test_extra_daemon_args_reach_capacity_advisor_run() -> None:
    done = _bench("--sizes", "2", "--duration", "4", "--interval", "2", "--daemon-arg=--no-such-flag")
    assert done.returncode != 0
    assert "the advisor exited" in done.stderr + done.stdout
    assert "extra run args: --no-such-flag" in done.stdout


@pytest.mark.skipif(shutil.which("prometheus") is None and not Path(fleet.PROMETHEUS).exists(), reason="no prometheus")
def test_fleet_beside_a_real_prometheus_reports_both_cpus_and_their_ratio() -> None:
    # 20 targets for 10 s: ~100 scrapes, enough Prometheus CPU to count in 10 ms clock ticks (3 targets for 8 s
    # once read 0 ticks: the ratio divided by zero; the bench now says "unknown" there)
    done = _bench("--prometheus", "--sizes", "20", "--duration", "10", "--interval", "2", "--json")
    assert done.returncode == 0, done.stderr + done.stdout
    r = _json(done)
    assert r["targets"] == 20 and r["up"] == 20
    assert 0 <= r["prom_up"] <= 20  # type: ignore[operator]  # its own sum(up): it answered (not NaN)
    assert str(r["prometheus_version"]).startswith("2.")
    prom, adv = r["prom_cpu_ms_per_scrape"], r["cpu_ms_per_target"]
    assert isinstance(prom, float) and isinstance(adv, float)
    assert prom > 0 and adv > 0
    assert r["ratio"] == pytest.approx(adv / prom)
    # both measured over the same window: Prometheus scraped each target at most about once per interval in it
    windows = float(r["window_seconds"]) / 2  # type: ignore[arg-type]
    assert 0 < float(r["prom_scrapes"]) <= 20 * (windows + 1)  # type: ignore[arg-type]
    # the printed line: advisor X / Prometheus Y = Z×, with Z = X / Y
    m = re.search(r"advisor ([\d.]+) ms / Prometheus ([\d.]+) ms per scrape = ([\d.]+)×", done.stdout)
    assert m is not None, done.stdout
    x, y, z = (float(g) for g in m.groups())
    assert x == pytest.approx(adv, abs=0.006) and y == pytest.approx(prom, abs=0.006)
    assert z == pytest.approx(r["ratio"], abs=0.006)
    assert (x - 0.005) / (y + 0.005) - 0.005 <= z <= (x + 0.005) / (y - 0.005) + 0.005  # Z = X / Y, as printed
