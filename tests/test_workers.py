"""Scrape jobs and worker processes (issue 15, "Normalize each body as it arrives" and "Both cores").

* :func:`advisor.workers.usable_cpus` reads the affinity and the cgroup's CPU quota (v2 ``cpu.max``, v1 CFS), from
  fake cgroup trees laid out as the kernel lays them out; ``os.cpu_count()`` never decides.
* :class:`advisor.collect.CollectJob` and :class:`advisor.collect.Collected` cross a pipe (pickle) unchanged, with
  a real snapshot of a real vLLM page.
* :func:`advisor.collect.collect` against stand-in targets on loopback gives what the daemon's in-process path gave
  before (a snapshot equal to observing the page; the same reasons and messages for failures).
* ``--workers`` refuses 0, negatives and non-integers with a message naming the flag.
* :class:`advisor.workers.ProcessWorkers`: a killed worker fails what it had in flight with a message naming it
  and saying it is being restarted, and is restarted.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
import requests

from advisor import conventions as c
from advisor.assembly import in_shard
from advisor.cli import main
from advisor.collect import Collected, CollectJob, collect
from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.observe import observe
from advisor.service import Service
from advisor.workers import ProcessWorkers, parse_cfs, parse_cpu_max, usable_cpus, worker_for
from tests.reliability.iso_support import DripServer, PageServer, deployment, vllm_page

# -- usable_cpus ------------------------------------------------------------------------------------------------


def _v2(tmp_path: Path, files: dict[str, str], cgroup: str = "/") -> tuple[Path, Path]:
    """A cgroup v2 tree (``cgroup.controllers`` at its root) with ``cpu.max`` per folder, and a /proc/self/cgroup."""
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    for folder, text in files.items():
        d = root / folder.strip("/") if folder.strip("/") else root
        d.mkdir(parents=True, exist_ok=True)
        (d / "cpu.max").write_text(text + "\n")
    proc = tmp_path / "proc_self_cgroup"
    proc.write_text(f"0::{cgroup}\n")
    return root, proc


@pytest.mark.parametrize(
    ("cpu_max", "affinity", "want"),
    [
        ("max 100000", 2, 2),  # no quota: the affinity decides
        ("150000 100000", 4, 2),  # 1.5 CPUs, rounded up
        ("50000 100000", 2, 1),  # half a CPU: one worker
        ("400000 100000", 1, 1),  # affinity smaller than the quota
        ("200000 100000", 8, 2),
    ],
)
def test_usable_cpus_is_affinity_capped_by_cgroup_v2_cpu_max(
    tmp_path: Path, cpu_max: str, affinity: int, want: int
) -> None:
    root, proc = _v2(tmp_path, {"/kubepods/pod1": cpu_max}, "/kubepods/pod1")
    budget = usable_cpus(affinity, root, proc)
    assert budget.cpus == want
    assert budget.affinity == affinity
    assert f"affinity {affinity}" in budget.describe() and "cpu.max" in budget.describe()


def test_a_quota_on_a_parent_cgroup_caps_the_child(tmp_path: Path) -> None:
    root, proc = _v2(tmp_path, {"/": "max 100000", "/slice": "100000 100000", "/slice/svc": "max 100000"}, "/slice/svc")
    budget = usable_cpus(4, root, proc)
    assert budget.cpus == 1
    assert budget.quota == 1.0


def test_v2_unlimited_is_logged_as_such(tmp_path: Path) -> None:
    root, proc = _v2(tmp_path, {"/": "max 100000"})
    assert usable_cpus(2, root, proc).describe() == "cpus allowed by affinity 2, cgroup cpu.max unlimited"


@pytest.mark.parametrize(("quota", "want"), [("150000", 2), ("50000", 1), ("-1", 4)])
def test_usable_cpus_reads_cgroup_v1_cfs_quota(tmp_path: Path, quota: str, want: int) -> None:
    root = tmp_path / "cgroup"
    d = root / "cpu,cpuacct" / "docker" / "abc"
    d.mkdir(parents=True)
    (d / "cpu.cfs_quota_us").write_text(quota + "\n")
    (d / "cpu.cfs_period_us").write_text("100000\n")
    proc = tmp_path / "proc_self_cgroup"
    proc.write_text("12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n")
    assert usable_cpus(4, root, proc).cpus == want


def test_usable_cpus_never_asks_cpu_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The host's CPU count is not the process's: a process pinned to one CPU gets one worker."""
    root, proc = _v2(tmp_path, {"/": "max 100000"})
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3})
    assert usable_cpus(None, root, proc).cpus == 1


def test_cgroup_files_are_parsed_strictly() -> None:
    assert parse_cpu_max("max 100000") is None
    assert parse_cpu_max("150000 100000") == 1.5
    assert parse_cfs("-1", "100000") is None
    with pytest.raises(ValueError, match=r"cpu\.max"):
        parse_cpu_max("1 2 3")
    with pytest.raises(ValueError):
        parse_cpu_max("lots 100000")


def test_workers_split_urls_by_the_shard_hash() -> None:
    urls = [f"http://10.0.{i // 250}.{i % 250}:8000/metrics" for i in range(400)]
    for n in (2, 3, 5):
        assert all(in_shard(u, (worker_for(u, n), n)) for u in urls)
        counts = [sum(worker_for(u, n) == w for u in urls) for w in range(n)]
        assert min(counts) > 400 / n / 2  # every worker gets a share
    assert {worker_for(u, 1) for u in urls} == {0}


# -- the --workers flag -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_the_workers_flag_refuses_what_is_not_a_positive_whole_number(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--config", "advisor.yaml", "--workers", value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--workers" in err and repr(value) in err


# -- jobs and results -------------------------------------------------------------------------------------------


@pytest.fixture()
def pages() -> Iterator[PageServer]:
    srv = PageServer(vllm_page())
    yield srv
    srv.stop()


def _job(url: str, engine: str = "vllm", **kw: object) -> CollectJob:
    args: dict[str, object] = {
        "deployment": "d",
        "url": url,
        "engine": engine,
        "served_model": None,
        "configured_model": "meta-llama/Llama-3.1-8B-Instruct",
        "connect_timeout": 2.0,
        "read_timeout": 5.0,
        "max_bytes": 16 * 1024 * 1024,
        "sample_limit": 0,
        "label_limit": 0,
    }
    args.update(kw)
    return CollectJob(**args)  # type: ignore[arg-type]


def test_a_job_and_its_result_cross_a_pipe_unchanged(pages: PageServer) -> None:
    job = _job(pages.url("/m"), "auto")
    assert pickle.loads(pickle.dumps(job)) == job
    with requests.Session() as s:
        res = collect(job, s)
    assert res.ok and res.snapshot is not None and res.engine == "vllm"
    back = pickle.loads(pickle.dumps(res))
    assert back == res
    assert back.snapshot == res.snapshot


def test_collect_gives_the_snapshot_observing_the_page_gives(pages: PageServer) -> None:
    """The in-process path is unchanged: the snapshot is the one ``observe`` reads from the same page, and the
    engine an ``auto`` job detected comes back by id."""
    want = observe(vllm_page().decode(), "vllm", None, configured_model="meta-llama/Llama-3.1-8B-Instruct", strict=True)
    with requests.Session() as s:
        pinned = collect(_job(pages.url("/a")), s)
        auto = collect(_job(pages.url("/b"), "auto"), s)
    assert pinned.snapshot == want.snapshot
    assert auto.snapshot == want.snapshot and auto.engine == "vllm"
    assert pinned.status_code == 200 and pinned.error_reason is None


def test_collect_keeps_the_failure_reasons(pages: PageServer) -> None:
    with requests.Session() as s:
        refused = collect(_job("http://127.0.0.1:9/metrics"), s)
        over = collect(_job(pages.url("/x"), sample_limit=10), s)
        labels = collect(_job(pages.url("/y"), label_limit=1), s)
        wrong = collect(_job(pages.url("/z"), served_model="no-such-model"), s)
    assert (refused.ok, refused.error_reason, refused.snapshot) == (False, c.REASON_CONNECTION_REFUSED, None)
    assert over.error_reason == c.REASON_SAMPLE_LIMIT
    assert labels.error_reason == c.REASON_SAMPLE_LIMIT and "label" in (labels.error_message or "")
    assert wrong.error_reason == c.REASON_SERVED_MODEL_NOT_FOUND and wrong.engine == "vllm"


def test_an_in_process_service_has_no_worker_processes(pages: PageServer) -> None:
    """``workers=1`` (and the default for library callers): the runtime's threads scrape, nothing is spawned, and
    ``engine: auto`` is adopted from the job's result by engine id."""
    dep = deployment("d", [pages.url("/one")]) | {"engine": "auto"}
    registry, collector, metrics = make_registry()
    svc = Service(parse_config({"scrape_interval": "1s", "deployments": [dep]}), collector, metrics)
    try:
        assert svc._procs is None
        svc.run_once()
        assert svc.deployments[0].adapter is not None and svc.deployments[0].adapter.engine == "vllm"
        assert svc.tracker.context("d").engine == "vllm"
        assert registry.get_sample_value(c.WORKERS) == 1.0
        assert svc.result is not None
    finally:
        svc.close(1.0)


# -- worker processes -------------------------------------------------------------------------------------------


def _wait(pred: object, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return bool(pred())  # type: ignore[operator]


def test_a_killed_worker_fails_its_targets_by_name_and_is_restarted(pages: PageServer) -> None:
    drip = DripServer("body")  # holds a scrape open until its deadline: in flight when the worker dies
    registry, _, metrics = make_registry()
    workers = ProcessWorkers(2, metrics=metrics)
    try:
        urls = [pages.url(f"/p{i}") for i in range(8)]
        first = [workers.submit(_job(u)) for u in urls]
        assert all(f.result(timeout=60)[0].ok for f in first)
        victim = worker_for(drip.url(), 2)
        held = workers.submit(_job(drip.url(), read_timeout=60.0))
        assert _wait(lambda: drip.connections >= 1)
        pid = workers.pids()[victim]
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        res, _ = held.result(timeout=30)
        assert (res.ok, res.error_reason) == (False, c.REASON_CONNECTION_REFUSED)
        assert f"scrape worker {victim} (pid {pid}) was killed by SIGKILL; it is being restarted" == res.error_message
        assert _wait(lambda: workers.pids()[victim] not in (None, pid))
        assert workers.restarts()[victim] == 1 and workers.down_reason() is None
        assert registry.get_sample_value("advisor_worker_restarts_total", {"worker": str(victim)}) == 1.0
        assert registry.get_sample_value("advisor_worker_up", {"worker": str(victim)}) == 1.0
        again: list[Future[tuple[Collected, float]]] = [workers.submit(_job(u)) for u in urls]
        assert all(f.result(timeout=60)[0].ok for f in again)
    finally:
        workers.close(2.0)
        drip.close()
    assert all(p is None for p in workers.pids())


@pytest.mark.parametrize(
    ("targets", "interval", "needed"),
    [
        (3, 15.0, False),
        (2_500, 15.0, False),  # 3.75 s of CPU ≤ 3.75 s, a quarter of 15 s
        (2_550, 15.0, True),  # 3.825 s > 3.75 s
        (4_950, 30.0, False),  # 7.425 s ≤ 7.5 s
        (5_050, 30.0, True),
        (800, 5.0, False),  # 1.2 s ≤ 1.25 s
        (850, 5.0, True),
        (160, 1.0, False),  # 0.24 s ≤ 0.25 s
        (170, 1.0, True),
        (20, 0.1, True),  # the shortest interval the config takes: 0.03 s > 0.025 s
    ],
)
def test_workers_are_needed_when_one_core_could_not_do_a_cycle_in_a_quarter_of_the_interval(
    targets: int, interval: float, needed: bool
) -> None:
    """At ~1.5 ms of CPU per target a cycle, one core does 2,500 targets in a quarter of 15 s, twice that at 30 s:
    the target count that starts worker processes follows the interval (a fixed 500 started them at 15 s where one
    core had room for 2,500, and never at 1 s where it has room for 166)."""
    from advisor.service import workers_needed

    assert workers_needed(targets, interval) is needed


def test_without_the_flag_a_small_config_scrapes_on_threads_and_a_large_one_starts_a_worker_per_cpu(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``workers=None`` (no ``--workers``): scrape targets one core scrapes and evaluates within a quarter of the
    interval → no worker process, the estimate logged; more → one worker per usable CPU, the estimate logged. (Each
    worker costs ~50 MB and ~0.4 s of start-up: a 3-engine advisor should not pay them.) At a 1 s interval 200
    targets (~0.3 s of CPU per cycle) are more than one core does in 0.25 s."""
    caplog.set_level(logging.INFO, logger="advisor.service")
    cpus = usable_cpus().cpus
    if cpus < 2:
        pytest.skip(f"one usable CPU here ({usable_cpus().describe()}): the default is 1 worker at any size")

    def start(n_targets: int, interval: str) -> Service:
        urls = [f"http://127.0.0.1:9/{i}/metrics" for i in range(n_targets)]
        cfg = parse_config({"scrape_interval": interval, "deployments": [deployment("a", urls)]})
        _, collector, metrics = make_registry()
        return Service(cfg, collector, metrics, workers=None)

    small = start(3, "15s")
    try:
        assert small._procs is None
        said = "3 scrape target(s) × ~1.5 ms = 0.0045s of CPU per cycle <= 0.25 of the 15s interval (3.75s)"
        assert said in caplog.text
    finally:
        small.close()
    large = start(200, "1s")
    try:
        assert large._procs is not None and large._procs.n == cpus
        assert "200 scrape target(s) × ~1.5 ms = 0.3s of CPU per cycle > 0.25 of the 1s interval (0.25s)" in caplog.text
    finally:
        large.close()
