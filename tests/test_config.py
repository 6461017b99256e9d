"""Config validation: every invalid field reported at once with its path."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from advisor.assembly import deployment_context
from advisor.config import load_config, parse_config, parse_duration, shared_targets
from advisor.errors import ConfigError
from tests.conftest import REPO_ROOT
from tests.inprocess import run_cli

GOOD = {
    "deployments": [
        {
            "name": "chat-8b",
            "engine": "vllm",
            "targets": ["http://127.0.0.1:8000/metrics"],
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "H100-SXM",
            "max_model_len": 8192,
            "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1, "target_ratio": 0.95},
        }
    ]
}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "advisor.cli", *args], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("15s", 15.0), ("5m", 300.0), ("1h30m", 5400.0), ("250ms", 0.25), (30, 30.0), ("2.5", 2.5)],
)
def test_durations_parse_like_prometheus(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "5 minutes", "-3s", "0s", "m", True])
def test_bad_durations_are_rejected(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_the_shipped_example_is_valid() -> None:
    r = _cli("check-config", "deploy/advisor.example.yaml")
    assert r.returncode == 0, r.stderr
    assert "valid — 1 deployment(s), 2 target(s), 1 receiver(s)" in r.stdout
    # the summary, then one capacity line for its one deployment (nothing else: no note)
    assert [ln.split(":", 1)[0] for ln in r.stdout.strip().splitlines()] == ["deploy/advisor.example.yaml", "  chat-8b"]


def test_check_config_shows_the_capacity_pass_of_each_deployment(tmp_path: Path) -> None:
    """Walkthrough: check-config validated a config without showing what the advisor will assume of each deployment.
    One line each: weights and KV pool per GPU, KV tokens, max concurrency, and the settings that sized them. The
    figures for Llama-3.1-8B-Instruct (bf16) on one H100-SXM at the default 0.9 and max_num_seqs 256, by hand (the
    derivation of tests/rules/helpers.py):"""
    memory = 84_986_665_370  # H100-SXM, 79.15 GiB
    usable = int(memory * 0.9)  # 76,487,998,833 B
    weights = 8_030_261_248 * 2 + 131_072 * 128 * 2  # parameters × bf16 + rotary cache: 16,094,076,928 B
    activation = max(8_192 * 2 * (6 * 4_096 + 3 * 14_336), 256 * 128_256 * 39)  # forward vs sampler at 256 seqs
    overhead = activation + int(0.13 * 2**30)  # + non-torch memory
    pool = usable - weights - overhead  # 58,973,827,564 B
    kv_per_token = 2 * 32 * 8 * 128 * 2  # K and V × layers × KV heads × head size × bf16
    blocks = pool // (16 * kv_per_token)  # 28,120
    assert blocks * 16 == 449_920
    f = tmp_path / "advisor.yaml"
    f.write_text(
        """
deployments:
  - name: chat-8b
    engine: vllm
    targets: ["http://127.0.0.1:8000/metrics"]
    model: meta-llama/Llama-3.1-8B-Instruct
    gpu: H100-SXM
    max_model_len: 8192
    max_num_seqs: 256
    slo: {ttft_seconds: 2.5, tpot_seconds: 0.1}
  - name: chat-8b-tp2
    engine: vllm
    targets: ["http://127.0.0.1:8001/metrics"]
    model: meta-llama/Llama-3.1-8B-Instruct
    gpu: H100-SXM
    tensor_parallel_size: 2
    max_model_len: 8192
    slo: {ttft_seconds: 2.5, tpot_seconds: 0.1}
""",
        encoding="utf-8",
    )
    r = run_cli("check-config", str(f))
    assert r.returncode == 0, r.stderr
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("  chat-8b:")]
    assert f"weights {weights / 2**30:.2f} GiB and KV pool {pool / 2**30:.2f} GiB per GPU" in line, line
    assert "weights 14.99 GiB and KV pool 54.92 GiB per GPU" in line  # the same, written out
    assert f"{blocks * 16:,} KV tokens per target" in line, line
    assert f"max concurrency {blocks / (8192 // 16):.2f} at max-model-len 8,192" in line, line  # 54.92
    assert "vllm's accounting" in line and "gpu-memory-utilization 0.9" in line and "max-num-seqs 256" in line
    # every deployment gets its line; the other's figures are the daemon's own (its context builder)
    (other,) = [ln for ln in r.stdout.splitlines() if ln.startswith("  chat-8b-tp2:")]
    ctx = deployment_context(load_config(f).deployments[1], tmp_path)
    assert f"{ctx.capacity.kv_cache_tokens:,} KV tokens per target" in other, other
    assert "TP 2" in other and "max-num-seqs 1024 by default" in other, other


def test_check_config_warns_of_a_pool_that_cannot_hold_one_max_length_request(tmp_path: Path) -> None:
    """Adversarial review: check-config called valid a vLLM deployment whose pool cannot hold one request of
    max-model-len (vLLM refuses to start: "To serve at least one request with the model's max seq len …"). By hand,
    Llama-3.1-8B-Instruct bf16 on one H100-SXM at 0.21 and 256 sequences: 84,986,665,370 × 0.21 = 17,847,199,727 B −
    weights 16,094,076,928 − overhead 1,420,094,341 = 333,028,458 B → 158 blocks of 16 tokens = 2,528 < 8,192."""
    budget = int(84_986_665_370 * 0.21)
    blocks = (budget - 16_094_076_928 - 1_420_094_341) // (16 * 131_072)
    assert blocks * 16 == 2_528
    f = tmp_path / "advisor.yaml"
    f.write_text(
        """
deployments:
  - name: tight
    targets: ["http://127.0.0.1:8000/metrics"]
    model: meta-llama/Llama-3.1-8B-Instruct
    gpu: H100-SXM
    gpu_memory_utilization: 0.21
    max_model_len: 8192
    max_num_seqs: 256
    slo: {ttft_seconds: 2.5, tpot_seconds: 0.1}
""",
        encoding="utf-8",
    )
    r = run_cli("check-config", str(f))
    assert r.returncode == 0, r.stderr
    assert (
        f"  tight: warning: the KV pool ({blocks * 16:,} tokens) cannot hold one request of max-model-len 8,192; "
        "vLLM refuses to start with this configuration"
    ) in r.stdout.splitlines(), r.stdout
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("  tight: weights")]
    assert "(vllm's accounting until the engine is detected;" in line, line  # engine auto: said after any "with"


def _readme_config() -> str:
    """The YAML block of README's Configuration section."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Configuration\n", 1)[1]
    return section.split("```yaml\n", 1)[1].split("```", 1)[0]


@pytest.mark.parametrize("interval", [None, "5s", "1s"], ids=["as written", "scrapes every 5s", "every 1s"])
def test_readmes_example_config_is_valid_and_stays_valid_with_a_shorter_interval(
    tmp_path: Path, interval: str | None
) -> None:
    """Walkthrough: README's example set 3s + 9s scrape timeouts (what 15 s gives unset), so an operator who
    lowered its scrape_interval got a config error. The example sets no timeout it does not need."""
    text = _readme_config()
    assert "scrape_interval: 15s" in text
    if interval is not None:
        text = text.replace("scrape_interval: 15s", f"scrape_interval: {interval}")
    f = tmp_path / "advisor.yaml"
    f.write_text(text, encoding="utf-8")
    r = _cli("check-config", str(f))
    assert r.returncode == 0, r.stderr
    assert "valid — 1 deployment(s), 2 target(s), 1 receiver(s)" in r.stdout


def test_three_wrong_fields_are_all_reported_with_their_paths(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(
        """
scrape_interval: soon
deployments:
  - name: chat-8b
    engine: vllm
    targets: ["http://127.0.0.1:8000/metrics"]
    model: meta-llama/Llama-3.1-8B-Instruct
    gpu: H100-SXM
    gpu_memory_utilization: 1.5
    max_model_len: 8192
    slo: {ttft_seconds: 2.5, tpot_seconds: 0.1, target_ratio: 2}
"""
    )
    r = _cli("check-config", str(f))
    assert r.returncode == 2
    assert "3 invalid field(s)" in r.stderr
    assert "scrape_interval: invalid duration 'soon'" in r.stderr
    assert "deployments[0].gpu_memory_utilization:" in r.stderr
    assert "deployments[0].slo.target_ratio:" in r.stderr


@pytest.mark.parametrize("ratio", [1, 1.0])
def test_a_target_ratio_of_one_is_refused_as_plan_refuses_it(ratio: float) -> None:
    """Breaker, 2026-12-03: ``target_ratio: 1.0`` was accepted while ``plan --target-ratio 1`` and the queueing
    model (``advisor.capacity.queueing.SLO``, which the replicas rule builds from it) refuse it."""
    slo = {"ttft_seconds": 2.5, "tpot_seconds": 0.1, "target_ratio": ratio}
    with pytest.raises(ConfigError) as err:
        parse_config({"deployments": [dict(GOOD["deployments"][0], slo=slo)]})
    assert [p for p, _ in err.value.problems] == ["deployments[0].slo.target_ratio"]
    slo["target_ratio"] = 0.999
    assert (
        parse_config({"deployments": [dict(GOOD["deployments"][0], slo=slo)]}).deployments[0].slo.target_ratio == 0.999
    )


def test_unknown_model_gpu_and_engine_are_named(tmp_path: Path) -> None:
    data = {"deployments": [dict(GOOD["deployments"][0], model="no/such-model", gpu="H9000")]}
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    paths = [p for p, _ in err.value.problems]
    assert paths == ["deployments[0].model", "deployments[0].gpu"]
    data = {"deployments": [dict(GOOD["deployments"][0], engine="vllm2")]}
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    assert err.value.problems[0][0] == "deployments[0].engine"


def test_unknown_keys_and_missing_slo_are_errors() -> None:
    dep = dict(GOOD["deployments"][0], tensor_paralel_size=2)
    del dep["slo"]
    with pytest.raises(ConfigError) as err:
        parse_config({"deployments": [dep]})
    paths = sorted(p for p, _ in err.value.problems)
    assert paths == ["deployments[0].slo", "deployments[0].tensor_paralel_size"]


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    f = tmp_path / "broken.yaml"
    f.write_text("deployments:\n  - name: [unclosed\n")
    with pytest.raises(ConfigError) as err:
        load_config(f)
    assert err.value.problems[0][0].startswith("line ")


def test_duplicate_names_and_weights_that_do_not_fit() -> None:
    dep = GOOD["deployments"][0]
    with pytest.raises(ConfigError) as err:
        parse_config({"deployments": [dep, dep]})
    assert err.value.problems == [
        ("deployments[1].name", "deployment names must be unique: 'chat-8b' repeats, first at deployments[0]")
    ]
    huge = dict(dep, model="meta-llama/Llama-3.1-70B-Instruct", gpu="L4")
    with pytest.raises(ConfigError) as err:
        parse_config({"deployments": [huge]})
    assert err.value.problems[0][0] == "deployments[0]"


def test_config_json_path_is_resolved_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "config.json").write_text(
        '{"hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,'
        ' "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 2048,'
        ' "torch_dtype": "bfloat16"}'
    )
    y = tmp_path / "a.yaml"
    y.write_text(
        "deployments:\n  - name: tiny\n    targets: ['http://127.0.0.1:1/metrics']\n    model: tiny/config.json\n"
        "    gpu_memory_gib: 1\n    max_model_len: 1024\n    slo: {ttft_seconds: 1, tpot_seconds: 0.1}\n"
    )
    cfg = load_config(y)
    assert cfg.deployments[0].model == "tiny/config.json"


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("scrape_interval", ".nan", "scrape_interval"),
        ("scrape_interval", ".inf", "scrape_interval"),
        ("scrape_interval", "9" * 400, "scrape_interval"),
        ("evaluation_window", "2y", "evaluation_window"),
    ],
)
def test_non_finite_or_huge_durations_are_errors(tmp_path: Path, field: str, value: str, path: str) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(
        f"{field}: {value}\ndeployments:\n  - name: a\n    targets: ['http://127.0.0.1:1/metrics']\n"
        "    model: meta-llama/Llama-3.1-8B-Instruct\n    gpu: H100\n    max_model_len: 8192\n"
        "    slo: {ttft_seconds: 1, tpot_seconds: 0.1}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_config(f)
    assert [p for p, _ in err.value.problems] == [path]


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), 1e300])
def test_non_finite_numbers_are_errors(bad: float) -> None:
    dep = dict(GOOD["deployments"][0], gpu_memory_gib=bad)
    with pytest.raises(ConfigError) as err:
        parse_config({"deployments": [dep]})
    assert [p for p, _ in err.value.problems] == ["deployments[0].gpu_memory_gib"]


def test_bad_target_urls_are_named_by_index_and_never_echo_credentials() -> None:
    targets = [
        "http://127.0.0.1:8000/metrics",
        "http://127.0.0.1:99999/m",
        "htp://admin:S3cretPW@10.0.0.1/metrics?token=TOK",
        "http://[::1/m",
    ]
    dep = dict(GOOD["deployments"][0], targets=targets)
    with pytest.raises(ConfigError) as err:
        parse_config({"deployments": [dep]})
    paths = [p for p, _ in err.value.problems]
    assert paths == ["deployments[0].targets[1]", "deployments[0].targets[2]", "deployments[0].targets[3]"]
    assert "S3cretPW" not in str(err.value) and "TOK" not in str(err.value)


def test_targets_equal_once_redacted_are_rejected() -> None:
    targets = ["http://u1:p1@127.0.0.1:8000/metrics?rank=0", "http://u2:p2@127.0.0.1:8000/metrics?rank=1"]
    with pytest.raises(ConfigError) as err:
        parse_config({"deployments": [dict(GOOD["deployments"][0], targets=targets)]})
    assert "is one target with targets[0]" in str(err.value)
    assert "p2" not in str(err.value)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("http://127.0.0.1:8000/metrics", "http://127.0.0.1:8000/metrics/"),  # FastAPI Mount answers both
        ("http://Engine-0:8000/metrics", "http://engine-0:8000/metrics"),  # host names are case-blind
        ("http://engine-0/metrics", "http://engine-0:80/metrics"),  # the scheme's default port
        ("https://engine-0/metrics", "HTTPS://engine-0:443/metrics//"),
        # breaker 16: requests sends these as /metrics to 127.0.0.1 and ::1
        ("http://127.0.0.1:8000/metrics", "http://127.0.0.1:8000/metric%73"),
        ("http://127.0.0.1:8000/metrics", "http://127.0.0.1:8000/metrics/../metrics"),
        ("http://127.0.0.1:8000/metrics", "http://127.0.0.1:8000/./metrics"),
        ("http://127.0.0.1:8000/metrics", "http://127.1:8000/metrics"),
        ("http://[::1]:8000/metrics", "http://[0:0:0:0:0:0:0:1]:8000/metrics"),
        ("http://127.0.0.1:8000/metrics", "http://[::ffff:127.0.0.1]:8000/metrics"),  # breaker 26: IPv4-mapped
        ("http://10.0.0.7:8000/metrics", "http://[::ffff:a00:7]:8000/metrics"),
    ],
)
def test_one_page_written_two_ways_is_one_engine_not_two_replicas(first: str, second: str) -> None:
    """Breaker 13: ``/metrics`` and ``/metrics/`` were two replicas of one engine (every per-replica figure halved,
    the replica count doubled)."""
    with pytest.raises(ConfigError) as err:
        parse_config({"deployments": [dict(GOOD["deployments"][0], targets=[first, second])]})
    assert [p for p, _ in err.value.problems] == ["deployments[0].targets"]
    assert "targets[1]" in str(err.value) and "is one target with targets[0]" in str(err.value)


def test_pages_on_other_ports_or_paths_stay_two_engines() -> None:
    targets = [
        "http://engine-0:8000/metrics",
        "http://engine-0:8001/metrics",
        "http://engine-0:8000/metrics/1",
        "http://engine-0:8000/metrics%2F1",  # an escaped slash is no path separator: another path
        "http://127.0.0.2:8000/metrics",
    ]
    cfg = parse_config({"deployments": [dict(GOOD["deployments"][0], targets=targets)]})
    assert cfg.deployments[0].targets == targets


def test_receiver_url_errors_do_not_echo_the_url() -> None:
    data = {"deployments": GOOD["deployments"], "receivers": [{"name": "ops", "url": "htp://h/T0SECRET"}]}
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    assert err.value.problems[0][0] == "receivers[0].url"
    assert "T0SECRET" not in str(err.value)


def test_catalog_errors_are_reported_with_schema_errors() -> None:
    dep = dict(GOOD["deployments"][0], gpu="H999", gpu_memory_utilization=1.5)
    with pytest.raises(ConfigError) as err:
        parse_config({"deployments": [dep], "scrape_interval": "soon"})
    assert sorted(p for p, _ in err.value.problems) == [
        "deployments[0].gpu",
        "deployments[0].gpu_memory_utilization",
        "scrape_interval",
    ]


def test_a_gpu_name_is_checked_even_with_a_memory_override() -> None:
    dep = dict(GOOD["deployments"][0], gpu="H10O", gpu_memory_gib=80)
    with pytest.raises(ConfigError) as err:
        parse_config({"deployments": [dep]})
    assert [p for p, _ in err.value.problems] == ["deployments[0].gpu"]


def test_inverted_hysteresis_band_and_context_beyond_the_model_are_errors() -> None:
    data = {
        "deployments": [dict(GOOD["deployments"][0], max_model_len=1_000_000)],
        "rules": {"kv_saturation": {"usage_threshold": 0.9, "resolve_below": 0.95}},
    }
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    paths = sorted(p for p, _ in err.value.problems)
    assert paths == ["deployments[0].max_model_len", "rules.kv_saturation"]
    assert "131072" in str(err.value)  # Llama-3.1's max_position_embeddings


def test_unreadable_model_configs_are_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00garbage")
    for model, expect in [("bin.json", "not UTF-8"), ("~nosuchuser-xyz/config.json", "")]:
        dep = dict(GOOD["deployments"][0], model=model)
        with pytest.raises(ConfigError) as err:
            parse_config({"deployments": [dep]}, base_dir=tmp_path)
        assert err.value.problems[0][0] == "deployments[0].model"
        assert expect in err.value.problems[0][1]


def test_check_config_says_which_part_an_ambiguous_gpu_alias_stands_for(tmp_path: Path) -> None:
    text = (REPO_ROOT / "deploy" / "advisor.example.yaml").read_text()
    assert "gpu: H100-SXM" in text
    f = tmp_path / "advisor.yaml"
    f.write_text(text.replace("gpu: H100-SXM", "gpu: H100"))
    r = _cli("check-config", str(f))
    assert r.returncode == 0, r.stderr
    note = r.stdout.splitlines()[1]
    assert "deployments[0].gpu 'H100' is the NVIDIA H100 SXM" in note
    assert "h100-pcie" in note and "h100-nvl" in note


def test_a_misspelt_key_is_answered_with_the_key_it_is_close_to(tmp_path: Path) -> None:
    text = (REPO_ROOT / "deploy" / "advisor.example.yaml").read_text()
    assert "    max_model_len: 8192" in text and "\nscrape_interval:" in text
    f = tmp_path / "advisor.yaml"
    f.write_text(
        text.replace("    max_model_len: 8192", "    max_model_lenght: 8192").replace(
            "\nscrape_interval:", "\nscrape_intervall:", 1
        )
    )
    r = _cli("check-config", str(f))
    assert r.returncode == 2
    assert "deployments[0].max_model_lenght: unknown key; did you mean 'max_model_len'?" in r.stderr
    assert "scrape_intervall: unknown key; did you mean 'scrape_interval'?" in r.stderr


def test_an_unknown_model_or_gpu_is_answered_with_the_closest_names() -> None:
    from advisor.capacity.hardware import get_gpu
    from advisor.capacity.models import get_preset
    from advisor.errors import UnknownGPUError, UnknownModelError

    with pytest.raises(UnknownModelError) as model_err:
        get_preset("meta-llama/Llama-3.1-8B-Instuct")
    assert "did you mean 'meta-llama/Llama-3.1-8B-Instruct'" in str(model_err.value)
    assert "advisor/tiny-test-model" not in str(model_err.value)  # a test fixture, not for operators
    with pytest.raises(UnknownGPUError) as gpu_err:
        get_gpu("h100-sxn")
    assert "did you mean 'h100-sxm'" in str(gpu_err.value)


def test_two_deployments_scraping_one_target_for_the_same_model_are_warned_about(tmp_path: Path) -> None:
    """Breaker, 2026-12-03: a copied deployment block whose URL was left unchanged passed check-config silently;
    the engine's figures were then counted under two names. Two models of one multi-model page are fine."""
    first = dict(GOOD["deployments"][0])
    copy = dict(first, name="chat-8b-copy", targets=["http://user:secret@127.0.0.1:8000/metrics"])
    f = tmp_path / "advisor.yaml"
    f.write_text(yaml.safe_dump({"deployments": [first, copy]}))
    r = _cli("check-config", str(f))
    assert r.returncode == 0, r.stderr
    warned = [line for line in r.stderr.splitlines() if "both scrape" in line]
    assert warned == [
        "capacity-advisor: warning: deployments 'chat-8b-copy' and 'chat-8b' both scrape "
        "http://127.0.0.1:8000/metrics for the same model: the same engine twice (change the URL, or set "
        "served_model on each if the page serves several models)"
    ]
    assert "secret" not in r.stderr
    two_models = [dict(first, served_model="llama-a"), dict(copy, served_model="llama-b")]
    assert shared_targets(parse_config({"deployments": two_models})) == []


def test_two_deployments_scraping_one_page_written_two_ways_are_warned_about() -> None:
    """``/metrics/`` in a copied block is the same page as ``/metrics``: one engine counted under two names."""
    first = dict(GOOD["deployments"][0], targets=["http://127.0.0.1:8000/metrics"])
    copy = dict(first, name="chat-8b-copy", targets=["HTTP://127.0.0.1:8000/metrics/"])
    warned = shared_targets(parse_config({"deployments": [first, copy]}))
    assert len(warned) == 1 and "'chat-8b-copy' and 'chat-8b' both scrape" in warned[0]


def test_check_config_warns_of_what_run_would_refuse_on_this_machine(tmp_path: Path) -> None:
    """Breaker, 2026-12-04: check-config said "valid" (and nothing more) for a state_file in a missing folder, an
    outbox_dir that is a file and a missing file_sd file, all of which `run` refuses at start. They stay valid (a
    config is often checked on another machine) but each is warned about, naming the field."""
    dep = dict(GOOD["deployments"][0], file_sd=[str(tmp_path / "missing.json")])
    del dep["targets"]
    (tmp_path / "a-file").write_text("x")
    f = tmp_path / "advisor.yaml"
    f.write_text(
        yaml.safe_dump(
            {
                "state_file": str(tmp_path / "no-dir" / "s.json"),
                "outbox_dir": str(tmp_path / "a-file"),
                "deployments": [dep],
            }
        )
    )
    r = _cli("check-config", str(f))
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if "would refuse to start" in line]
    assert said == [
        f"capacity-advisor: warning: on this machine the daemon would refuse to start: state_file: the folder "
        f"{str(tmp_path / 'no-dir')!r} does not exist",
        f"capacity-advisor: warning: on this machine the daemon would refuse to start: outbox_dir: "
        f"{str(tmp_path / 'a-file')!r} exists and is not a folder",
        f"capacity-advisor: warning: on this machine the daemon would refuse to start: deployments[0].file_sd: "
        f"{str(tmp_path / 'missing.json')!r} is not a readable file here",
    ]
    run = _cli("once", "--config", str(f))
    assert run.returncode == 2 and "cannot read" in run.stderr  # and the daemon's start refuses the same file


@pytest.mark.parametrize(
    ("settings", "scrapes", "span", "need"),
    [
        ({"evaluation_window": "5m", "rules": {"replicas": {"min_history": "10m"}}}, 21, 300, 600),  # 15 s default
        ({"scrape_interval": "2m", "evaluation_window": "5m"}, 3, 240, 30),
        ({"scrape_interval": "5m", "evaluation_window": "5m"}, 2, 300, 30),
    ],
)
def test_a_window_that_can_never_size_replicas_is_warned_about(
    tmp_path: Path, settings: dict[str, object], scrapes: int, span: int, need: int
) -> None:
    """Breaker, 2026-12-04: these passed check-config silently, yet every cycle withholds the replica count (a
    window must span ≥ min_history over ≥ 4 scrapes: ⌊window ÷ interval⌋ + 1 scrapes over ⌊window ÷ interval⌋ ×
    interval seconds at best)."""
    f = tmp_path / "advisor.yaml"
    f.write_text(yaml.safe_dump({**GOOD, **settings}))
    r = _cli("check-config", str(f))
    assert r.returncode == 0, r.stderr
    warned = [line for line in r.stderr.splitlines() if "no replica count" in line]
    interval = {2: 300, 3: 120, 21: 15}[scrapes]
    assert warned == [
        f"capacity-advisor: warning: no replica count can ever be proposed: evaluation_window 300s at "
        f"scrape_interval {interval}s holds at most {scrapes} scrape(s) spanning {span}s, and a replica count needs "
        f"≥ {need}s (rules.replicas.min_history) over ≥ 4 scrapes: lengthen evaluation_window, scrape more often or "
        "lower min_history"
    ]


def test_the_demo_and_the_default_windows_can_size_replicas() -> None:
    from advisor.config import replica_history_warnings
    from advisor.demo import demo_config

    assert replica_history_warnings(parse_config(GOOD)) == []  # 15 s over 5 m, min_history 30 s
    assert replica_history_warnings(demo_config(GOOD["deployments"])) == []  # 1 s over 5 s, min_history 4 s


def test_check_config_warns_of_a_state_file_that_is_a_fifo(tmp_path: Path) -> None:
    """Bad-input breaker, 2026-12-06: a ``state_file`` that is a named pipe passed check-config without a word, and
    ``run`` then exited with "cannot read state file … not a regular file"."""
    import os

    fifo = tmp_path / "state.json"
    os.mkfifo(fifo)
    f = tmp_path / "advisor.yaml"
    f.write_text(yaml.safe_dump({"state_file": str(fifo), "deployments": GOOD["deployments"]}))
    r = _cli("check-config", str(f))
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if "would refuse to start" in line]
    assert said == [
        "capacity-advisor: warning: on this machine the daemon would refuse to start: state_file: "
        f"{str(fifo)!r} is not a regular file (a FIFO, socket or device)"
    ]


def test_check_config_warns_when_a_llamacpp_cache_cannot_fit_the_gpu(tmp_path: Path) -> None:
    """Bad-input breaker, 2026-12-06: ``engine: llamacpp`` with 256 slots of 8,192 tokens printed "valid" and "KV pool
    256.00 GiB per GPU" for an 80 GB H100 without a word. llama.cpp's pool is ``--ctx-size`` cells, not what the
    memory leaves: Llama-3.1-8B's f16 cache is 2 × 32 layers × 8 KV heads × 128 × 2 B = 128 KiB a token, so 256 ×
    8,192 = 2,097,152 cells are 256 GiB."""
    dep = dict(GOOD["deployments"][0], engine="llamacpp", max_num_seqs=256, max_model_len=8192)
    f = tmp_path / "advisor.yaml"
    f.write_text(yaml.safe_dump({"deployments": [dep]}))
    r = _cli("check-config", str(f))
    assert r.returncode == 0, r.stderr
    assert "KV pool 256.00 GiB per GPU" in r.stdout
    warned = [line for line in r.stdout.splitlines() if "warning:" in line]
    assert len(warned) == 1 and "do NOT fit in" in warned[0] and "KV 256.00 GiB" in warned[0], r.stdout
    fits = dict(dep, max_num_seqs=4)  # 4 × 8,192 cells: 4 GiB beside ~15 GiB of weights
    f.write_text(yaml.safe_dump({"deployments": [fits]}))
    r = _cli("check-config", str(f))
    assert r.returncode == 0 and "do NOT fit" not in r.stdout + r.stderr, r.stdout


def test_a_file_sd_target_that_is_a_listed_page_written_another_way_is_listed_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Breaker 16: file_sd targets skipped the duplicate check: ``127.0.0.1:18101`` and ``127.0.0.1:018101`` beside a
    static ``…/metrics/`` made one engine three replicas (24 running read from one engine's 8)."""
    from advisor.assembly import resolve_targets

    (tmp_path / "sd.json").write_text('[{"targets": ["127.0.0.1:18101", "127.0.0.1:018101", "127.0.0.1:18102"]}]')
    dep = dict(GOOD["deployments"][0], targets=["http://127.0.0.1:18101/metrics/"], file_sd=["sd.json"])
    cfg = parse_config({"deployments": [dep]}, base_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="advisor.assembly"):
        urls = resolve_targets(cfg.deployments[0], tmp_path)
    assert urls == ["http://127.0.0.1:18101/metrics/", "http://127.0.0.1:18102/metrics"]
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2 and all("is the same page as http://127.0.0.1:18101/metrics/" in w for w in warned)


@pytest.mark.parametrize(
    "host",
    ["127.1", "2130706433", "0x7f.1", "0177.0.0.1", "10.1.2", "1.2.3.4", "4294967295", "256.1.1.1", "1.2.65536",
     "4294967296", "08.1", "0x", "1_0.0.0.1", "1.2.3.4.5", "engine-0"],
)  # fmt: skip
def test_endpoint_key_reads_an_ipv4_host_as_the_resolver_does(host: str) -> None:
    """``127.1`` reaches 127.0.0.1 (``inet_aton``, which the resolver uses): one key with it; a host the C library
    does not read as an address stays a name."""
    import socket

    from advisor.redact import endpoint_key

    try:
        address = socket.inet_ntoa(socket.inet_aton(host))
    except OSError:
        address = host
    assert endpoint_key(f"http://{host}:9/metrics") == f"http://{address}:9/metrics"


def test_check_config_names_a_file_sd_target_that_is_a_listed_page(tmp_path: Path) -> None:
    """Breaker 17: check-config said "valid" without a word of a file_sd target the daemon would list once."""
    (tmp_path / "sd.json").write_text('[{"targets": ["127.0.0.1:18101", "127.0.0.1:18102"]}]')
    dep = dict(GOOD["deployments"][0], targets=["http://127.0.0.1:18101/metrics/"], file_sd=["sd.json"])
    f = tmp_path / "advisor.yaml"
    f.write_text(yaml.safe_dump({"deployments": [dep]}))
    r = _cli("check-config", str(f))
    assert r.returncode == 0, r.stderr
    warned = [line for line in r.stderr.splitlines() if "file_sd target" in line]
    assert warned == [
        f"capacity-advisor: warning: deployment {dep['name']!r}: file_sd target http://127.0.0.1:18101/metrics is "
        "the same page as http://127.0.0.1:18101/metrics/: listed once"
    ], r.stderr


@pytest.mark.parametrize(
    ("window", "interval", "warned"),
    [
        ("30s", "2s", None),  # 15 scrapes spanning 28 s at most phases: 30 s at the window's resolution
        ("31s", "2s", None),
        ("45s", "15s", None),  # 3 scrapes at most phases, 4 spanning 45 s only when one lands on the window's start
        ("29s", "2s", "no replica count can ever be proposed"),
    ],
)
def test_a_window_as_long_as_min_history_is_not_warned_about_but_one_that_flickers_is(
    tmp_path: Path, window: str, interval: str, warned: str | None
) -> None:
    """Walkthrough, 2026-12-07: ``evaluation_window: 30s`` at 2 s scrapes passed check-config and then flickered
    (28 s seen against 30 s). The daemon now reads such a window at its scrapes' resolution, so it is valid; a
    window whose scrapes reach ``min_history`` only at some phases is warned about as flickering."""
    from advisor.config import replica_history_warnings

    cfg = parse_config({**GOOD, "evaluation_window": window, "scrape_interval": interval})
    got = replica_history_warnings(cfg)
    if window == "45s":  # 3 scrapes (< 4) at most phases, 4 only at one: the count comes and goes
        assert len(got) == 1 and got[0].startswith("replica counts will come and go: evaluation_window 45s at ")
        assert "holds 3 scrape(s) spanning 30s on most cycles (4 spanning 45s only when" in got[0]
    elif warned is None:
        assert got == []
    else:
        assert len(got) == 1 and got[0].startswith(warned)
