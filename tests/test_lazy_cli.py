"""Lazy start-up of ``capacity-advisor`` (issue 15): sub-commands are registered by name and help, and a
command's module is imported only when that command runs, so ``--help`` and ``plan`` import neither the daemon
(pydantic config, requests, prometheus_client, apscheduler, YAML) nor the engine adapters.

The import checks run ``advisor.cli.main`` in a fresh interpreter (this process has imported everything already)
and read its ``sys.modules`` afterwards. The flag lists below are written out by hand from the commands' help as
they were before the change, so a flag lost by the lazy registration fails here.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.cli import LazySubParsers, build_parser
from tests.inprocess import run_cli

ROOT = Path(__file__).resolve().parent.parent

PLAN = ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM", "--max-model-len", "8192"]

NEVER = ("pydantic", "requests", "urllib3", "prometheus_client", "apscheduler", "yaml", "numpy")
"""Third-party packages neither ``--help`` nor ``plan`` needs."""

NEVER_ADVISOR = ("advisor.config", "advisor.service", "advisor.engines", "advisor.sources", "advisor.sim")
"""The daemon's modules and the engine adapters: not for ``--help`` nor ``plan``."""

COMMAND_MODULES = ("advisor.plancmd", "advisor.simcmd", "advisor.rulescmd", "advisor.backtestcmd")

FLAGS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("run",): (
        "--config",
        "--listen",
        "--web.config.file",
        "--web.external-url",
        "--web.enable-lifecycle",
        "--web.max-connections",
        "--shard",
    ),
    ("demo",): ("--listen", "--duration", "--speed"),
    ("once",): ("--config", "--interval", "--json"),
    ("plan",): (
        "--model",
        "--gpu",
        "--gpu-memory-gib",
        "--tp",
        "--gpu-memory-utilization",
        "--max-model-len",
        "--dtype",
        "--quantization",
        "--kv-cache-dtype",
        "--max-num-seqs",
        "--max-num-batched-tokens",
        "--block-size",
        "--kv-cache-memory-gib",
        "--num-gpu-blocks-override",
        "--kv-cache-memory-bytes",
        "--gpu-memory-used-by-others-gib",
        "--engine",
        "--engine-version",
        "--enforce-eager",
        "--mem-fraction-static",
        "--cuda-memory-fraction",
        "--kv-cache-free-gpu-memory-fraction",
        "--ctx-size",
        "--parallel",
        "--max-tokens",
        "--kv-unified",
        "--pp",
        "--dp",
        "--data-parallel-size",
        "--enable-expert-parallel",
        "--json",
        "--search",
        "--arrival-rate",
        "--prompt-tokens",
        "--output-tokens",
        "--max-context",
        "--ttft",
        "--tpot",
        "--target-ratio",
        "--cloud",
        "--limit",
        "--plot",
        "{vllm,sglang,tgi,trtllm,llamacpp}",
        "other engines (--engine sglang|tgi|trtllm|llamacpp):",
    ),
    ("simulate",): (
        "--config",
        "--deployment",
        "--duration",
        "--arrival-rate",
        "--seed",
        "--json",
        "--arrivals",
        "--burstiness",
        "--on-off",
        "--daily-period",
        "--daily-amplitude",
        "--prompt-tokens",
        "--prompt-cv",
        "--output-tokens",
        "--output-cv",
        "--lengths-csv",
        "--trace",
        "--replicas",
        "--router",
        "--prefix-hit-rate",
        "--spec-tokens",
        "--spec-acceptance",
        "--spec-draft-cost",
        "--spec-disable-by-batch-size",
        "--warmup",
        "--sweep",
        "--plot",
        "--apply",
    ),
    ("rules",): ("generate", "write the rule files for a config"),
    ("rules", "generate"): ("--config", "--out", "--check"),
    ("backtest",): ("--config", "--prometheus", "--from", "--to", "--step", "--selector", "--deployment", "--json"),
    ("inspect",): (
        "url",
        "--engine",
        "{auto,vllm,sglang,tgi,triton-trtllm,trtllm,llamacpp,dynamo}",
        "--interval",
        "--served-model",
        "--json",
    ),
    ("catalog",): ("{models,gpus}",),
    ("check-config",): ("file",),
}

COMMAND_HELP = {
    "run": "run the daemon against real engines",
    "demo": "run the daemon against a built-in simulated fleet of four deployments",
    "once": "scrape twice, evaluate once, print and exit",
    "plan": "the capacity pass for one configuration",
    "simulate": "run a traffic profile against a configured deployment in the engine simulator",
    "rules": "Prometheus rule files (recording rules, SLO and advisor alerts)",
    "backtest": "replay the rules over a Prometheus's history: what would have been recommended, and when",
    "inspect": "scrape one target twice and show what the advisor reads from it",
    "catalog": "list the bundled model presets or GPUs",
    "check-config": "validate a config file",
}


def _imports_after(argv: list[str]) -> tuple[int, str, list[str]]:
    """Run ``advisor.cli.main(argv)`` in a fresh interpreter; its exit code, stdout and every module imported."""
    code = (
        "import json, sys\n"
        "from advisor.cli import main\n"
        "try:\n"
        f"    rc = main({argv!r})\n"
        "except SystemExit as exc:\n"
        "    rc = exc.code\n"
        "sys.stdout.flush()\n"
        "sys.stderr.write('\\nMODULES ' + json.dumps(sorted(sys.modules)) + '\\n')\n"
        "sys.exit(rc)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="120")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    line = next(x for x in done.stderr.splitlines() if x.startswith("MODULES "))
    return done.returncode, done.stdout, json.loads(line.removeprefix("MODULES "))


@functools.cache
def _at_start() -> frozenset[str]:
    """The modules a bare interpreter has loaded in this environment (``site``, ``.pth`` files): not the CLI's."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    code = "import sys; print(' '.join(sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    return frozenset(done.stdout.split())


def _loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    """The modules of ``modules`` that are, or are inside, one of ``names`` and that a bare interpreter lacks."""
    preloaded = _at_start()
    return [m for m in modules if (m in names or m.startswith(tuple(n + "." for n in names))) and m not in preloaded]


def test_help_imports_no_command_module_nor_the_daemon() -> None:
    rc, out, modules = _imports_after(["--help"])
    assert rc == 0
    for name, text in COMMAND_HELP.items():
        assert name in out and text in " ".join(out.split())
    assert _loaded(modules, NEVER) == []
    assert _loaded(modules, NEVER_ADVISOR + COMMAND_MODULES + ("advisor.capacity",)) == []
    assert _loaded(modules, ("logging", "typing")) == []  # a few ms each; for the commands that use them


def test_plan_imports_only_the_capacity_model() -> None:
    rc, out, modules = _imports_after(PLAN)
    assert rc == 0
    assert "KV tokens per replica" in out and "Llama-3.1-8B-Instruct" in out
    assert _loaded(modules, NEVER) == []
    assert _loaded(modules, NEVER_ADVISOR) == []
    assert _loaded(modules, ("advisor.simcmd", "advisor.rulescmd", "advisor.backtestcmd")) == []
    assert "advisor.capacity.kv" in modules and "advisor.plancmd" in modules
    # the KV pass alone: not the roofline and queueing models, nor importlib.resources to read the package data
    assert _loaded(modules, ("advisor.capacity.perf", "advisor.capacity.queueing", "importlib.resources")) == []


@pytest.mark.parametrize("command", list(FLAGS), ids=[" ".join(c) for c in FLAGS])
def test_every_subcommand_still_lists_its_flags(command: tuple[str, ...]) -> None:
    r = run_cli(*command, "--help")
    assert r.returncode == 0, r.stderr
    words = set(r.stdout.replace(",", " ").replace("[", " ").replace("]", " ").split())
    for flag in FLAGS[command]:
        assert flag in words or flag in r.stdout, f"{' '.join(command)} --help lacks {flag}"


def test_the_lazy_parser_equals_the_whole_one() -> None:
    """``main``'s parser (flags added on demand) prints and parses as the parser with every command loaded."""
    whole = build_parser()
    assert build_parser(lazy=True).format_help() == whole.format_help()
    subs = next(a for a in whole._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in subs.choices.items():
        lazy = build_parser(lazy=True)
        lazy_subs = next(a for a in lazy._actions if isinstance(a, LazySubParsers))
        assert lazy_subs.load(name).format_help() == parser.format_help()


@pytest.mark.parametrize(
    ("argv", "dest", "value"),
    [
        (["run", "--config", "c.yaml", "--shard", "1/3"], "shard", (1, 3)),
        (["demo", "--duration", "90s"], "duration", 90.0),
        (["once", "--config", "c.yaml", "--interval", "0.5"], "interval", 0.5),
        ([*PLAN, "--engine", "sglang", "--mem-fraction-static", "0.8"], "mem_fraction_static", 0.8),
        (["plan", "--model", "m", "--data-parallel-size", "4"], "dp", 4),
        (["simulate", "--config", "c.yaml", "--seed", "7"], "seed", 7),
        (["rules", "generate", "--config", "c.yaml", "--out", "o"], "out", "o"),
        (
            ["backtest", "--config", "c.yaml", "--from", "now-1h", "--to", "now", "--deployment", "d"],
            "deployment",
            ["d"],
        ),
        (["inspect", "http://h:1/metrics", "--engine", "triton-trtllm"], "engine", "triton-trtllm"),
        (["catalog", "gpus"], "what", "gpus"),
        (["check-config", "c.yaml"], "file", "c.yaml"),
    ],
)
def test_every_subcommand_still_parses_its_flags(argv: list[str], dest: str, value: object) -> None:
    args = build_parser(lazy=True).parse_args(argv)
    assert getattr(args, dest) == value
    assert callable(args.func)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([*PLAN, "--engine", "dynamo"], "invalid choice: 'dynamo'"),
        ([*PLAN, "--tp", "0"], "must be between 1 and 512"),
        (["inspect", "http://h:1/metrics", "--engine", "nope"], "invalid choice: 'nope'"),
        (["demo", "--speed", "nan"], "must be a positive number"),
        (["nosuch"], "invalid choice: 'nosuch'"),
    ],
)
def test_bad_flags_still_exit_2_with_argparse_message(argv: list[str], message: str) -> None:
    r = run_cli(*argv)
    assert r.returncode == 2
    assert message in r.stderr


def test_plan_engines_are_catalog_engines_in_catalog_order() -> None:
    """``plan --engine`` reads its choices from the capacity model (so as not to import every adapter); each
    must still be an engine id of the catalog, in the catalog's order."""
    from advisor.engines import catalog
    from advisor.plancmd import plan_engines

    engines = plan_engines()
    assert engines[0] == "vllm" and len(engines) > 1
    assert engines == tuple(e for e in catalog.engine_ids() if e in engines)


def test_a_loader_that_registers_another_help_is_refused() -> None:
    """The help ``--help`` lists is the registration's; a command whose own ``add_parser`` says otherwise is an
    error, not a silently different listing."""

    def loader(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        sub.add_parser("x", help="something else")

    p = argparse.ArgumentParser(prog="t")
    sub = p.add_subparsers(dest="command", action=LazySubParsers)
    assert isinstance(sub, LazySubParsers)
    sub.add_lazy("x", loader, help="what x does")
    with pytest.raises(ValueError, match="another help"):
        p.parse_args(["x"])


def test_the_command_module_is_loaded_once_and_only_when_chosen() -> None:
    calls: list[str] = []

    def loader(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        calls.append("x")
        sub.add_parser("x", help="what x does").add_argument("--n", type=int)

    p = argparse.ArgumentParser(prog="t")
    sub = p.add_subparsers(dest="command", action=LazySubParsers)
    assert isinstance(sub, LazySubParsers)
    sub.add_lazy("x", loader, help="what x does")
    sub.add_parser("y")
    assert p.parse_args(["y"]).command == "y" and calls == []
    assert p.parse_args(["x", "--n", "3"]).n == 3
    assert p.parse_args(["x", "--n", "4"]).n == 4
    assert calls == ["x"]
    assert "what x does" in p.format_help()
