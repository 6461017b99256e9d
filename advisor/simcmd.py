"""``capacity-advisor simulate``: a traffic profile against a configured deployment, in the simulator.

::

    capacity-advisor simulate --config FILE [--deployment NAME] [--duration D] [--arrival-rate R] [--seed S]
                              [--json] [traffic flags] [--sweep DIAL=V1,V2,… [--plot FILE.png]]
                              [--apply DIAL=VALUE]

One run prints TTFT/TPOT/e2e/queue-time quantiles, goodput against the deployment's SLO, tokens/s, KV usage and
preemptions. ``--sweep`` runs the same traffic (same seed) once per value of one dial and prints the frontier
table (rows on the Pareto frontier of goodput tokens/s against GPUs are marked ``*``); ``--plot`` draws it
when matplotlib is importable. ``--apply DIAL=VALUE`` runs the deployment as configured and with the dial
turned, side by side. (``--apply ID``, an open recommendation's id, is not implemented yet.)

Dials: ``max_num_seqs``, ``gpu_memory_utilization``, ``kv_cache_dtype``, ``tensor_parallel_size``,
``max_model_len``, ``replicas``. Every number has a bound no deployment exceeds (``--replicas`` and the replicas dial
≤ 10,000, ``--spec-tokens`` ≤ 64, max_num_seqs and ``--spec-disable-by-batch-size`` ≤ 1,000,000; the config's bounds
for the other dials), so a typo is one line of error rather than a run that never ends. Exit codes as the other
commands: 0 done (also when the reader of stdout went away, ``| head``), 2 invalid input (config, flags, a
configuration that does not fit), 1 runtime failure.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, TypeVar

from advisor.argtypes import http_url_arg, positive_float

__all__ = ["DIALS", "add_simulate_parser", "cmd_simulate"]

MAX_REPLICAS = 10_000
"""``--replicas`` and the ``replicas`` dial: more than any single deployment runs (and each simulated replica costs
time on every arrival)."""
MAX_NUM_SEQS = 1_000_000
"""The ``max_num_seqs`` dial and ``--spec-disable-by-batch-size``: vLLM's default is 256 or 1024; no GPU holds a
million concurrent sequences."""
MAX_SPEC_TOKENS = 64
"""``--spec-tokens``: draft models and EAGLE/MTP heads propose a handful of tokens per step (vLLM's examples use
2–7); the acceptance of the 64th is nil."""
MAX_SEED = 2**32 - 1
"""``--seed``: the usual unsigned 32-bit range."""
MAX_TENSOR_PARALLEL_SIZE = 64
"""The ``tensor_parallel_size`` dial: the config's own bound."""
DEFAULT_PROMPT_TOKENS, DEFAULT_OUTPUT_TOKENS = 1500.0, 300.0
"""``--prompt-tokens`` and ``--output-tokens`` when not given (a chat workload's order of magnitude)."""
DEFAULT_WINDOW = 3600.0
"""``--window`` when not given: an hour of history."""
DEFAULT_PROMPT_CV = 0.5
DEFAULT_OUTPUT_CV = 1.0
DEFAULT_BURSTINESS = 2.0
DEFAULT_ON_OFF = (30.0, 30.0)
DEFAULT_DAILY_PERIOD = 86400.0
DEFAULT_DAILY_AMPLITUDE = 0.6
"""The traffic flags' defaults (``--prompt-cv`` … ``--daily-amplitude``), applied where read so that a flag given
can be told from one not given (issue 19: a flag that does not apply is refused, not ignored)."""
MIN_MODEL_LEN, MAX_MODEL_LEN = 16, 10_000_000
"""The ``max_model_len`` dial: the config's own bounds (and the model's context, checked once the config is read)."""


def _shown(text: str) -> str:
    """``text`` quoted for a message, cut to 40 characters (a 5,000-digit number need not be echoed)."""
    return repr(text) if len(text) <= 40 else repr(text[:37]) + "…"


def _whole(low: int, high: int) -> Callable[[str], int]:
    """A whole number in [``low``, ``high``] (``1_000`` as Python writes it too); ValueError otherwise, with a message
    that states the range. Digits beyond any bound are refused before ``int()`` sees them (no 4,300-digit limit
    error, no overflow further on)."""

    def parse(text: str) -> int:
        t = text.strip()
        if not re.fullmatch(r"[+-]?[0-9]+(_[0-9]+)*", t):
            raise ValueError(f"{_shown(text)} is not a valid int; give a whole number from {low:,} to {high:,}")
        negative = t.startswith("-")
        digits = t.lstrip("+-").replace("_", "").lstrip("0") or "0"
        v = (-1 if negative else 1) * int(digits) if len(digits) <= 30 else (low - 1 if negative else high + 1)
        if not low <= v <= high:
            raise ValueError(f"{_shown(text)} is out of range; give a whole number from {low:,} to {high:,}")
        return v

    return parse


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{_shown(text)} is not a valid float; give a number in (0, 1]") from None
    if not math.isfinite(v) or not 0.0 < v <= 1.0:
        raise ValueError(f"{_shown(text)} is out of range; give a number in (0, 1]")
    return v


def _kv_dtype(text: str) -> str:
    from advisor.capacity.precision import kv_bytes_per_element
    from advisor.errors import CapacityError

    v = text.strip()
    try:
        kv_bytes_per_element(v, "bfloat16")
    except CapacityError as exc:
        raise ValueError(str(exc)) from None
    return v


DIALS: dict[str, Callable[[str], object]] = {
    "max_num_seqs": _whole(1, MAX_NUM_SEQS),
    "gpu_memory_utilization": _fraction,
    "kv_cache_dtype": _kv_dtype,
    "tensor_parallel_size": _whole(1, MAX_TENSOR_PARALLEL_SIZE),
    "max_model_len": _whole(MIN_MODEL_LEN, MAX_MODEL_LEN),
    "replicas": _whole(1, MAX_REPLICAS),
}
"""Dials ``--sweep`` and ``--apply`` turn, with the parser of their values (ValueError, naming the range, for a value
the dial cannot take)."""


def _err(msg: str) -> None:
    print(f"capacity-advisor: {msg}", file=sys.stderr)


def _duration(text: str) -> float:
    from advisor.config import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _time_arg(text: str) -> float:
    from advisor.backtestcmd import parse_time

    try:
        return parse_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _ratio(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {text!r}")
    return v


def _int_flag(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number in [``low``, ``high``]; argparse names the flag in its one-line error."""
    check = _whole(low, high)

    def parse(text: str) -> int:
        try:
            return check(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def add_simulate_parser(subparsers: Any) -> None:
    """Register ``simulate`` on an argparse sub-parsers object."""
    p = subparsers.add_parser(
        "simulate",
        help="run a traffic profile against a configured deployment in the engine simulator",
        description="Run a traffic profile against a deployment of the config in the continuous-batching engine "
        "simulator; print latency quantiles, goodput against its SLO, tokens/s, KV usage and preemptions.",
    )
    p.add_argument("--config", required=True, help="YAML config file (the advisor's)")
    p.add_argument("--deployment", help="deployment name (default: the first)")
    p.add_argument("--duration", type=_duration, default=300.0, help="simulated time: 90s, 5m, … (default 5m)")
    p.add_argument(
        "--arrival-rate",
        type=positive_float(1e6),
        help="mean requests/s across all replicas (default: 1 per replica)",
    )
    p.add_argument(
        "--seed",
        type=_int_flag(0, MAX_SEED),
        default=0,
        help=f"random seed, 0 to {MAX_SEED:,} (default 0); same seed, same traffic",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    t = p.add_argument_group("traffic")
    t.add_argument(
        "--arrivals",
        choices=["poisson", "gamma", "onoff", "daily"],
        default=None,
        help="arrival process (default poisson)",
    )
    t.add_argument(
        "--burstiness", type=positive_float(100.0), default=None, help=f"gamma: gap CV (default {DEFAULT_BURSTINESS:g})"
    )
    t.add_argument(
        "--on-off",
        type=positive_float(1e6),
        nargs=2,
        metavar=("ON_S", "OFF_S"),
        default=None,
        help=f"onoff: seconds on and off (default {DEFAULT_ON_OFF[0]:g} {DEFAULT_ON_OFF[1]:g})",
    )
    t.add_argument(
        "--daily-period", type=_duration, default=None, help=f"daily: period (default {DEFAULT_DAILY_PERIOD / 3600:g}h)"
    )
    t.add_argument(
        "--daily-amplitude",
        type=_ratio,
        default=None,
        help=f"daily: relative amplitude (default {DEFAULT_DAILY_AMPLITUDE:g})",
    )
    t.add_argument("--prompt-tokens", type=positive_float(1e7), help="mean prompt (1500)")
    t.add_argument(
        "--prompt-cv", type=positive_float(100.0), default=None, help=f"prompt length CV ({DEFAULT_PROMPT_CV:g})"
    )
    t.add_argument("--output-tokens", type=positive_float(1e7), help="mean output (300)")
    t.add_argument(
        "--output-cv", type=positive_float(100.0), default=None, help=f"output length CV ({DEFAULT_OUTPUT_CV:.1f})"
    )
    t.add_argument("--lengths-csv", help="CSV of prompt_tokens,output_tokens rows to draw lengths from")
    t.add_argument("--trace", help="CSV of arrival_seconds,prompt_tokens,output_tokens to replay")
    e = p.add_argument_group("engine")
    e.add_argument(
        "--replicas",
        type=_int_flag(1, MAX_REPLICAS),
        help=f"replicas, 1 to {MAX_REPLICAS:,} (default: the deployment's targets)",
    )
    e.add_argument("--router", choices=["least-loaded", "round-robin"], default="least-loaded")
    e.add_argument("--prefix-hit-rate", type=_ratio, help="prefix caching on, with this shared-prefix hit rate")
    e.add_argument(
        "--spec-tokens",
        type=_int_flag(1, MAX_SPEC_TOKENS),
        help=f"speculative decoding on, with this many draft tokens (1 to {MAX_SPEC_TOKENS})",
    )
    e.add_argument("--spec-acceptance", type=_ratio, default=0.7, help="draft token acceptance rate (0.7)")
    e.add_argument("--spec-draft-cost", type=_ratio, default=0.05, help="draft step ÷ target step (0.05)")
    e.add_argument(
        "--spec-disable-by-batch-size",
        type=_int_flag(1, MAX_NUM_SEQS),
        help=f"no speculation above this many running (1 to {MAX_NUM_SEQS:,})",
    )
    e.add_argument("--warmup", type=_duration, help="exclude requests arriving before this (default none)")
    w = p.add_argument_group("what-if")
    w.add_argument("--sweep", metavar="DIAL=V1,V2,…", help=f"vary one dial: {', '.join(DIALS)}")
    w.add_argument("--plot", metavar="FILE.png", help="with --sweep: draw the frontier (needs matplotlib)")
    w.add_argument("--apply", metavar="DIAL=VALUE", help="run with the dial turned beside the unchanged run")
    h = p.add_argument_group(
        "live data",
        "run at the traffic a deployment's history observed, with its calibrated latency model, and report the "
        "simulator's latency error against the engines' own TPOT/TTFT histograms over that window",
    )
    h.add_argument(
        "--prometheus",
        metavar="URL",
        type=http_url_arg,
        help="the Prometheus holding the deployment's history (read as backtest reads it; the config's credentials)",
    )
    h.add_argument("--window", type=_duration, help="with --prometheus: the history window (default 1h)")
    h.add_argument(
        "--to", type=_time_arg, help="with --prometheus: the window's end: RFC 3339, unix seconds, now-5m (default now)"
    )
    h.add_argument(
        "--step",
        type=positive_float(86400.0),
        help="with --prometheus: seconds between replayed evaluations (default: the config's scrape_interval)",
    )
    h.add_argument(
        "--latency-model",
        choices=["calibrated", "prior"],
        help="with --prometheus: calibrated (default: the deployment's online calibration over the window) or the "
        "published prior alone, to see what calibration changed",
    )
    p.set_defaults(func=cmd_simulate)


@dataclass(frozen=True)
class _Setup:
    name: str
    deployment: Any
    base_dir: Path
    replicas: int
    profile: Any
    slo: Any
    latency: Any = None
    """The :class:`~advisor.capacity.calibration.LatencyModel` the step model comes from (``None``: the prior of the
    deployment's engine)."""
    calibration: str = "prior"
    """Where :attr:`latency` came from, for the report."""


def _parse_dial(text: str, many: bool) -> tuple[str, list[object]]:
    """``DIAL=VALUE`` (``DIAL=V1,V2,…`` when ``many``) → the dial and its parsed values.

    Raises:
        ValueError: a one-line message naming the dial (or what is missing): empty text, no ``=``, an unknown
            dial, an empty value, a value the dial cannot take.
    """
    if not text.strip():
        example = "max_num_seqs=256,512" if many else "max_num_seqs=512"
        raise ValueError(f"empty; expected DIAL={'V1,V2,…' if many else 'VALUE'}, e.g. {example}")
    if "=" not in text:
        raise ValueError(
            f"{_shown(text)}: expected DIAL=VALUE (--apply with a recommendation id is not implemented yet; "
            "give the dial and value the recommendation names)"
        )
    dial, _, raw = text.partition("=")
    dial = dial.strip().replace("-", "_")
    if not dial:
        raise ValueError(f"{_shown(text)}: no dial before '='; dials: {', '.join(DIALS)}")
    if dial not in DIALS:
        raise ValueError(f"unknown dial {_shown(dial)}; dials: {', '.join(DIALS)}")
    if not many and "," in raw:
        raise ValueError(f"{dial}: {_shown(raw.strip())}: --apply takes one value (--sweep takes several)")
    parts = [v.strip() for v in raw.split(",")] if many else [raw.strip()]
    if any(not v for v in parts):
        raise ValueError(
            f"{_shown(text)}: no value for {dial}" if len(parts) == 1 else f"{_shown(text)}: an empty value"
        )
    conv = DIALS[dial]
    values: list[object] = []
    for v in parts:
        try:
            values.append(conv(v))
        except ValueError as exc:
            raise ValueError(f"{dial}: {exc}") from None
    return dial, values


def _turned(setup: _Setup, dial: str, value: object) -> Any:
    """The deployment with ``dial`` set to ``value``, validated as the config file would be (so a value the config
    refuses is refused here too, and the context fits the model).

    Raises:
        ValueError: naming the dial.
    """
    from pydantic import ValidationError

    from advisor.config import resolve_model
    from advisor.errors import CapacityError

    dep = setup.deployment
    if dial == "replicas":
        return dep
    try:
        turned = type(dep).model_validate({**dep.model_dump(by_alias=True), dial: value})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"{dial}={value}: {first['msg']}") from None
    if dial == "max_model_len":
        try:
            arch = resolve_model(dep.model, setup.base_dir)
        except CapacityError:
            return turned  # the engine build reports the model
        if isinstance(value, int) and value > arch.context_tokens:
            raise ValueError(
                f"max_model_len={value}: exceeds the model's context of {arch.context_tokens} tokens "
                f"({arch.context_words})"
            )
    return turned


T = TypeVar("T")

TRAFFIC_FILE_BYTES = 256 * 1024 * 1024
"""The largest ``--trace`` or ``--lengths-csv`` file read (a trace of millions of requests fits)."""


def _traffic_file(flag: str, name: str, what: str, parse: Callable[[str], T]) -> T:
    """The file ``name`` that ``flag`` gives, read (:func:`advisor.files.read_text_capped`) and parsed by ``parse``
    (whose errors begin with ``what``, the parser's name for the file).

    Raises:
        TrafficError: the file is unreadable (missing, a directory, a FIFO, socket or device, too large), not UTF-8
            text, or a line ``parse`` refuses; the message names the flag and the file (``--trace t.csv: line 4:
            …``).
    """
    from advisor.files import read_text_capped
    from advisor.sim.traffic import TrafficError

    where = f"simulate: {flag} {name if name.isprintable() and name.strip() == name else repr(name)}"
    try:
        text = read_text_capped(Path(name), TRAFFIC_FILE_BYTES)
    except OSError as exc:
        raise TrafficError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise TrafficError(f"{where}: not UTF-8 text (byte 0x{_text_byte(exc):02x} at offset {exc.start})") from None
    try:
        return parse(text)
    except TrafficError as exc:
        message = str(exc)
        for prefix in (f"{what}: ", f"{what} "):
            message = message.removeprefix(prefix)
        raise TrafficError(f"{where}: {message}") from None


def _text_byte(exc: UnicodeDecodeError) -> int:
    """The first byte ``exc`` could not decode."""
    return exc.object[exc.start] if exc.start < len(exc.object) else 0


def _traffic(args: argparse.Namespace, rate: float) -> Any:
    from advisor.sim.traffic import (
        DailyCurve,
        GammaGaps,
        LognormalLengths,
        OnOff,
        Poisson,
        TrafficProfile,
        parse_lengths_csv,
        parse_trace_csv,
    )

    if args.trace:
        trace = _traffic_file("--trace", args.trace, "trace", parse_trace_csv)
        profile = TrafficProfile(trace=trace)
        return profile.with_rate(args.arrival_rate) if args.arrival_rate else profile
    lengths: Any
    if args.lengths_csv:
        lengths = _traffic_file("--lengths-csv", args.lengths_csv, "lengths", parse_lengths_csv)
    else:
        prompt = args.prompt_tokens if args.prompt_tokens is not None else DEFAULT_PROMPT_TOKENS
        output = args.output_tokens if args.output_tokens is not None else DEFAULT_OUTPUT_TOKENS
        lengths = LognormalLengths(
            prompt, _or(args.prompt_cv, DEFAULT_PROMPT_CV), output, _or(args.output_cv, DEFAULT_OUTPUT_CV)
        )
    process: Any
    if args.arrivals == "gamma":
        process = GammaGaps(rate, _or(args.burstiness, DEFAULT_BURSTINESS))
    elif args.arrivals == "onoff":
        on, off = args.on_off or DEFAULT_ON_OFF
        process = OnOff(rate_on=rate * (on + off) / on, rate_off=0.0, on_seconds=on, off_seconds=off)
    elif args.arrivals == "daily":
        process = DailyCurve(
            rate, _or(args.daily_amplitude, DEFAULT_DAILY_AMPLITUDE), _or(args.daily_period, DEFAULT_DAILY_PERIOD)
        )
    else:
        process = Poisson(rate)
    return TrafficProfile(process, lengths)


def _engine(setup: _Setup, args: argparse.Namespace, dial: str | None = None, value: object = None) -> Any:
    from advisor.capacity.deployment import resolve_deployment
    from advisor.config import deployment_spec
    from advisor.errors import CapacityError
    from advisor.sim.engine import PrefixCaching, Speculative, engine_config

    dep = setup.deployment if dial is None else _turned(setup, dial, value)
    resolved = resolve_deployment(deployment_spec(dep, setup.base_dir))  # the GPU as the daemon identifies it
    spec = resolved.gpu.part
    if spec is None:
        raise CapacityError(
            f"deployment {setup.name!r}: simulate needs the GPU's bandwidth and FLOP/s: give gpu: (a catalog name); "
            f"{resolved.gpu.name} names no one catalog part"
        )
    speculative = None
    if args.spec_tokens or dep.speculative_decoding:
        speculative = Speculative(
            num_speculative_tokens=args.spec_tokens or 3,
            acceptance_rate=args.spec_acceptance,
            draft_cost_ratio=args.spec_draft_cost,
            disable_by_batch_size=args.spec_disable_by_batch_size,
        )
    prefix = PrefixCaching(args.prefix_hit_rate) if args.prefix_hit_rate is not None else None
    return engine_config(
        resolved.inputs,
        spec,
        model_name=dep.served_model or dep.model,
        prefix_caching=prefix,
        speculative=speculative,
        latency=_latency(setup),
    )


def _latency(setup: _Setup) -> Any:
    """The setup's latency model: the calibrated one read from history, else the published prior of the engine the
    deployment names (:func:`advisor.capacity.perf.assumptions_for`, what the daemon's calibration starts from)."""
    from advisor.capacity.calibration import LatencyModel

    return setup.latency if setup.latency is not None else LatencyModel.prior(setup.deployment.engine)


def _latency_json(setup: _Setup) -> dict[str, Any]:
    """``latency_model`` of ``--json``: which step model ran (``prior`` or ``calibrated``), its factors (ratios to
    the prior; 1 for the prior), the efficiencies they amount to, and where it came from."""
    from advisor.capacity.deployment import resolve_gpu
    from advisor.config import deployment_spec

    model = _latency(setup)
    out: dict[str, Any] = {
        "label": model.label,
        "engine": model.engine,
        "decode_efficiency_ratio": round(model.decode.ratio, 4),
        "prefill_efficiency_ratio": round(model.prefill.ratio, 4),
        "windows": max(model.decode.updates, model.prefill.updates),
        "source": setup.calibration,
    }
    spec = deployment_spec(setup.deployment, setup.base_dir)
    part = resolve_gpu(spec.gpu, spec.gpu_memory_bytes).part
    if part is not None:
        a = model.effective_assumptions(part)
        out["memory_bandwidth_efficiency"] = round(a.memory_bandwidth_efficiency, 4)
        out["compute_efficiency"] = round(a.compute_efficiency, 4)
    return out


def _latency_line(setup: _Setup) -> str:
    j = _latency_json(setup)
    eff = (
        f"; bandwidth {j['memory_bandwidth_efficiency']:.0%}, compute {j['compute_efficiency']:.0%} of peak"
        if "memory_bandwidth_efficiency" in j
        else ""
    )
    return (
        f"latency model: {j['label']} ({j['source']}): decode ×{j['decode_efficiency_ratio']:.3g}, "
        f"prefill ×{j['prefill_efficiency_ratio']:.3g} of the {j['engine']} prior{eff}"
    )


class _Progress:
    """A progress bar on ``stream``, drawn only once a run has taken a second and only on a terminal (or when
    ``force``)."""

    def __init__(
        self, label: str, stream: TextIO, force: bool | None = None, clock: Callable[[], float] = time.monotonic
    ):
        self.label = label
        self.stream = stream
        self.enabled = stream.isatty() if force is None else force
        self.clock = clock
        self.start = clock()
        self.drawn = False

    def __call__(self, fraction: float) -> None:
        if not self.enabled or self.clock() - self.start < 1.0:
            return
        width = 30
        filled = round(width * fraction)
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {fraction:4.0%}")
        self.stream.flush()
        self.drawn = True

    def done(self) -> None:
        if self.drawn:
            self.stream.write("\r" + " " * (len(self.label) + 40) + "\r")
            self.stream.flush()


def _run(
    setup: _Setup,
    args: argparse.Namespace,
    label: str,
    config: Any,
    replicas: int | None = None,
    observers: Callable[[int], Any] | None = None,
) -> Any:
    from advisor.sim.fleet import simulate

    progress = _Progress(label, sys.stderr)
    try:
        return simulate(
            config,
            setup.profile,
            duration=args.duration,
            slo_ttft_seconds=setup.slo.ttft_seconds,
            slo_tpot_seconds=setup.slo.tpot_seconds,
            replicas=setup.replicas if replicas is None else replicas,
            router=args.router,
            seed=args.seed,
            warmup=args.warmup or 0.0,
            progress=progress,
            observers=observers,
        )
    finally:
        progress.done()


def _replicas(setup: _Setup, dial: str | None, value: object) -> int:
    return int(str(value)) if dial == "replicas" else setup.replicas


def _ms(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{v * 1000:.1f} ms" if v < 1 else f"{v:.2f} s"


def _pct(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{v:.1%}"


def _rows(s: Any, tp: int, target: float) -> list[tuple[str, str]]:
    gpus = s.replicas * tp
    return [
        ("replicas × TP", f"{s.replicas} × {tp} ({gpus} GPU{'s' if gpus > 1 else ''})"),
        ("KV pool per replica", f"{s.kv_cache_blocks:,} blocks, {s.kv_cache_tokens:,} tokens"),
        ("max_num_seqs", f"{s.max_num_seqs}"),
        ("requests", f"{s.requests_measured:,} measured, {s.requests_finished:,} finished, "
         f"{s.requests_unfinished:,} unfinished, {s.requests_rejected:,} rejected (prompt ≥ max_model_len)"),
        ("TTFT p50 / p90 / p99", f"{_ms(s.ttft.p50)} / {_ms(s.ttft.p90)} / {_ms(s.ttft.p99)}"),
        ("TPOT p50 / p90 / p99", f"{_ms(s.tpot.p50)} / {_ms(s.tpot.p90)} / {_ms(s.tpot.p99)}"),
        ("max ITL p50 / p99", f"{_ms(s.itl_max.p50)} / {_ms(s.itl_max.p99)}"),
        ("e2e p50 / p99", f"{_ms(s.e2e.p50)} / {_ms(s.e2e.p99)}"),
        ("queue time p50 / p99", f"{_ms(s.queue_time.p50)} / {_ms(s.queue_time.p99)}"),
        ("goodput", _verdict(s, target)),
        ("goodput tokens/s", f"{s.goodput_tokens_per_second:,.0f}"),
        ("output tokens/s", f"{s.output_tokens_per_second:,.0f} ({s.output_tokens_per_second / gpus:,.0f} per GPU)"),
        ("prefill tokens/s", f"{s.prompt_tokens_per_second:,.0f} computed (cache hits excluded)"),
        ("KV usage mean / peak", f"{_pct(s.kv_usage_mean)} / {_pct(s.kv_usage_peak)}"),
        ("running per replica", f"{s.mean_running:.1f} mean"),
        ("preemptions", f"{s.preemptions:,} ({s.preemptions_per_second:.2f}/s)"),
    ]  # fmt: skip


def _verdict(s: Any, target: float) -> str:
    """The goodput row: the share meeting the SLO and met/MISSED, or no verdict when no request completed (a ratio
    of nothing is unknown, not a miss)."""
    if s.requests_finished == 0 or not math.isfinite(s.goodput_ratio):
        return "no request completed in the simulated time; no verdict"
    return (
        f"{_pct(s.goodput_ratio)} of requests meet TTFT ≤ {s.slo_ttft_seconds:g} s and TPOT ≤ {s.slo_tpot_seconds:g} s "
        f"(target {target:.0%}: {'met' if s.goodput_ratio >= target else 'MISSED'})"
    )


def _tp(setup: _Setup, dial: str | None, value: object) -> int:
    return int(str(value)) if dial == "tensor_parallel_size" else int(setup.deployment.tensor_parallel_size)


def _frontier(points: list[tuple[float, float]]) -> list[bool]:
    """Pareto frontier of (GPUs ↓, goodput tokens/s ↑): a row is on it when no other has as many goodput
    tokens/s with no more GPUs and is better in one."""
    out = []
    for i, (g, v) in enumerate(points):
        dominated = any((g2 <= g and v2 >= v) and (g2 < g or v2 > v) for j, (g2, v2) in enumerate(points) if j != i)
        out.append(not dominated)
    return out


def _plot(path: str, dial: str, values: list[object], summaries: list[Any]) -> None:
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    plt: Any = importlib.import_module("matplotlib.pyplot")

    labels = [str(v) for v in values]
    fig, ax1 = plt.subplots(figsize=(8, 4.5))
    ax1.plot(labels, [s.goodput_tokens_per_second for s in summaries], marker="o", label="goodput tokens/s")
    ax1.plot(labels, [s.output_tokens_per_second for s in summaries], marker="s", label="output tokens/s")
    ax1.set_xlabel(dial)
    ax1.set_ylabel("tokens/s")
    ax2 = ax1.twinx()
    ax2.plot(labels, [s.ttft.p99 for s in summaries], color="tab:red", marker="^", label="TTFT p99 (s)")
    ax2.set_ylabel("TTFT p99, s")
    fig.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def cmd_simulate(args: argparse.Namespace) -> int:
    """Run ``simulate``; see the module docstring. Returns the exit code."""
    outcome = _simulate(args)
    if isinstance(outcome, int):
        return outcome
    return _emit(outcome)


def _emit(write: Callable[[], None]) -> int:
    """Print the report; a reader that went away (``| head -1``) is not an error: as the Python documentation
    advises (library/signal.html, note on SIGPIPE), point stdout at devnull so that the interpreter's last flush
    does not fail again, and exit 0 quietly like the other commands."""
    try:
        write()
        sys.stdout.flush()
    except BrokenPipeError:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # stdout without a file descriptor (captured): nothing left to flush there
            pass
    return 0


def _simulate(args: argparse.Namespace) -> int | Callable[[], None]:
    """Validate, run; an exit code (2 after a one-line error), or the function that prints the result."""
    from advisor.config import load_config
    from advisor.errors import CapacityError, ConfigError
    from advisor.sim.traffic import TrafficError

    if args.sweep is not None and args.apply is not None:
        _err("simulate: give --sweep or --apply, not both")
        return 2
    if args.plot and args.sweep is None:
        _err("simulate: --plot needs --sweep")
        return 2
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        _err("simulate: --plot needs matplotlib, which is not installed (pip install matplotlib); run without --plot")
        return 2
    refused = _refused_flags(args)
    if refused:
        _err(f"simulate: {refused}")
        return 2
    flag = "--sweep" if args.sweep is not None else "--apply"
    try:
        sweep = _parse_dial(args.sweep, many=True) if args.sweep is not None else None
        apply = _parse_dial(args.apply, many=False) if args.apply is not None else None
    except ValueError as exc:
        _err(f"simulate: {flag}: {exc}")
        return 2
    try:
        cfg = load_config(args.config)
        deps = {d.name: d for d in cfg.deployments}
        name = args.deployment or cfg.deployments[0].name
        if name not in deps:
            _err(f"simulate: no deployment {name!r} in {args.config}; deployments: {', '.join(deps)}")
            return 2
        dep = deps[name]
        if args.prometheus is not None:
            return _from_history(args, cfg, dep)
        replicas = args.replicas or max(1, len(dep.targets))
        rate = args.arrival_rate or float(replicas)
        setup = _Setup(
            name,
            dep,
            Path(args.config).parent.resolve(),
            replicas,
            _traffic(args, rate),
            dep.slo,
            calibration="the published calibration; no live data (--prometheus URL reads it)",
        )
        if args.warmup is not None and args.warmup >= args.duration:
            _err("simulate: --warmup must be shorter than --duration")
            return 2
        try:
            # every configuration is built (and refused) before anything runs
            if sweep is not None:
                configs = [_engine(setup, args, sweep[0], v) for v in sweep[1]]
            elif apply is not None:
                configs = [_engine(setup, args), _engine(setup, args, apply[0], apply[1][0])]
            else:
                configs = [_engine(setup, args)]
        except ValueError as exc:
            _err(f"simulate: {flag}: {exc}")
            return 2
        if sweep is not None:
            return _sweep(setup, args, *sweep, configs)
        if apply is not None:
            return _apply(setup, args, apply[0], apply[1][0], configs)
        summary = _run(setup, args, f"simulate {name}", configs[0])
        gpu = _gpu(setup)
    except (ConfigError, CapacityError, TrafficError) as exc:
        _err(str(exc))
        return 2
    except OSError as exc:
        _err(f"simulate: {exc.strerror or exc}: {getattr(exc, 'filename', '') or ''}")
        return 2

    def write() -> None:
        if args.json:
            out = {
                "deployment": name,
                "seed": args.seed,
                **gpu,
                "latency_model": _latency_json(setup),
                "summary": summary.as_dict(),
            }
            print(json.dumps(out, indent=2))
            return
        _header(setup, args)
        _table(_rows(summary, _tp(setup, None, None), dep.slo.target_ratio))

    return write


_HISTORY_ONLY = ("window", "to", "step", "latency_model")
"""Flags that read live data: refused without ``--prometheus``."""
_NOT_WITH_HISTORY = (
    "arrival_rate", "prompt_tokens", "output_tokens", "trace", "lengths_csv", "replicas", "sweep", "apply", "plot",
)  # fmt: skip
"""Flags refused with ``--prometheus``: the run's traffic and replicas are the window's, so that its latencies
compare with the engines' (what-if dials belong to a run without history)."""


_PROCESS_FLAGS = {"burstiness": "gamma", "on_off": "onoff", "daily_period": "daily", "daily_amplitude": "daily"}
"""The flags each arrival process alone reads (``--arrivals``)."""

_NOT_WITH_TRACE = ("arrivals", "lengths_csv", "prompt_tokens", "output_tokens", "prompt_cv", "output_cv")
"""Flags a ``--trace`` replay does not read: its arrivals and lengths are the trace's (``--arrival-rate`` rescales
it)."""

_NOT_WITH_LENGTHS_CSV = ("prompt_tokens", "output_tokens", "prompt_cv", "output_cv")
"""Flags ``--lengths-csv`` replaces: the lengths are drawn from its rows."""


def _or(value: Any, default: Any) -> Any:
    """``value``, or ``default`` when the flag was not given (None)."""
    return default if value is None else value


def _refused_flags(args: argparse.Namespace) -> str | None:
    """The one-line reason a flag does not apply, or ``None``."""

    def flag(name: str) -> str:
        return "--" + name.replace("_", "-")

    for group, why in (
        (
            _NOT_WITH_TRACE if args.trace else (),
            "does not apply with --trace: the trace gives the arrivals and lengths",
        ),
        (
            _NOT_WITH_LENGTHS_CSV if args.lengths_csv and not args.trace else (),
            "does not apply with --lengths-csv: the lengths are drawn from its rows",
        ),
    ):
        given = [flag(n) for n in group if getattr(args, n) is not None]
        if given:
            return f"{', '.join(given)} {why}"
    if not args.trace:
        process = args.arrivals or "poisson"
        for name, wanted in _PROCESS_FLAGS.items():
            if getattr(args, name) is not None and process != wanted:
                return f"{flag(name)} applies to --arrivals {wanted} only (this run: {process})"

    if args.prometheus is None:
        given = [flag(n) for n in _HISTORY_ONLY if getattr(args, n) is not None]
        return f"{', '.join(given)} needs --prometheus URL (live data)" if given else None
    given = [flag(n) for n in _NOT_WITH_HISTORY if getattr(args, n) is not None]
    if given:
        return (
            f"{', '.join(given)} does not apply with --prometheus: the run takes the arrival rate, lengths and "
            "replicas the history observed (run without --prometheus for a what-if)"
        )
    return None


def _from_history(args: argparse.Namespace, cfg: Any, dep: Any) -> int | Callable[[], None]:
    """``--prometheus``: replay the window's history as ``backtest`` does (the daemon's tracker, its online
    calibration included), run the simulator at the observed traffic with the calibrated latency model, and compare
    its TPOT/TTFT with the engines' histograms over the window (:mod:`advisor.sim.latency_error`)."""
    from advisor.backtest import replay_history
    from advisor.capacity.calibration import LatencyModel
    from advisor.config import PrometheusConfig
    from advisor.domain import rfc3339
    from advisor.redact import redact_url
    from advisor.service import prometheus_source
    from advisor.sim.fleet import RequestLog
    from advisor.sim.latency_error import LatencyError, observed_window

    window = args.window if args.window is not None else DEFAULT_WINDOW
    now = time.time()
    if args.to is not None and args.to > now + 1.0:  # 1 s: a --to of "now" typed as unix seconds
        _err(
            f"simulate: --to {rfc3339(args.to)} is in the future (now {rfc3339(now)}): the history ends now; omit --to "
            "for a window ending now"
        )
        return 2
    if args.step is not None and args.step > window:
        _err(f"simulate: --step {args.step:g}s is longer than --window {window:g}s: no evaluation falls inside it")
        return 2
    end = args.to if args.to is not None else now
    start = end - window
    if window < cfg.evaluation_window:
        _err(
            f"simulate: --window {window:g}s is shorter than the evaluation window ({cfg.evaluation_window:g}s): "
            "the calibration needs at least one"
        )
        return 2
    prom = cfg.prometheus.model_copy(update={"url": args.prometheus}) if cfg.prometheus else None
    cfg = cfg.model_copy(update={"prometheus": prom or PrometheusConfig(url=args.prometheus)})
    base_dir = Path(args.config).parent.resolve()
    with prometheus_source(cfg, base_dir) as prometheus:
        rp = replay_history(
            cfg, prometheus, start, end, step=args.step, base_dir=base_dir, deployments=[dep.name], keep_points=True
        )
    replay = rp.report().deployment(dep.name)
    if replay is not None and replay.errors:
        for e in replay.errors[:5]:
            _err(f"simulate: {dep.name}: {e}")
        return 1
    engine = rp.tracker.context(dep.name).engine
    try:
        observed = observed_window(rp.points(dep.name), start, end)
    except ValueError as exc:
        _err(f"simulate: {dep.name}: {exc}")
        return 1
    fit = rp.tracker.calibration.fit(dep.name)
    model = LatencyModel.prior(engine)
    if args.latency_model == "prior":
        calibration = "the published calibration alone (--latency-model prior)"
    elif fit is None or not fit.model.calibrated:
        calibration = "the published calibration: no evaluation window of the history calibrated it"
    else:
        model = fit.model
        calibration = f"online calibration over {fit.windows} evaluation window(s) of the history"
    lengths = argparse.Namespace(**{**vars(args), "prompt_tokens": observed.prompt_tokens})
    lengths.output_tokens = observed.output_tokens
    setup = _Setup(
        dep.name,
        dep,
        base_dir,
        observed.replicas,
        _traffic(lengths, observed.requests_per_second),
        dep.slo,
        latency=model,
        calibration=calibration,
    )
    warmup = args.warmup if args.warmup is not None else args.duration / 5
    if warmup >= args.duration:
        _err("simulate: --warmup must be shorter than --duration")
        return 2
    run_args = argparse.Namespace(**{**vars(args), "warmup": warmup})
    logs: list[Any] = []

    def observers(i: int) -> list[Any]:
        logs.append(RequestLog())
        return [logs[-1]]

    summary = _run(setup, run_args, f"simulate {dep.name}", _engine(setup, args), observers=observers)
    measured = [r for log in logs for r in log.finished if warmup <= r.arrival < args.duration]
    kind = "inter-token latency" if observed.tpot_is_itl else "per-request TPOT"
    source = f"{engine} engines' own histograms ({kind}, TTFT) in Prometheus {redact_url(args.prometheus)}"
    error = LatencyError.of(measured, observed, source)
    gpu = _gpu(setup)

    def write() -> None:
        if args.json:
            out = {
                "deployment": dep.name,
                "seed": args.seed,
                **gpu,
                "latency_model": _latency_json(setup),
                "latency_error": error.as_dict(),
                "summary": summary.as_dict(),
            }
            print(json.dumps(out, indent=2))
            return
        _header(setup, run_args)
        _table(_rows(summary, _tp(setup, None, None), dep.slo.target_ratio))
        for line in _error_lines(error):
            print(line)

    return write


def _error_lines(error: Any) -> list[str]:
    """The latency error as text: the window, then one line per quantity."""
    w = error.window
    lines = [
        f"latency error against the engines' histograms, {w.start:.0f} → {w.end:.0f} ({w.end - w.start:g} s; "
        f"{w.requests_per_second:.3g} req/s, prompt {w.prompt_tokens:,.0f}, output {w.output_tokens:,.0f} tokens, "
        f"{w.replicas} replica(s)); predicted ÷ observed − 1:"
    ]
    for name, c in (("TPOT", error.tpot), ("TTFT", error.ttft)):
        if c is None:
            lines.append(f"  {name}: not measurable (no histogram or no request in the window)")
            continue
        qs = ", ".join(f"{k} {_signed(v['ratio'])}" for k, v in c.quantiles.items())
        lines.append(
            f"  {name}: mean {_signed(c.mean_ratio)} ({_ms(c.predicted_mean)} predicted, {_ms(c.observed_mean)} "
            f"observed over {c.observed_count:,.0f}){'; ' + qs if qs else ''}"
        )
    lines.append(f"  truth: {error.source}")
    return lines


def _signed(v: float | None) -> str:
    return "-" if v is None else f"{v:+.1%}"


def _gpu(setup: _Setup) -> dict[str, Any]:
    """The GPU the run simulated, as the one resolver identifies it (the daemon, the API and ``plan`` name the
    same part): ``{"gpu": catalog name or label, "nvlink_sharp": bool, or None when the part is unknown}``.

    Raises:
        CapacityError: the GPU cannot be identified.
    """
    from advisor.capacity.deployment import resolve_gpu
    from advisor.config import deployment_spec

    spec = deployment_spec(setup.deployment, setup.base_dir)
    gpu = resolve_gpu(spec.gpu, spec.gpu_memory_bytes)
    return {"gpu": gpu.name, "nvlink_sharp": gpu.nvlink_sharp}


def _header(setup: _Setup, args: argparse.Namespace) -> None:
    d = setup.deployment
    print(
        f"deployment {setup.name}: {d.model} on {d.gpu}, util {d.gpu_memory_utilization}, max_model_len "
        f"{d.max_model_len}, kv_cache_dtype {d.kv_cache_dtype}"
    )
    print(
        f"traffic: {setup.profile.mean_rate:.3g} req/s "
        f"({(args.arrivals or 'poisson') if not args.trace else 'trace'}), "
        f"{args.duration:g} s simulated, seed {args.seed}"
    )
    print(_latency_line(setup))


def _table(rows: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}")


def _sweep(
    setup: _Setup, args: argparse.Namespace, dial: str, values: list[object], configs: list[Any]
) -> Callable[[], None]:
    summaries = []
    for i, (v, config) in enumerate(zip(values, configs, strict=True)):
        label = f"{dial}={v} ({i + 1}/{len(values)})"
        summaries.append(_run(setup, args, label, config, _replicas(setup, dial, v)))
    gpus = [s.replicas * _tp(setup, dial, v) for s, v in zip(summaries, values, strict=True)]
    frontier = _frontier([(float(g), s.goodput_tokens_per_second) for g, s in zip(gpus, summaries, strict=True)])
    if args.plot:
        _plot(args.plot, dial, values, summaries)

    def write() -> None:
        if args.json:
            rows = [
                {"value": v, "gpus": g, "frontier": f, "summary": s.as_dict()}
                for v, g, f, s in zip(values, gpus, frontier, summaries, strict=True)
            ]
            out = {"deployment": setup.name, "dial": dial, "seed": args.seed, "latency_model": _latency_json(setup)}
            print(json.dumps({**out, "rows": rows}, indent=2))
            return
        _header(setup, args)
        head = (
            f"{'':1} {dial:>22} {'GPUs':>4} {'KV blocks':>10} {'TTFT p50':>10} {'TTFT p99':>10} {'TPOT p50':>9} "
            f"{'TPOT p99':>9} {'goodput':>8} {'good tok/s':>10} {'tok/s':>8} {'KV mean':>7} {'preempt/s':>9}"
        )
        print(head)
        for v, g, f, s in zip(values, gpus, frontier, summaries, strict=True):
            print(
                f"{'*' if f else ' ':1} {v!s:>22} {g:>4} {s.kv_cache_blocks:>10,} {_ms(s.ttft.p50):>10} "
                f"{_ms(s.ttft.p99):>10} {_ms(s.tpot.p50):>9} {_ms(s.tpot.p99):>9} {_pct(s.goodput_ratio):>8} "
                f"{s.goodput_tokens_per_second:>10,.0f} {s.output_tokens_per_second:>8,.0f} "
                f"{_pct(s.kv_usage_mean):>7} {s.preemptions_per_second:>9.2f}"
            )
        print("* on the frontier: no other row has as many goodput tokens/s with no more GPUs")
        if args.plot:
            print(f"plot written to {args.plot}")

    return write


def _current(setup: _Setup, dial: str) -> tuple[object, bool]:
    """The dial's value in the deployment as configured, and whether it is the engine's default (a dial the config
    leaves unset, e.g. ``max_num_seqs``: the number the engine would pick, never None)."""
    from advisor.config import capacity_inputs

    if dial == "replicas":
        return setup.replicas, False
    value = getattr(setup.deployment, dial)
    if value is None:
        return getattr(capacity_inputs(setup.deployment, setup.base_dir), dial), True
    return value, False


def _apply(setup: _Setup, args: argparse.Namespace, dial: str, value: object, configs: list[Any]) -> Callable[[], None]:
    current, default = _current(setup, dial)
    shown = f"{current} (default)" if default else f"{current}"
    before = _run(setup, args, f"{dial}={current} (1/2)", configs[0])
    after = _run(setup, args, f"{dial}={value} (2/2)", configs[1], _replicas(setup, dial, value))
    target = setup.deployment.slo.target_ratio

    def write() -> None:
        if args.json:
            out = {
                "deployment": setup.name,
                "dial": dial,
                "current": current,
                "current_is_default": default,
                "applied": value,
                "seed": args.seed,
                "latency_model": _latency_json(setup),
                "before": before.as_dict(),
                "after": after.as_dict(),
            }
            print(json.dumps(out, indent=2))
            return
        _header(setup, args)
        left = _rows(before, _tp(setup, None, None), target)
        right = _rows(after, _tp(setup, dial, value), target)
        width = max(len(k) for k, _ in left)
        col = max(len(v) for _, v in left)
        print(f"{'':{width}}  {f'{dial} = {shown} (now)':<{col}}  {dial} = {value}")
        for (k, a), (_, b) in zip(left, right, strict=True):
            print(f"{k.ljust(width)}  {a:<{col}}  {b}")
        print(
            f"simulated effect of {dial} {shown} → {value}: goodput {_pct(before.goodput_ratio)} → "
            f"{_pct(after.goodput_ratio)}, goodput tokens/s {before.goodput_tokens_per_second:,.0f} → "
            f"{after.goodput_tokens_per_second:,.0f}, TTFT p99 {_ms(before.ttft.p99)} → {_ms(after.ttft.p99)}"
        )

    return write
