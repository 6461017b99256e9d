"""``--web.config.file``: TLS with a certificate made in the test, basic auth with bcrypt, reload on change."""

from __future__ import annotations

import datetime
import ipaddress
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from advisor.config import parse_config
from advisor.errors import ConfigError
from advisor.exporter import make_registry
from advisor.server import AdvisorHTTPServer
from advisor.service import Service
from advisor.standin import StandInServer
from advisor.web_config import WebConfigSource, load_web_config
from tests.http.conftest import config

pytestmark = pytest.mark.integration

PASSWORD = "correct horse battery staple"


def _self_signed(folder: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    crt, pem = folder / "server.crt", folder / "server.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return crt, pem


@pytest.fixture
def served(saturated_standin: StandInServer, tmp_path: Path) -> Iterator[tuple[AdvisorHTTPServer, Path, Path]]:
    """A server with TLS and basic auth from a web config file (relative cert paths), after cycles that
    opened a recommendation."""
    crt, _ = _self_signed(tmp_path)
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
    web = tmp_path / "web.yml"
    web.write_text(
        f"tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  alice: '{hashed}'\n"
    )
    registry, collector, metrics = make_registry()
    svc = Service(parse_config(config(saturated_standin.url(), tmp_path / "state.json")), collector, metrics)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        res = svc.run_once()
        if any(d.recommendations for d in res.deployments):
            break
        time.sleep(0.5)
    srv = AdvisorHTTPServer(("127.0.0.1", 0), svc, registry, web_config=web)
    srv.start_background()
    # cycles go on while the test runs, as the daemon's loop runs them: /healthz answers 503 once none completed
    # for its bound (CI, 2026-12-04: on a loaded machine the requests below outlasted it after the last cycle)
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(0.5):
            svc.run_once()

    cycles = threading.Thread(target=loop, daemon=True)
    cycles.start()
    try:
        yield srv, crt, web
    finally:
        stop.set()
        cycles.join(30)
        srv.shutdown()
        srv.server_close()
        svc.close()


def test_tls_and_basic_auth_guard_everything_served(served: tuple[AdvisorHTTPServer, Path, Path]) -> None:
    srv, crt, _ = served
    url = srv.url()
    assert url.startswith("https://127.0.0.1:")
    for path in ("/", "/metrics", "/healthz", "/api/v1/recommendations", "/api/v1/openapi.json"):
        r = requests.get(url + path, verify=str(crt), timeout=30)
        assert r.status_code == 401, path
        assert r.headers["WWW-Authenticate"].startswith("Basic ")
        assert r.json()["status"] == 401
        ok = requests.get(url + path, verify=str(crt), auth=("alice", PASSWORD), timeout=30)
        assert ok.status_code == 200, (path, ok.text)
    assert requests.get(url + "/metrics", verify=str(crt), auth=("alice", "wrong"), timeout=30).status_code == 401
    assert requests.get(url + "/metrics", verify=str(crt), auth=("mallory", PASSWORD), timeout=30).status_code == 401
    doc = requests.get(url + "/api/v1/openapi.json", verify=str(crt), auth=("alice", PASSWORD), timeout=30).json()
    assert doc["security"] == [{"basic": []}]

    # plain HTTP to the TLS port gets no answer; the server keeps serving
    with pytest.raises(requests.ConnectionError):
        requests.get(url.replace("https://", "http://") + "/healthz", timeout=30)
    assert requests.get(url + "/healthz", verify=str(crt), auth=("alice", PASSWORD), timeout=30).status_code == 200


def test_basic_auth_allows_writes_and_records_who(served: tuple[AdvisorHTTPServer, Path, Path]) -> None:
    srv, crt, _ = served
    srv.loopback = False  # as if listening on a public address: basic auth is what allows the write
    recs = requests.get(
        srv.url() + "/api/v1/recommendations", verify=str(crt), auth=("alice", PASSWORD), timeout=10
    ).json()["recommendations"]
    assert recs, "the saturated stand-in should have opened a recommendation"
    r = requests.post(
        f"{srv.url()}/api/v1/recommendations/{recs[0]['id']}/ack",
        json={"reason": "on it"},
        verify=str(crt),
        auth=("alice", PASSWORD),
        timeout=30,
    )
    assert r.status_code == 200, r.text
    assert r.json()["recommendation"]["suppression"]["by"] == "alice"


def test_a_changed_web_config_is_reloaded_and_an_invalid_one_refused(
    served: tuple[AdvisorHTTPServer, Path, Path],
) -> None:
    srv, crt, web = served
    url = srv.url()
    other = bcrypt.hashpw(b"second", bcrypt.gensalt(4)).decode()
    web.write_text(
        f"tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  bob: '{other}'\n"
    )
    st = web.stat()
    os.utime(web, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    assert requests.get(url + "/healthz", verify=str(crt), auth=("bob", "second"), timeout=30).status_code == 200
    assert requests.get(url + "/healthz", verify=str(crt), auth=("alice", PASSWORD), timeout=30).status_code == 401

    web.write_text("basic_auth_users:\n  bob: plain-text-password\n")
    os.utime(web, ns=(st.st_atime_ns, st.st_mtime_ns + 4_000_000_000))
    time.sleep(0.01)
    # refused: the running configuration (TLS, bob) stays
    assert requests.get(url + "/healthz", verify=str(crt), auth=("bob", "second"), timeout=30).status_code == 200


def test_invalid_web_configs_name_every_problem(tmp_path: Path) -> None:
    f = tmp_path / "web.yml"
    f.write_text(
        "tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n  min_version: TLS99\n"
        "basic_auth_users:\n  alice: hunter2\n"
        "tls_config: {}\n"
    )
    with pytest.raises(ConfigError) as exc:
        load_web_config(f)
    text = str(exc.value)
    for needle in ("missing.crt", "missing.key", "min_version", "bcrypt hash", "tls_config"):
        assert needle in text, needle
    assert "hunter2" not in text
    with pytest.raises(ConfigError, match="cannot read"):
        WebConfigSource(tmp_path / "absent.yml")
    empty = tmp_path / "empty.yml"
    empty.write_text("")
    assert WebConfigSource(empty).current().ssl_context is None
