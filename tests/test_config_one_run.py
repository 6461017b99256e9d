"""Issue 19: ``check-config`` reports every error in one run, each with the line it is on.

Before, validation ran in stages (YAML, the schema, names and timeouts, the capacity pass): a schema error hid a
duplicate deployment name, a timeout that overfills the interval and a deployment that does not fit, and fixing a
real file took four rounds. The expected lines are counted by hand in the files written here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from advisor.config import line_of, load_config
from advisor.errors import ConfigError
from tests.inprocess import run_cli

FIVE_ERRORS = """\
scrape_interval: 5s
evaluation_window: 5 minutes
scrape:
  connect_timeout: 3s
  read_timeout: 9s
deployments:
  - name: chat
    model: llama-3.1-8b
    gpu: H100-SXM
    max_model_len: 8192
    slo: {ttft_seconds: 0.5, tpot_seconds: 0.05}
    targets: ["http://127.0.0.1:8000/metrics"]
  - name: chat
    model: llama-3.1-70b
    gpu: L4
    max_model_len: 8192
    slo: {ttft_seconds: 0.5, tpot_seconds: 0.05}
    targets: ["http://127.0.0.1:8001/metrics"]
receivers:
  - name: hook
    url: "ftp://example.com/hook"
"""
"""Line 2: a duration with a unit Prometheus does not have; line 5: 3 s + 9 s of timeouts in a 5 s interval; line 13:
the second ``chat``, and Llama-3.1-70B in bf16 (about 140 GB of weights, Meta's model card: 70.6 B parameters ×
2 bytes) on one 24 GB L4, which cannot hold it; line 21: a receiver URL that is not http(s)."""


def test_a_file_with_five_kinds_of_error_lists_all_five_in_one_run_each_with_its_line(tmp_path: Path) -> None:
    f = tmp_path / "advisor.yaml"
    f.write_text(FIVE_ERRORS)
    r = run_cli("check-config", str(f))
    assert r.returncode == 2
    lines = r.stderr.splitlines()[1:]
    assert len(lines) == 5, r.stderr
    expected = [
        ("  line 2: evaluation_window: ", "invalid duration"),
        ("  line 5: scrape.read_timeout: ", "must not exceed scrape_interval (5s)"),
        ("  line 13: deployments[1].name: ", "deployment names must be unique: 'chat' repeats, first at line 7 ("),
        ("  line 13: deployments[1]: ", "weights need"),
        ("  line 21: receivers[0].url: ", "http(s) URL"),
    ]
    for line, (start, says) in zip(lines, expected, strict=True):
        assert line.startswith(start) and says in line, r.stderr


def test_a_duplicate_deployment_name_is_reported_beside_a_field_error(tmp_path: Path) -> None:
    """A field error in either deployment used to stop validation before names were compared."""
    f = tmp_path / "advisor.yaml"
    f.write_text(
        "deployments:\n"  # 1
        "  - name: a\n"  # 2
        "    model: llama-3.1-8b\n"  # 3
        "    gpu: H100-SXM\n"  # 4
        "    max_model_len: 8\n"  # 5: below the minimum of 16
        "    slo: {ttft_seconds: 1, tpot_seconds: 0.1}\n"  # 6
        "    targets: [http://127.0.0.1:1/metrics]\n"  # 7
        "  - name: a\n"  # 8
        "    model: llama-3.1-8b\n"
        "    gpu: H100-SXM\n"
        "    max_model_len: 4096\n"
        "    slo: {ttft_seconds: 1, tpot_seconds: 0.1}\n"
        "    targets: [http://127.0.0.1:2/metrics]\n"
    )
    with pytest.raises(ConfigError) as err:
        load_config(f)
    assert err.value.problems == [
        ("deployments[0].max_model_len", "Input should be greater than or equal to 16"),
        ("deployments[1].name", "deployment names must be unique: 'a' repeats, first at line 2 (deployments[0])"),
    ]
    assert err.value.lines == [5, 8]


def test_a_repeated_name_says_the_line_of_the_first_as_a_repeated_key_does(tmp_path: Path) -> None:
    """Seen: "line 15: deployments[1].name: … 'chat-8b' repeats" without the first one's line, while a repeated
    YAML key says "first set on line 1". Lines counted by hand below; the third ``chat-8b`` names the first too."""
    deployment = (
        "    model: llama-3.1-8b\n"
        "    gpu: H100-SXM\n"
        "    max_model_len: 4096\n"
        "    slo: {ttft_seconds: 1, tpot_seconds: 0.1}\n"
        "    targets: [http://127.0.0.1:1/metrics]\n"
    )
    f = tmp_path / "advisor.yaml"
    f.write_text(
        "deployments:\n"  # 1
        "  - name: chat-8b\n"  # 2
        + deployment  # 3-7
        + "  - name: chat-70b\n"  # 8
        + deployment  # 9-13
        + "  -\n"  # 14
        "    name: chat-8b\n"  # 15: the item starts on line 14, its name on 15
        + deployment  # 16-20
        + "receivers:\n"  # 21
        "  - name: hook\n"  # 22
        "    url: http://127.0.0.1:9/hook\n"  # 23
        "  - name: hook\n"  # 24
        "    url: http://127.0.0.1:9/other\n"  # 25
    )
    r = run_cli("check-config", str(f))
    assert r.returncode == 2
    assert r.stderr.splitlines()[1:] == [
        "  line 15: deployments[2].name: deployment names must be unique: 'chat-8b' repeats, first at line 2 "
        "(deployments[0])",
        "  line 24: receivers[1].name: receiver names must be unique: 'hook' repeats, first at line 22 (receivers[0])",
    ]


def test_without_a_file_a_repeated_name_names_the_first_by_its_path() -> None:
    from advisor.config import parse_config

    dep = {
        "name": "a",
        "model": "llama-3.1-8b",
        "gpu": "H100-SXM",
        "max_model_len": 4096,
        "slo": {"ttft_seconds": 1, "tpot_seconds": 0.1},
        "targets": ["http://127.0.0.1:1/metrics"],
    }
    with pytest.raises(ConfigError) as err:
        parse_config({"deployments": [dep, dep]})
    assert err.value.problems == [
        ("deployments[1].name", "deployment names must be unique: 'a' repeats, first at deployments[0]")
    ]


def test_schema_errors_carry_the_line_of_their_key_or_of_the_part_missing_it(tmp_path: Path) -> None:
    f = tmp_path / "advisor.yaml"
    f.write_text(
        "deployments:\n"  # 1
        "  - name: a\n"  # 2: the deployment that lacks slo
        "    model: llama-3.1-8b\n"  # 3
        "    gpu: H100-SXM\n"  # 4
        "    max_model_len: 4096\n"  # 5
        "    targets: [http://127.0.0.1:1/metrics]\n"  # 6
        "    max_num_seq: 64\n"  # 7: misspelt
    )
    with pytest.raises(ConfigError) as err:
        load_config(f)
    got = {p: line for (p, _), line in zip(err.value.problems, err.value.lines, strict=True)}
    assert got == {"deployments[0].slo": 2, "deployments[0].max_num_seq": 7}
    assert "  line 7: deployments[0].max_num_seq: unknown key; did you mean 'max_num_seqs'?" in str(err.value)


def test_a_repeated_key_is_reported_with_the_other_errors_not_alone(tmp_path: Path) -> None:
    f = tmp_path / "advisor.yaml"
    f.write_text(
        "scrape_interval: 15s\n"  # 1
        "scrape_interval: 10s\n"  # 2: repeated
        "evaluation_window: 1 hour\n"  # 3: bad duration
        "deployments:\n"
        "  - name: a\n"
        "    model: llama-3.1-8b\n"
        "    gpu: H100-SXM\n"
        "    max_model_len: 4096\n"
        "    slo: {ttft_seconds: 1, tpot_seconds: 0.1}\n"
        "    targets: [http://127.0.0.1:1/metrics]\n"
    )
    with pytest.raises(ConfigError) as err:
        load_config(f)
    assert [p for p, _ in err.value.problems] == ["line 2, column 1", "evaluation_window"]
    assert "duplicate key 'scrape_interval' (first set on line 1)" in err.value.problems[0][1]
    assert err.value.lines == [None, 3]  # the YAML problem's path already says its line


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ("deployments[1].slo.tpot_seconds", 6),
        ("deployments[1].slo.target_ratio", 5),  # not in the file: the slo key's line
        ("deployments[1]", 4),
        ("deployments[7].name", 1),  # no such item: the deployments key
        ("scrape_interval", None),  # not in the file, nothing of it either
        ("line 3, column 1", None),
        ("(file)", None),
    ],
)
def test_line_of_follows_a_problem_path_down_the_yaml_nodes(path: str, line: int | None) -> None:
    text = (
        "deployments:\n"  # 1
        "  - name: a\n"  # 2
        "    model: m\n"  # 3
        "  - name: b\n"  # 4
        "    slo: {ttft_seconds: 1,\n"  # 5
        "          tpot_seconds: 2}\n"  # 6: a flow mapping on two lines
    )
    assert line_of(yaml.compose(text), path) == line


def test_a_missing_gpu_is_said_beside_a_missing_field(tmp_path: Path) -> None:
    # a fresh user (2026-12-06): "max_model_len: required" first, "set gpu … or gpu_memory_gib" only in a second run
    path = tmp_path / "c.yaml"
    path.write_text(
        "deployments:\n"
        "  - name: x\n"
        "    targets: [http://127.0.0.1:9/metrics]\n"
        "    model: meta-llama/Llama-3.1-8B-Instruct\n"
        "    slo: {ttft_seconds: 2, tpot_seconds: 0.1, target_ratio: 0.9}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert ("deployments[0].max_model_len", "required") in err.value.problems
    assert ("deployments[0]", "set gpu (a catalog name) or gpu_memory_gib") in err.value.problems
    # the schema's own check says it once, not twice, when it is the only problem
    path.write_text(path.read_text(encoding="utf-8").replace("    slo:", "    max_model_len: 8192\n    slo:"))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.problems == [("deployments[0]", "set gpu (a catalog name) or gpu_memory_gib")]
