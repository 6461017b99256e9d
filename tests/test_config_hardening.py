"""Config mistakes that used to pass silently: repeated YAML keys, settings for a rule plugin that is not
installed, and request timeouts longer than the scrape interval. Also: the daemon queries its
``source: prometheus`` deployments concurrently, so one slow answer does not add up over deployments."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from advisor.config import load_config, parse_config
from advisor.errors import ConfigError
from advisor.exporter import make_registry
from advisor.service import Service
from advisor.web_config import load_web_config
from tests.conftest import reply
from tests.test_config import GOOD, _cli

DEPLOYMENT = """\
deployments:
  - name: chat-8b
    engine: vllm
    targets: ["http://127.0.0.1:8000/metrics"]
    model: meta-llama/Llama-3.1-8B-Instruct
    gpu: H100-SXM
    max_model_len: 8192
    slo: {ttft_seconds: 2.5, tpot_seconds: 0.1, target_ratio: 0.95}
"""


def _problems(exc: pytest.ExceptionInfo[ConfigError]) -> dict[str, str]:
    return dict(exc.value.problems)


# --- repeated keys ----------------------------------------------------------------------------------------


def test_a_repeated_key_is_an_error_naming_its_line(tmp_path: Path) -> None:
    f = tmp_path / "advisor.yaml"
    f.write_text("scrape_interval: 15s\n" + DEPLOYMENT + "scrape_interval: 30s\n")
    with pytest.raises(ConfigError) as exc:
        load_config(f)
    # the second scrape_interval is on line 10 (line 1, then the deployment's 8 lines)
    assert list(_problems(exc)) == ["line 10, column 1"]
    assert "duplicate key 'scrape_interval' (first set on line 1)" in _problems(exc)["line 10, column 1"]


def test_a_repeated_key_inside_a_deployment_is_caught_too(tmp_path: Path) -> None:
    f = tmp_path / "advisor.yaml"
    f.write_text(DEPLOYMENT + '    targets: ["http://10.0.0.9:8000/metrics"]\n')
    with pytest.raises(ConfigError) as exc:
        load_config(f)
    (where, message), *_ = exc.value.problems
    assert where == "line 9, column 5"  # after the deployment's 8 lines
    assert "duplicate key 'targets' (first set on line 4)" in message


def test_a_repeated_key_on_one_line_is_caught(tmp_path: Path) -> None:
    f = tmp_path / "advisor.yaml"
    f.write_text(DEPLOYMENT + "scrape: {read_timeout: 5s, read_timeout: 9s}\n")
    with pytest.raises(ConfigError, match="duplicate key 'read_timeout'"):
        load_config(f)


def test_a_merge_key_may_still_be_overridden(tmp_path: Path) -> None:
    f = tmp_path / "advisor.yaml"
    f.write_text(DEPLOYMENT + "scrape:\n  <<: {connect_timeout: 2s, read_timeout: 5s}\n  read_timeout: 7s\n")
    cfg = load_config(f)
    assert (cfg.scrape.connect_timeout, cfg.scrape.read_timeout) == (2.0, 7.0)


def test_the_web_config_refuses_repeated_keys_and_non_utf8(tmp_path: Path) -> None:
    f = tmp_path / "web.yml"
    f.write_text("basic_auth_users: {}\nbasic_auth_users: {}\n")
    with pytest.raises(ConfigError, match="duplicate key 'basic_auth_users'"):
        load_web_config(f)
    f.write_bytes(b"basic_auth_users:\n  admin: \xff\xfe\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_web_config(f)


# --- rule plugin settings ----------------------------------------------------------------------------------


def test_settings_for_a_plugin_that_is_not_installed_are_an_error() -> None:
    data = copy.deepcopy(GOOD)
    data["rules"] = {"plugins": {"cost_guard": {"max_dollars": 5}}}
    with pytest.raises(ConfigError) as exc:
        parse_config(data)
    problems = _problems(exc)
    assert list(problems) == ["rules.plugins.cost_guard"]
    assert "no rule plugin named 'cost_guard' is installed" in problems["rules.plugins.cost_guard"]
    assert "'advisor.rules'" in problems["rules.plugins.cost_guard"]


# --- timeouts against the interval -------------------------------------------------------------------------


def test_explicit_timeouts_longer_than_the_interval_are_an_error() -> None:
    data = copy.deepcopy(GOOD)
    data.update(scrape_interval="10s", scrape={"connect_timeout": "3s", "read_timeout": "9s"})  # 12 s > 10 s
    with pytest.raises(ConfigError) as exc:
        parse_config(data)
    problems = _problems(exc)
    assert list(problems) == ["scrape.read_timeout"]
    assert "(12s) must not exceed scrape_interval (10s)" in problems["scrape.read_timeout"]


def test_an_explicit_prometheus_timeout_is_checked_too() -> None:
    data = copy.deepcopy(GOOD)
    data.update(prometheus={"url": "http://127.0.0.1:9090", "connect_timeout": "20s"})
    with pytest.raises(ConfigError) as exc:
        parse_config(data)
    assert list(_problems(exc)) == ["prometheus.connect_timeout"]


def test_timeouts_over_a_lowered_interval_say_which_key_to_set_and_to_what(tmp_path: Path) -> None:
    """Walkthrough: an operator who copied README's 3s + 9s timeouts and lowered scrape_interval to 5s was told the
    sum must not exceed the interval, not what to set. The message names the key and the value that fits, and the
    alternative of leaving both unset (0.8 × 5 s = 4 s: connect a quarter, 1 s; read the rest, 3 s); each fix,
    applied, is accepted."""
    f = tmp_path / "advisor.yaml"
    f.write_text("scrape_interval: 5s\nscrape: {connect_timeout: 3s, read_timeout: 9s}\n" + DEPLOYMENT)
    r = _cli("check-config", str(f))
    assert r.returncode == 2
    (line,) = [ln for ln in r.stderr.splitlines() if "scrape.read_timeout" in ln]
    assert "(12s) must not exceed scrape_interval (5s)" in line, line
    assert "set scrape.read_timeout to at most 2s" in line, line  # 5 s − the 3 s connect timeout
    assert "or remove both timeouts (at 5s they take 1s + 3s" in line, line
    f.write_text("scrape_interval: 5s\nscrape: {connect_timeout: 3s, read_timeout: 2s}\n" + DEPLOYMENT)
    assert load_config(f).scrape.read_timeout == 2.0
    f.write_text("scrape_interval: 5s\n" + DEPLOYMENT)
    cfg = load_config(f)
    assert (cfg.scrape.connect_timeout, cfg.scrape.read_timeout) == pytest.approx((1.0, 3.0))


def test_one_timeout_that_alone_fills_the_interval_says_to_set_it_below_the_interval(tmp_path: Path) -> None:
    # prometheus.connect_timeout 20 s at 15 s scrapes: nothing is left for the read, whatever it is
    f = tmp_path / "advisor.yaml"
    f.write_text("prometheus: {url: 'http://127.0.0.1:9090', connect_timeout: 20s}\n" + DEPLOYMENT)
    r = _cli("check-config", str(f))
    assert r.returncode == 2
    (line,) = [ln for ln in r.stderr.splitlines() if "prometheus.connect_timeout" in ln]
    assert "connect_timeout (20s) leaves nothing of scrape_interval (15s) for read_timeout" in line, line
    assert "set prometheus.connect_timeout below 15s" in line, line
    assert "or remove it (at 15s the two take 3s + 9s" in line, line
    f.write_text("prometheus: {url: 'http://127.0.0.1:9090', connect_timeout: 14s}\n" + DEPLOYMENT)
    prom = load_config(f).prometheus
    assert prom is not None and prom.connect_timeout + prom.read_timeout <= 15.0


def test_default_timeouts_shrink_to_a_short_interval() -> None:
    data = copy.deepcopy(GOOD)
    data.update(scrape_interval="4s", evaluation_window="1m", prometheus={"url": "http://127.0.0.1:9090"})
    cfg = parse_config(data)
    # the deadline is 0.8 of the interval (3.2 s), leaving the rest for normalize and evaluate (issue 14):
    # connect at most a quarter of it (0.8 s), read the rest (2.4 s)
    assert (cfg.scrape.connect_timeout, cfg.scrape.read_timeout) == pytest.approx((0.8, 2.4))
    assert cfg.prometheus is not None
    assert (cfg.prometheus.connect_timeout, cfg.prometheus.read_timeout) == pytest.approx((0.8, 2.4))


def test_defaults_that_fit_are_kept() -> None:
    data = copy.deepcopy(GOOD)
    data.update(prometheus={"url": "http://127.0.0.1:9090"})
    # 15 s interval: the defaults' deadline is at most 0.8 of it (12 s), so scrape 3 + 10 becomes 3 + 9 and the
    # Prometheus default 3 + 30 becomes 3 + 9 (issue 14: defaults that filled the interval overran every cycle)
    cfg = parse_config(data)
    assert (cfg.scrape.connect_timeout, cfg.scrape.read_timeout) == (3.0, 9.0)
    assert cfg.prometheus is not None
    assert (cfg.prometheus.connect_timeout, cfg.prometheus.read_timeout) == (3.0, 9.0)


def test_defaults_leave_a_fifth_of_the_interval_and_explicit_timeouts_may_fill_it() -> None:
    data = copy.deepcopy(GOOD)
    data.update(scrape_interval="2s", evaluation_window="1m")
    cfg = parse_config(data)
    assert cfg.scrape.connect_timeout + cfg.scrape.read_timeout == pytest.approx(1.6)
    # one set: the other takes what it leaves of 0.8 of the interval
    data["scrape"] = {"connect_timeout": "1s"}
    cfg = parse_config(data)
    assert (cfg.scrape.connect_timeout, cfg.scrape.read_timeout) == pytest.approx((1.0, 0.6))
    # set by the file: up to the whole interval, as Prometheus allows scrape_timeout == scrape_interval
    data["scrape"] = {"connect_timeout": "0.5s", "read_timeout": "1.5s"}
    cfg = parse_config(data)
    assert (cfg.scrape.connect_timeout, cfg.scrape.read_timeout) == (0.5, 1.5)


# --- concurrent Prometheus queries -------------------------------------------------------------------------


def test_prometheus_deployments_are_queried_concurrently(
    http_server: Callable[[Callable[[BaseHTTPRequestHandler], None]], str], tmp_path: Path
) -> None:
    """A stand-in Prometheus that takes 0.5 s per answer records how many requests it holds at once: with three
    deployments, all three selectors are in flight together."""
    lock = threading.Lock()
    in_flight = 0
    high_water = 0
    paths: list[str] = []

    def handle(h: BaseHTTPRequestHandler) -> None:
        nonlocal in_flight, high_water
        with lock:
            in_flight += 1
            high_water = max(high_water, in_flight)
            paths.append(h.path.split("?")[0])
        time.sleep(0.5)
        with lock:
            in_flight -= 1
        body: dict[str, Any] = {"status": "success", "data": []}
        reply(h, 200, json.dumps(body).encode(), "application/json")

    url = http_server(handle)
    deployments = "".join(
        f"""  - name: dep-{i}
    source: prometheus
    engine: vllm
    selector: '{{job="vllm-{i}"}}'
    model: meta-llama/Llama-3.1-8B-Instruct
    gpu: H100-SXM
    max_model_len: 8192
    slo: {{ttft_seconds: 2.5, tpot_seconds: 0.1, target_ratio: 0.95}}
"""
        for i in range(3)
    )
    f = tmp_path / "advisor.yaml"
    f.write_text(f"prometheus: {{url: '{url}'}}\ndeployments:\n{deployments}")
    _, collector, metrics = make_registry()
    svc = Service(load_config(f), collector, metrics, base_dir=tmp_path)
    try:
        svc.scrape_once()
        result = svc.evaluate_once()
    finally:
        svc.close(timeout=1)
    assert paths.count("/api/v1/label/__name__/values") == 3
    assert high_water == 3
    # each deployment keeps its own outcome (no series: its target is down), none is lost
    assert sorted(d.name for d in result.deployments) == ["dep-0", "dep-1", "dep-2"]
    errors = {dep for (dep, _, _) in result.scrape_errors}
    assert errors == {"dep-0", "dep-1", "dep-2"}


# --- the prometheus section names the field at fault ---------------------------------------------------------


@pytest.mark.parametrize(
    ("prometheus", "field"),
    [
        ({"bearer_token_file": "t", "username": "u", "password_file": "p"}, "prometheus.bearer_token_file"),
        ({"username": "u"}, "prometheus.password_file"),
        ({"password_file": "p"}, "prometheus.username"),
        ({"url": "http://admin:hunter2@127.0.0.1:9090"}, "prometheus.url"),
        ({"url": "http://127.0.0.1:9090/?tenant=a"}, "prometheus.url"),
    ],
)
def test_prometheus_auth_mistakes_name_their_field(prometheus: dict[str, str], field: str) -> None:
    data = copy.deepcopy(GOOD)
    data["prometheus"] = {"url": "http://127.0.0.1:9090", **prometheus}
    with pytest.raises(ConfigError) as exc:
        parse_config(data)
    assert list(_problems(exc)) == [field]
    assert "hunter2" not in str(exc.value)


def _prom_service(tmp_path: Path, extra: str) -> Service:
    f = tmp_path / "advisor.yaml"
    f.write_text(
        f"prometheus: {{url: 'https://127.0.0.1:9', {extra}}}\n"
        + DEPLOYMENT.replace('    targets: ["http://127.0.0.1:8000/metrics"]\n', "    source: prometheus\n").replace(
            "    engine: vllm\n", "    engine: vllm\n    selector: '{job=\"vllm\"}'\n"
        )
    )
    _, collector, metrics = make_registry()
    return Service(load_config(f), collector, metrics, base_dir=tmp_path)


def test_secret_and_ca_files_are_read_relative_to_the_config_and_named_when_bad(tmp_path: Path) -> None:
    (tmp_path / "token").write_bytes(b"\xff\xfe not text")
    with pytest.raises(ConfigError) as exc:
        _prom_service(tmp_path, "bearer_token_file: token")
    assert list(_problems(exc)) == ["prometheus.bearer_token_file"]
    assert "not UTF-8" in _problems(exc)["prometheus.bearer_token_file"]

    (tmp_path / "token").write_text("line-one\nline-two\n")
    with pytest.raises(ConfigError) as exc:
        _prom_service(tmp_path, "bearer_token_file: token")
    assert list(_problems(exc)) == ["prometheus.bearer_token_file"]
    assert "line-one" not in str(exc.value)

    with pytest.raises(ConfigError) as exc:
        _prom_service(tmp_path, "ca_file: ca.pem")
    assert list(_problems(exc)) == ["prometheus.ca_file"]
    assert str(tmp_path / "ca.pem") in _problems(exc)["prometheus.ca_file"]

    # a CA file beside the config is found from any working directory
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    (tmp_path / "token").write_text("s3cret\n")
    svc = _prom_service(tmp_path, "ca_file: ca.pem, bearer_token_file: token")
    svc.close(timeout=1)


def test_a_timeout_left_unset_takes_what_the_set_one_leaves() -> None:
    data = copy.deepcopy(GOOD)
    data.update(scrape_interval="10s", scrape={"read_timeout": "9s"}, prometheus={"url": "http://127.0.0.1:9090"})
    data["prometheus"]["connect_timeout"] = "1s"
    cfg = parse_config(data)
    assert (cfg.scrape.connect_timeout, cfg.scrape.read_timeout) == (1.0, 9.0)  # connect 3 s → the 1 s left
    assert cfg.prometheus is not None
    # read 30 s → what connect leaves of 0.8 of the interval (issue 14: room for normalize and evaluate)
    assert (cfg.prometheus.connect_timeout, cfg.prometheus.read_timeout) == (1.0, 7.0)


def test_timeouts_that_exactly_fill_the_interval_are_accepted_despite_float_sums() -> None:
    data = copy.deepcopy(GOOD)
    data.update(
        scrape_interval="300ms", evaluation_window="1m", scrape={"connect_timeout": "100ms", "read_timeout": "200ms"}
    )
    cfg = parse_config(data)  # 0.1 + 0.2 = 0.30000000000000004
    assert (cfg.scrape.connect_timeout, cfg.scrape.read_timeout) == (0.1, 0.2)


def test_an_absurdly_short_interval_is_refused() -> None:
    data = copy.deepcopy(GOOD)
    data.update(scrape_interval="1ms", evaluation_window="1m")
    with pytest.raises(ConfigError) as exc:
        parse_config(data)
    assert list(_problems(exc)) == ["scrape_interval"]
    assert "at least 100ms" in _problems(exc)["scrape_interval"]


@pytest.mark.parametrize(
    ("text", "seconds"), [("1d", 86400.0), ("1w", 604800.0), ("1y", 365 * 86400.0), ("1d12h", 129600.0)]
)
def test_durations_take_prometheus_day_week_and_year_units(text: str, seconds: float) -> None:
    from advisor.config import parse_duration

    assert parse_duration(text) == seconds


# --- values YAML itself cannot build, and files that are not files ------------------------------------------


@pytest.mark.parametrize(
    "value", ["!!timestamp x", "!!int", '!!float ""', "!!bool maybe", "!!set [a]", "2020-13-45", "1" * 5000]
)
def test_a_value_yaml_cannot_build_is_a_config_error_at_its_line(tmp_path: Path, value: str) -> None:
    f = tmp_path / "advisor.yaml"
    f.write_text(DEPLOYMENT + f"state_file: {value}\n")
    with pytest.raises(ConfigError) as exc:
        load_config(f)
    (where, message), *_ = exc.value.problems
    assert where == "line 9, column 13"
    assert message.startswith("not valid YAML")


def test_a_fifo_is_refused_at_once_not_read_forever(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "advisor.yaml"
    os.mkfifo(fifo)
    r = _cli("check-config", str(fifo))
    assert r.returncode == 2
    assert "not a regular file" in r.stderr

    token = tmp_path / "token"
    os.mkfifo(token)
    cfg = tmp_path / "real.yaml"
    cfg.write_text(
        "prometheus: {url: 'http://127.0.0.1:9', bearer_token_file: token}\n"
        + DEPLOYMENT.replace('    targets: ["http://127.0.0.1:8000/metrics"]\n', "    source: prometheus\n").replace(
            "    engine: vllm\n", "    engine: vllm\n    selector: '{job=\"vllm\"}'\n"
        )
    )
    r = _cli("check-config", str(cfg))
    assert r.returncode == 2, r.stdout
    assert "prometheus.bearer_token_file" in r.stderr and "not a regular file" in r.stderr
    assert str(cfg) in r.stderr  # the file the problem is in, not "config"


def test_the_web_config_names_the_line_without_quoting_it(tmp_path: Path) -> None:
    f = tmp_path / "web.yml"
    f.write_text("basic_auth_users:\n  admin: $2y$10$FIRSTSECRETabcdefghijk\n  admin: $2y$10$OTHERSECRETabcdefghijk\n")
    with pytest.raises(ConfigError) as exc:
        load_web_config(f)
    assert "line 3, column 3" in str(exc.value) and "duplicate key 'admin'" in str(exc.value)
    assert "SECRET" not in str(exc.value)


@pytest.mark.parametrize(
    ("prometheus", "field"),
    [
        ({"url": "http://127.0.0.1:9090", "ca_file": "ca.pem"}, "prometheus.ca_file"),
        ({"headers": {"Authorization": "Bearer x"}, "bearer_token_file": "t"}, "prometheus.headers.Authorization"),
        ({"headers": {"X-Scope-OrgID": "a\nb"}}, "prometheus.headers.X-Scope-OrgID"),
        ({"headers": {"X-Scope-OrgID": "tenant-ö"}}, None),  # Latin-1 is sendable
        ({"headers": {"X-Scope-OrgID": "tenant-\u2028"}}, "prometheus.headers.X-Scope-OrgID"),
        ({"headers": {"Bad Name:": "x"}}, "prometheus.headers.'Bad Name:'"),
    ],
)
def test_prometheus_headers_and_ca_are_checked_in_the_config(prometheus: dict[str, Any], field: str | None) -> None:
    data = copy.deepcopy(GOOD)
    data["prometheus"] = {"url": "https://127.0.0.1:9090", **prometheus}
    if field is None:
        parse_config(data)
        return
    with pytest.raises(ConfigError) as exc:
        parse_config(data)
    assert list(_problems(exc)) == [field]


@pytest.mark.parametrize(
    ("content", "why"), [(b"", "empty"), (b"one\ntwo\n", "more than one line"), ("pässwörd€".encode(), "Latin-1")]
)
def test_a_password_file_must_hold_one_sendable_line(tmp_path: Path, content: bytes, why: str) -> None:
    (tmp_path / "pw").write_bytes(content)
    with pytest.raises(ConfigError) as exc:
        _prom_service(tmp_path, "username: u, password_file: pw")
    assert list(_problems(exc)) == ["prometheus.password_file"]
    assert why in _problems(exc)["prometheus.password_file"]


def test_a_secret_path_may_start_with_a_tilde(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "tok").write_text("s3cret\n")
    sub = tmp_path / "etc"
    sub.mkdir()
    svc = _prom_service(sub, "bearer_token_file: ~/tok")
    svc.close(timeout=1)


def test_check_config_reads_standard_input_and_a_process_substitution(tmp_path: Path) -> None:
    """The Kubernetes ConfigMap's recipe pipes the config in (walkthrough of 2026-12-06: ``check-config
    <(kubectl get cm …)`` gave "/dev/fd/63: cannot read: not a regular file" and ``check-config -`` "No such file").
    Standard input and an inherited pipe are read to their end; a named FIFO is still refused (test above)."""
    text = DEPLOYMENT
    r = subprocess.run(
        [sys.executable, "-m", "advisor.cli", "check-config", "-"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("<stdin>: valid — 1 deployment(s), 1 target(s)")
    r = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m advisor.cli check-config <(cat "$0")', str(_written(tmp_path, text))],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert re.match(r"/dev/fd/\d+: valid — 1 deployment\(s\)", r.stdout), r.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "advisor.cli", "check-config", "-"],
        input=text.replace("max_model_len: 8192", "max_model_len: -3"),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert bad.returncode == 2
    assert bad.stderr.startswith("<stdin>:") and "max_model_len" in bad.stderr


def _written(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "from-the-configmap.yaml"
    f.write_text(text)
    return f


@pytest.mark.parametrize(("char", "line", "column"), [("\x07", 9, 14), ("\x00", 9, 14), ("\x1b", 9, 14)])
def test_a_control_character_is_named_with_its_line_not_a_traceback(
    tmp_path: Path, char: str, line: int, column: int
) -> None:
    """Bad-input breaker of 2026-12-06: a BEL in the config ended ``check-config`` (and ``once``, ``run``, a reload)
    in PyYAML's ``ReaderError`` traceback — the loader checks the characters when it is built, outside the ``try``.
    The problem now names the line and column (counted here by hand: line 9 is ``state_file: x`` and the character,
    its 14th) and the code point."""
    f = tmp_path / "advisor.yaml"
    f.write_text(DEPLOYMENT + f"state_file: x{char}\n")
    with pytest.raises(ConfigError) as exc:
        load_config(f)
    assert exc.value.problems == [
        (
            f"line {line}, column {column}",
            f"not valid YAML: character U+{ord(char):04X} is not allowed (a control character)",
        )
    ]
    r = _cli("check-config", str(f))
    assert r.returncode == 2 and "Traceback" not in r.stderr and f"line {line}, column {column}" in r.stderr
