"""How many targets one advisor evaluates within half a 15 s scrape interval: the fleet-scale definition.

Per size N (default 200, 1,000 and 2,000 targets) it starts the daemon itself, ``capacity-advisor run``, on a
config of N targets (10 replicas per deployment, ``scrape_interval`` 15 s, ``evaluation_window`` 5m), and
measures it from outside while it runs:

* pages that move on every scrape, as a serving engine's do: one stand-in server *process* (asyncio,
  keep-alive; its CPU is not the advisor's) serves target ``i`` at ``/t/<i>/metrics`` a vLLM 0.33 page —
  a busy simulated replica rendered by the project's simulator (:mod:`advisor.sim.exposition`), or the page
  ``--exposition FILE`` names — whose counters rise, whose histograms gain observations in their buckets,
  ``_sum`` and ``_count``, and whose gauges move, on every scrape and differently per target
  (:class:`MovingPage`);
* CPU: user + system time of every advisor process (the daemon and its descendants, threads included), from
  ``/proc/<pid>/stat``, per target per cycle, between the end of the first cycle and the end of the last;
* memory: resident set from ``/proc`` sampled every 0.5 s while the advisor runs — the peak, the steady value
  (median over the last third of the run) and per target;
* cycle time: from the tick to the last deployment published, each cycle's own, read from what the daemon
  exposes on ``/metrics`` (``advisor_cycle_duration_seconds`` when exported, else the step histograms
  ``advisor_cycle_step_duration_seconds`` of scrape → normalize → prometheus → evaluate → publish); p50 and p99.

The 5 min window fills after 20 cycles, so memory reaches its steady state only in runs of ``--duration 330``
or longer; the default (90 s) is a short run. The machine's load average (1 min, at the start and end of each
size) is printed beside the figures: on a shared machine wall-clock cycle times move with it, CPU and memory
much less.

    .venv/bin/python bench/fleet.py                                  # N = 200, 1000, 2000; 90 s each
    .venv/bin/python bench/fleet.py --sizes 2000 --duration 330      # the acceptance figure (issue 14)
    .venv/bin/python bench/fleet.py --sizes 5 --duration 6 --interval 2 --json   # a smoke run
    .venv/bin/python bench/fleet.py --in-process --sizes 100,1000 --cycles 2     # the older in-process measure
    .venv/bin/python bench/fleet.py --baseline main                  # N = 100, 300; 4 repeats per side

``--in-process`` is the measure this script made before issue 14 (:func:`measure`): ``Service.run_once`` in a
fresh process against the same moving stand-in, every target's history pre-filled to the 5 min window, the
process's own CPU time and RSS after the cycles.

``--baseline REF`` measures git ref REF and this tree side by side in one run with that in-process measure,
against the same stand-in server: REF is checked out into a temporary ``git worktree`` (removed at the end);
every measurement runs in a fresh subprocess with ``PYTHONPATH`` set to its side's tree, which imports that
tree's ``advisor`` and calls that tree's own ``bench/fleet.py`` ``measure`` (so each side is driven through its
own API; ``bench/baseline.py``). Per size the sides alternate — baseline, current, current, baseline, … —
``--repeats`` times each (default 4), and it prints each figure's median for both sides and the median of the
per-repeat ratios current ÷ baseline (min..max). Defaults in this mode: ``--sizes 100,300``, ``--cycles 5``, 4
repeats. Verdict ``PASS`` when the median CPU-per-target ratio is at most ``1 + --tolerance`` (default 0.10) at
every size; exit status 1 otherwise. The cycle time ratio is printed but not judged: it is wall time, and on a
shared machine it moves with the other processes' load (0.64..1.50 between repeats of identical code at load 85).
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import math
import multiprocessing as mp
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CAPTURE = REPO.parent / "shared" / "engine-metrics" / "vllm-0.33.0-engine-code-healthy-llama3.1-8b.prom"


def _sim_page() -> bytes:
    """A busy simulated Llama-3.1-8B replica's ``/metrics``, rendered by the project's own vLLM 0.33 renderer
    (:class:`advisor.sim.exposition.VLLMCollector`): the page served when the capture is absent."""
    sys.path.insert(0, str(REPO))
    from advisor.capacity.hardware import get_gpu
    from advisor.capacity.kv import CapacityInputs
    from advisor.capacity.models import get_preset
    from advisor.sim.engine import engine_config
    from advisor.sim.exposition import VLLMCollector, render
    from advisor.sim.fleet import Fleet
    from advisor.sim.metrics import VLLMMetrics
    from advisor.sim.traffic import LognormalLengths, Poisson, TrafficProfile

    model = "meta-llama/Llama-3.1-8B-Instruct"
    gpu = get_gpu("H100-SXM")
    inputs = CapacityInputs(
        model=get_preset(model), gpu_memory_bytes=gpu.memory_bytes, max_model_len=8192, max_num_seqs=256
    )
    cfg = engine_config(inputs, gpu, model_name=model)
    profile = TrafficProfile(Poisson(3.0), LognormalLengths(1500, 0.5, 300, 1.0))
    fleet = Fleet(cfg, profile, seed=7, observers=lambda i: [VLLMMetrics(cfg.max_model_len)])
    fleet.advance(60.0)
    replica = fleet.replicas[0]
    (metrics,) = replica.observers
    assert isinstance(metrics, VLLMMetrics)
    return render(VLLMCollector(replica, metrics, created=time.time() - 3600))


def _body(exposition: Path | None = None) -> bytes:
    """The page every target serves (moved per scrape): ``exposition``'s text, else the simulated replica's."""
    return exposition.read_bytes() if exposition is not None else _sim_page()


# --- moving pages ------------------------------------------------------------------------------------------------

_LE = re.compile(r'(?:^|,)le="([^"]*)"')


class MovingPage:
    """One exposition as a template whose numbers move on every scrape, as a serving engine's do.

    Per target ``i`` and scrape ``k`` (0, 1, 2, …): counters rise by ``k × rate``; every histogram series gains
    ``k × r`` observations spread over its buckets as in the template (cumulative buckets stay monotonic; ``_count``
    equals the ``+Inf`` bucket's gain, ``_sum`` gains ``r ×`` the template's mean); gauges move within ±10 % of
    the template's value (ratios capped at 1); ``_created``, ``*_info`` and start times stay. ``r`` and the rates
    differ per target (``1 + i % 5`` ×), so no two targets' pages are alike.
    """

    CONST, COUNTER, BUCKET, GAUGE = 0, 1, 2, 3

    def __init__(self, text: str) -> None:
        types: dict[str, str] = {}
        rows: list[tuple[str, int, float, float]] = []  # (prefix "name{labels} ", kind, base, step)
        hist: dict[str, list[tuple[int, float, float]]] = {}  # series key → (row, le, base)
        sums: dict[str, tuple[int, float]] = {}  # series key → (row, base) of _sum
        counts: dict[str, float] = {}  # series key → base _count
        for line in text.splitlines():
            if not line or line.startswith("#"):
                parts = line.split(None, 3)
                if len(parts) >= 4 and parts[1] == "TYPE":
                    types[parts[2]] = parts[3].strip()
                rows.append((line + "\n", self.CONST, 0.0, 0.0))
                continue
            series, _, value = line.rpartition(" ")
            name = series.split("{", 1)[0]
            labels = series[len(name) + 1 : -1] if "{" in series else ""
            try:
                base = float(value)
            except ValueError:
                rows.append((line + "\n", self.CONST, 0.0, 0.0))
                continue
            family, kind = name, types.get(name)
            for suffix in ("_bucket", "_sum", "_count", "_total", "_created"):
                if kind is None and name.endswith(suffix):
                    family = name[: -len(suffix)]
                    kind = types.get(family)
            row = len(rows)
            prefix = series + " "
            if name.endswith("_created") or name.endswith("_info") or "start_time" in name or kind is None:
                rows.append((line + "\n", self.CONST, base, 0.0))
            elif kind == "histogram" and name.endswith("_bucket"):
                key = family + "{" + _LE.sub("", labels).strip(",")
                hist.setdefault(key, []).append((row, float(_LE.search(labels).group(1)), base))  # type: ignore[union-attr]
                rows.append((prefix, self.BUCKET, base, 0.0))
            elif kind in ("histogram", "summary") and name.endswith("_sum"):
                sums[family + "{" + labels] = (row, base)
                rows.append((prefix, self.COUNTER, base, 0.0))
            elif kind in ("histogram", "summary") and name.endswith("_count"):
                counts[family + "{" + labels] = base
                rows.append((prefix, self.COUNTER, base, 5.0))
            elif kind == "counter":
                rows.append((prefix, self.COUNTER, base, 3.0 if base == 0 else max(1.0, round(base * 0.002, 3))))
            elif kind == "gauge" and base != 0:
                rows.append((prefix, self.GAUGE, base, 0.1))
            else:
                rows.append((line + "\n", self.CONST, base, 0.0))
        r = 5.0  # observations per scrape per histogram series (× the target's factor)
        for key, buckets in hist.items():
            total = max(b for _, _, b in buckets)
            for j, (row, _le, base) in enumerate(buckets):
                share = base / total if total > 0 else float(j >= len(buckets) // 2)
                rows[row] = (rows[row][0], self.BUCKET, base, round(r * share))
            finite = [le for _, le, _ in buckets if le != float("inf")]
            if key in sums:
                row, base = sums[key]
                n = counts.get(key, 0.0)
                mean = base / n if n > 0 else (finite[len(finite) // 2] if finite else 1.0)
                rows[row] = (rows[row][0], self.COUNTER, base, r * mean)
        self.rows = rows
        self.capped = [("perc" in p or "usage" in p or "ratio" in p) for p, *_ in rows]

    def render(self, i: int, k: int) -> bytes:
        """Target ``i``'s page at its ``k``-th scrape."""
        f = 1 + i % 5
        out: list[str] = []
        add = out.append
        wobble = ((i + k) % 5 - 2) * 0.05
        for (prefix, kind, base, step), capped in zip(self.rows, self.capped, strict=True):
            if kind == 0:  # CONST
                add(prefix)
            elif kind == 3:  # GAUGE
                v = base * (1 + wobble)
                add(f"{prefix}{min(v, 1.0) if capped and base <= 1 else v!r}\n")
            else:  # COUNTER, BUCKET
                add(f"{prefix}{base + k * f * step!r}\n")
        return "".join(out).encode()


def _serve(port_queue: Any, body: bytes) -> None:
    """The stand-in server process: ``GET /t/<i>/metrics`` answers target ``i``'s moving page (keep-alive,
    HTTP/1.1, asyncio: thousands of idle connections cost no thread each); ``GET /stats`` answers
    ``{"requests": …, "first": unix time of the first scrape, "cpu_seconds": this process's CPU}``."""
    import asyncio

    page = MovingPage(body.decode())
    scrapes: dict[int, int] = {}
    stats: dict[str, float] = {"requests": 0, "first": 0.0}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode()
                if path == "/reset":
                    scrapes.clear()
                    stats.update(requests=0, first=0.0)
                    payload, status = b"{}", b"200 OK"
                elif path == "/stats":
                    cpu = os.times()
                    payload = json.dumps({**stats, "cpu_seconds": cpu.user + cpu.system}).encode()
                    status = b"200 OK"
                elif path.startswith("/t/") and path.endswith("/metrics"):
                    i = int(path.split("/")[2])
                    k = scrapes.get(i, 0)
                    scrapes[i] = k + 1
                    if not stats["first"]:
                        stats["first"] = time.time()
                    stats["requests"] += 1
                    payload = page.render(i, k)
                    status = b"200 OK"
                else:
                    payload, status = b"not found\n", b"404 Not Found"
                writer.write(
                    b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                    b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, IndexError, ValueError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=4096)
        port_queue.put(server.sockets[0].getsockname()[1])
        async with server:
            await server.serve_forever()

    asyncio.run(main())


# --- the daemon, measured from outside ------------------------------------------------------------------------


def _config(n: int, port: int, interval: float, window: str) -> dict[str, Any]:
    """``n`` targets on the stand-in, 10 replicas per deployment (Llama-3.1-8B on H100s, the capture's engine)."""
    deployments = []
    for d in range(0, n, 10):
        deployments.append(
            {
                "name": f"dep-{d // 10}",
                "engine": "vllm",
                "targets": [f"http://127.0.0.1:{port}/t/{i}/metrics" for i in range(d, min(n, d + 10))],
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "gpu": "H100-SXM",
                "max_model_len": 8192,
                "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
            }
        )
    return {"scrape_interval": f"{interval:g}s", "evaluation_window": window, "deployments": deployments}


def _tree(pid: int) -> list[int]:
    """``pid`` and every live descendant (``/proc/<pid>/task/<tid>/children``)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            continue
    return out


_TICK = os.sysconf("SC_CLK_TCK")


def proc_usage(pid: int) -> tuple[float, float]:
    """(CPU seconds, resident MiB) of ``pid`` and all its descendants, from ``/proc``: user + system time of
    each live process (every thread included) plus that of its children already reaped; VmRSS summed."""
    cpu = rss = 0.0
    for p in _tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{p}/status") as f:
                status = f.read()
        except OSError:
            continue
        # fields[0] is field 3 (state): utime, stime, cutime, cstime are fields 14–17
        cpu += sum(int(x) for x in fields[11:15]) / _TICK
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss += int(line.split()[1]) / 1024
    return cpu, rss


_SAMPLE = re.compile(r"^(advisor_[a-z_]+)(?:\{([^}]*)\})? (\S+)$", re.M)
CYCLE_STEPS = ("scrape", "normalize", "prometheus", "evaluate", "publish")
"""The steps from the tick to the last deployment published (``advisor.service``: notify and persist follow)."""


def advisor_figures(text: str) -> dict[str, float]:
    """What the bench reads from the advisor's ``/metrics``: ``cycles`` (completed), ``steps`` (seconds summed
    over :data:`CYCLE_STEPS` since start), ``duration`` (``advisor_cycle_duration_seconds`` when exported),
    ``skipped`` (``advisor_cycles_skipped_total`` when exported) and ``up`` (targets whose last scrape
    succeeded)."""
    out = {"cycles": 0.0, "steps": 0.0, "up": 0.0}
    for name, labels, value in _SAMPLE.findall(text):
        if name == "advisor_cycles_total":
            out["cycles"] = float(value)
        elif name == "advisor_cycle_step_duration_seconds_sum":
            step = labels.split('"')[1]
            out["step:" + step] = float(value)
            if step in CYCLE_STEPS:
                out["steps"] += float(value)
        elif name == "advisor_cycle_duration_seconds":
            out["duration"] = float(value)
        elif name == "advisor_cycles_skipped_total":
            out["skipped"] = float(value)
        elif name == "advisor_target_up":
            out["up"] += float(value)
    return out


def _get(url: str, timeout: float = 30.0) -> bytes:
    import urllib.request

    with urllib.request.urlopen(url, timeout=timeout) as r:
        return bytes(r.read())


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _p(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values``."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def run_daemon(n: int, port: int, duration: float, interval: float, window: str, log_dir: Path) -> dict[str, Any]:
    """Run ``capacity-advisor run`` over ``n`` moving targets for ``duration`` seconds and measure it from outside.

    * CPU: user + system seconds of the advisor process and all its descendants (``/proc``), between the end of
      its first cycle (connections, imports: warm-up) and the end of its last, per target per cycle;
    * memory: resident set (``/proc``, summed over the processes) sampled every 0.5 s while it runs — the peak, the
      steady value (median over the last third of the run) and per target (steady minus the RSS at the first
      scrape, when the advisor has imported and configured everything, ÷ ``n``);
    * cycle time: tick to the last deployment published, each cycle's own — ``advisor_cycle_duration_seconds``
      when the advisor exports it, else the growth of ``advisor_cycle_step_duration_seconds_sum`` over the steps
      :data:`CYCLE_STEPS` between two reads of ``/metrics`` one cycle apart. ``/metrics`` is read once per
      interval, 0.5 s before each tick (as a Prometheus scraping the advisor at its interval would), so
      each read falls between two cycles; its cost is in the CPU figure.
    """
    _get(f"http://127.0.0.1:{port}/reset")
    cfg_file = log_dir / f"fleet-{n}.json"
    cfg_file.write_text(json.dumps(_config(n, port, interval, window)))
    listen = f"127.0.0.1:{_free_port()}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "advisor.cli", "--log-level", "warning", "run", "--config", str(cfg_file)]
    with open(log_dir / f"advisor-{n}.log", "wb") as logf:
        proc = subprocess.Popen([*cmd, "--listen", listen], env=env, stdout=logf, stderr=subprocess.STDOUT)
    load0 = os.getloadavg()[0]
    rss: list[tuple[float, float]] = []
    reads: list[tuple[float, dict[str, float]]] = []  # (cpu, figures) at each /metrics read
    try:
        first = 0.0
        began = time.monotonic()
        while not first:  # the first scrape marks the first tick
            if proc.poll() is not None:
                raise SystemExit(f"the advisor exited ({proc.returncode}); see {log_dir / f'advisor-{n}.log'}")
            if time.monotonic() - began > 120:
                raise SystemExit("the advisor scraped nothing within 120 s")
            rss.append((time.time(), proc_usage(proc.pid)[1]))
            first = json.loads(_get(f"http://127.0.0.1:{port}/stats"))["first"]
            time.sleep(0.2)
        idle = proc_usage(proc.pid)[1]  # imported and configured, nothing scraped yet
        ticks = [first + k * interval - 0.5 for k in range(1, max(2, int(duration // interval)) + 1)]
        for at in ticks:
            while time.time() < at:
                rss.append((time.time(), proc_usage(proc.pid)[1]))
                time.sleep(min(0.5, max(0.0, at - time.time())))
            if proc.poll() is not None:
                raise SystemExit(f"the advisor exited ({proc.returncode}); see {log_dir / f'advisor-{n}.log'}")
            cpu = proc_usage(proc.pid)[0]
            reads.append((cpu, advisor_figures(_get(f"http://{listen}/metrics").decode())))
    finally:
        proc.terminate()
        try:
            proc.wait(40)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    durations: list[float] = []
    overran = 0
    for (_, a), (_, b) in itertools.pairwise(reads):
        done = b["cycles"] - a["cycles"]
        if done < 1:
            overran += 1
            continue
        if "duration" in b and done == 1:
            durations.append(b["duration"])
        else:
            durations.extend([(b["steps"] - a["steps"]) / done] * int(done))
    c0, f0 = reads[0]
    c1, f1 = reads[-1]
    cycles = f1["cycles"] - f0["cycles"]
    values = [v for t, v in rss]
    steady = [v for t, v in rss if t >= rss[0][0] + (rss[-1][0] - rss[0][0]) * 2 / 3]
    expected = len(ticks)
    return {
        "targets": n,
        "cycles": int(f1["cycles"]),
        "skipped": int(f1.get("skipped", max(0.0, expected - f1["cycles"]))),
        "overran": overran,
        "first_cycle_seconds": f0.get("duration", f0["steps"]),
        "cycle_p50": _p(durations, 0.5) if durations else float("nan"),
        "cycle_p99": _p(durations, 0.99) if durations else float("nan"),
        "cycle_seconds": durations,
        "cpu_ms_per_target": (c1 - c0) / cycles / n * 1000 if cycles else float("nan"),
        "rss_peak_mib": max(values),
        "rss_steady_mib": statistics.median(steady),
        "rss_start_mib": idle,
        "kib_per_target": (statistics.median(steady) - idle) * 1024 / n,
        "up": int(f1["up"]),
        "load": (load0, os.getloadavg()[0]),
        "step_seconds": {  # mean per cycle of each step, first cycle excluded
            k[5:]: (f1[k] - f0.get(k, 0.0)) / cycles for k in f1 if k.startswith("step:") and cycles
        },
    }


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(n: int, port: int, cycles: int, body: bytes) -> dict[str, float]:
    """Fill every target's history to steady state (a whole 5 min window of 15 s scrapes, through the
    service's own retention policy), then run ``cycles`` cycles over ``n`` targets; return the median
    cycle seconds, CPU per target and resident memory."""
    sys.path.insert(0, str(REPO))
    from advisor.config import parse_config
    from advisor.domain import TimedSnapshot
    from advisor.exporter import make_registry
    from advisor.service import Service
    from advisor.sources.exposition import parse_exposition

    cfg = parse_config(_config(n, port, 15.0, "5m"))
    _, collector, metrics = make_registry()
    svc = Service(cfg, collector, metrics)
    times, cpus = [], []
    try:
        svc.run_once()  # warm-up: connections, caches
        text = body.decode()
        now = time.time()
        tracker = getattr(svc, "tracker", None)  # since issue 13 the tracker holds the histories
        for d in svc.deployments:
            assert d.adapter is not None
            urls = tracker.targets(d.spec.name) if tracker is not None else [t.url for t in d.targets]
            for url in urls:
                points = [
                    TimedSnapshot(url, now - 15 * k, d.adapter.snapshot(parse_exposition(text, keep=d.adapter.wants)))
                    for k in range(21, 0, -1)  # 5 min of 15 s scrapes before now
                ]
                if tracker is not None:
                    tracker.replace_history(d.spec.name, url, [])
                    for p in points:
                        tracker.observe(d.spec.name, url, p)  # through the tracker's own retention policy
                else:  # a baseline from before the tracker (--baseline REF): the service's own record()
                    from advisor.service import record  # type: ignore[attr-defined]

                    t = next(t for t in d.targets if t.url == url)
                    t.history.clear()
                    for p in points:
                        record(t.history, p, cfg.evaluation_window)
        for _ in range(cycles):
            c0, t0 = time.process_time(), time.perf_counter()
            svc.run_once()
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        if tracker is not None:
            views = [v for d in svc.deployments for v in tracker.views(d.spec.name)]
            up = sum(1 for v in views if v.up)
            points = statistics.median(len(v.history) for v in views)
        else:
            up = sum(1 for d in svc.deployments for t in d.targets if t.up)
            points = statistics.median(len(t.history) for d in svc.deployments for t in d.targets)
    finally:
        svc.close()
    return {
        "cycle_seconds": statistics.median(times),
        "cpu_ms_per_target": statistics.median(cpus) / n * 1000,
        "rss_mib": _rss_mib(),
        "up": up,
        "history_points": points,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--sizes", default=None, help="target counts (default 200,1000,2000; 100,300 with --baseline)")
    ap.add_argument(
        "--duration", type=float, default=90.0, help="seconds the daemon runs per size (default 90; 330 fills 5 min)"
    )
    ap.add_argument("--interval", type=float, default=15.0, help="the advisor's scrape_interval, s (default 15)")
    ap.add_argument("--window", default="5m", help="the advisor's evaluation_window (default 5m)")
    ap.add_argument("--in-process", action="store_true", help="the older in-process measure (see above)")
    ap.add_argument("--cycles", type=int, default=None, help="--in-process: timed cycles per size (default 3)")
    ap.add_argument("--baseline", metavar="REF", help="also measure git ref REF, side by side (see above)")
    ap.add_argument("--repeats", type=int, default=4, help="--baseline: measurements per side and size (default 4)")
    ap.add_argument("--tolerance", type=float, default=0.10, help="--baseline: allowed slowdown (default 0.10)")
    ap.add_argument(
        "--exposition",
        type=Path,
        default=None,
        help=f"the page to serve and move (default: a simulated vLLM 0.33 replica's; e.g. ../shared/…/{CAPTURE.name})",
    )
    ap.add_argument("--json", action="store_true", help="also print each size's figures as one JSON line")
    ap.add_argument("--worker", nargs=3, metavar=("N", "PORT", "BODY_FILE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cycles is None:
        args.cycles = 5 if args.baseline else 3
    if args.worker:
        return worker(int(args.worker[0]), int(args.worker[1]), args.cycles, Path(args.worker[2]))
    default_sizes = "100,300" if args.baseline else ("100,1000,2000" if args.in_process else "200,1000,2000")
    sizes = [int(x) for x in (args.sizes or default_sizes).split(",")]
    body = _body(args.exposition)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    server = ctx.Process(target=_serve, args=(q, body), daemon=True)
    server.start()
    port = q.get(timeout=30)
    source = args.exposition.name if args.exposition is not None else "simulated vLLM 0.33 replica"
    print(f"exposition: {source} ({len(body):,} bytes), moving on every scrape; stand-in server pid {server.pid}")
    try:
        if args.baseline:
            return compare(args, sizes, port, body)
        if args.in_process:
            return in_process(args, sizes, port, body, ctx)
        return daemon(args, sizes, port)
    finally:
        server.terminate()


def daemon(args: argparse.Namespace, sizes: list[int], port: int) -> int:
    """The default mode: ``capacity-advisor run`` per size, measured from outside (:func:`run_daemon`)."""
    print(
        f"capacity-advisor run, scrape_interval {args.interval:g} s, evaluation_window {args.window}, "
        f"{args.duration:g} s per size; {os.cpu_count()} CPUs"
    )
    print(
        f"{'targets':>7} {'cycles':>6} {'skip':>4} {'cycle p50 s':>11} {'p99 s':>6} {'first s':>7} "
        f"{'CPU ms/tgt/cycle':>16} {'RSS peak MiB':>12} {'steady MiB':>10} {'KiB/tgt':>7} {'up':>5} {'load 1m':>9}"
    )
    results = []
    with tempfile.TemporaryDirectory(prefix="fleet-") as tmp:
        for n in sizes:
            stand0 = json.loads(_get(f"http://127.0.0.1:{port}/stats"))["cpu_seconds"]
            r = run_daemon(n, port, args.duration, args.interval, args.window, Path(tmp))
            r["standin_cpu_seconds"] = json.loads(_get(f"http://127.0.0.1:{port}/stats"))["cpu_seconds"] - stand0
            results.append(r)
            print(
                f"{n:>7} {r['cycles']:>6} {r['skipped']:>4} {r['cycle_p50']:>11.2f} {r['cycle_p99']:>6.2f} "
                f"{r['first_cycle_seconds']:>7.2f} {r['cpu_ms_per_target']:>16.2f} {r['rss_peak_mib']:>12.0f} "
                f"{r['rss_steady_mib']:>10.0f} {r['kib_per_target']:>7.0f} {r['up']:>5} "
                f"{r['load'][0]:>4.1f}/{r['load'][1]:<4.1f}",
                flush=True,
            )
            steps = ", ".join(f"{k} {v:.2f}" for k, v in r["step_seconds"].items() if v >= 0.005)
            print(f"{'':>7} mean s per cycle: {steps}; stand-in CPU {r['standin_cpu_seconds']:.1f} s", flush=True)
            if args.json:
                print(json.dumps(r), flush=True)
    half = args.interval / 2
    for r in results:
        if r["targets"] >= 2000:
            ok = r["cycle_p99"] < half and r["rss_peak_mib"] * 1.048576 < 400
            print(
                f"{r['targets']} targets: cycle p99 {r['cycle_p99']:.2f} s (< {half:g} s), "
                f"RSS peak {r['rss_peak_mib'] * 1.048576:.0f} MB (< 400 MB): {'PASS' if ok else 'FAIL'}"
            )
    return 0


def in_process(args: argparse.Namespace, sizes: list[int], port: int, body: bytes, ctx: Any) -> int:
    """``--in-process``: :func:`measure` per size, each in a fresh process (so RSS is that size's alone)."""
    print(f"{'targets':>8} {'cycle s':>9} {'CPU ms/target':>14} {'RSS MiB':>9} {'up':>6} {'points/target':>14}")
    for n in sizes:
        with ctx.Pool(1) as pool:
            r = pool.apply(measure, (n, port, args.cycles, body))
        print(
            f"{n:>8} {r['cycle_seconds']:>9.2f} {r['cpu_ms_per_target']:>14.2f} {r['rss_mib']:>9.0f} "
            f"{r['up']:>6} {r['history_points']:>14.0f}",
            flush=True,
        )
    return 0


# --- --baseline REF ---------------------------------------------------------------------------------------------

FIGURES = (  # key, heading, format, compared in the verdict
    ("cycle_seconds", "cycle s", ".2f", False),
    ("cpu_ms_per_target", "CPU ms/target", ".2f", True),
    ("rss_mib", "RSS MiB", ".0f", False),
    ("up", "up", ".0f", False),
    ("history_points", "points/target", ".0f", False),
)


def worker(n: int, port: int, cycles: int, body_file: Path) -> int:
    """One ``--baseline`` measurement: this process's ``PYTHONPATH`` tree's own ``bench/fleet.py`` ``measure``;
    prints the figures as one JSON line."""
    from baseline import check_import

    tree = Path(os.environ.get("PYTHONPATH", ""))
    spec = importlib.util.spec_from_file_location("fleet_under_test", tree / "bench" / "fleet.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {tree / 'bench' / 'fleet.py'}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.measure(n, port, cycles, body_file.read_bytes())
    result["advisor"] = check_import(str(tree))
    print(json.dumps(result))
    return 0


def compare(args: argparse.Namespace, sizes: list[int], port: int, body: bytes) -> int:
    """``--baseline REF``: per size, ``--repeats`` fresh-process measurements per side, the sides alternating."""
    from baseline import REPO, baseline_tree, describe, dirty, ratio_stats, run_once

    began = time.perf_counter()
    sides = ("baseline", "current")
    slower: list[str] = []
    with tempfile.TemporaryDirectory(prefix="fleet-body-") as tmp, baseline_tree(args.baseline) as tree:
        body_file = Path(tmp) / "body.prom"
        body_file.write_bytes(body)
        trees = {"baseline": tree, "current": REPO}
        print(f"baseline: {describe(args.baseline)}")
        print(f"current:  {REPO} at {describe('HEAD')}{dirty()}")
        print(
            f"{args.repeats} fresh-process measurements per side and size, interleaved; {args.cycles} cycles each; "
            "figures: baseline / current (median), ratio current ÷ baseline (median of repeats, min..max)"
        )
        cmd = [sys.executable, str(Path(__file__).resolve()), "--cycles", str(args.cycles), "--worker"]
        for n in sizes:
            runs: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
            for k in range(args.repeats):  # baseline, current, current, baseline, …
                for side in sides if k % 2 == 0 else sides[::-1]:
                    runs[side].append(run_once([*cmd, str(n), str(port), str(body_file)], trees[side]))
            parts = []
            for key, heading, fmt, judged in FIGURES:
                base = [float(r[key]) for r in runs["baseline"]]
                cur = [float(r[key]) for r in runs["current"]]
                med, lo, hi = ratio_stats(cur, base)
                parts.append(
                    f"{heading} {statistics.median(base):{fmt}} / {statistics.median(cur):{fmt}} "
                    f"= {med:.3f}× ({lo:.2f}..{hi:.2f})"
                )
                if judged and med > 1 + args.tolerance:
                    slower.append(f"{heading} at {n} targets: {med:.3f}×")
            print(f"{n:>6} targets: " + "; ".join(parts))
        print(f"advisor: baseline from {runs['baseline'][0]['advisor']}, current from {runs['current'][0]['advisor']}")
    verdict = "PASS" if not slower else "FAIL"
    print(
        f"CPU per target within {1 + args.tolerance:.2f}× of the baseline at every size: {verdict}; "
        f"{time.perf_counter() - began:.0f} s"
    )
    for line in slower:
        print(f"  slower: {line}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
