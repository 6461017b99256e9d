"""``capacity-advisor rules generate``: write the Prometheus rule files for a config (the I/O around
:mod:`advisor.rulesgen`, which only returns values).

::

    capacity-advisor rules generate --config deploy/advisor.example.yaml            # writes rules/*.rules.yml
    capacity-advisor rules generate --config deploy/advisor.example.yaml --check    # exit 1 if rules/ differs

It also writes ``<out>/kubernetes/``: a KEDA ScaledObject and an HPA example per deployment that has an
``autoscaling:`` block (opt-in; keys ``deployments[].autoscaling`` of the config) and the rules as one
PrometheusRule (:mod:`advisor.manifests`).

Warnings (a target between bucket bounds, an engine without histograms, a burn-rate alert that can never fire)
go to stderr and into the generated files as comments; ``check-config`` prints the same ones
(:func:`config_warnings`, :func:`print_warnings`). Files are written atomically (temp file, then rename);
files in the folder that the generator does not produce (``runbook.md``, ``README.md``) are left alone.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.manifests import autoscaling_settings
from advisor.rulesgen import DeploymentSLO, RulesInput, generate, render_all

if TYPE_CHECKING:
    from collections.abc import Iterable

    from advisor.config import Config


def rules_input(config_path: str | Path) -> RulesInput:
    """Load and validate the config, and map it to the generator's parameter object.

    Raises:
        ConfigError: the config is invalid (every problem listed).
    """
    from advisor.config import load_config

    return config_rules_input(load_config(config_path), config_path)


def config_rules_input(cfg: Config, config_path: str | Path) -> RulesInput:
    """The generator's parameter object for a loaded config (``config_path`` names it in the files' headers)."""
    return RulesInput(
        deployments=tuple(
            DeploymentSLO(
                name=d.name,
                engine=d.engine,
                ttft_seconds=d.slo.ttft_seconds,
                tpot_seconds=d.slo.tpot_seconds,
                target_ratio=d.slo.target_ratio,
                served_model=d.served_model,
                autoscaling=autoscaling_settings(d),
                platform=d.platform,
            )
            for d in cfg.deployments
        ),
        scrape_interval_seconds=cfg.scrape_interval,
        capacity_model_error_bound=cfg.data_quality.capacity_model_error_bound,
        source=Path(config_path).name,
    )


def config_warnings(cfg: Config, config_path: str | Path) -> tuple[str, ...]:
    """The warnings ``rules generate`` reports for this config (each once), for ``check-config``: the same
    generator run, nothing written."""
    return generate(config_rules_input(cfg, config_path)).warnings


def print_warnings(warnings: Iterable[str]) -> None:
    """Each warning on stderr as ``capacity-advisor: warning: …`` (``rules generate`` and ``check-config``)."""
    for w in warnings:
        print(f"capacity-advisor: warning: {w}", file=sys.stderr)


def cmd_rules_generate(args: argparse.Namespace) -> int:
    """Generate (or, with ``--check``, compare) the rule files; 0 on success, 1 when ``--check`` finds a
    difference; config errors propagate (exit 2 in :func:`advisor.cli.main`)."""
    generated = generate(rules_input(args.config))
    print_warnings(generated.warnings)
    for note in generated.notes:
        print(f"capacity-advisor: note: {note}", file=sys.stderr)
    texts = render_all(generated)
    out = Path(args.out)
    if args.check:
        stale = []
        for name, text in texts.items():
            path = out / name
            try:
                current = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                current = None
            if current != text:
                stale.append(str(path))
        if stale:
            print(
                "capacity-advisor: these rule files differ from what the config generates "
                f"(run `capacity-advisor rules generate --config {args.config} --out {args.out}`): " + ", ".join(stale),
                file=sys.stderr,
            )
            return 1
        print(f"{len(texts)} rule files in {out} are up to date")
        return 0
    try:
        _write_all(out, texts)
    except OSError as exc:
        where = "" if exc.filename is None or str(exc.filename) == args.out else f"{exc.filename}: "
        print(
            f"capacity-advisor: --out {args.out}: {where}{exc.strerror or exc}; nothing was written",
            file=sys.stderr,
        )
        return 2
    for name in texts:
        print(f"wrote {out / name}")
    return 0


def _write_all(out: Path, texts: dict[str, str]) -> None:
    """Write every file of ``texts`` under ``out`` or none: each is first written whole to a temporary file
    beside its destination (which proves the folder writable), and only when all are written are they renamed
    into place (:func:`os.replace`, atomic per file on POSIX).

    Raises:
        OSError: a folder cannot be made or written (its ``filename`` names the path); the temporary files are
            removed and no destination file is touched.
    """
    staged: list[tuple[str, Path]] = []
    try:
        for name, text in texts.items():
            path = out / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.parent.is_dir():
                raise NotADirectoryError(20, "Not a directory", str(path.parent))
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            staged.append((tmp, path))
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
            os.chmod(tmp, 0o644)
    except BaseException:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        raise
    for tmp, path in staged:
        os.replace(tmp, path)


def _folder_arg(text: str) -> str:
    """``--out``: a folder path, not empty (``--out ""`` would write into the working directory unasked)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a folder, not be empty (default: rules)")
    return text


def add_rules_parser(subparsers: Any) -> None:
    """Register ``rules generate`` on an argparse sub-parsers object."""
    from advisor.cli import add_log_flags

    rules = subparsers.add_parser("rules", help="Prometheus rule files (recording rules, SLO and advisor alerts)")
    sub = rules.add_subparsers(dest="rules_command", required=True)
    gen = sub.add_parser(
        "generate",
        help="write the rule files for a config",
        description="Write recording rules that normalise engine metrics per deployment, goodput SLO burn-rate "
        "alerts from each deployment's slo, and alerts on the advisor's own gauges.",
    )
    add_log_flags(gen, after_command=True)  # as after every other command (a nested one is not LazySubParsers')
    gen.add_argument("--config", required=True, help="YAML config file (the advisor's)")
    gen.add_argument("--out", type=_folder_arg, default="rules", help="folder to write into (default: rules)")
    gen.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 when a file in --out differs from the output"
    )
    gen.set_defaults(func=cmd_rules_generate)
