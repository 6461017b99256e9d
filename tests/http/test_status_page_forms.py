"""The status page's Acknowledge and Snooze forms against a running daemon on loopback: a state-changing POST
needs this advisor's Origin (or Referer) or the page's CSRF token, else 403 and nothing is recorded; each ack or
snooze records who (the client address without basic auth) and when, shown on the page and returned by the API.
Then the same in headless Chromium: the page's DOM has the "needs attention" list and the forms with the
token, a form submitted by Chromium with that token acknowledges, and a cross-site page's forged form is
refused."""

from __future__ import annotations

import html
import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import bcrypt
import pytest
import requests

from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.server import AdvisorHTTPServer
from advisor.service import Service
from advisor.standin import StandInServer
from tests.http.conftest import Daemon, config, start_daemon, stop_daemon
from tests.http.test_status_page import _render, needs_chromium

pytestmark = pytest.mark.integration

TOKEN_RE = re.compile(r"name=\"?csrf_token\"? value=\"([0-9a-f]+)\"|name='csrf_token' value='([0-9a-f]+)'")


def _token(page: str) -> str:
    m = TOKEN_RE.search(page)
    assert m is not None, "no CSRF token on the page"
    return m.group(1) or m.group(2)


def _rec_id(d: Daemon) -> str:
    return str(d.wait_open()[0]["id"])


def _suppression(d: Daemon, rec_id: str) -> dict[str, Any] | None:
    r = requests.get(f"{d.url}/api/v1/recommendations/{quote(rec_id, safe='')}", timeout=30)
    assert r.status_code == 200, r.text
    sup: dict[str, Any] | None = r.json()["suppression"]
    return sup


def _post(d: Daemon, rec_id: str, kind: str, data: dict[str, str], **headers: str) -> requests.Response:
    return requests.post(
        f"{d.url}/api/v1/recommendations/{quote(rec_id, safe='')}/{kind}",
        data=data,
        headers=headers,
        allow_redirects=False,
        timeout=10,
    )


def _refused(r: requests.Response, *words: str) -> None:
    assert r.status_code == 403, (r.status_code, r.text)
    msg = r.json()["error"]
    assert all(w in msg for w in words), msg


def test_a_form_post_without_origin_or_token_is_refused_and_records_nothing(daemon: Daemon) -> None:
    rid = _rec_id(daemon)
    _refused(_post(daemon, rid, "ack", {"reason": "no-origin"}), "CSRF token", "Origin")
    _refused(_post(daemon, rid, "snooze", {"reason": "no-origin", "duration": "1h"}), "CSRF token")
    _refused(_post(daemon, rid, "ack", {"reason": "bad-token", "csrf_token": "00" * 32}), "not valid")
    # Origin: null (a no-referrer page, a sandboxed frame) proves nothing
    _refused(_post(daemon, rid, "ack", {"reason": "null-origin"}, Origin="null"), "CSRF token")
    sup = _suppression(daemon, rid)
    assert sup is None or sup["reason"] not in ("no-origin", "bad-token", "null-origin")


def test_a_post_from_another_origin_is_refused_form_or_json(daemon: Daemon) -> None:
    rid = _rec_id(daemon)
    evil = "http://evil.example:8080"
    _refused(_post(daemon, rid, "ack", {"reason": "wrong-origin"}, Origin=evil), "cross-origin", "evil.example")
    _refused(_post(daemon, rid, "ack", {"reason": "wrong-origin"}, Referer=evil + "/x"), "cross-origin")
    r = requests.post(
        f"{daemon.url}/api/v1/recommendations/{rid}/ack",
        json={"reason": "wrong-origin"},
        headers={"Origin": evil},
        timeout=10,
    )
    _refused(r, "cross-origin")
    # the same host on another port is another origin
    other_port = daemon.url.rsplit(":", 1)[0] + ":1"
    _refused(_post(daemon, rid, "ack", {"reason": "wrong-origin"}, Origin=other_port), "cross-origin")
    sup = _suppression(daemon, rid)
    assert sup is None or sup["reason"] != "wrong-origin"


def test_same_origin_posts_are_accepted_and_record_who_and_when(daemon: Daemon) -> None:
    rid = _rec_id(daemon)
    before = time.time()
    r = _post(daemon, rid, "ack", {"reason": "same-origin form"}, Origin=daemon.url)
    assert r.status_code == 303, r.text
    assert r.headers["Location"] == f"/#rec-{quote(rid)}"
    sup = _suppression(daemon, rid)
    assert sup is not None and sup["kind"] == "ack" and sup["reason"] == "same-origin form"
    assert sup["by"] == "127.0.0.1"
    assert before - 1 <= sup["created_at_seconds"] <= time.time() + 1
    # following the redirect lands on the page, which shows who and when
    page = requests.get(daemon.url + r.headers["Location"], timeout=30)
    assert page.status_code == 200
    when = sup["created_at"][:19] + "Z"  # the page shows the second
    assert f"acknowledged by 127.0.0.1 at {when}: same-origin form" in html.unescape(page.text)

    # JSON from this origin, and a form whose Referer is this advisor's page
    j = requests.post(
        f"{daemon.url}/api/v1/recommendations/{rid}/snooze",
        json={"reason": "same-origin json", "duration": "2h"},
        headers={"Origin": daemon.url},
        timeout=10,
    )
    assert j.status_code == 200, j.text
    sup = j.json()["recommendation"]["suppression"]
    assert sup["kind"] == "snooze" and sup["by"] == "127.0.0.1"
    assert sup["until_seconds"] == pytest.approx(sup["created_at_seconds"] + 7200, abs=1)
    r = _post(daemon, rid, "ack", {"reason": "referer form"}, Referer=daemon.url + "/")
    assert r.status_code == 303, r.text
    assert _suppression(daemon, rid)["reason"] == "referer form"  # type: ignore[index]


def test_a_valid_csrf_token_from_the_page_is_accepted_without_origin(daemon: Daemon) -> None:
    rid = _rec_id(daemon)
    token = _token(requests.get(daemon.url + "/", timeout=30).text)
    r = _post(daemon, rid, "snooze", {"reason": "token form", "duration": "4h", "csrf_token": token})
    assert r.status_code == 303, r.text
    sup = _suppression(daemon, rid)
    assert sup is not None and sup["kind"] == "snooze" and sup["reason"] == "token form" and sup["by"] == "127.0.0.1"
    # as the page's own POST arrives (Referrer-Policy no-referrer makes Chromium send Origin: null)
    r = _post(daemon, rid, "ack", {"reason": "token null-origin", "csrf_token": token}, Origin="null")
    assert r.status_code == 303, r.text
    # the JSON API takes the token as a header
    j = requests.post(
        f"{daemon.url}/api/v1/recommendations/{rid}/ack",
        json={"reason": "token json"},
        headers={"Origin": "null", "X-CSRF-Token": token},
        timeout=10,
    )
    assert j.status_code == 200, j.text
    assert j.json()["recommendation"]["suppression"]["reason"] == "token json"


def test_the_api_without_origin_still_works_for_non_browser_clients(daemon: Daemon) -> None:
    rid = _rec_id(daemon)
    r = requests.post(f"{daemon.url}/api/v1/recommendations/{rid}/ack", json={"reason": "curl"}, timeout=10)
    assert r.status_code == 200, r.text
    assert r.json()["recommendation"]["suppression"]["by"] == "127.0.0.1"


# --- headless Chromium ---------------------------------------------------------------------------------------


class _Page(BaseHTTPRequestHandler):
    body = b""

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)


def _serve(body: str) -> ThreadingHTTPServer:
    handler = type("H", (_Page,), {"body": body.encode()})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def _submitting_page(form: str) -> str:
    return f"<!doctype html><body>{form}<script>document.forms[0].submit()</script></body>"


@needs_chromium
def test_chromium_shows_the_needs_attention_list_and_forms_and_its_form_post_acknowledges(daemon: Daemon) -> None:
    rid = _rec_id(daemon)
    dom, console = _render(daemon.url + "/")
    assert console == [], console
    # DOM order: the needs-attention list, then the overview, then the deployment with its incidents
    attention = dom.index('id="needs-attention"')
    assert attention < dom.index('id="overview"') < dom.index('id="dep-chat-8b"') < dom.index(f'id="rec-{rid}"')
    listing = dom[attention : dom.index("</section>", attention)]
    assert 'data-deployment="chat-8b"' in listing and f'href="#rec-{rid}"' in listing
    forms = re.findall(r'<form class="act (ack|snooze)" method="post" action="([^"]+)">(.*?)</form>', dom)
    assert {(k, a) for k, a, _ in forms} >= {
        ("ack", f"/api/v1/recommendations/{quote(rid, safe='')}/ack"),
        ("snooze", f"/api/v1/recommendations/{quote(rid, safe='')}/snooze"),
    }
    token = _token(dom)
    assert all(f'name="csrf_token" value="{token}"' in body for _, _, body in forms)

    # the token parsed from Chromium's DOM authorizes a POST (no Origin)
    r = _post(daemon, rid, "ack", {"reason": "token from the DOM", "csrf_token": token})
    assert r.status_code == 303, r.text
    assert _suppression(daemon, rid)["reason"] == "token from the DOM"  # type: ignore[index]

    # Chromium itself submits the page's ack form (copied from its DOM, with the token): the POST is accepted
    # and the redirect lands on the status page, which shows the acknowledgement
    ack_form = next(
        m.group(0)
        for m in re.finditer(r'<form class="act ack".*?</form>', dom)
        if f"/{quote(rid, safe='')}/ack" in m.group(0)
    )
    ack_form = ack_form.replace('action="/', f'action="{daemon.url}/')
    ack_form = re.sub(r'name="reason"[^>]*value="[^"]*"', 'name="reason" value="chromium submitted"', ack_form)
    srv = _serve(_submitting_page(ack_form))
    try:
        after, _ = _render(f"http://127.0.0.1:{srv.server_address[1]}/")
    finally:
        srv.shutdown()
        srv.server_close()
    sup = _suppression(daemon, rid)
    assert sup is not None and sup["reason"] == "chromium submitted" and sup["by"] == "127.0.0.1"
    assert "acknowledged by 127.0.0.1" in html.unescape(after) and 'id="needs-attention"' in after


@needs_chromium
def test_chromium_submitting_a_forged_form_from_another_site_is_refused(daemon: Daemon) -> None:
    rid = _rec_id(daemon)
    forged = (
        f'<form method="post" action="{daemon.url}/api/v1/recommendations/{quote(rid, safe="")}/ack">'
        '<input name="reason" value="forged by another site"></form>'
    )
    srv = _serve(_submitting_page(forged))
    try:
        dom, _ = _render(f"http://127.0.0.1:{srv.server_address[1]}/")
    finally:
        srv.shutdown()
        srv.server_close()
    assert "cross-origin write refused" in html.unescape(dom), dom[-2000:]
    sup = _suppression(daemon, rid)
    assert sup is None or sup["reason"] != "forged by another site"


def test_a_failed_reload_shows_a_banner_on_the_page_until_a_reload_succeeds(
    saturated_standin: StandInServer, tmp_path: Path
) -> None:
    d = start_daemon(config(saturated_standin.url()))
    try:
        assert "reload-failed" not in requests.get(d.url + "/", timeout=30).text
        bad = tmp_path / "advisor.yaml"
        bad.write_text("deployments: [{name: chat-8b, engine: vllm, gpu: H900-NOPE}]\n")
        ok, message = d.service.reload(bad)
        assert not ok
        page = html.unescape(requests.get(d.url + "/", timeout=30).text)
        assert "id='reload-failed'" in page and "Config reload failed" in page
        assert message.splitlines()[0][:60] in page
        good = tmp_path / "good.yaml"
        good.write_text(json.dumps(config(saturated_standin.url())))
        ok, message = d.service.reload(good)
        assert ok, message
        assert "reload-failed" not in requests.get(d.url + "/", timeout=30).text
    finally:
        stop_daemon(d)


@pytest.fixture
def authed(saturated_standin: StandInServer, tmp_path: Path) -> Iterator[AdvisorHTTPServer]:
    """A server with basic auth (alice, bob), marked as listening on a public address, after cycles that opened
    a recommendation."""
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
    web = tmp_path / "web.yml"
    web.write_text(f"basic_auth_users:\n  alice: '{hashed}'\n  bob: '{hashed}'\n")
    registry, collector, metrics = make_registry()
    svc = Service(parse_config(config(saturated_standin.url())), collector, metrics)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(d.recommendations for d in svc.run_once().deployments):
        time.sleep(0.5)
    srv = AdvisorHTTPServer(("127.0.0.1", 0), svc, registry, web_config=web)
    srv.loopback = False  # as if public: basic auth is what allows writes
    srv.start_background()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        svc.close()


def test_with_basic_auth_the_token_is_the_users_and_the_ack_records_the_user(authed: AdvisorHTTPServer) -> None:
    url = authed.url()
    recs = requests.get(url + "/api/v1/recommendations", auth=("alice", "pw"), timeout=30).json()["recommendations"]
    assert recs, "the saturated stand-in should have opened a recommendation"
    rid = quote(recs[0]["id"], safe="")
    page = requests.get(url + "/", auth=("alice", "pw"), timeout=30).text
    token = _token(page)
    assert token != _token(requests.get(url + "/", auth=("bob", "pw"), timeout=30).text)

    def post(auth: tuple[str, str] | None, reason: str) -> requests.Response:
        data = {"reason": reason, "csrf_token": token}
        return requests.post(f"{url}/api/v1/recommendations/{rid}/ack", data=data, auth=auth, allow_redirects=False)

    assert post(None, "anonymous").status_code == 401  # the forms sit behind the API's auth
    _refused(post(("bob", "pw"), "alice's token"), "not valid")  # a token is bound to the user it was made for
    r = post(("alice", "pw"), "alice from the page")
    assert r.status_code == 303, r.text
    got = requests.get(f"{url}/api/v1/recommendations/{rid}", auth=("alice", "pw"), timeout=30).json()
    assert got["suppression"]["by"] == "alice" and got["suppression"]["reason"] == "alice from the page"
    shown = html.unescape(requests.get(url + "/", auth=("alice", "pw"), timeout=30).text)
    assert "acknowledged by alice at" in shown


def test_no_forms_where_the_server_refuses_writes(saturated_standin: StandInServer) -> None:
    registry, collector, metrics = make_registry()
    svc = Service(parse_config(config(saturated_standin.url())), collector, metrics)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(d.recommendations for d in svc.run_once().deployments):
        time.sleep(0.5)
    srv = AdvisorHTTPServer(("127.0.0.1", 0), svc, registry)
    srv.loopback = False  # as if public, without auth
    srv.start_background()
    try:
        page = requests.get(srv.url() + "/", timeout=30).text
    finally:
        srv.shutdown()
        srv.server_close()
        svc.close()
    assert "class='rec'" in page, "the saturated stand-in should have opened a recommendation"
    assert "<form" not in page and "csrf_token" not in page and "Acknowledge and snooze are off" in page
