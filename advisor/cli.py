"""The ``capacity-advisor`` command.

Sub-commands::

    run           the daemon against the engines in a config file
    demo          the daemon against a built-in simulated fleet of four deployments (no engine, no GPU, no network)
    once          scrape each target twice, evaluate once (ignoring for-durations), print, exit
    inspect       scrape one URL twice: detected engine, version hints, snapshot, what is missing
    simulate      run a traffic profile against a deployment in the engine simulator
    plan          the capacity pass for one configuration
    rules         generate Prometheus recording and alerting rules from a config
    backtest      replay the rules over a Prometheus history: what would have been advised, and when
    check-config  validate a config file, reporting every invalid field
    catalog       list the model presets and GPUs

Exit codes: 0 success; 1 runtime failure; 2 invalid input (config, flags, unknown model or GPU).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import math
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from advisor import __version__
from advisor.argtypes import bounded_int, duration_arg, interval_arg, nonblank_arg, positive_float, shard_arg
from advisor.errors import FILE_PROBLEM, AdvisorError, CapacityError, ConfigError

# ``--help`` imports neither typing nor logging (a few ms each at start): names for annotations only, and logging
# where a command logs (tests/test_lazy_cli.py)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, Final


def _setup_logging(level: str, fmt: str = "text", compact: bool = False) -> None:
    """One handler on the root logger, in ``--log-format`` (``compact``: text lines under 160 characters), that
    every logger reaches — apscheduler's, urllib3's, the HTTP servers' (:mod:`advisor.hangups`) — and Python's
    warnings (``logging.captureWarnings``) and uncaught exceptions of threads (``threading.excepthook``, unless a
    harness has its own) too, so that each line on stderr has the one format. The handler writes to the
    ``sys.stderr`` of each record (:class:`advisor.logfmt.StderrHandler`)."""
    import logging
    import threading

    from advisor.logfmt import JSONFormatter, StderrHandler, TextFormatter

    handler = StderrHandler()
    handler.setFormatter(JSONFormatter() if fmt == "json" else TextFormatter(compact=compact))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    logging.captureWarnings(True)
    if threading.excepthook is threading.__excepthook__:  # not a test harness's own hook (pytest's)
        threading.excepthook = _log_thread_exception


def _log_thread_exception(args: Any) -> None:
    """``threading.excepthook``: an exception nothing caught on a thread, logged (logger ``advisor``) with its
    traceback instead of printed raw (https://docs.python.org/3/library/threading.html#threading.excepthook)."""
    import logging

    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    logging.getLogger("advisor").error(
        "uncaught exception on thread %s", name, exc_info=(args.exc_type, args.exc_value, args.exc_traceback)
    )


def _err(msg: str) -> None:
    print(f"capacity-advisor: {msg}", file=sys.stderr)


# -- check-config --------------------------------------------------------------------------------
def cmd_check_config(args: argparse.Namespace) -> int:
    """Validate a config; print every problem with its path (exit 2), or a one-line summary, each deployment's
    capacity, and every warning ``rules generate`` would print for the file (exit 0)."""
    from advisor.config import load_config, replica_history_warnings, runtime_path_warnings, shared_targets
    from advisor.files import is_stream, read_stream_capped
    from advisor.service import prometheus_source

    try:
        base = Path(args.file).resolve().parent
    except (OSError, RuntimeError):  # a symlink loop (RuntimeError before Python 3.13): said as load_config says it
        base = Path(args.file).absolute().parent
    text = None
    if is_stream(args.file):  # `-` or `<(kubectl get cm …)`: read to its end; relative paths from here
        stdin = args.file in ("-", "/dev/stdin")
        base, name = Path.cwd(), "<stdin>" if stdin else args.file
        try:
            if stdin:
                text = read_stream_capped(sys.stdin.buffer)
            else:
                with open(args.file, "rb") as stream:
                    text = read_stream_capped(stream)
        except (OSError, UnicodeDecodeError) as exc:
            why = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else exc.strerror or str(exc)
            print(str(ConfigError([(FILE_PROBLEM, f"cannot read: {why}")], name)), file=sys.stderr)
            return 2
        args.file = name
    try:
        cfg = load_config(args.file, text=text, base_dir=base)
        if cfg.prometheus is not None:  # its secret and CA files, as the daemon will read them at start
            prometheus_source(cfg, base, source=args.file).close()
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    targets = sum(len(d.targets) for d in cfg.deployments)
    print(
        f"{args.file}: valid — {len(cfg.deployments)} deployment(s), {targets} target(s), "
        f"{len(cfg.receivers)} receiver(s), scrape every {cfg.scrape_interval:g}s, "
        f"window {cfg.evaluation_window:g}s"
    )
    try:
        sized = _capacity_lines(cfg, base)
    except CapacityError as exc:  # load_config sized each deployment: only a model file changed since
        print(f"{args.file}: {exc}", file=sys.stderr)
        return 2
    for line in _gpu_notes(cfg) + sized:
        print(line)
    from advisor.rulescmd import config_warnings, print_warnings

    print_warnings(shared_targets(cfg))
    print_warnings(_file_sd_duplicates(cfg, base))
    print_warnings(replica_history_warnings(cfg))
    print_warnings(runtime_path_warnings(cfg, base))
    print_warnings(config_warnings(cfg, args.file))  # what `rules generate` would warn about; still valid: exit 0
    return 0


def _file_sd_duplicates(cfg: Any, base: Path) -> list[str]:
    """The ``file_sd`` targets that are a page already listed, written another way (:func:`advisor.assembly.
    resolve_targets`: the daemon lists each once and logs it; breaker 17: check-config said nothing). The files were
    read by ``load_config`` already; one unreadable since is left to the daemon's own warning."""
    from advisor.assembly import resolve_targets

    found: list[str] = []
    for dep in cfg.deployments:
        if dep.file_sd:
            with contextlib.suppress(ConfigError):
                resolve_targets(dep, base, found)
    return found


_BUDGET_FLAGS = {"vllm": "gpu-memory-utilization", "sglang": "mem-fraction-static", "tgi": "cuda-memory-fraction"}
"""The engine flag whose fraction of GPU memory the capacity pass budgets (``CapacityInputs.gpu_memory_utilization``
holds SGLang's and TGI's fractions too: :mod:`advisor.capacity.deployment`)."""


def _capacity_lines(cfg: Any, base_dir: Path) -> list[str]:
    """One line per deployment: the capacity pass the daemon will hold its engine to, from the daemon's own context
    builder (:func:`advisor.assembly.deployment_context`, the one resolver): weights and KV pool per GPU, KV tokens
    per target, max concurrency at max-model-len (and a llama.cpp slot's cap on a request), and what sized them —
    the engine's accounting (and the operator's pool settings, by key and value), the GPU, TP, the memory budget
    and vLLM's max-num-seqs ("by default" when not set: vLLM's default depends on the GPU). Example
    (Llama-3.1-8B on one H100-SXM, max_num_seqs 256)::

        chat-8b: weights 14.99 GiB and KV pool 54.92 GiB per GPU; 449,920 KV tokens per target; max concurrency
        54.92 at max-model-len 8,192 (vllm's accounting; NVIDIA H100 SXM, 79.15 GiB, TP 1; gpu-memory-utilization
        0.9, max-num-seqs 256)

    Raises:
        CapacityError: a deployment cannot be sized (``load_config`` has already sized each one, so only when a
            model file changed in between).
    """
    from advisor.assembly import deployment_context
    from advisor.capacity.engines import memory_overcommit
    from advisor.capacity.hardware import GIB
    from advisor.config import ENGINE_KEYS

    lines = []
    for d in cfg.deployments:
        given = [k for k in ENGINE_KEYS if getattr(d, k) != type(d).model_fields[k].default]
        if d.gpu_memory_used_by_others_gib:
            given.append("gpu_memory_used_by_others_gib")
        ctx = deployment_context(d, base_dir)
        inputs, r = ctx.inputs, ctx.capacity
        how = f"{inputs.engine}'s accounting"
        how += f" with {', '.join(f'{k} {_setting(getattr(d, k))}' for k in given)}" if given else ""
        how += " until the engine is detected" if d.engine == "auto" else ""
        gpu = f"{ctx.gpu.name}, " if ctx.gpu is not None else ""
        settings = [f"{gpu}{inputs.gpu_memory_bytes / GIB:.2f} GiB, TP {r.tensor_parallel_size}"]
        dials = []
        if (
            inputs.engine in _BUDGET_FLAGS
            and inputs.kv_cache_memory_bytes is None
            and not inputs.num_gpu_blocks_override
        ):
            dials.append(f"{_BUDGET_FLAGS[inputs.engine]} {inputs.gpu_memory_utilization:g}")
        if inputs.engine == "vllm":
            default = " by default" if d.max_num_seqs is None else ""  # vLLM's default depends on the GPU
            dials.append(f"max-num-seqs {inputs.max_num_seqs}{default}")
        ranks = f" over {r.data_parallel_size} ranks" if r.data_parallel_size > 1 else ""
        cap = f", each request at most {r.max_request_tokens:,} tokens" if r.max_request_tokens is not None else ""
        lines.append(
            f"  {d.name}: weights {r.weights_bytes_per_gpu / GIB:.2f} GiB and KV pool "
            f"{r.kv_pool_bytes_per_gpu / GIB:.2f} GiB per GPU; {r.kv_cache_tokens:,} KV tokens per target{ranks}; "
            "max concurrency "
            f"{r.max_concurrency:.2f} at max-model-len {r.max_model_len:,}{cap} "
            f"({'; '.join([how, *settings, *([', '.join(dials)] if dials else [])])})"
        )
        if inputs.engine == "vllm" and r.max_concurrency < 1:
            lines.append(
                f"  {d.name}: warning: the KV pool ({r.kv_cache_tokens:,} tokens) cannot hold one request of "
                f"max-model-len {r.max_model_len:,}; vLLM refuses to start with this configuration"
            )
        over = memory_overcommit(r, inputs.gpu_memory_used_by_others_bytes) if inputs.engine == "llamacpp" else None
        if over is not None:  # llama.cpp's pool is --ctx-size cells, not what the memory leaves
            lines.append(f"  {d.name}: warning: {over}")
    return lines


def _setting(value: Any) -> str:
    """A deployment setting as the config writes it: ``8192``, ``True``, ``{max_tokens: 64000}`` (a section: the keys
    set)."""
    if hasattr(value, "model_dump"):
        return "{" + ", ".join(f"{k}: {v}" for k, v in value.model_dump(exclude_unset=True).items()) + "}"
    return str(value)


def _gpu_notes(cfg: Any) -> list[str]:
    """One note per deployment whose ``gpu:`` is an alias that stands for one of several parts (``H100`` is
    the SXM; the PCIe and NVL cards have other memory), so a wrong guess is visible before it skews the
    capacity pass."""
    from advisor.capacity.hardware import get_gpu, gpu_keys, is_alias

    notes = []
    for i, d in enumerate(cfg.deployments):
        if d.gpu is None or d.gpu_memory_gib is not None:
            continue
        spec = get_gpu(d.gpu)
        if not is_alias(d.gpu, spec):
            continue
        stem = d.gpu.strip().lower().replace("_", "-").split("-")[0]
        siblings = [k for k in gpu_keys() if k.startswith(stem) and k != spec.key]
        others = f"; others: {', '.join(siblings)} (set gpu: to one of them)" if siblings else ""
        notes.append(f"  note: deployments[{i}].gpu {d.gpu!r} is the {spec.name} ({spec.memory_gib:.2f} GiB){others}")
    return notes


# -- once ------------------------------------------------------------------------------------------
ONCE_SCRAPES = 2
"""Scrapes of each target ``once`` takes, ``--interval`` seconds apart: the fewest that give rates, and what its
evaluation expects (coverage = scrapes that answered ÷ 2 per target)."""


def _print_human(result_dicts: list[dict[str, Any]], notes: dict[str, str] | None = None) -> None:
    """``once``'s text: per deployment its state, and when the data is not fresh the state's reason once (the
    rules it kept from running folded into one line, not one "not evaluated" line each); a target down whose
    error the state's reason does not already say; ``notes`` (deployment name → one line, e.g.
    :func:`advisor.inspect.model_label_note`); the rules that ran and the recommendations. Every line goes through
    :func:`_say`: model labels, reasons and errors come from the engines' pages (breaker 11: a model label's ESC and
    BEL bytes reached the terminal raw)."""
    from advisor.conventions import STATE_FRESH
    from advisor.platforms import flag_text
    from advisor.rules.lifecycle import NOT_EVALUATED

    for d in result_dicts:
        s = d["snapshot"]
        why = s.get("state_reason") if d["state"] != STATE_FRESH else None
        _say(f"== {d['name']} ({d['engine']}) — {d['state']}" + (f": {why}" if why else ""))

        def fmt(v: Any, pct: bool = False) -> str:
            if v is None:
                return "unknown"
            if pct:
                return f"{v:.1%}"
            if isinstance(v, float) and not v.is_integer():
                return f"{v:,.4g}" if abs(v) < 1000 else f"{v:,.0f}"
            return f"{int(v):,}" if isinstance(v, (int, float)) else str(v)

        # what the engine has not said yet, the config and the capacity pass still know (a fresh user read "model
        # unknown … of unknown tokens" beside a target down as the config not understood, 2026-12-06)
        configured = ((d.get("capacity") or {}).get("inputs") or {}).get("model")
        model = s.get("model") or (f"unknown ({configured} configured)" if configured else "unknown")
        pool = fmt(s.get("kv_cache_capacity_tokens"))
        predicted = s.get("kv_cache_capacity_tokens_predicted")
        if s.get("kv_cache_capacity_tokens") is None and predicted is not None:
            pool = f"unknown (the capacity pass predicts {fmt(predicted)})"
        goodput = fmt(s.get("goodput_ratio"), True)
        at_most = (s.get("goodput_ratio_bounds") or [None, None])[1]
        if s.get("goodput_ratio") is None and at_most is not None:
            # one side's histogram unmeasured: only the bound is known (advisor.telemetry.goodput_ratio)
            goodput = f"unknown (at most {fmt(at_most, True)}: TTFT or TPOT not measured)"
        _say(
            f"   model {model}; KV usage {fmt(s.get('kv_cache_usage_ratio'), True)} of {pool} tokens; running "
            f"{fmt(s.get('requests_running'))}, waiting {fmt(s.get('requests_waiting'))}; goodput {goodput}"
        )
        note = (notes or {}).get(d["name"])
        if note:
            _say(f"   warning: {note}")
        for t in d["targets"]:
            if not t["up"] and not (why and t["error"] and t["error"] in why and len(d["targets"]) == 1):
                _say(f"   target {t['target']} DOWN: {t['error_reason']} — {t['error']}")
        skipped = [r for r in d["rules"] if r["state"] == "unknown" and r["reason"].startswith(NOT_EVALUATED)]
        for r in d["rules"]:
            if r not in skipped:
                _say(f"   rule {r['rule']}: {r['state']} — {r['reason']}")
        if skipped:
            _say(f"   {len(skipped)} rules not evaluated: the data is {d['state']}")
        recs = d["recommendations"]
        if not recs:
            _say("   no recommendation")
        for r in recs:
            _say(f"   [{r['severity']}] {r['summary']}")
            _say(f"      flag: {flag_text(r['flag'], r.get('evidence') or {})}")
            _say(f"      {r['description']}")
            # the other turns, ranked (a fresh user found the one that closes the gap only in --json, 2026-12-06)
            for a in r.get("alternatives") or []:
                flag = a.get("flag") or f"not offered: {a.get('flag_unavailable_reason')}"
                # a dial at no value (weights unquantized) reads "none", as on the status page, never Python's None
                now, then = ("none" if v is None else v for v in (a["current"], a["suggested"]))
                _say(f"      or [{a['rule']}] {a['dial']} {now} → {then} ({flag}): {a.get('why_rank', '')}")
            for w in r.get("withheld") or []:
                _say(f"      withheld [{w['rule']}] {w['dial']}: {str(w['reason']).removeprefix('withheld: ')}")


def cmd_once(args: argparse.Namespace) -> int:
    """Scrape each target twice, ``--interval`` seconds apart, evaluate once, print, exit."""
    from advisor.config import load_config
    from advisor.exporter import make_registry
    from advisor.service import Service

    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    cfg = cfg.model_copy(
        update={
            "scrape_interval": args.interval,
            "evaluation_window": args.interval * 2,
            "receivers": [],
            # once is a question, not the daemon: it neither reads nor writes the daemon's state or outbox
            "state_file": None,
            "outbox_dir": None,
            # two scrapes can only tell "frozen" over the time between them
            "data_quality": cfg.data_quality.model_copy(update={"frozen_after": args.interval}),
            # judge goodput from whatever finished between the scrapes; confidence reflects how few
            # two scrapes see one interval: a stall needing more is reported unknown, never guessed
            "rules": cfg.rules.model_copy(
                update={
                    "goodput": cfg.rules.goodput.model_copy(update={"min_requests": 1}),
                    "stalled": cfg.rules.stalled.model_copy(update={"observable_intervals": 1}),
                }
            ),
        }
    )
    _, collector, metrics = make_registry()
    svc = Service(cfg, collector, metrics, base_dir=Path(args.config).resolve().parent, ignore_for=True)
    try:
        start = time.time()
        for n in range(ONCE_SCRAPES):
            if n:
                time.sleep(args.interval)
            svc.scrape_once()
        # the window covers both scrapes however long a slow target held them up; its length is not how many
        # scrapes it should hold (elapsed + one interval is ~4 s at --interval 2, "3 scrapes" at 2 s): once
        # took ONCE_SCRAPES of each target, so a complete run has full coverage and a missed scrape lowers it
        result = svc.evaluate_once(
            window_seconds=time.time() - start + args.interval, as_of_round=True, scrapes_per_target=ONCE_SCRAPES
        )
    finally:
        svc.close()
    dicts = [d.as_dict() for d in result.deployments]
    if args.json:
        from advisor.results import json_text

        print(json_text({"deployments": dicts}))
    else:
        from advisor.inspect import model_label_note

        configured = {dep.name: dep for dep in cfg.deployments}
        notes = {}
        for d in dicts:
            dep = configured.get(d["name"])
            note = None if dep is None else model_label_note(dep.model, d["snapshot"].get("model"), dep.served_model)
            if note is not None:
                notes[d["name"]] = note
        _print_human(dicts, notes)
    return 0


# -- run / demo ----------------------------------------------------------------------------------------
def external_url_arg(value: str | None, listen: str) -> str:
    """``--web.external-url``: the URL users reach the advisor at, which notifications link to
    (``externalURL``, each alert's ``generatorURL``). Default, as Prometheus's flag of the same name:
    ``http://<hostname>:<port of --listen>/``.

    Raises:
        ValueError: not an absolute http(s) URL with a host, or ``listen`` is not HOST:PORT.
    """
    import socket

    from advisor.config import check_http_url
    from advisor.server import parse_listen

    if value is None:
        _, port = parse_listen(listen)
        return f"http://{socket.gethostname()}:{port}/"
    try:
        return check_http_url(value)
    except ValueError as exc:
        raise ValueError(f"--web.external-url {exc}") from None


def max_connections_arg(value: str) -> int:
    """``--web.max-connections``: a whole number, 0 or more (0: no limit of its own).

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number, 0 (no limit) or more; got {value!r}")
    return n


def cmd_run(args: argparse.Namespace) -> int:
    """The daemon against the configured engines."""
    import logging

    from advisor.config import load_config
    from advisor.console import transition_printer
    from advisor.exporter import make_registry
    from advisor.scheduler import run_daemon
    from advisor.service import Service

    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    try:
        external_url = external_url_arg(args.web_external_url, args.listen)
    except ValueError as exc:
        _err(str(exc))
        return 2
    registry, collector, metrics = make_registry()
    svc = Service(
        cfg,
        collector,
        metrics,
        shard=args.shard,
        workers=args.workers,
        base_dir=Path(args.config).resolve().parent,
        on_transition=transition_printer(args.compact),
    )
    svc.external_url = external_url
    return run_daemon(
        svc,
        registry,
        args.listen,
        on_listening=lambda url: logging.getLogger("advisor").info(
            "serving %s/metrics and the status page %s/; watching %d deployment(s), %d configured target(s) every "
            "%gs. A recommendation prints here once its rule's condition has held for its for-duration (a minute or "
            "two by default); until then the status page shows each rule's reading",
            url,
            url,
            len(cfg.deployments),
            sum(len(d.targets) for d in cfg.deployments),
            cfg.scrape_interval,
        ),
        config_path=Path(args.config),
        web_config=args.web_config_file,
        enable_lifecycle=args.web_enable_lifecycle,
        max_connections=args.web_max_connections,
    )


def cmd_demo(args: argparse.Namespace) -> int:
    """The same daemon against a built-in stand-in vLLM engine on loopback."""
    from advisor.demo import run_demo

    return run_demo(args.listen, args.duration, args.speed, compact=args.compact)


# -- inspect -------------------------------------------------------------------------------------------
def cmd_inspect(args: argparse.Namespace) -> int:
    """Scrape one target twice and print what the advisor makes of it."""
    from advisor.config import check_http_url
    from advisor.inspect import inspect_target, with_scheme

    url = with_scheme(args.url)  # host:port/metrics is http://host:port/metrics, as Prometheus's targets
    try:
        check_http_url(url)
    except ValueError as exc:
        _err(f"URL {exc}")
        return 2
    out = inspect_target(url, args.engine, args.interval, args.served_model)
    if args.json:
        from advisor.results import json_text

        print(json_text(out))
        return 0
    from advisor.conventions import STATE_FRESH

    t = out["targets"][0]
    # a target that answered but is stale or frozen says why here; one that did not, on its own line below
    why = f": {t['state_reason']}" if out["state"] != STATE_FRESH and t["up"] and t["state_reason"] else ""
    _say(f"target {out['name']}: engine {out['detected_engine'] or 'unknown'}, state {out['state']}{why}")
    for hint in out["version_hints"]:
        _say(f"  version hint: {hint}")
    if out["models"]:
        _say(
            f"  models: {', '.join(out['models'])}"
            + (f" (reading {out['snapshot']['model']})" if out["snapshot"]["model"] else "")
        )
    if out["hint"]:
        _say(f"  hint: {out['hint']}")
    if not t["up"]:
        from advisor.evaluate import PAGE_REASONS

        # a page that answered but is no engine's says what it is; a failed request says it failed
        said = "not read" if t["error_reason"] in PAGE_REASONS else "scrape failed"
        _say(f"  {said}: {t['error_reason']} — {t['error']}")
        path = urlsplit(url).path
        if "HTTP 404" in (t["error"] or "") and not path.rstrip("/").endswith("metrics"):
            _say(f"  hint: engines serve /metrics; try {url.rstrip('/')}/metrics")
    s = out["snapshot"]
    if not t["up"] and all(s.get(k) is None for k in (*_INSPECT_KEYS, "ttft_seconds", "tpot_seconds")):
        return 0  # nothing was read: the reason above, once, not a line of "unknown" per quantity
    for key in _INSPECT_KEYS:
        v = s.get(key)
        _say(f"  {key:<30} {_show(v)}")
    for key in ("ttft_seconds", "tpot_seconds"):
        h = s.get(key)
        if h:
            _say(
                f"  {key:<30} count {h['count']:g}, p50 {_show(h['p50'])}, p90 {_show(h['p90'])}, "
                f"p99 {_show(h['p99'])} ({h['source']})"
            )
        else:
            _say(f"  {key:<30} unknown")
    if out["missing"]:
        _say("  missing: " + "; ".join(out["missing"]))
    return 0


def _say(text: str) -> None:
    """Print one line of ``inspect``'s text: the model names, errors and hints in it come from the target's page, so
    control characters are escaped (:func:`advisor.redact.escape_controls`; a label value could otherwise set the
    terminal's title or colours; ``once``'s text and the log escape too)."""
    from advisor.redact import escape_controls

    print(escape_controls(text))


_INSPECT_KEYS = (
    "model",
    "requests_running",
    "requests_waiting",
    "kv_cache_usage_ratio",
    "kv_cache_capacity_tokens",
    "preemptions_total",
    "prompt_tokens_total",
    "generation_tokens_total",
    "generation_tokens_per_second",
)
"""The snapshot's quantities ``inspect`` prints, one line each."""


def _show(v: object) -> str:
    """A value for a terminal: ``unknown`` for None, floats to at most four decimals (0.9902594676 → 0.9903)."""
    if v is None:
        return "unknown"
    if isinstance(v, float):
        return f"{v:.4f}".rstrip("0").rstrip(".") if math.isfinite(v) else str(v)
    return str(v)


# -- catalog ---------------------------------------------------------------------------------------
def _print_table(headers: tuple[str, ...], rows: Sequence[tuple[str, ...]], right: frozenset[int]) -> None:
    """Columns padded to their widest cell (header included), two spaces apart; the columns in ``right``
    (numbers) right-aligned; trailing blanks cut."""
    widths = [max(len(x[i]) for x in (headers, *rows)) for i in range(len(headers))]
    for row in (headers, *rows):
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        print("  ".join(cells).rstrip())


def cmd_catalog(args: argparse.Namespace) -> int:
    """List the bundled model presets or GPUs (the names ``model:``/``--model`` and ``gpu:``/``--gpu`` take), as a
    table with a header row. Models: id, parameters (billions), layers, KV heads, context (tokens; the config's
    ``max_position_embeddings``). GPUs: key, name, memory (GiB), memory bandwidth (TB/s, ``unknown`` when no
    source gives it), the TP domain (the GPUs one NVLink or Infinity Fabric domain joins, ``not stated`` where the
    catalog has none) and ``NVLink SHARP`` where the part has it."""
    from advisor.capacity.hardware import get_gpu, gpu_keys
    from advisor.capacity.models import get_preset, preset_ids

    rows: list[tuple[str, ...]] = []
    if args.what == "models":
        for pid in preset_ids():
            if pid.startswith("advisor/"):
                continue  # the test suite's own tiny model
            m = get_preset(pid)
            rows.append(
                (
                    pid,
                    f"{m.num_parameters / 1e9:.2f} B",
                    str(m.num_layers),
                    str(m.num_kv_heads),
                    f"{m.max_position_embeddings:,}",
                )
            )
        _print_table(("MODEL", "PARAMETERS", "LAYERS", "KV HEADS", "CONTEXT (tokens)"), rows, frozenset({1, 2, 3, 4}))
    else:
        for key in gpu_keys():
            g = get_gpu(key)
            bandwidth = g.memory_bandwidth_bytes_per_second
            rows.append(
                (
                    key,
                    g.name,
                    f"{g.memory_bytes / 1024**3:.2f} GiB",
                    f"{bandwidth / 1e12:.2f} TB/s" if bandwidth == bandwidth else "unknown",
                    f"{g.scale_up_domain_gpus} GPUs" if g.scale_up_domain_gpus else "not stated",
                    "NVLink SHARP" if g.nvlink_sharp else "",
                )
            )
        # TP DOMAIN: the GPUs one NVLink/Infinity Fabric domain joins; a larger TP group's all-reduces cross nodes
        _print_table(("GPU", "NAME", "MEMORY", "BANDWIDTH", "TP DOMAIN", "NVLINK SHARP"), rows, frozenset({2, 3}))
    return 0


# -- parser ------------------------------------------------------------------------------------------
INSPECT_HELP = "scrape one target twice and show what the advisor reads from it"


def add_inspect_parser(sub: Any) -> None:
    """Register ``inspect`` on an argparse sub-parsers object (its ``--engine`` choices import every adapter)."""
    from advisor.engines import ENGINES

    ins = sub.add_parser("inspect", help=INSPECT_HELP)
    ins.add_argument("url")
    ins.add_argument("--engine", default="auto", choices=["auto", *ENGINES])
    ins.add_argument(
        "--interval",
        type=interval_arg(600.0),
        default=3.0,
        help="seconds between scrapes (3; at least 0.1)",
    )
    ins.add_argument(
        "--served-model",
        metavar="NAME",
        type=nonblank_arg,
        default=None,
        help="the model to read when the target serves several (as served_model in the config)",
    )
    ins.add_argument("--json", action="store_true")
    ins.set_defaults(func=cmd_inspect)


if TYPE_CHECKING:
    _SubParsersBase = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    _SubParsersBase = argparse._SubParsersAction


LOG_LEVELS: Final = ("debug", "info", "warning", "error")
LOG_FORMATS: Final = ("text", "json")


def add_log_flags(parser: argparse.ArgumentParser, after_command: bool = False) -> argparse.ArgumentParser:
    """``--log-level`` and ``--log-format`` on ``parser`` (returned): before the sub-command with their defaults,
    and after it (``after_command``) with none, so that a flag given there overrides one given before and neither
    resets the other (``run --config=… --log-format=json``, as ``deploy/kubernetes/deployment.yaml`` passes it,
    exited 2 with "unrecognized arguments" until 2026-12-07: breaker 28)."""
    level: Any = argparse.SUPPRESS if after_command else "info"
    fmt: Any = argparse.SUPPRESS if after_command else "text"
    parser.add_argument("--log-level", default=level, choices=LOG_LEVELS)
    parser.add_argument("--log-format", default=fmt, choices=LOG_FORMATS, help="json: one object per line")
    return parser


class LazySubParsers(_SubParsersBase):
    """Sub-commands registered by name and help alone (:meth:`add_lazy`); a sub-command's flags are added, and its
    module imported, only when it is the command given (or its ``--help`` is asked for), so that ``--help`` and
    ``plan`` do not import the daemon, pydantic or the engine adapters.

    The module's own ``add_…_parser(sub)`` adds the flags, called with this object: its ``sub.add_parser(name,
    help=…)`` replaces the placeholder, and its help must equal the registered one (else :class:`ValueError`, which
    ``tests/test_lazy_cli.py`` would show), so that ``--help`` lists what the command says of itself.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loaders: dict[str, str | Callable[[Any], None]] = {}
        self._loading: str | None = None

    def add_lazy(self, name: str, loader: str | Callable[[Any], None], *, help: str) -> None:
        """Register ``name`` with ``help`` (argparse's keyword); ``loader``, a function or ``"module:function"``
        (imported then), adds its parser when it is chosen."""
        self.add_parser(name, help=help)
        self._loaders[name] = loader

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        """As argparse's, with the logging flags (:func:`add_log_flags`) after the sub-command too; while
        :meth:`load` runs ``name``'s loader, the placeholder is replaced in place.

        Raises:
            ValueError: the loader adds another sub-command, or gives another help than registered.
        """
        if self._loading is None:
            return add_log_flags(super().add_parser(name, **kwargs), after_command=True)
        listed = next(a for a in self._choices_actions if a.dest == self._loading)
        if name != self._loading or kwargs.get("help") != listed.help:
            raise ValueError(f"sub-command {self._loading!r}: its loader registered {name!r} with another help")
        order = list(self._name_parser_map)
        del self._name_parser_map[name]
        n = len(self._choices_actions)
        parser = add_log_flags(super().add_parser(name, **kwargs), after_command=True)
        del self._choices_actions[n:]  # listed once, by the placeholder's entry (same help)
        rebuilt = {k: self._name_parser_map[k] for k in order}  # in the order registered: choices listed as before
        rebuilt.update(self._name_parser_map)  # then any alias the loader added
        self._name_parser_map.clear()
        self._name_parser_map.update(rebuilt)
        return parser

    def load(self, name: str) -> argparse.ArgumentParser:
        """The sub-parser of ``name``, its flags added (the loader imported and run once)."""
        loader = self._loaders.pop(name, None)
        if loader is not None:
            if isinstance(loader, str):
                module, _, function = loader.partition(":")
                loader = getattr(importlib.import_module(module), function)
            self._loading = name
            try:
                loader(self)
            finally:
                self._loading = None
        return self._name_parser_map[name]

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if values and values[0] in self._loaders:
            self.load(values[0])
        super().__call__(parser, namespace, values, option_string)


COMPACT_HELP = (
    "console lines under 160 characters: a short line per recommendation (the status page and the API hold the "
    "rest) and text log lines cut with …"
)


def build_parser(lazy: bool = False) -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and docs): every sub-command's flags added, or with ``lazy`` only
    those of the sub-command given (:class:`LazySubParsers`; what :func:`main` uses)."""
    p = argparse.ArgumentParser(
        prog="capacity-advisor",
        description="Watches LLM serving engines and recommends which dial to turn, and by how much.",
    )
    p.add_argument("--version", action="version", version=f"capacity-advisor {__version__}")
    add_log_flags(p)
    sub = p.add_subparsers(dest="command", required=True, action=LazySubParsers)
    assert isinstance(sub, LazySubParsers)

    run = sub.add_parser("run", help="run the daemon against real engines")
    run.add_argument("--config", required=True, help="YAML config file")
    run.add_argument("--listen", default="127.0.0.1:9188", help="HOST:PORT to serve on (default 127.0.0.1:9188)")
    run.add_argument(
        "--web.config.file",
        dest="web_config_file",
        default=None,
        help="TLS and basic auth for everything served (Prometheus exporter-toolkit format)",
    )
    run.add_argument(
        "--web.external-url",
        dest="web_external_url",
        default=None,
        help="the URL the advisor is reached at (behind a proxy, say); notifications link to it "
        "(default http://<hostname>:<port>/, as Prometheus's flag of the same name)",
    )
    run.add_argument(
        "--web.enable-lifecycle",
        dest="web_enable_lifecycle",
        action="store_true",
        help="allow POST /-/reload (as Prometheus's flag of the same name)",
    )
    run.add_argument(
        "--web.max-connections",
        dest="web_max_connections",
        type=max_connections_arg,
        default=512,
        help="most HTTP connections held at once; 0: no limit of its own (default 512, as Prometheus's flag of "
        "the same name); lowered to what the open-file limit leaves beside scrapes and the outbox",
    )
    run.add_argument(
        "--shard",
        type=shard_arg,
        default=(0, 1),
        help="i/n: evaluate only the deployments whose stable hash mod n is i (n advisors split a fleet)",
    )
    run.add_argument(
        "--workers",
        type=bounded_int(1, 256),
        default=None,
        help="scrape worker processes, targets split by stable hash of the URL; 1: scrape on the daemon's own "
        "threads (default: the CPUs this process may use — affinity and cgroup quota — once one core could not "
        "scrape and evaluate the config's targets, ~2 ms each, in a quarter of the scrape interval, else 1; logged "
        "at start)",
    )
    run.add_argument("--compact", action="store_true", help=COMPACT_HELP)
    run.set_defaults(func=cmd_run)

    demo = sub.add_parser("demo", help="run the daemon against a built-in simulated fleet of four deployments")
    demo.add_argument("--listen", default="127.0.0.1:9188", help="HOST:PORT to serve on (default 127.0.0.1:9188)")
    demo.add_argument(
        "--duration",
        type=duration_arg,
        default=75.0,
        # the ramp (advisor.demo.RAMP) repeats every 200 + 150 simulated s: 35 s at the default speed
        help="seconds to run, 0 = until Ctrl-C (default 75: two whole ramps of demo-chat-8b, 35 s each at the "
        "default --speed, and the start of a third)",
    )
    demo.add_argument(
        "--speed", type=positive_float(1000.0), default=10.0, help="scenario seconds per real second (default 10)"
    )
    demo.add_argument("--compact", action="store_true", help=COMPACT_HELP)
    demo.set_defaults(func=cmd_demo)

    once = sub.add_parser("once", help="scrape twice, evaluate once, print and exit")
    once.add_argument("--config", required=True)
    once.add_argument(
        "--interval",
        type=interval_arg(3600.0),
        default=2.0,
        help="seconds between the two scrapes (default 2; at least 0.1)",
    )
    once.add_argument("--json", action="store_true")
    once.set_defaults(func=cmd_once)

    # registered by name and help only; each one's flags (and its module) are added when it is the command given
    sub.add_lazy("plan", "advisor.plancmd:add_plan_parser", help="the capacity pass for one configuration")
    sub.add_lazy(
        "simulate",
        "advisor.simcmd:add_simulate_parser",
        help="run a traffic profile against a configured deployment in the engine simulator",
    )
    sub.add_lazy(
        "rules",
        "advisor.rulescmd:add_rules_parser",
        help="Prometheus rule files (recording rules, SLO and advisor alerts)",
    )
    sub.add_lazy(
        "backtest",
        "advisor.backtestcmd:add_backtest_parser",
        help="replay the rules over a Prometheus's history: what would have been recommended, and when",
    )
    sub.add_lazy("inspect", add_inspect_parser, help=INSPECT_HELP)

    cat = sub.add_parser("catalog", help="list the bundled model presets or GPUs")
    cat.add_argument("what", choices=["models", "gpus"])
    cat.set_defaults(func=cmd_catalog)

    chk = sub.add_parser("check-config", help="validate a config file")
    chk.add_argument(
        "file",
        help="the config file; '-' reads it from standard input, and a pipe (<(kubectl get cm …)) is read to its end "
        "(relative paths in it then resolve from the current directory)",
    )
    chk.set_defaults(func=cmd_check_config)
    if not lazy:
        for name in list(sub.choices):
            sub.load(name)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``capacity-advisor`` console script."""
    args = build_parser(lazy=True).parse_args(argv)
    _setup_logging(args.log_level, args.log_format, getattr(args, "compact", False))
    try:
        rc: int = args.func(args)
    except (ValueError, AdvisorError) as exc:
        _err(str(exc))
        return 2
    except BrokenPipeError:  # output piped into head(1) and closed: not an error
        return 0
    except OSError as exc:
        _err(f"{exc.strerror or exc}")
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
