"""Issue 19 (breaker sibling): a key put one level too high says where it belongs, with its line.

``platform: kubernetes`` at the top level belongs in each ``deployments[]`` entry; before, ``check-config`` said
only "unknown key". Every key of a deployment, a section (``scrape``, ``data_quality``) or a deployment's ``slo``
gets the same hint when written one level up. The expected lines are counted by hand in the file below.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.config import Deployment
from tests.inprocess import run_cli

MISPLACED = """\
platform: kubernetes
deployments:
  - name: box
    model: llama-3.1-8b
    gpu: H100-SXM
    max_model_len: 8192
    ttft_seconds: 1
    slo: {ttft_seconds: 1, tpot_seconds: 0.1}
    targets: ["http://127.0.0.1:8000/metrics"]
max_num_seqs: 128
stale_after_intervals: 4
scrape_intervall: 5s
"""
"""Line 1: ``platform`` (a deployment's); line 7: ``ttft_seconds`` (the deployment's ``slo``); line 10:
``max_num_seqs`` (a deployment's); line 11: ``stale_after_intervals`` (``data_quality``); line 12: a typo, which
keeps its "did you mean"."""


def test_check_config_says_where_each_misplaced_key_belongs_with_its_line(tmp_path: Path) -> None:
    f = tmp_path / "advisor.yaml"
    f.write_text(MISPLACED)
    r = run_cli("check-config", str(f))
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.splitlines()[1:]
    assert lines == [
        "  line 1: platform: not a top-level key; it belongs in each deployments[] entry (deployments[0].platform)",
        "  line 7: deployments[0].ttft_seconds: not a key of deployments[0]; it belongs in slo "
        "(deployments[0].slo.ttft_seconds)",
        "  line 10: max_num_seqs: not a top-level key; it belongs in each deployments[] entry "
        "(deployments[0].max_num_seqs)",
        "  line 11: stale_after_intervals: not a top-level key; it belongs in data_quality "
        "(data_quality.stale_after_intervals)",
        "  line 12: scrape_intervall: unknown key; did you mean 'scrape_interval'?",
    ], r.stderr


@pytest.mark.parametrize("key", ["model", "gpu", "engine", "slo", "targets", "served_model", "max_model_len"])
def test_every_deployment_key_at_the_top_level_points_into_deployments(tmp_path: Path, key: str) -> None:
    assert key in Deployment.model_fields  # the hint is derived from the model; these are a sample of it
    f = tmp_path / "advisor.yaml"
    f.write_text(
        "deployments:\n"
        "  - name: box\n"
        "    model: llama-3.1-8b\n"
        "    gpu: H100-SXM\n"
        "    max_model_len: 8192\n"
        "    slo: {ttft_seconds: 1, tpot_seconds: 0.1}\n"
        '    targets: ["http://127.0.0.1:8000/metrics"]\n'
        f"{key}: x\n"  # line 8
    )
    r = run_cli("check-config", str(f))
    assert r.returncode == 2
    assert r.stderr.splitlines()[1:] == [
        f"  line 8: {key}: not a top-level key; it belongs in each deployments[] entry (deployments[0].{key})"
    ], r.stderr


def test_a_key_one_level_too_low_says_where_it_belongs(tmp_path: Path) -> None:
    f = tmp_path / "advisor.yaml"
    f.write_text(
        "deployments:\n"  # 1
        "  - name: box\n"  # 2
        "    model: llama-3.1-8b\n"  # 3
        "    gpu: H100-SXM\n"  # 4
        "    max_model_len: 8192\n"  # 5
        "    scrape_interval: 5s\n"  # 6: the file's, not a deployment's
        "    slo: {ttft_seconds: 1, tpot_seconds: 0.1, gpu: L4}\n"  # 7: the deployment's, not its slo's
        '    targets: ["http://127.0.0.1:8000/metrics"]\n'
    )
    r = run_cli("check-config", str(f))
    assert r.returncode == 2
    assert r.stderr.splitlines()[1:] == [
        "  line 6: deployments[0].scrape_interval: not a key of deployments[0]; it belongs at the top level "
        "(scrape_interval)",
        "  line 7: deployments[0].slo.gpu: not a key of deployments[0].slo; it belongs in deployments[0] "
        "(deployments[0].gpu)",
    ], r.stderr
