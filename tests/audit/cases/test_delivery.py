"""Held-payment outcomes pushed to the payment system: Standard Webhooks messages a receiver
verifies with that project's own library, sent at least once and in ledger order, retried on the
specification's schedule, stopped by 410 Gone, one deliverer per endpoint."""

from __future__ import annotations

import base64
import random
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from sqlalchemy import select
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from audit.cases.delivery import Answer, deliver_round, deliveries, enable, status
from audit.cases.query import outcomes_since
from audit.cases.service import act
from audit.cases.store import catch_up
from audit.cases.tables import alerts
from audit.cases.webhooks import (
    RETRY_SCHEDULE_S,
    Endpoint,
    WebhookConfigError,
    body_of,
    headers_of,
    new_secret,
    parse_secret,
    retry_delay,
    sign,
)
from ledger.append import Ledger
from tests.audit.cases.test_cases import ALICE, BOB, decided, rows  # noqa: F401 - fixture

SECRET = new_secret()
KEY = parse_secret(SECRET, where="test")


@dataclass
class Clock:
    t: float = 1_796_000_000.0  # 2026-11-30

    def __call__(self) -> float:
        return self.t

    def db(self, conn: object) -> int:
        """The same time as the database's clock (``deliver_round(lease_clock=)``): one clock for both,
        as every deliverer of a log shares the database's."""
        return int(self.t * 1_000_000)

    @property
    def both(self) -> dict[str, Any]:
        """``deliver_round``'s two clocks, both this one."""
        return {"clock": self, "lease_clock": self.db}


@dataclass
class Receiver:
    """A payment system's endpoint: answers from ``script`` (then 204), keeps what it got."""

    script: list[Answer] = field(default_factory=list)
    got: list[tuple[bytes, dict[str, str]]] = field(default_factory=list)
    verify_with: str = SECRET

    def __call__(self, ep: Endpoint, body: bytes, headers: Mapping[str, str]) -> Answer:
        self.got.append((body, dict(headers)))
        return self.script.pop(0) if self.script else Answer(204)

    def ids(self) -> list[str]:
        return [h["webhook-id"] for _, h in self.got]

    def acknowledged(self) -> list[dict[str, Any]]:
        """The outcomes, as the receiver reads them after verifying each message."""
        return [Webhook(self.verify_with).verify(b, h)["data"] for b, h in self.got]


def endpoint(scorers: tuple[str, ...], **kw: Any) -> Endpoint:
    return Endpoint(name=kw.pop("name", "core-banking"), url=kw.pop("url", "https://pay.bank.example/hooks"),
                    scorers=scorers, secrets=kw.pop("secrets", (KEY,)), **kw)


@pytest.fixture
def outcomes(decided: Ledger) -> list[dict[str, Any]]:  # noqa: F811
    """Six held payments released or rejected, by two scorers' payments; the feed's items."""
    catch_up(decided.engine)
    held = [a for a in rows(decided.engine, alerts) if a.outcome == "HOLD"][:6]
    assert len(held) == 6 and len({a.scorer_fp for a in held}) == 2
    for i, a in enumerate(held):
        act(decided, ALICE, "release" if i % 2 else "reject", alert=a.seq, rationale=f"checked {i}")
    items: list[dict[str, Any]] = outcomes_since(decided.engine, 0, scorer_fp=None).items
    return items


def scorers_of(items: list[dict[str, Any]], decided: Ledger) -> dict[str, list[int]]:  # noqa: F811
    by: dict[str, list[int]] = {}
    with decided.engine.connect() as conn:
        fp = {int(s): str(f) for s, f in conn.execute(select(alerts.c.seq, alerts.c.scorer_fp))}
    for o in items:
        by.setdefault(fp[o["alert_seq"]], []).append(o["seq"])
    return by


def test_the_signature_is_the_standard_webhooks_published_vector() -> None:
    # The specification's test vector, as the Standard Webhooks libraries and Svix's manual
    # verification guide publish it (docs.svix.com/receiving/verifying-payloads/how-manual).
    key = parse_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", where="vector")
    assert sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}') == \
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_a_rotated_secret_signs_beside_the_current_one_and_either_verifies() -> None:
    old = parse_secret(new_secret(), where="old")
    body = b'{"type":"payment.outcome"}'
    h = headers_of((KEY, old), "outcome_7", 1_796_000_000, body)
    assert len(h["webhook-signature"].split(" ")) == 2
    for k in (KEY, old):
        wh = Webhook("whsec_" + base64.b64encode(k).decode())
        with pytest.raises(WebhookVerificationError, match="too old"):  # a replay days later
            wh.verify(body, h)
    fresh = headers_of((KEY, old), "outcome_7", int(time.time()), body)
    for k in (KEY, old):
        assert Webhook("whsec_" + base64.b64encode(k).decode()).verify(body, fresh, json_parse=False) is None
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body, fresh)
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(body + b" ", fresh)


def test_each_outcome_reaches_its_payment_system_once_in_ledger_order(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    by = scorers_of(outcomes, decided)
    (a_fp, a_seqs), (b_fp, b_seqs) = sorted(by.items())
    rx_a, rx_b = Receiver(), Receiver()
    eps = [endpoint((a_fp,), name="a"), endpoint((b_fp,), name="b", url="https://other.bank.example/h")]

    def post(ep: Endpoint, body: bytes, headers: Mapping[str, str]) -> Answer:
        return (rx_a if ep.name == "a" else rx_b)(ep, body, headers)

    reports = deliver_round(decided.engine, eps, post, holder="d1")
    assert [(r.endpoint, r.state, r.delivered_now, r.pending) for r in reports] == [
        ("a", "caught_up", len(a_seqs), 0), ("b", "caught_up", len(b_seqs), 0)]
    # the receiver verifies each message with the Standard Webhooks library and reads what
    # GET /v1/outcomes answers, its own payments only, oldest first, each id its seq
    assert rx_a.acknowledged() == [o for o in outcomes if o["seq"] in a_seqs]
    assert rx_b.acknowledged() == [o for o in outcomes if o["seq"] in b_seqs]
    assert rx_a.ids() == [f"outcome_{s}" for s in a_seqs]
    body = orjson.loads(rx_a.got[0][0])
    assert body["type"] == "payment.outcome" and body["timestamp"] == body["data"]["recorded_at"]
    # nothing twice; a new outcome goes out alone, after the others
    assert [r.delivered_now for r in deliver_round(decided.engine, eps, post, holder="d1")] == [0, 0]
    more = next(a for a in rows(decided.engine, alerts) if a.payment == "HELD" and a.scorer_fp == a_fp)
    new = act(decided, BOB, "reject", alert=more.seq, rationale="beneficiary on the internal list")
    deliver_round(decided.engine, eps, post, holder="d1")
    assert rx_a.ids()[-1] == f"outcome_{new.seq}" and len(rx_a.got) == len(a_seqs) + 1
    assert len(rx_b.got) == len(b_seqs)


def test_a_failure_holds_back_every_later_outcome_until_it_is_delivered(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    clock = Clock()
    fps = tuple(scorers_of(outcomes, decided))
    rx = Receiver(script=[Answer(204), Answer(500, error="HTTP 500: busy"),
                          Answer(None, error="ConnectError")])
    ep = endpoint(fps)
    (r,) = deliver_round(decided.engine, [ep], rx, holder="d1", **clock.both, rng=random.Random(1))
    assert (r.state, r.delivered_now, r.cursor, r.failures, r.last_status) == (
        "retrying", 1, outcomes[0]["seq"], 1, 500)
    assert r.pending == len(outcomes) - 1 and r.last_error == "HTTP 500: busy"
    # before the schedule's first step (5 s, +-10 %) nothing is sent
    clock.t += 4
    assert deliver_round(decided.engine, [ep], rx, holder="d1", **clock.both)[0].delivered_now == 0
    assert len(rx.got) == 2
    clock.t += 2
    (r,) = deliver_round(decided.engine, [ep], rx, holder="d1", **clock.both, rng=random.Random(1))
    assert (r.state, r.failures, r.last_status, r.last_error) == ("retrying", 2, None, "ConnectError")
    clock.t += RETRY_SCHEDULE_S[1] * 1.1
    (r,) = deliver_round(decided.engine, [ep], rx, holder="d1", **clock.both)
    assert (r.state, r.failures, r.cursor) == ("caught_up", 0, outcomes[-1]["seq"])
    # the failed outcome was sent three times under one id, and the receiver has every outcome once, in order
    ids = rx.ids()
    assert ids[1] == ids[2] == ids[3] == f"outcome_{outcomes[1]['seq']}"
    assert list(dict.fromkeys(ids)) == [f"outcome_{o['seq']}" for o in outcomes]


def test_retry_after_is_followed_and_410_gone_disables_until_enabled(decided: Ledger,  # noqa: F811
                                                                     outcomes: list[dict[str, Any]]) -> None:
    clock = Clock()
    ep = endpoint(tuple(scorers_of(outcomes, decided)))
    rx = Receiver(script=[Answer(503, retry_after="120"), Answer(410, error="HTTP 410")])
    (r,) = deliver_round(decided.engine, [ep], rx, holder="d1", **clock.both)
    with decided.engine.connect() as conn:
        (row,) = conn.execute(select(deliveries)).all()
    assert row.next_attempt_us == int(clock.t * 1_000_000) + 120_000_000 and r.state == "retrying"
    clock.t += 121
    (r,) = deliver_round(decided.engine, [ep], rx, holder="d1", **clock.both)
    assert r.state == "disabled" and r.disabled is not None and "410 Gone" in r.disabled
    clock.t += 10 * 86_400
    assert deliver_round(decided.engine, [ep], rx, holder="d1", **clock.both)[0].delivered_now == 0
    assert status(decided.engine, [ep])[0].state == "disabled" and len(rx.got) == 2
    assert enable(decided.engine, "core-banking", clock=clock) is True
    (r,) = deliver_round(decided.engine, [ep], rx, holder="d1", **clock.both)
    assert (r.state, r.delivered_now) == ("caught_up", len(outcomes))
    assert rx.ids()[:3] == [f"outcome_{outcomes[0]['seq']}"] * 3
    assert enable(decided.engine, "never-worked") is False


def test_an_outcome_acknowledged_just_before_the_deliverer_died_is_sent_again(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    clock = Clock()
    ep = endpoint(tuple(scorers_of(outcomes, decided)))
    rx = Receiver()

    class Died(Exception):
        pass

    def dies_after_the_answer(e: Endpoint, body: bytes, headers: Mapping[str, str]) -> Answer:
        rx(e, body, headers)
        if len(rx.got) == 3:
            raise Died  # the process is gone between the receiver's 2xx and the cursor's update
        return Answer(200)

    with pytest.raises(Died):
        deliver_round(decided.engine, [ep], dies_after_the_answer, holder="d1", **clock.both)
    assert status(decided.engine, [ep])[0].cursor == outcomes[1]["seq"]
    # another deliverer waits out the dead one's lease, then sends the third outcome again
    assert deliver_round(decided.engine, [ep], rx, holder="d2", **clock.both)[0].state == "held_elsewhere"
    clock.t += 61
    (r,) = deliver_round(decided.engine, [ep], rx, holder="d2", **clock.both)
    assert r.state == "caught_up" and r.holder == "d2"
    ids = rx.ids()
    assert ids[2] == ids[3] == f"outcome_{outcomes[2]['seq']}"  # at least once
    assert list(dict.fromkeys(ids)) == [f"outcome_{o['seq']}" for o in outcomes]


def test_a_deliverer_whose_lease_passed_on_mid_message_does_not_move_the_cursor(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    clock = Clock()
    ep = endpoint(tuple(scorers_of(outcomes, decided)))
    rx = Receiver()
    seen: list[str] = []

    def stalls(e: Endpoint, body: bytes, headers: Mapping[str, str]) -> Answer:
        seen.append(headers["webhook-id"])
        if len(seen) == 2:  # stopped past its lease while this message was out; the other takes over
            clock.t += 61
            (other,) = deliver_round(decided.engine, [ep], rx, holder="d2", **clock.both)
            assert (other.state, other.cursor) == ("caught_up", outcomes[-1]["seq"])
        return Answer(200)

    (r,) = deliver_round(decided.engine, [ep], stalls, holder="d1", **clock.both)
    assert (r.state, r.delivered_now, r.holder) == ("held_elsewhere", 1, "d2")
    assert status(decided.engine, [ep])[0].cursor == outcomes[-1]["seq"]  # d1's late answer moved nothing
    assert rx.ids() == [f"outcome_{o['seq']}" for o in outcomes[1:]]


def test_an_endpoint_gets_only_its_scorers_outcomes(decided: Ledger,  # noqa: F811
                                                    outcomes: list[dict[str, Any]]) -> None:
    rx = Receiver()
    (r,) = deliver_round(decided.engine, [endpoint(("0f" * 32,))], rx, holder="d1")
    assert (r.state, r.delivered_now, r.pending, rx.got) == ("caught_up", 0, 0, [])
    start = endpoint(tuple(scorers_of(outcomes, decided)), name="late", after=outcomes[3]["seq"])
    assert status(decided.engine, [start])[0].pending == len(outcomes) - 4
    deliver_round(decided.engine, [start], rx, holder="d1")
    assert rx.ids() == [f"outcome_{o['seq']}" for o in outcomes[4:]]


def test_a_round_budget_leaves_the_rest_for_the_next_round(decided: Ledger,  # noqa: F811
                                                           outcomes: list[dict[str, Any]]) -> None:
    rx = Receiver()
    ep = endpoint(tuple(scorers_of(outcomes, decided)))
    (r,) = deliver_round(decided.engine, [ep], rx, holder="d1", budget=4)
    assert (r.state, r.delivered_now, r.pending) == ("behind", 4, len(outcomes) - 4)
    (r,) = deliver_round(decided.engine, [ep], rx, holder="d1", budget=4)
    assert (r.state, r.delivered) == ("caught_up", len(outcomes))


def test_the_retry_schedule_is_the_specifications_and_never_gives_up() -> None:
    assert [retry_delay(n, 0.0) for n in range(1, 10)] == list(RETRY_SCHEDULE_S)
    assert retry_delay(50, 0.0) == 86_400 and retry_delay(50, 0.1) == 86_400
    assert retry_delay(2, 0.1) == 330 and retry_delay(2, -0.1) == 270
    assert retry_delay(1, 0.0, retry_after_s=0) == 1 and retry_delay(1, 0.0, retry_after_s=10**9) == 86_400
    for bad in ((0, 0.0), (1, 0.5)):
        with pytest.raises(ValueError):
            retry_delay(*bad)


@pytest.mark.parametrize(("kw", "says"), [
    ({"name": "Core Banking"}, "endpoint name"),
    ({"url": "http://pay.bank.example/hooks"}, "plain http only to a loopback"),
    ({"url": "ftp://pay.bank.example/"}, "not an http(s) URL"),
    ({"url": "https://user:pw@pay.bank.example/"}, "carries credentials"),
    ({"url": "https://pay.bank.example:99999/"}, "is not a URL"),
    ({"scorers": ()}, "scorers must list"),
    ({"scorers": ("AB" * 32,)}, "scorers must list"),
    ({"scorers": ("ab" * 32, "ab" * 32)}, "listed twice"),
    ({"secrets": (b"short",)}, "24 to 64 bytes"),
    ({"after": -1}, "after must be a seq"),
    ({"timeout_s": 0.0}, "timeout_s"),
])
def test_an_endpoint_that_cannot_be_used_is_refused_naming_why(kw: dict[str, Any], says: str) -> None:
    with pytest.raises(WebhookConfigError, match=re.escape(says)):
        endpoint(kw.pop("scorers", ("ab" * 32,)), **kw)


def test_http_to_a_loopback_receiver_is_allowed() -> None:
    for url in ("http://127.0.0.1:9000/h", "http://localhost/h", "http://[::1]:8080/h"):
        assert endpoint(("ab" * 32,), url=url).url == url


@pytest.mark.parametrize(("text", "says"), [
    ("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "starts with 'whsec_'"),
    ("whsec_not base64!", "not base64"),
    ("whsec_c2hvcnQ=", "is 5 bytes"),
])
def test_a_secret_that_is_not_one_is_refused(text: str, says: str) -> None:
    with pytest.raises(WebhookConfigError, match=re.escape(says)):
        parse_secret(text, where="f")


def test_the_body_is_the_feed_item_under_the_specifications_envelope() -> None:
    item = {"seq": 9, "trace_id": "t", "outcome": "RELEASED", "alert_seq": 4,
            "recorded_at": "2026-12-05T10:00:00Z"}
    assert orjson.loads(body_of(item)) == {"type": "payment.outcome", "timestamp": "2026-12-05T10:00:00Z",
                                           "data": item}


def test_a_stop_asked_mid_round_ends_it_after_the_message_in_flight(decided: Ledger,  # noqa: F811
                                                                   outcomes: list[dict[str, Any]]) -> None:
    rx = Receiver()
    ep = endpoint(tuple(scorers_of(outcomes, decided)))
    (r,) = deliver_round(decided.engine, [ep], rx, holder="d1", stop=lambda: len(rx.got) >= 2)
    assert (r.state, r.delivered_now, r.cursor, len(rx.got)) == ("behind", 2, outcomes[1]["seq"], 2)
    assert deliver_round(decided.engine, [ep], rx, holder="d1", stop=lambda: True) == []
