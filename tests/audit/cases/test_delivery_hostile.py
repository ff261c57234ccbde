"""Hostile probes of the outcome webhooks (``audit.cases.delivery``, ``audit.cases.webhooks``,
``api.webhooks``, ``sealtrail webhooks``): each tries to lose, reorder or double-send an outcome,
to forge or break a signature, to leak a secret, to hold the deliverer, or to break the CLI's
contract. A probe that held asserts the behaviour; a gap nobody could close here is a strict xfail
naming it."""

from __future__ import annotations

import base64
import json
import random
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import select
from standardwebhooks.webhooks import Webhook
from typer.testing import CliRunner

from api.cli import app
from api.webhooks import WebhookList, http_post, load_webhooks
from audit.cases.delivery import Answer, deliver_round, deliveries, scorer_cursors, status
from audit.cases.service import act
from audit.cases.tables import alerts
from audit.cases.webhooks import Endpoint, WebhookConfigError, body_of, headers_of, new_secret, parse_secret
from ledger.append import Ledger
from ledger.keys import write_private
from tests.audit.cases.test_cases import BOB, decided, rows  # noqa: F401 - fixture
from tests.audit.cases.test_delivery import KEY, SECRET, Clock, Receiver, endpoint, outcomes, scorers_of  # noqa: F401

FP = "ab" * 32


# --------------------------------------------------------------------------- nothing lost


def test_an_after_beyond_every_sealed_outcome_does_not_skip_the_ones_sealed_later(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    """A typo'd ``after`` (a timestamp, an extra digit) used to become the cursor: every outcome
    sealed until the ledger reached it was skipped, silently. The cursor starts at the watermark."""
    fps = tuple(scorers_of(outcomes, decided))
    ep = endpoint(fps, name="typo", after=10**12)
    assert status(decided.engine, [ep])[0].cursor <= outcomes[-1]["seq"]
    rx = Receiver()
    (r,) = deliver_round(decided.engine, [ep], rx, holder="d1")
    assert (r.state, r.delivered_now) == ("caught_up", 0) and r.cursor < 10**12
    a_fp = sorted(fps)[0]
    more = next(a for a in rows(decided.engine, alerts) if a.payment == "HELD" and a.scorer_fp == a_fp)
    new = act(decided, BOB, "reject", alert=more.seq, rationale="sealed after the endpoint was added")
    (r,) = deliver_round(decided.engine, [ep], rx, holder="d1")
    assert rx.ids() == [f"outcome_{new.seq}"] and r.cursor == new.seq


def test_a_scorer_added_later_still_gets_its_outcomes_below_the_cursor(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    """Each scorer of an endpoint has its own cursor: a scorer added later (a rotated scoring
    certificate) gets its earlier outcomes, oldest first, and nothing already acknowledged again."""
    by = scorers_of(outcomes, decided)
    (a_fp, a_seqs), (b_fp, b_seqs) = sorted(by.items())
    rx = Receiver()
    deliver_round(decided.engine, [endpoint((a_fp,))], rx, holder="d1")
    assert rx.ids() == [f"outcome_{s}" for s in a_seqs]
    both = endpoint((a_fp, b_fp))
    assert status(decided.engine, [both])[0].pending == len(b_seqs)
    (r,) = deliver_round(decided.engine, [both], rx, holder="d1")
    assert (r.state, r.delivered_now, r.pending) == ("caught_up", len(b_seqs), 0)
    assert rx.ids() == [f"outcome_{s}" for s in a_seqs + b_seqs]  # each once, b's in seq order
    assert r.cursor == max(a_seqs + b_seqs)


def test_a_scorer_taken_off_and_put_back_resumes_where_it_stopped(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    a_fp, b_fp = sorted(scorers_of(outcomes, decided))
    rx = Receiver()
    deliver_round(decided.engine, [endpoint((a_fp, b_fp))], rx, holder="d1")
    deliver_round(decided.engine, [endpoint((a_fp,))], rx, holder="d1")
    more = next(a for a in rows(decided.engine, alerts) if a.payment == "HELD" and a.scorer_fp == b_fp)
    new = act(decided, BOB, "reject", alert=more.seq, rationale="while b was off the endpoint")
    deliver_round(decided.engine, [endpoint((a_fp,))], rx, holder="d1")
    deliver_round(decided.engine, [endpoint((a_fp, b_fp))], rx, holder="d1")
    assert rx.ids() == [f"outcome_{o['seq']}" for o in outcomes] + [f"outcome_{new.seq}"]


def test_an_endpoint_worked_before_scorer_cursors_keeps_its_cursor_for_its_scorers(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    """An endpoint row of revision 0010 has no scorer cursors: its scorers start at its cursor."""
    fps = tuple(scorers_of(outcomes, decided))
    half = outcomes[len(outcomes) // 2 - 1]["seq"]
    with decided.engine.begin() as conn:  # as the deliverer of revision 0010 left it
        conn.execute(deliveries.insert().values(endpoint="core-banking", url="https://pay.bank.example/hooks",
                                                cursor=half, delivered=3, failures=0, next_attempt_us=0,
                                                lease_until_us=0))
    rx = Receiver()
    (r,) = deliver_round(decided.engine, [endpoint(fps)], rx, holder="d1")
    assert rx.ids() == [f"outcome_{o['seq']}" for o in outcomes if o["seq"] > half]
    with decided.engine.connect() as conn:
        kept = dict(conn.execute(select(scorer_cursors.c.scorer_fp, scorer_cursors.c.cursor)).all())
    assert set(kept) == set(fps) and r.cursor == outcomes[-1]["seq"] == max(kept.values())


def test_a_budget_of_one_sends_each_outcome_once_in_order_across_rounds(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    ep = endpoint(tuple(scorers_of(outcomes, decided)))
    rx = Receiver()
    states = [deliver_round(decided.engine, [ep], rx, holder="d1", budget=1)[0].state for _ in outcomes]
    assert states == ["behind"] * (len(outcomes) - 1) + ["caught_up"]
    assert rx.ids() == [f"outcome_{o['seq']}" for o in outcomes]
    with pytest.raises(ValueError):
        deliver_round(decided.engine, [ep], rx, holder="d1", budget=0)


def test_an_outcome_sealed_after_the_view_was_folded_is_caught_up_and_sent(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    """The round folds the view itself: an outcome sealed since the last catch-up is not missed."""
    ep = endpoint(tuple(scorers_of(outcomes, decided)))
    rx = Receiver()
    deliver_round(decided.engine, [ep], rx, holder="d1")
    more = next(a for a in rows(decided.engine, alerts) if a.payment == "HELD" and a.scorer_fp in ep.scorers)
    new = act(decided, BOB, "reject", alert=more.seq, rationale="sealed, not yet folded")
    (r,) = deliver_round(decided.engine, [ep], rx, holder="d1")
    assert rx.ids()[-1] == f"outcome_{new.seq}" and r.state == "caught_up"


# --------------------------------------------------------------------------- at least once, in order


def test_a_resent_outcome_has_the_same_id_and_the_same_body_and_verifies_each_time(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    clock = Clock(time.time())
    ep = endpoint(tuple(scorers_of(outcomes, decided)))
    rx = Receiver(script=[Answer(500, retry_after="1"), Answer(503, retry_after="1")])
    for _ in range(3):
        deliver_round(decided.engine, [ep], rx, holder="d1", **clock.both, rng=random.Random(2))
        clock.t += 6
    first = [(b, h) for b, h in rx.got if h["webhook-id"] == f"outcome_{outcomes[0]['seq']}"]
    assert len(first) == 3 and len({b for b, _ in first}) == 1
    for b, h in first:
        assert Webhook(SECRET).verify(b, h)["data"] == outcomes[0]
    assert list(dict.fromkeys(rx.ids())) == [f"outcome_{o['seq']}" for o in outcomes]


def test_a_failure_after_some_successes_never_lets_a_later_outcome_through(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    clock = Clock()
    ep = endpoint(tuple(scorers_of(outcomes, decided)))
    rx = Receiver(script=[Answer(200), Answer(200), Answer(429, retry_after="1")])
    (r,) = deliver_round(decided.engine, [ep], rx, holder="d1", **clock.both)
    assert (r.state, r.cursor, r.failures, r.delivered_now) == ("retrying", outcomes[1]["seq"], 1, 2)
    clock.t += 2
    (r,) = deliver_round(decided.engine, [ep], rx, holder="d1", **clock.both)
    assert r.state == "caught_up"
    assert list(dict.fromkeys(rx.ids())) == [f"outcome_{o['seq']}" for o in outcomes]


@pytest.mark.parametrize(("retry_after", "wait_s"), [
    ("999999999999999999999999", 86_400),   # absurd: a day at most
    ("-5", 5),                              # unreadable: the schedule's step
    ("soon", 5),
    ("Wed, 21 Oct 1970 07:28:00 GMT", 1),   # in the past: a second
    ("\u0661\u0662", 5),                     # Arabic-Indic digits are no delta-seconds
])
def test_a_hostile_retry_after_neither_stalls_nor_hammers(decided: Ledger, outcomes: list[dict[str, Any]],  # noqa: F811
                                                          retry_after: str, wait_s: int) -> None:
    clock = Clock()
    ep = endpoint(tuple(scorers_of(outcomes, decided)))
    (r,) = deliver_round(decided.engine, [ep], Receiver(script=[Answer(503, retry_after=retry_after)]),
                         holder="d1", **clock.both, rng=random.Random(0))
    assert r.state == "retrying" and r.next_attempt is not None
    from datetime import datetime
    waited = datetime.fromisoformat(r.next_attempt.replace("Z", "+00:00")).timestamp() - clock.t
    assert abs(waited - wait_s) <= max(1, wait_s * 0.1)


def test_an_enormous_or_forged_error_text_is_kept_short_and_on_one_printable_line(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    """The receiver's text reaches ``webhooks status`` and the deliverer's stderr: a newline or an
    escape sequence in it used to forge log lines and repaint the operator's terminal."""
    ep = endpoint(tuple(scorers_of(outcomes, decided)))
    forged = "busy\ncore-banking: caught_up, cursor 999\x1b[2J\x1b[31m\r\x00" + "x" * 100_000
    (r,) = deliver_round(decided.engine, [ep], Receiver(script=[Answer(500, error=forged)]), holder="d1")
    assert r.last_error is not None and len(r.last_error) <= 300
    assert r.last_error.isprintable() and r.last_error.startswith("busy core-banking")
    assert status(decided.engine, [ep])[0].last_error == r.last_error


# --------------------------------------------------------------------------- the lease


def test_a_second_deliverer_does_not_send_while_the_first_has_a_message_out(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    clock = Clock()
    ep = endpoint(tuple(scorers_of(outcomes, decided)))
    other = Receiver()
    seen: list[str] = []

    def slow(e: Endpoint, body: bytes, headers: Mapping[str, str]) -> Answer:
        seen.append(headers["webhook-id"])
        clock.t += 50  # within the lease: the other deliverer keeps off
        (r2,) = deliver_round(decided.engine, [ep], other, holder="d2", **clock.both)
        assert r2.state == "held_elsewhere"
        return Answer(200)

    (r,) = deliver_round(decided.engine, [ep], slow, holder="d1", **clock.both)
    assert r.state == "caught_up" and other.got == [] and len(seen) == len(outcomes)


def test_a_slow_receiver_answering_within_its_timeout_keeps_the_lease(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    """``timeout_s`` may be 120 s, the lease was 60 s: a receiver answering in 90 s (in time) let a
    second deliverer take the endpoint over and send the same outcomes beside the first."""
    clock = Clock()
    ep = endpoint(tuple(scorers_of(outcomes, decided)), timeout_s=120.0)
    other = Receiver()

    def slow(e: Endpoint, body: bytes, headers: Mapping[str, str]) -> Answer:
        clock.t += 90
        (r2,) = deliver_round(decided.engine, [ep], other, holder="d2", **clock.both)
        assert r2.state == "held_elsewhere"
        return Answer(200)

    (r,) = deliver_round(decided.engine, [ep], slow, holder="d1", **clock.both, budget=2)
    assert (r.state, r.delivered_now, other.got) == ("behind", 2, [])


def test_a_stale_deliverers_failed_answer_neither_touches_the_new_holders_state_nor_says_retrying(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    clock = Clock()
    ep = endpoint(tuple(scorers_of(outcomes, decided)))
    rx = Receiver()

    def stalls_then_fails(e: Endpoint, body: bytes, headers: Mapping[str, str]) -> Answer:
        clock.t += 61
        assert deliver_round(decided.engine, [ep], rx, holder="d2", **clock.both)[0].state == "caught_up"
        return Answer(410, error="HTTP 410")

    (r,) = deliver_round(decided.engine, [ep], stalls_then_fails, holder="d1", **clock.both)
    assert (r.state, r.holder, r.failures, r.disabled) == ("held_elsewhere", "d2", 0, None)
    s = status(decided.engine, [ep])[0]
    assert (s.state, s.cursor, s.failures, s.last_status) == ("caught_up", outcomes[-1]["seq"], 0, 204)


def test_a_deliverer_whose_clock_runs_ahead_does_not_take_a_live_lease(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    """Leases are the database's time, which both hosts share: one whose own clock runs five minutes
    ahead still sees the lease live (its clock times only its messages and retries)."""
    clock = Clock()
    ep = endpoint(tuple(scorers_of(outcomes, decided)))
    other = Receiver()

    def in_flight(e: Endpoint, body: bytes, headers: Mapping[str, str]) -> Answer:
        ahead = Clock(clock.t + 300)  # five minutes of skew between the hosts
        deliver_round(decided.engine, [ep], other, holder="d2", clock=ahead)
        return Answer(200)

    (r,) = deliver_round(decided.engine, [ep], in_flight, holder="d1", clock=clock, budget=1)
    assert other.got == [] and r.delivered_now == 1


# --------------------------------------------------------------------------- signatures


def test_every_message_verifies_with_the_reference_library_whatever_the_data() -> None:
    item = {"seq": 12, "trace_id": "t\u00e9\u2028\"'.\n<x>", "outcome": "RELEASED", "alert_seq": 3,
            "recorded_at": "2026-12-05T10:00:00.123456Z"}
    old = parse_secret(new_secret(), where="old")
    body = body_of(item)
    now = int(time.time())
    h = headers_of((KEY, old), "outcome_12", now, body)
    assert "." not in h["webhook-id"] and h["webhook-timestamp"].isdigit()
    assert all("\r" not in v and "\n" not in v for v in h.values())
    for k in (KEY, old):
        got = Webhook("whsec_" + base64.b64encode(k).decode()).verify(body, h)
        assert got["data"] == item
    assert orjson.loads(body)["data"] == item


def test_the_secret_never_appears_in_an_endpoints_repr() -> None:
    ep = endpoint((FP,))
    for text in (repr(ep), str(ep)):
        assert base64.b64encode(KEY).decode() not in text and repr(KEY) not in text


# --------------------------------------------------------------------------- configuration


@pytest.mark.parametrize("url", [
    "http://127.0.0.1.evil.example/h", "http://0x7f000001/h", "http://2130706433/h", "http://127.1/h",
    "http://[::ffff:127.0.0.1]/h", "http://localhost.evil.example/h", "http://localhost./h",
    "http://evil.example\\@127.0.0.1/h", "http://127.0.0.1:80@evil.example/h", "http://evil.example#@127.0.0.1",
    "http://\uff11\uff12\uff17.0.0.1/h", "https://ex\x00ample.com/h", "https://exa mple.com/h",
    "https://pay.bank.example/h\r\nX-Injected: 1",
])
def test_plain_http_off_the_machine_and_unusable_urls_are_refused(url: str) -> None:
    with pytest.raises(WebhookConfigError):
        endpoint((FP,), url=url)


def _file(tmp_path: Path, secret_text: str, **more: str) -> Path:
    write_private(tmp_path / "s.whsec", secret_text, exclusive=False, what="a webhook secret")
    top = "".join(f"{k} = {json.dumps(v)}\n" for k, v in more.items())
    p = tmp_path / "webhooks.toml"
    p.write_text(f'{top}[[endpoint]]\nname = "a"\nurl = "https://x.example/"\nscorers = ["{FP}"]\n'
                 'secret_file = "s.whsec"\n')
    return p


def test_a_bad_secret_file_is_refused_without_echoing_it(tmp_path: Path) -> None:
    p = _file(tmp_path, "whsec_SUPERSECRETVALUE!!")
    with pytest.raises(WebhookConfigError) as exc:
        load_webhooks(p)
    assert "SUPERSECRET" not in str(exc.value)


def test_a_huge_secret_file_is_refused_by_its_size(tmp_path: Path) -> None:
    p = _file(tmp_path, new_secret() + "\n" * 10_000_000)
    with pytest.raises(WebhookConfigError, match="over 1024 bytes"):
        load_webhooks(p)


def test_a_secret_file_through_a_symlink_is_read_with_its_targets_mode(tmp_path: Path) -> None:
    p = _file(tmp_path, new_secret())
    (tmp_path / "s.whsec").rename(tmp_path / "real.whsec")
    (tmp_path / "s.whsec").symlink_to(tmp_path / "real.whsec")
    assert len(load_webhooks(p).endpoints) == 1
    (tmp_path / "real.whsec").chmod(0o644)
    with pytest.raises(WebhookConfigError, match="owner only"):
        load_webhooks(p)
    (tmp_path / "s.whsec").unlink()
    (tmp_path / "s.whsec").symlink_to("/dev/zero")
    with pytest.raises(WebhookConfigError, match="not a regular file"):
        load_webhooks(p)


def test_a_client_key_others_may_read_is_refused(tmp_path: Path) -> None:
    (tmp_path / "c.pem").write_text("cert")
    (tmp_path / "c.key").write_text("-----BEGIN PRIVATE KEY-----\n")
    (tmp_path / "c.key").chmod(0o644)
    p = _file(tmp_path, new_secret(), client_cert="c.pem", client_key="c.key")
    with pytest.raises(WebhookConfigError, match=r"client_key.*owner only"):
        load_webhooks(p)


# --------------------------------------------------------------------------- a hostile receiver


@pytest.fixture
def hostile() -> Iterator[tuple[str, dict[str, Any]]]:
    """A receiver whose behaviour the test picks: ``mode`` in ``endless_body``, ``drip_headers``."""
    ctl: dict[str, Any] = {"mode": "endless_body", "stop": threading.Event()}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            try:
                if ctl["mode"] == "endless_body":
                    self.send_response(500)
                    self.send_header("content-type", "text/plain")
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    chunk = b"x" * 65536
                    while not ctl["stop"].is_set():
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                else:  # one byte of the status line at a time, each within the read timeout
                    for b in b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n":
                        if ctl["stop"].wait(0.3):
                            return
                        self.wfile.write(bytes([b]))
                        self.wfile.flush()
            except OSError:
                pass

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/h", ctl
    finally:
        ctl["stop"].set()
        server.shutdown()
        server.server_close()


def _wl(url: str, timeout_s: float) -> WebhookList:
    return WebhookList((Endpoint("a", url, (FP,), (KEY,), timeout_s=timeout_s),), None, None, None)


def test_a_failure_answered_with_an_endless_body_neither_holds_the_deliverer_nor_fills_its_memory(
        hostile: tuple[str, dict[str, Any]]) -> None:
    url, _ = hostile
    wl = _wl(url, 2.0)
    started = time.monotonic()
    with http_post(wl) as post:
        a = post(wl.endpoints[0], b"{}", {"webhook-id": "outcome_1"})
    assert time.monotonic() - started < 5
    assert a.status == 500 and a.error is not None
    assert a.error.startswith("HTTP 500: xxx") and len(a.error) < 400


def test_a_receiver_dripping_its_answer_is_cut_off_at_its_timeout(
        hostile: tuple[str, dict[str, Any]]) -> None:
    """httpx's own timeout bounds each read; the deliverer bounds the whole exchange, so a receiver
    sending its status line a byte at a time cannot hold it (and every endpoint after it)."""
    url, ctl = hostile
    ctl["mode"] = "drip_headers"
    wl = _wl(url, 1.0)
    started = time.monotonic()
    with http_post(wl) as post:
        a = post(wl.endpoints[0], b"{}", {"webhook-id": "outcome_1"})
        assert time.monotonic() - started < 4
        assert a.status is None and a.error is not None and a.error.startswith("ReadTimeout")
        ctl["mode"] = "endless_body"  # the same client goes on: the next exchange has its own time
        b = post(wl.endpoints[0], b"{}", {"webhook-id": "outcome_2"})
    assert b.status == 500 and b.error is not None and b.error.startswith("HTTP 500")


def test_a_receiver_that_is_not_there_is_a_failure_not_an_exception() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    wl = _wl(f"http://127.0.0.1:{port}/h", 1.0)
    with http_post(wl) as post:
        a = post(wl.endpoints[0], b"{}", {"webhook-id": "outcome_1"})
    assert a.status is None and a.error is not None and "Connect" in a.error


# --------------------------------------------------------------------------- the CLI's contract


runner = CliRunner()


def _cli(*args: str) -> tuple[int, dict[str, Any], str]:
    res = runner.invoke(app, [*args, "--json"])
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    assert "Traceback" not in res.output
    return res.exit_code, json.loads(res.stdout), "\n".join(lines)


@pytest.mark.parametrize("args", [
    ("webhooks", "deliver", "--once", "--budget", "0"),
    ("webhooks", "deliver", "--once", "--interval", "0"),
    ("webhooks", "enable"),
    ("webhooks", "nonsense"),
])
def test_a_usage_error_exits_2_with_one_json_object(tmp_path: Path, args: tuple[str, ...]) -> None:
    code, doc, _ = _cli(*args, "--webhooks", str(tmp_path / "w.toml"))
    assert code == 2 and doc["ok"] is False


def test_a_configuration_error_exits_2_with_one_json_object_and_no_secret(tmp_path: Path) -> None:
    p = _file(tmp_path, "whsec_SUPERSECRETVALUE!!")
    for cmd in (("deliver", "--once"), ("status",), ("enable", "a")):
        code, doc, text = _cli("webhooks", *cmd, "--webhooks", str(p))
        assert (code, doc["ok"], doc["error"]) == (2, False, "configuration")
        assert "SUPERSECRET" not in text
    code, doc, _ = _cli("webhooks", "status", "--webhooks", str(tmp_path / "absent.toml"))
    assert (code, doc["error"]) == (2, "configuration")


def test_secret_into_a_missing_folder_or_over_a_symlink_exits_with_json(tmp_path: Path) -> None:
    code, doc, _ = _cli("webhooks", "secret", str(tmp_path / "no" / "such" / "s.whsec"))
    assert code == 2 and doc["ok"] is False
    (tmp_path / "target").write_text("keep")
    (tmp_path / "link.whsec").symlink_to(tmp_path / "target")
    code, doc, _ = _cli("webhooks", "secret", str(tmp_path / "link.whsec"))
    assert code in (1, 2) and doc["ok"] is False and (tmp_path / "target").read_text() == "keep"
