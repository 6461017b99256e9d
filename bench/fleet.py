"""How many targets one advisor evaluates within half a 15 s scrape interval: the fleet-scale definition.

Per size N (default 200, 1,000 and 2,000 targets) it starts the daemon itself, ``capacity-advisor run``, on a
config of N targets (10 replicas per deployment, ``scrape_interval`` 15 s, ``evaluation_window`` 5m), and
measures it from outside while it runs:

* pages that move on every scrape, as a serving engine's do: a stand-in server *process* (asyncio,
  keep-alive; its CPU is not the advisor's) serves target ``i`` at ``/t/<i>/metrics`` a vLLM 0.33 page —
  a busy simulated replica rendered by the project's simulator (:mod:`advisor.sim.exposition`), or the page
  ``--exposition FILE`` names — whose counters rise, whose histograms gain observations in their buckets,
  ``_sum`` and ``_count``, and whose gauges move, on every scrape and differently per target
  (:class:`MovingPage`). By default each answer is rendered when asked; ``--prerendered`` serves pages rendered
  once at start (5 target classes × as many scrapes as the run needs, rotated: no rendering per request), and
  ``--servers S`` runs S stand-in processes, one each on 127.0.0.2, 127.0.0.3, … (:class:`StandIns`), so no one
  server process is the bottleneck and each address has its own ephemeral ports. The series count per page and
  the descriptor limit (RLIMIT_NOFILE, soft raised to hard in this process and inherited by the advisor and the
  stand-ins; both printed) are stated;
* CPU: user + system time of every advisor process (the daemon and all its descendants — worker processes
  included —, threads included), from ``/proc/<pid>/stat``, per target per cycle, between the end of the first
  cycle and the end of the last;
* memory: PSS (``/proc/<pid>/smaps_rollup``: a page shared by k processes counts 1/k in each, so the sum over
  the daemon and its workers counts each page once) summed over every advisor process, sampled every 0.25 s
  while the advisor runs, never after it stopped — the peak (mid-cycle, while pages are in flight), the steady
  value (median over the last third of the run), and per target: peak ÷ N in KB (interpreter included);
* cycle time: from the tick to the last deployment published, each cycle's own, read from what the daemon
  exposes on ``/metrics`` (``advisor_cycle_duration_seconds`` when exported, else the step histograms
  ``advisor_cycle_step_duration_seconds`` of scrape → normalize → prometheus → evaluate → publish); p50 and p99.

``--prometheus`` (issue 15) runs a real Prometheus (``/usr/bin/prometheus``, Debian's 2.42; temporary config
and TSDB, a free port, ``scrape_interval`` = the advisor's) beside the advisor over the same stand-in pages: it
is started first and scrapes every target once before the advisor starts, then both are read at the same
instants, so over the same window: the advisor's CPU per target per cycle, Prometheus's CPU per scrape (its
process's CPU from ``/proc`` ÷ its scrapes, counted by the stand-ins from its ``User-Agent``), and the ratio
advisor ÷ Prometheus (goal ≤ 1×). ``--daemon-arg ARG`` (repeatable) and ``--workers N`` pass arguments on to
``capacity-advisor run`` (default: none, the daemon's own defaults).

The 5 min window fills after 20 cycles, so memory reaches its steady state only in runs of ``--duration 330``
or longer; the default (90 s) is a short run. The machine's load average (1 min, at the start and end of each
size) is printed beside the figures: on a shared machine wall-clock cycle times move with it, CPU and memory
much less.

    .venv/bin/python bench/fleet.py                                  # N = 200, 1000, 2000; 90 s each
    .venv/bin/python bench/fleet.py --sizes 2000 --duration 330      # the acceptance figure (issue 14)
    .venv/bin/python bench/fleet.py --prometheus --sizes 100,1000,2000 --duration 120   # beside Prometheus (issue 15)
    .venv/bin/python bench/fleet.py --sizes 5000,10000 --servers 4 --prerendered --duration 180  # alone (issue 15)
    .venv/bin/python bench/fleet.py --sizes 2000 --workers 2         # `run --workers 2`
    .venv/bin/python bench/fleet.py --sizes 5 --duration 6 --interval 2 --json   # a smoke run
    .venv/bin/python bench/fleet.py --in-process --sizes 100,1000 --cycles 2     # the older in-process measure
    .venv/bin/python bench/fleet.py --baseline main                  # N = 100, 300; 4 repeats per side

``--in-process`` is the measure this script made before issue 14 (:func:`measure`): ``Service.run_once`` in a
fresh process against the same moving stand-in, every target's history pre-filled to the 5 min window, the
process's own CPU time, and its peak PSS sampled every 0.1 s on a thread while it runs (:func:`sampled`; until
issue 15 it read RSS after closing the service, which missed every page a cycle holds).

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
import contextlib
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
import threading
import time
from collections.abc import Callable
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


PROMETHEUS_AGENT = b"user-agent: prometheus/"
"""How the stand-in tells a Prometheus scrape from the advisor's (Prometheus sends ``User-Agent: Prometheus/<v>``)."""


def _serve(port_queue: Any, body: bytes, host: str = "127.0.0.1", variants: int = 0) -> None:
    """The stand-in server process: ``GET /t/<i>/metrics`` answers target ``i``'s moving page (keep-alive,
    HTTP/1.1, asyncio: thousands of idle connections cost no thread each); ``GET /stats`` answers
    ``{"requests": …, "by": {"advisor": …, "prometheus": …}, "first": unix time of the advisor's first scrape,
    "cpu_seconds": this process's CPU}``; ``GET /reset`` zeroes the counts.

    ``variants`` 0: every answer is rendered when asked (:meth:`MovingPage.render`). ``variants`` K > 0:
    pre-rendered pages, no rendering per request — :meth:`MovingPage.render` for the 5 target classes
    (``i % 5``) × scrapes 0 … K−1, built once at start (whole HTTP answers); target ``i``'s ``k``-th scrape gets
    ``(i % 5, k % K)``, so a page still moves on every scrape, and its counters restart (as after an engine
    restart) once every K scrapes."""
    import asyncio

    page = MovingPage(body.decode())
    scrapes: dict[int, int] = {}
    stats: dict[str, Any] = {"requests": 0, "first": 0.0, "by": {"advisor": 0, "prometheus": 0}}

    def answer(payload: bytes, status: bytes = b"200 OK") -> bytes:
        return (
            b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
            b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload
        )

    rendered = [[answer(page.render(c, k)) for k in range(variants)] for c in range(5)] if variants > 0 else []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode()
                if path == "/reset":
                    scrapes.clear()
                    stats.update(requests=0, first=0.0, by={"advisor": 0, "prometheus": 0})
                    out = answer(b"{}")
                elif path == "/stats":
                    cpu = os.times()
                    out = answer(json.dumps({**stats, "cpu_seconds": cpu.user + cpu.system}).encode())
                elif path.startswith("/t/") and path.endswith("/metrics"):
                    i = int(path.split("/")[2])
                    k = scrapes.get(i, 0)
                    scrapes[i] = k + 1
                    stats["requests"] += 1
                    if PROMETHEUS_AGENT in head.lower():
                        stats["by"]["prometheus"] += 1
                    else:
                        stats["by"]["advisor"] += 1
                        if not stats["first"]:
                            stats["first"] = time.time()
                    out = rendered[i % 5][k % variants] if rendered else answer(page.render(i, k))
                else:
                    out = answer(b"not found\n", b"404 Not Found")
                writer.write(out)
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, IndexError, ValueError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, host, 0, backlog=4096)
        port_queue.put(server.sockets[0].getsockname()[1])
        async with server:
            await server.serve_forever()

    asyncio.run(main())


class StandIns:
    """``count`` stand-in server processes (:func:`_serve`), one per loopback address: 127.0.0.1 when
    ``count`` is 1, else 127.0.0.2, 127.0.0.3, … (Linux routes all of 127/8 to ``lo``), so no one server
    process is the bottleneck and each address has its own ephemeral ports. Target ``i`` is served by server
    ``i % count``."""

    def __init__(self, body: bytes, count: int = 1, variants: int = 0) -> None:
        ctx = mp.get_context("spawn")
        self.hosts = ["127.0.0.1"] if count <= 1 else [f"127.0.0.{2 + j}" for j in range(count)]
        self.procs = []
        queues = []
        for host in self.hosts:
            q = ctx.Queue()
            proc = ctx.Process(target=_serve, args=(q, body, host, variants), daemon=True)
            proc.start()
            self.procs.append(proc)
            queues.append(q)
        self.bases = [f"http://{h}:{q.get(timeout=120)}" for h, q in zip(self.hosts, queues, strict=True)]

    def url(self, i: int) -> str:
        """Target ``i``'s page."""
        return f"{self.bases[i % len(self.bases)]}/t/{i}/metrics"

    def reset(self) -> None:
        """Zero every server's counts (each target's next page is its scrape 0)."""
        for b in self.bases:
            _get(f"{b}/reset")

    def stats(self) -> dict[str, float]:
        """Summed over the servers: ``requests``, ``advisor``/``prometheus`` requests, ``cpu_seconds``; ``first``
        is the earliest advisor scrape (0 before any)."""
        out = {"requests": 0.0, "advisor": 0.0, "prometheus": 0.0, "cpu_seconds": 0.0, "first": 0.0}
        for b in self.bases:
            s = json.loads(_get(f"{b}/stats"))
            out["requests"] += s["requests"]
            out["advisor"] += s["by"]["advisor"]
            out["prometheus"] += s["by"]["prometheus"]
            out["cpu_seconds"] += s["cpu_seconds"]
            if s["first"]:
                out["first"] = min(out["first"] or s["first"], s["first"])
        return out

    @property
    def pids(self) -> list[int]:
        """The server processes' ids."""
        return [p.pid for p in self.procs if p.pid is not None]

    def close(self) -> None:
        """Stop every server process."""
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.join(10)


# --- the daemon, measured from outside ------------------------------------------------------------------------


def _config(n: int, port: int, interval: float, window: str, url: Callable[[int], str] | None = None) -> dict[str, Any]:
    """``n`` targets on the stand-in, 10 replicas per deployment (Llama-3.1-8B on H100s, the capture's engine);
    target ``i`` at ``url(i)`` (default ``http://127.0.0.1:<port>/t/<i>/metrics``)."""
    where = url or (lambda i: f"http://127.0.0.1:{port}/t/{i}/metrics")
    deployments = []
    for d in range(0, n, 10):
        deployments.append(
            {
                "name": f"dep-{d // 10}",
                "engine": "vllm",
                "targets": [where(i) for i in range(d, min(n, d + 10))],
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


def proc_usage(pid: int) -> tuple[float, float, float]:
    """(CPU seconds, resident MiB, proportional MiB) of ``pid`` and all its descendants, from ``/proc``: user +
    system time of each live process (every thread included) plus that of its children already reaped; VmRSS
    summed; PSS (``/proc/<pid>/smaps_rollup``) summed — a page shared by k processes counts 1/k in each, so the
    sum over a process tree (a daemon and its forked workers) counts every page once."""
    cpu = rss = pss = 0.0
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
        pss += _pss_kib(p) / 1024
    return cpu, rss, pss


def _pss_kib(pid: int | str) -> float:
    """``pid``'s proportional set size in KiB (``Pss:`` of ``/proc/<pid>/smaps_rollup``; 0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return float(line.split()[1])
    except OSError:
        pass
    return 0.0


class PeakPss:
    """Samples this process's PSS every ``every`` seconds on a thread while the ``with`` block runs: ``peak``
    (MiB) is the largest sample, taken while the work runs — never after it closed what it measures."""

    def __init__(self, every: float = 0.1) -> None:
        self.every = every
        self.peak = 0.0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            self.peak = max(self.peak, _pss_kib("self") / 1024)
            self.samples += 1
            if self._stop.wait(self.every):
                return

    def __enter__(self) -> PeakPss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


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


PROMETHEUS = "/usr/bin/prometheus"


class Prometheus:
    """A real Prometheus (``binary``, Debian's 2.42 by default) scraping the same stand-in pages as the advisor:
    a temporary config — one job, ``scrape_interval`` = the advisor's, ``scrape_timeout`` = min(10 s, interval),
    one static target per page (``__metrics_path__`` = its path, ``instance`` = ``t<i>`` so no two targets' series
    collide) — a temporary TSDB directory under ``work``, listening on a free loopback port.

    Raises:
        SystemExit: the binary is missing, or it exited / was not ready within 60 s (its log is named).
    """

    def __init__(self, urls: list[str], interval: float, work: Path, binary: str = PROMETHEUS) -> None:
        import urllib.parse

        if not Path(binary).exists():
            raise SystemExit(f"--prometheus: {binary} not found (Debian: apt-get install prometheus)")
        groups = []
        for i, url in enumerate(urls):
            u = urllib.parse.urlsplit(url)
            groups.append({"targets": [u.netloc], "labels": {"__metrics_path__": u.path, "instance": f"t{i}"}})
        ms = max(1, round(interval * 1000))
        cfg = {
            "global": {"scrape_interval": f"{ms}ms", "evaluation_interval": f"{ms}ms"},
            "scrape_configs": [
                {
                    "job_name": "fleet",
                    "scrape_interval": f"{ms}ms",
                    "scrape_timeout": f"{min(ms, 10_000)}ms",
                    "static_configs": groups,
                }
            ],
        }
        work.mkdir(parents=True, exist_ok=True)
        (work / "prometheus.yml").write_text(json.dumps(cfg))  # JSON is YAML
        self.listen = f"127.0.0.1:{_free_port()}"
        self.log = work / "prometheus.log"
        with open(self.log, "wb") as logf:
            self.proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={work / 'prometheus.yml'}",
                    f"--storage.tsdb.path={work / 'tsdb'}",
                    f"--web.listen-address={self.listen}",
                    "--log.level=warn",
                ],
                stdout=logf,
                stderr=subprocess.STDOUT,
            )
        began = time.monotonic()
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"prometheus exited ({self.proc.returncode}); see {self.log}")
            try:
                _get(f"http://{self.listen}/-/ready", timeout=2)
                break
            except OSError:
                if time.monotonic() - began > 60:
                    self.close()
                    raise SystemExit(f"prometheus not ready within 60 s; see {self.log}") from None
                time.sleep(0.2)
        self.version = _get(f"http://{self.listen}/api/v1/status/buildinfo").decode()
        self.version = json.loads(self.version)["data"]["version"]

    def up(self) -> float:
        """How many of its targets' last scrape succeeded (``sum(up)``); NaN when it does not answer."""
        import urllib.parse

        try:
            q = urllib.parse.quote('sum(up{job="fleet"})')
            got = json.loads(_get(f"http://{self.listen}/api/v1/query?query={q}"))["data"]["result"]
            return float(got[0]["value"][1]) if got else 0.0
        except (OSError, ValueError, KeyError, IndexError):
            return float("nan")

    def close(self) -> None:
        """Stop it (SIGTERM, then SIGKILL after 30 s)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _nofile(pid: int) -> str:
    """``pid``'s open-files limit as ``soft/hard`` (``/proc/<pid>/limits``)."""
    try:
        for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return f"{soft}/{hard}"
    except OSError:
        pass
    return "?"


def cpu_window(reads: list[dict[str, Any]], n: int) -> tuple[int, int, bool]:
    """The measuring window over ``reads`` (each ``{"fig": advisor_figures(…), "stats": StandIns.stats()}``) of an
    advisor over ``n`` targets: the indexes of the first read after the first cycle that falls *between* two
    cycles — the stand-ins have answered the advisor exactly (cycles completed) × ``n`` scrapes — and of the last
    such read, and True; (0, last, False) when fewer than two reads qualify. A read taken mid-cycle (a cycle
    overran the interval) would charge part of a cycle's CPU to the wrong cycle count."""
    between = [
        j for j, r in enumerate(reads) if r["fig"]["cycles"] >= 1 and r["stats"]["advisor"] == r["fig"]["cycles"] * n
    ]
    if len(between) >= 2:
        return between[0], between[-1], True
    return 0, len(reads) - 1, False


def run_daemon(
    n: int,
    servers: StandIns,
    duration: float,
    interval: float,
    window: str,
    log_dir: Path,
    daemon_args: list[str] | None = None,
    prometheus: bool = False,
) -> dict[str, Any]:
    """Run ``capacity-advisor run`` over ``n`` moving targets for ``duration`` seconds and measure it from outside.

    * CPU: user + system seconds of the advisor process and all its descendants (``/proc``; worker processes
      included), between the end of its first cycle (connections, imports: warm-up) and the end of its last, per
      target per cycle. The window runs from the first read (after the first cycle) that falls between two cycles
      — the stand-ins have answered the advisor exactly (cycles completed) × ``n`` scrapes — to the last such
      read, so a cycle that overran the interval is not split across the count; ``cpu_ms_per_scrape`` is the same
      CPU ÷ the advisor's scrapes the stand-ins counted in the window (equal when the window is exact). When fewer
      than two reads fell between cycles (``window_between_cycles`` false, flagged in the output) the window is
      first to last read and the per-target figure is the per-scrape one;
    * memory: PSS (``/proc/<pid>/smaps_rollup``) summed over the advisor process and its descendants, sampled every
      0.25 s while it runs — never after it stopped: the peak (which falls mid-cycle, while pages are in flight),
      the steady value (median over the last third of the run), and per target: peak ÷ ``n`` (interpreter and
      libraries included) and (steady − PSS at the first scrape) ÷ ``n``. RSS (summed, so shared pages count once
      per process) is kept beside it;
    * cycle time: tick to the last deployment published, each cycle's own — ``advisor_cycle_duration_seconds``
      when the advisor exports it, else the growth of ``advisor_cycle_step_duration_seconds_sum`` over the steps
      :data:`CYCLE_STEPS` between two reads of ``/metrics`` one cycle apart. ``/metrics`` is read once per
      interval, 0.5 s before each tick (as a Prometheus scraping the advisor at its interval would), so
      each read falls between two cycles; its cost is in the CPU figure.

    ``daemon_args`` are appended to ``capacity-advisor run`` (e.g. ``["--workers", "2"]``). With ``prometheus``,
    a real Prometheus (:class:`Prometheus`) is started first and scrapes the same pages at the same interval; its
    CPU (``/proc``, its process) and its scrapes (the stand-ins' count of requests with its ``User-Agent``) are
    read at the same instants as the advisor's, so both are measured over the same window: CPU per scrape.
    """
    servers.reset()
    cfg_file = log_dir / f"fleet-{n}.json"
    cfg_file.write_text(json.dumps(_config(n, 0, interval, window, servers.url)))
    listen = f"127.0.0.1:{_free_port()}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "advisor.cli", "--log-level", "warning", "run", "--config", str(cfg_file)]
    prom = Prometheus([servers.url(i) for i in range(n)], interval, log_dir / f"prometheus-{n}") if prometheus else None
    if prom is not None:  # its scrape loops start a few seconds after it is ready: let each scrape once first
        began = time.monotonic()
        while servers.stats()["prometheus"] < n:
            if time.monotonic() - began > 60 + 2 * interval:
                prom.close()
                raise SystemExit(f"prometheus did not scrape all {n} targets within {60 + 2 * interval:g} s")
            time.sleep(0.5)
    load0 = os.getloadavg()[0]
    with open(log_dir / f"advisor-{n}.log", "wb") as logf:
        proc = subprocess.Popen(
            [*cmd, "--listen", listen, *(daemon_args or [])], env=env, stdout=logf, stderr=subprocess.STDOUT
        )
    mem: list[tuple[float, float, float]] = []  # (time, RSS MiB, PSS MiB)
    reads: list[dict[str, Any]] = []  # at each /metrics read: advisor CPU, its figures, Prometheus CPU, stand-in counts
    nofile = "?"
    try:
        first = 0.0
        began = time.monotonic()
        while not first:  # the advisor's first scrape marks its first tick
            if proc.poll() is not None:
                raise SystemExit(f"the advisor exited ({proc.returncode}); see {log_dir / f'advisor-{n}.log'}")
            if time.monotonic() - began > 120:
                raise SystemExit("the advisor scraped nothing within 120 s")
            _, r, p = proc_usage(proc.pid)
            mem.append((time.time(), r, p))
            first = servers.stats()["first"]
            time.sleep(0.2)
        nofile = _nofile(proc.pid)
        _, _, idle = proc_usage(proc.pid)  # imported and configured, nothing scraped yet
        ticks = [first + k * interval - 0.5 for k in range(1, max(2, int(duration // interval)) + 1)]
        for at in ticks:
            while time.time() < at:
                _, r, p = proc_usage(proc.pid)
                mem.append((time.time(), r, p))
                time.sleep(min(0.25, max(0.0, at - time.time())))
            if proc.poll() is not None:
                raise SystemExit(f"the advisor exited ({proc.returncode}); see {log_dir / f'advisor-{n}.log'}")
            read: dict[str, Any] = {"t": time.time(), "cpu": proc_usage(proc.pid)[0], "stats": servers.stats()}
            if prom is not None:
                read["prom_cpu"] = proc_usage(prom.proc.pid)[0]
            try:  # a busy advisor may answer late: a missed read merges two cycles, as an overrun does
                read["fig"] = advisor_figures(_get(f"http://{listen}/metrics", timeout=60).decode())
            except OSError as e:
                print(f"{'':>7} /metrics not read at tick {len(reads) + 1}: {e}", file=sys.stderr, flush=True)
                continue
            reads.append(read)
        prom_up = prom.up() if prom is not None else float("nan")
        prom_pss = proc_usage(prom.proc.pid)[2] if prom is not None else float("nan")
    finally:
        proc.terminate()
        try:
            proc.wait(40)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if prom is not None:
            prom.close()
    j0, j1, exact = cpu_window(reads, n)
    durations: list[float] = []
    overran = 0
    for a, b in itertools.pairwise(r["fig"] for r in reads[j0:]):
        done = b["cycles"] - a["cycles"]
        if done < 1:
            overran += 1
            continue
        if "duration" in b and done == 1:
            durations.append(b["duration"])
        else:
            durations.extend([(b["steps"] - a["steps"]) / done] * int(done))
    r0, r1 = reads[j0], reads[j1]
    f0, f1 = r0["fig"], reads[-1]["fig"]
    cycles = r1["fig"]["cycles"] - f0["cycles"]
    pss = [p for _, _, p in mem]
    steady = [p for t, _, p in mem if t >= mem[0][0] + (mem[-1][0] - mem[0][0]) * 2 / 3]
    scrapes = r1["stats"]["advisor"] - r0["stats"]["advisor"]
    expected = len(ticks)
    out: dict[str, Any] = {
        "targets": n,
        "cycles": int(f1["cycles"]),
        "skipped": int(f1.get("skipped", max(0.0, expected - f1["cycles"]))),
        "overran": overran,
        "first_cycle_seconds": next(
            (r["fig"].get("duration", r["fig"]["steps"]) for r in reads if r["fig"]["cycles"] == 1), float("nan")
        ),
        "window_between_cycles": exact,  # False: no two reads fell between cycles; the window is approximate
        "cycle_p50": _p(durations, 0.5) if durations else float("nan"),
        "cycle_p99": _p(durations, 0.99) if durations else float("nan"),
        "cycle_seconds": durations,
        "window_seconds": r1["t"] - r0["t"],
        "window_cycles": cycles,
        # per target per cycle: over whole cycles when the window is exact, else per scrape the stand-ins counted
        # (equal when exact; the better estimate when reads fell mid-cycle)
        "cpu_ms_per_target": (
            (r1["cpu"] - r0["cpu"]) / cycles / n * 1000
            if exact and cycles
            else ((r1["cpu"] - r0["cpu"]) / scrapes * 1000 if scrapes else float("nan"))
        ),
        "advisor_scrapes": scrapes,
        # /proc counts CPU in clock ticks: one tick spread over the window's scrapes is the figure's resolution
        "cpu_resolution_ms_per_target": 1000 / _TICK / scrapes if scrapes else float("nan"),
        "cpu_ms_per_scrape": (r1["cpu"] - r0["cpu"]) / scrapes * 1000 if scrapes else float("nan"),
        "pss_peak_mib": max(pss),
        "pss_steady_mib": statistics.median(steady),
        "pss_start_mib": idle,
        "pss_kb_per_target": max(pss) * 1048.576 / n,
        "pss_kib_per_target_over_start": (statistics.median(steady) - idle) * 1024 / n,
        "rss_peak_mib": max(r for _, r, _ in mem),
        "up": int(f1["up"]),
        "nofile": nofile,
        "load": (load0, os.getloadavg()[0]),
        "step_seconds": {  # mean per cycle of each step over the window, first cycle excluded
            k[5:]: (r1["fig"][k] - f0.get(k, 0.0)) / cycles for k in r1["fig"] if k.startswith("step:") and cycles
        },
    }
    if prom is not None:
        prom_scrapes = r1["stats"]["prometheus"] - r0["stats"]["prometheus"]
        out["prometheus_version"] = prom.version
        out["prom_scrapes"] = prom_scrapes
        out["prom_up"] = prom_up
        out["prom_pss_mib"] = prom_pss
        prom_cpu = r1["prom_cpu"] - r0["prom_cpu"]
        # /proc counts CPU in clock ticks (10 ms): below one tick Prometheus's CPU is unknown, never 0
        measurable = prom_scrapes > 0 and prom_cpu >= 1 / os.sysconf("SC_CLK_TCK")
        out["prom_cpu_ms_per_scrape"] = prom_cpu / prom_scrapes * 1000 if measurable else None
        out["ratio"] = (
            out["cpu_ms_per_target"] / out["prom_cpu_ms_per_scrape"] if out["prom_cpu_ms_per_scrape"] else None
        )
    return out


def measure(n: int, port: int, cycles: int, body: bytes) -> dict[str, float]:
    """Fill every target's history to steady state (a whole 5 min window of 15 s scrapes, through the
    service's own retention policy), then run ``cycles`` cycles over ``n`` targets; return the median
    cycle seconds and CPU per target. Memory is measured around this call, while it runs (:func:`sampled`):
    read after ``svc.close()`` it would miss what a cycle holds (every page in flight)."""
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
        "up": up,
        "history_points": points,
    }


def sampled(fn: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """``fn(*args)``'s figures plus ``pss_peak_mib``: this process's peak PSS, sampled every 0.1 s on a thread
    while ``fn`` runs (:class:`PeakPss`)."""
    with PeakPss() as peak:
        result = fn(*args)
    return {**result, "pss_peak_mib": peak.peak}


def raise_nofile() -> tuple[int, int]:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit (inherited by the advisor and the stand-ins it
    starts); return (soft, hard) as they are now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft, hard


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--sizes", default=None, help="target counts (default 200,1000,2000; 100,300 with --baseline)")
    ap.add_argument(
        "--duration", type=float, default=90.0, help="seconds the daemon runs per size (default 90; 330 fills 5 min)"
    )
    ap.add_argument("--interval", type=float, default=15.0, help="the advisor's scrape_interval, s (default 15)")
    ap.add_argument("--window", default="5m", help="the advisor's evaluation_window (default 5m)")
    ap.add_argument(
        "--prometheus",
        action="store_true",
        help=f"also run a real Prometheus ({PROMETHEUS}) over the same pages (default sizes 100,1000,2000)",
    )
    ap.add_argument(
        "--servers",
        type=int,
        default=1,
        help="stand-in server processes (default 1, on 127.0.0.1; more: one each on 127.0.0.2, 127.0.0.3, …)",
    )
    ap.add_argument(
        "--prerendered",
        action="store_true",
        help="serve pre-rendered pages (5 target classes × scrapes, rotated), no rendering per request",
    )
    ap.add_argument(
        "--daemon-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an extra argument for `capacity-advisor run` (repeatable), e.g. --daemon-arg=--workers=2",
    )
    ap.add_argument("--workers", default=None, help="shorthand for --daemon-arg=--workers=N (default: the daemon's)")
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
    if args.workers is not None:
        args.daemon_arg.append(f"--workers={args.workers}")
    if args.worker:
        return worker(int(args.worker[0]), int(args.worker[1]), args.cycles, Path(args.worker[2]))
    if args.baseline:
        default_sizes = "100,300"
    elif args.in_process or args.prometheus:
        default_sizes = "100,1000,2000"
    else:
        default_sizes = "200,1000,2000"
    sizes = [int(x) for x in (args.sizes or default_sizes).split(",")]
    soft, hard = raise_nofile()
    body = _body(args.exposition)
    in_daemon = not (args.baseline or args.in_process)
    scrapers = 2 if args.prometheus else 1
    variants = (scrapers * (math.ceil(args.duration / args.interval) + 4)) if args.prerendered and in_daemon else 0
    servers = StandIns(body, args.servers if in_daemon else 1, variants)
    source = args.exposition.name if args.exposition is not None else "simulated vLLM 0.33 replica"
    samples = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
    args.series_per_page, args.page_bytes = samples, len(body)
    how = f"pre-rendered, 5 classes × {variants} scrapes, rotated" if variants else "rendered per request"
    print(
        f"exposition: {source} ({len(body):,} bytes, {samples} series per page), moving on every scrape ({how}); "
        f"stand-in servers {', '.join(servers.bases)} (pids {' '.join(map(str, servers.pids))}, "
        f"open files {_nofile(servers.pids[0])})"
    )
    print(f"RLIMIT_NOFILE soft {soft} / hard {hard} (soft raised to hard; the advisor and the stand-ins inherit it)")
    port = int(servers.bases[0].rsplit(":", 1)[1])
    try:
        if args.baseline:
            return compare(args, sizes, port, body)
        if args.in_process:
            return in_process(args, sizes, port, body)
        return daemon(args, sizes, servers)
    finally:
        servers.close()


def daemon(args: argparse.Namespace, sizes: list[int], servers: StandIns) -> int:
    """The default mode: ``capacity-advisor run`` per size, measured from outside (:func:`run_daemon`); with
    ``--prometheus``, a real Prometheus beside it over the same pages and the same window."""
    extra = " ".join(args.daemon_arg) or "(none: the daemon's defaults)"
    print(
        f"capacity-advisor run, scrape_interval {args.interval:g} s, evaluation_window {args.window}, "
        f"{args.duration:g} s per size; {os.cpu_count()} CPUs (affinity {len(os.sched_getaffinity(0))}); "
        f"extra run args: {extra}"
    )
    head = (
        f"{'targets':>7} {'cycles':>6} {'skip':>4} {'cycle p50 s':>11} {'p99 s':>6} {'first s':>7} "
        f"{'CPU ms/tgt/cycle':>16} {'PSS peak MiB':>12} {'steady MiB':>10} {'KB/tgt':>6} {'up':>5}"
    )
    if args.prometheus:
        head += f" {'prom ms/scrape':>14} {'ratio':>6} {'prom up':>7}"
    print(head + f" {'load 1m':>9}")
    results = []
    with tempfile.TemporaryDirectory(prefix="fleet-") as tmp:
        for n in sizes:
            stand0 = servers.stats()["cpu_seconds"]
            r = run_daemon(
                n, servers, args.duration, args.interval, args.window, Path(tmp), args.daemon_arg, args.prometheus
            )
            r["standin_cpu_seconds"] = servers.stats()["cpu_seconds"] - stand0
            r["series_per_page"], r["page_bytes"] = args.series_per_page, args.page_bytes
            results.append(r)
            line = (
                f"{n:>7} {r['cycles']:>6} {r['skipped']:>4} {r['cycle_p50']:>11.2f} {r['cycle_p99']:>6.2f} "
                f"{r['first_cycle_seconds']:>7.2f} {r['cpu_ms_per_target']:>16.2f} {r['pss_peak_mib']:>12.0f} "
                f"{r['pss_steady_mib']:>10.0f} {r['pss_kb_per_target']:>6.0f} {r['up']:>5}"
            )
            if args.prometheus and r["ratio"] is None:
                line += f" {'unknown':>14} {'—':>6} {r['prom_up']:>7.0f}"
            elif args.prometheus:
                line += f" {r['prom_cpu_ms_per_scrape']:>14.2f} {r['ratio']:>5.2f}× {r['prom_up']:>7.0f}"
            print(line + f" {r['load'][0]:>4.1f}/{r['load'][1]:<4.1f}", flush=True)
            steps = ", ".join(f"{k} {v:.2f}" for k, v in r["step_seconds"].items() if v >= 0.005)
            print(
                f"{'':>7} mean s per cycle: {steps}; advisor {r['cpu_ms_per_scrape']:.2f} ms CPU per scrape "
                f"({r['advisor_scrapes']:.0f} scrapes in {r['window_seconds']:.0f} s"
                f"{'' if r['window_between_cycles'] else ', window approximate: no two reads fell between cycles'}); "
                "PSS per target over the "
                f"start {r['pss_kib_per_target_over_start']:.0f} KiB, RSS peak {r['rss_peak_mib']:.0f} MiB; "
                f"advisor open files {r['nofile']}; stand-in CPU {r['standin_cpu_seconds']:.1f} s",
                flush=True,
            )
            if args.prometheus and r["ratio"] is None:
                print(
                    f"{'':>7} Prometheus {r['prometheus_version']}: {r['prom_scrapes']:.0f} scrapes in the same "
                    "window; its CPU is unknown: less than one clock tick (10 ms) in the window — run longer or with "
                    "more targets",
                    flush=True,
                )
            elif args.prometheus:
                print(
                    f"{'':>7} Prometheus {r['prometheus_version']}: {r['prom_scrapes']:.0f} scrapes in the same "
                    f"window; CPU per target per cycle: advisor {r['cpu_ms_per_target']:.2f} ms / Prometheus "
                    f"{r['prom_cpu_ms_per_scrape']:.2f} ms per scrape = {r['ratio']:.2f}× (goal ≤ 1×); "
                    f"Prometheus PSS {r['prom_pss_mib']:.0f} MiB",
                    flush=True,
                )
            if args.json:
                print(json.dumps(r), flush=True)
    half = args.interval / 2
    for r in results:
        if r["targets"] >= 2000:
            ok = r["cycle_p99"] < half and r["pss_kb_per_target"] < 100
            print(
                f"{r['targets']} targets: cycle p99 {r['cycle_p99']:.2f} s (< {half:g} s), PSS peak "
                f"{r['pss_peak_mib'] * 1.048576:.0f} MB = {r['pss_kb_per_target']:.0f} KB per target (< 100 KB): "
                f"{'PASS' if ok else 'FAIL'} (load {r['load'][0]:.1f}/{r['load'][1]:.1f})"
            )
        if r.get("ratio") is not None:
            print(
                f"{r['targets']} targets beside Prometheus: {r['ratio']:.2f}× its CPU per scrape (≤ 1×): "
                f"{'PASS' if r['ratio'] <= 1 else 'FAIL'}"
            )
    return 0


def in_process(args: argparse.Namespace, sizes: list[int], port: int, body: bytes) -> int:
    """``--in-process``: :func:`measure` per size, each in a fresh process (so memory is that size's alone),
    its peak PSS sampled while it runs (:func:`sampled`)."""
    ctx = mp.get_context("spawn")
    print(f"{'targets':>8} {'cycle s':>9} {'CPU ms/target':>14} {'PSS peak MiB':>12} {'up':>6} {'points/target':>14}")
    for n in sizes:
        with ctx.Pool(1) as pool:
            r = pool.apply(sampled, (measure, n, port, args.cycles, body))
        print(
            f"{n:>8} {r['cycle_seconds']:>9.2f} {r['cpu_ms_per_target']:>14.2f} {r['pss_peak_mib']:>12.0f} "
            f"{r['up']:>6} {r['history_points']:>14.0f}",
            flush=True,
        )
        if args.json:
            print(json.dumps({"targets": n, **r}), flush=True)
    return 0


# --- --baseline REF ---------------------------------------------------------------------------------------------

FIGURES = (  # key, heading, format, compared in the verdict
    ("cycle_seconds", "cycle s", ".2f", False),
    ("cpu_ms_per_target", "CPU ms/target", ".2f", True),
    ("pss_peak_mib", "PSS peak MiB", ".0f", False),
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
    result = sampled(module.measure, n, port, cycles, body_file.read_bytes())  # memory: while it runs
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
