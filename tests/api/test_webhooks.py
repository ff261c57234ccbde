"""``sealtrail webhooks``: the endpoints file, real HTTP to a receiver that verifies each message with
the Standard Webhooks library, and the commands' exit codes and JSON."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook
from typer.testing import CliRunner

from api.cli import app
from api.webhooks import http_post, load_webhooks
from audit.cases.delivery import deliver_round
from audit.cases.query import outcomes_since
from audit.cases.service import act
from audit.cases.store import catch_up
from audit.cases.tables import alerts
from audit.cases.webhooks import WebhookConfigError, new_secret
from ledger.append import Ledger
from ledger.keys import write_private
from tests.audit.cases.test_cases import ALICE, rows
from tests.audit.conftest import pack_wasm, sandbox  # noqa: F401 - fixtures
from tests.audit.test_trace_index import indexed_pipeline, mixed_submissions
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox

runner = CliRunner()


@dataclass
class Received:
    """What the receiver accepted (verified), and how it answers next."""

    secret: str
    answers: list[tuple[int, dict[str, str]]] = field(default_factory=list)  # then 204
    accepted: list[dict[str, Any]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[tuple[str, Received]]:
    got = Received(new_secret())

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            if got.answers:
                status, headers = got.answers.pop(0)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                return
            try:
                got.accepted.append(Webhook(got.secret).verify(body, dict(self.headers)))
            except Exception as exc:
                got.refused.append(str(exc))
                self.send_response(401)
                self.end_headers()
                return
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks/sealtrail", got
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def ledger_with_outcomes(sqlite_db: Db, signer: Any, sandbox: Sandbox,  # noqa: F811
                         pack_wasm: bytes) -> Iterator[Ledger]:  # noqa: F811
    ledger = make_ledger(sqlite_db, signer)
    indexed_pipeline(ledger, sandbox, pack_wasm).decide(mixed_submissions(300))
    catch_up(ledger.engine)
    for a in [a for a in rows(ledger.engine, alerts) if a.outcome == "HOLD"][:4]:
        act(ledger, ALICE, "release", alert=a.seq, rationale="verified with the customer")
    yield ledger
    ledger.engine.dispose()


def scorers(ledger: Ledger) -> list[str]:
    return sorted({a.scorer_fp for a in rows(ledger.engine, alerts) if a.payment == "RELEASED"})


def config(tmp_path: Path, url: str, secret: str, fps: list[str], **more: str) -> Path:
    write_private(tmp_path / "hook.whsec", secret, exclusive=False, what="a webhook secret")
    extra = "".join(f"{k} = {json.dumps(v)}\n" for k, v in more.items())
    p = tmp_path / "webhooks.toml"
    p.write_text(f'timeout_s = 5\n\n[[endpoint]]\nname = "core-banking"\nurl = "{url}"\n'
                 f"scorers = {json.dumps(fps)}\nsecret_file = \"hook.whsec\"\n{extra}")
    return p


def test_outcomes_cross_real_http_and_the_receiver_verifies_each(
        tmp_path: Path, receiver: tuple[str, Received], ledger_with_outcomes: Ledger) -> None:
    url, got = receiver
    wl = load_webhooks(config(tmp_path, url, got.secret, scorers(ledger_with_outcomes)))
    with http_post(wl) as post:
        (r,) = deliver_round(ledger_with_outcomes.engine, wl.endpoints, post, holder="t")
    want = outcomes_since(ledger_with_outcomes.engine, 0, scorer_fp=None).items
    assert (r.state, r.delivered_now, got.refused) == ("caught_up", len(want), [])
    assert [m["data"] for m in got.accepted] == want and len(want) == 4


def test_a_redirect_is_not_followed_and_retry_after_is_read(
        tmp_path: Path, receiver: tuple[str, Received], ledger_with_outcomes: Ledger) -> None:
    url, got = receiver
    got.answers = [(307, {"location": "https://elsewhere.example/"}),
                   (503, {"retry-after": "Wed, 21 Oct 2099 07:28:00 GMT", "content-type": "text/plain"})]
    wl = load_webhooks(config(tmp_path, url, got.secret, scorers(ledger_with_outcomes)))
    now = [1_796_000_000.0]
    eng = ledger_with_outcomes.engine
    with http_post(wl) as post:
        (r,) = deliver_round(eng, wl.endpoints, post, holder="t", clock=lambda: now[0])
        assert (r.state, r.last_status, r.last_error, r.delivered_now) == ("retrying", 307, "HTTP 307", 0)
        now[0] += 10
        (r,) = deliver_round(eng, wl.endpoints, post, holder="t", clock=lambda: now[0])
    assert (r.state, r.last_status, got.accepted) == ("retrying", 503, [])
    # a date decades ahead waits the longest step, a day, not decades
    assert r.next_attempt == "2026-12-01T00:53:30Z"  # 1,796,000,010 s + 86,400


def test_a_receiver_that_does_not_answer_is_a_failure_naming_why(
        tmp_path: Path, ledger_with_outcomes: Ledger) -> None:
    wl = load_webhooks(config(tmp_path, "http://127.0.0.1:9/h", new_secret(), scorers(ledger_with_outcomes)))
    with http_post(wl) as post:
        (r,) = deliver_round(ledger_with_outcomes.engine, wl.endpoints, post, holder="t")
    assert (r.state, r.last_status, r.cursor) == ("retrying", None, 0)
    assert r.last_error is not None and "Connect" in r.last_error


# --------------------------------------------------------------------------- the endpoints file


@pytest.mark.parametrize(("text", "says"), [
    ("[[endpoint]\n", "is not TOML"),
    ("verbose = true\n", "unknown setting(s) verbose"),
    ("timeout_s = 15\n", "at least one [[endpoint]]"),
    ('[[endpoint]]\nname = "a"\nurl = "https://x.example/"\nscorers = ["' + "ab" * 32 + '"]\n',
     "secret_file is required"),
    ('[[endpoint]]\nname = "a"\nurl = "https://x.example/"\nsecret_file = "s.whsec"\n',
     "scorers is required"),
    ('[[endpoint]]\nname = "a"\nurl = "https://x.example/"\nscorers = ["' + "ab" * 32 + '"]\n'
     'secret_file = "absent.whsec"\n', "does not exist"),
    ('[[endpoint]]\nname = "a"\nurl = "https://x.example/"\nscorers = ["' + "ab" * 32 + '"]\n'
     'secret_file = "s.whsec"\nretries = 3\n', "unknown setting(s) retries"),
    ('[[endpoint]]\nname = "a"\nurl = "http://x.example/"\nscorers = ["' + "ab" * 32 + '"]\n'
     'secret_file = "s.whsec"\n', "plain http only to a loopback"),
    ('client_cert = "c.pem"\n[[endpoint]]\nname = "a"\nurl = "https://x.example/"\nscorers = ["' + "ab" * 32
     + '"]\nsecret_file = "s.whsec"\n', "client_cert and client_key go together"),
    ('[[endpoint]]\nname = "a"\nurl = "https://x.example/"\nscorers = ["' + "ab" * 32 + '"]\n'
     'secret_file = "s.whsec"\n[[endpoint]]\nname = "a"\nurl = "https://y.example/"\nscorers = ["' + "cd" * 32
     + '"]\nsecret_file = "s.whsec"\n', "an endpoint name is used twice"),
])
def test_an_endpoints_file_that_cannot_be_used_is_refused_naming_the_setting(tmp_path: Path, text: str,
                                                                            says: str) -> None:
    write_private(tmp_path / "s.whsec", new_secret(), exclusive=True, what="a webhook secret")
    p = tmp_path / "webhooks.toml"
    p.write_text(text)
    with pytest.raises(WebhookConfigError, match=re.escape(says)):
        load_webhooks(p)


def test_a_secret_file_others_may_read_is_refused(tmp_path: Path) -> None:
    p = config(tmp_path, "https://x.example/", new_secret(), ["ab" * 32])
    (tmp_path / "hook.whsec").chmod(0o644)
    with pytest.raises(WebhookConfigError, match="readable by its owner only"):
        load_webhooks(p)


# --------------------------------------------------------------------------- the commands


def cli(*args: str) -> tuple[int, dict[str, Any]]:
    res = runner.invoke(app, [*args, "--json"])
    return res.exit_code, json.loads(res.stdout)


def test_secret_writes_an_owner_only_secret_and_never_overwrites_one(tmp_path: Path) -> None:
    code, doc = cli("webhooks", "secret", str(tmp_path / "a.whsec"))
    assert code == 0 and doc["ok"] is True
    assert (tmp_path / "a.whsec").stat().st_mode & 0o777 == 0o600
    first = (tmp_path / "a.whsec").read_text()
    assert first.startswith("whsec_")
    code, doc = cli("webhooks", "secret", str(tmp_path / "a.whsec"))
    assert (code, doc["ok"]) == (1, False) and "already exists" in doc["message"]
    assert (tmp_path / "a.whsec").read_text() == first


def test_deliver_once_status_and_exit_codes(tmp_path: Path, receiver: tuple[str, Received],
                                            ledger_with_outcomes: Ledger) -> None:
    url, got = receiver
    db = ["--db", str(ledger_with_outcomes.engine.url.render_as_string(hide_password=False)),
          "--keys", str(tmp_path / "keys")]
    fps = scorers(ledger_with_outcomes)
    (tmp_path / "down").mkdir()
    down = config(tmp_path / "down", "http://127.0.0.1:9/h", got.secret, fps)
    code, doc = cli("webhooks", "deliver", "--once", "--webhooks", str(down), *db)
    assert (code, doc["ok"], doc["error"]) == (1, False, "undelivered")
    assert doc["endpoints"][0]["state"] == "retrying" and doc["endpoints"][0]["pending"] == 4
    code, doc = cli("webhooks", "status", "--webhooks", str(down), *db)
    assert code == 0 and doc["endpoints"][0]["failures"] == 1
    each = doc["endpoints"][0]["scorers"]  # where each scorer stands, in fingerprint order
    assert [s["scorer"] for s in each] == sorted(fps) and sum(s["pending"] for s in each) == 4
    # the receiver comes up under the same endpoint name: enable retries at once
    (tmp_path / "up").mkdir()
    up = config(tmp_path / "up", url, got.secret, fps)
    code, doc = cli("webhooks", "enable", "core-banking", "--webhooks", str(up), *db)
    assert (code, doc["enabled"]) == (0, True)
    code, doc = cli("webhooks", "deliver", "--once", "--webhooks", str(up), *db)
    assert code == 0 and doc["endpoints"][0]["state"] == "caught_up" and len(got.accepted) == 4
    code, doc = cli("webhooks", "enable", "nobody", "--webhooks", str(up), *db)
    assert (code, doc["field"]) == (1, "NAME")
    code, doc = cli("webhooks", "deliver", "--once", *db)
    assert (code, doc["ok"]) == (2, False) and "SEALTRAIL_WEBHOOKS_FILE" in doc["message"]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_service_delivers_serves_metrics_and_stops_on_sigterm_giving_up_its_lease(
        tmp_path: Path, receiver: tuple[str, Received], ledger_with_outcomes: Ledger) -> None:
    import signal
    import subprocess
    import sys
    import time

    import httpx

    url, got = receiver
    p = config(tmp_path, url, got.secret, scorers(ledger_with_outcomes))
    port = free_port()
    db = ledger_with_outcomes.engine.url.render_as_string(hide_password=False)
    proc = subprocess.Popen([sys.executable, "-m", "api.cli", "webhooks", "deliver", "--webhooks", str(p),
                             "--db", db, "--keys", str(tmp_path / "keys"), "--interval", "0.2",
                             "--metrics-port", str(port)],
                            cwd=Path(__file__).parents[2], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 60
        metrics = ""
        while time.monotonic() < deadline:
            try:
                metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
            except httpx.HTTPError:
                metrics = ""
            if 'sealtrail_webhook_delivered_total{endpoint="core-banking"} 4.0' in metrics:
                break
            time.sleep(0.2)
        assert 'sealtrail_webhook_delivered_total{endpoint="core-banking"} 4.0' in metrics, metrics
        assert 'sealtrail_webhook_pending{endpoint="core-banking"} 0.0' in metrics
        assert 'sealtrail_webhook_state{endpoint="core-banking",state="caught_up"} 1.0' in metrics
        assert [m["data"] for m in got.accepted] == outcomes_since(ledger_with_outcomes.engine, 0,
                                                                   scorer_fp=None).items
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "delivering to 1 endpoint(s)" in stderr
    code, doc = cli("webhooks", "status", "--webhooks", str(p), "--db", db, "--keys", str(tmp_path / "keys"))
    assert code == 0 and doc["endpoints"][0]["holder"] is None  # the lease given up at the stop


def test_a_receiver_over_mutual_tls_gets_the_message_and_an_untrusted_one_does_not(tmp_path: Path) -> None:
    """The deliverer's TLS: the receiver's certificate must chain to the file's ``ca``, and the
    deliverer shows its client certificate to a receiver that asks for one."""
    import ssl

    from api.certs import create_dev_pki
    from api.webhooks import WebhookList
    from audit.cases.webhooks import Endpoint

    pki = tmp_path / "pki"
    create_dev_pki(pki)
    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            peer = self.connection.getpeercert()  # type: ignore[attr-defined]  # an SSLSocket
            seen.append(None if not peer else dict(x[0] for x in peer["subject"]).get("commonName"))
            self.send_response(204)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki / "ca.pem"))
    ctx.load_cert_chain(str(pki / "server.pem"), str(pki / "server.key"))
    ctx.verify_mode = ssl.CERT_REQUIRED
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"https://127.0.0.1:{server.server_address[1]}/hooks"
        ep = Endpoint("bank", url, ("ab" * 32,), (new_secret(),), timeout_s=5.0)
        trusted = WebhookList((ep,), pki / "ca.pem", pki / "scorer.pem", pki / "scorer.key")
        with http_post(trusted) as post:
            answers = [post(ep, b"{}", {"webhook-id": f"outcome_{i}"}) for i in (1, 2)]
        assert [a.status for a in answers] == [204, 204] and seen == ["sealtrail-scorer"] * 2
        untrusted = WebhookList((ep,), pki / "other-ca" / "ca.pem", pki / "scorer.pem", pki / "scorer.key")
        with http_post(untrusted) as post:
            refused = post(ep, b"{}", {"webhook-id": "outcome_3"})
        assert refused.status is None and refused.error is not None
        assert "CERTIFICATE_VERIFY_FAILED" in refused.error
        assert len(seen) == 2
    finally:
        server.shutdown()
        server.server_close()
