"""The alert queue and case pages in a real browser over mutual TLS: an officer triages from the
queue to a closed case with the keyboard alone (Tab to every control, each focus stop visible),
releases a held payment that the payment system then reads RELEASED on /v1/outcomes (another
payment system's scorer certificate does not), is refused approving their own release of a
blocked one (a second officer's certificate approves it), rejects a held payment, drafts and files
the case's report and closes the case as REPORT_FILED with the legal hold listed, and reads the
queue on a phone-width screen without sideways scrolling.

A real ``sealtrail serve`` (tests/api/server_proc.py) and Debian's Chromium driven by Playwright
(tests/api/console/browser.py), as in test_browser.py; the second officer is a certificate the
dev CA issues here, which the server's role map grants ``officer`` by its SAN (a second scorer is
issued the same way).
"""

from __future__ import annotations

import hashlib
import re
import ssl
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from api.certs import role_uri
from tests.api import server_proc
from tests.api.console.browser import Browser, score
from tests.api.console.test_browser import browser  # noqa: F401  (the module's Chromium, a fixture)
from tests.api.server_proc import ServerFiles, ServerProcess

pytestmark = pytest.mark.browser

EXAMPLE = Path(__file__).parents[3] / "docs" / "reporting-entity.example.toml"
UNLABELED = """() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
    .filter(e => e.labels.length === 0 && !e.getAttribute('aria-label')).map(e => e.name || e.id)"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    files = server_proc.prepare(tmp_path_factory.mktemp("cases"))
    with server_proc.start(files, extra_args=("--reporting-entity", str(EXAMPLE))) as srv:
        score(srv, 200)  # 19 alerts in 14 cases: REVIEW, HOLD and BLOCK
        yield srv
        srv.stop()


def issue(files: ServerFiles, out: Path, cn: str, role: str = "officer") -> tuple[Path, Path]:
    """Another client certificate from the dev CA, granted ``role`` by the role map through its SAN
    (a second officer, a second payment system's scorer)."""
    ca = x509.load_pem_x509_certificate((files.pki / "ca.pem").read_bytes())
    ca_key = serialization.load_pem_private_key((files.pki / "ca.key").read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "sealtrail dev"),
                                     x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(hours=1)).not_valid_after(now + timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         key_cert_sign=False, crl_sign=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(role_uri(role))]),
                           critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    cert_path, key_path = out / f"{cn}.pem", out / f"{cn}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@contextmanager
def as_cert(b: Browser, srv: ServerProcess, cert: Path, key: Path) -> Iterator[Any]:
    ctx = b.browser.new_context(ignore_https_errors=True, client_certificates=[
        {"origin": srv.url, "certPath": str(cert), "keyPath": str(key)}])
    ctx.set_default_timeout(20_000)
    try:
        yield ctx.new_page()
    finally:
        ctx.close()


def rows(page: Any) -> list[dict[str, str]]:
    """The queue's rows as their data attributes say."""
    got: list[dict[str, str]] = page.locator("#queue tr[data-alert]").evaluate_all(
        "rs => rs.map(r => ({alert: r.dataset.alert, case: r.dataset.case, trace: r.dataset.traceId}))")
    return got


def alone_in_case(page: Any, srv: ServerProcess, outcome: str) -> tuple[str, str]:
    """(alert, case) of an open ``outcome`` alert that is the only alert of its case, as the
    queue's Open tab shows them (all 19 fit one page)."""
    page.goto(f"{srv.url}/console/alerts?view=open")
    got = page.locator("#queue tr[data-alert]").evaluate_all(
        "rs => rs.map(r => [r.dataset.alert, r.dataset.case, r.querySelector('.badge').textContent])")
    per_case = Counter(case for _, case, _ in got)
    found = [(seq, case) for seq, case, o in got if o == outcome and per_case[case] == 1]
    assert found, f"no open {outcome} alert alone in its case"
    return found[0][0], found[0][1]


FOCUSED = """() => { const e = document.activeElement, s = getComputedStyle(e);
    return {id: e.id, tag: e.tagName.toLowerCase(), text: (e.textContent || '').trim().replace(/\\s+/g, ' '),
            outline: s.outlineStyle, width: parseFloat(s.outlineWidth) || 0}; }"""


def focused(page: Any) -> dict[str, Any]:
    """The focused element: its id, tag, text and computed outline."""
    got: dict[str, Any] = page.evaluate(FOCUSED)
    return got


def tab_to(page: Any, selector: str, limit: int = 400) -> dict[str, Any]:
    """Press Tab until the focus is on ``selector``, as a keyboard user moves through the page;
    every stop on the way shows where the focus is (a visible outline). Fails if the control is
    not reached: it is not in the tab order."""
    hidden: list[str] = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        at = focused(page)
        if at["tag"] != "body" and (at["outline"] == "none" or at["width"] == 0):
            hidden.append(f"{at['tag']}#{at['id']} {at['text'][:40]!r}")
        if page.evaluate("s => document.activeElement.matches(s)", selector):
            assert hidden == [], f"focus without a visible outline on the way to {selector}: {hidden}"
            assert at["outline"] != "none" and at["width"] > 0  # the focus is visible
            return at
    pytest.fail(f"{selector} is not reached by {limit} presses of Tab")


def press_and_load(page: Any, key: str = "Enter") -> None:
    """Activate the focused link or submit button with a key and wait for the page it loads (the
    URL alone may not change: two actions in a row both land on the same case and alert)."""
    with page.expect_navigation():
        page.keyboard.press(key)


def keyboard(page: Any, selector: str, key: str = "Enter") -> None:
    """Reach a control and operate it with a key (the tests that are not about the keyboard)."""
    page.locator(selector).focus()
    page.keyboard.press(key)


def follow(page: Any, selector: str) -> None:
    """Activate a link or a submit button with Enter and wait for the page it loads."""
    page.locator(selector).focus()
    press_and_load(page)


def test_triage_from_the_queue_to_a_closed_case_by_keyboard(browser: Browser,  # noqa: F811
                                                            server: ServerProcess) -> None:
    """From the queue page to a closed case with the keyboard alone: Tab to each control, Enter,
    Space and the arrow keys to operate it, typing into the focused field; no click, no programmatic
    focus or fill. Every focus stop on the way shows an outline."""
    srv = server
    with browser.as_role(srv, "officer") as page:
        seq, case = alone_in_case(page, srv, "REVIEW")  # which alert to take (read, not acted on)
        page.goto(f"{srv.url}/console/alerts")  # the officer's home: the queue, their own alerts
        # the first stop is the skip link, and it shows
        page.keyboard.press("Tab")
        at = focused(page)
        assert (at["tag"], at["text"]) == ("a", "Skip to content") and at["outline"] != "none"
        assert page.locator("a.skip").bounding_box()["x"] >= 0  # moved on screen when focused
        # the Unassigned tab
        assert tab_to(page, "nav.tabs a[data-view=unassigned]")["text"] == "Unassigned"
        press_and_load(page)
        page.wait_for_url(re.compile(r".*view=unassigned"))
        assert page.evaluate(UNLABELED) == []
        # filter on REVIEW: the Outcome select is changed with the arrow keys, Apply with Enter
        tab_to(page, "#f-outcome")
        for _ in range(page.locator("#f-outcome option").count()):
            if page.eval_on_selector("#f-outcome", "s => s.value") == "REVIEW":
                break
            page.keyboard.press("ArrowDown")
        assert page.eval_on_selector("#f-outcome", "s => s.value") == "REVIEW"
        assert tab_to(page, "#queue-filters button[type=submit]")["text"] == "Apply"
        press_and_load(page)
        page.wait_for_url(re.compile(r".*outcome=REVIEW"))
        assert "view=unassigned" in page.url
        assert {r["alert"] for r in rows(page)} >= {seq}
        assert page.locator("#queue .badge").all_inner_texts() == ["REVIEW"] * len(rows(page))
        # tick the alert with Space, assign it to me with Enter
        tab_to(page, f"#pick-{seq}")
        page.keyboard.press("Space")
        assert page.locator(f"#pick-{seq}").is_checked()
        assert tab_to(page, "#assign-to-me")["text"] == "Assign ticked alerts to me"
        press_and_load(page)
        page.wait_for_url(re.compile(r".*assigned=1"))
        assert "Assigned 1 alert to you" in page.locator("#queue-notice").inner_text()
        # Mine, then the alert's case
        assert tab_to(page, "nav.tabs a[data-view=mine]")["text"] == "Mine"
        press_and_load(page)
        page.wait_for_url(re.compile(r".*view=mine"))
        assert [r["alert"] for r in rows(page)] == [seq]
        assert tab_to(page, f"#queue tr[data-alert='{seq}'] td[data-label=Case] a")["text"] == f"Case {case}"
        press_and_load(page)
        page.wait_for_url(f"**/console/cases/{case}#alert-{seq}")
        assert page.evaluate(UNLABELED) == []
        # start the review
        assert tab_to(page, f"#alert-{seq}-quick button[value=start_review]")["text"] == "Start review"
        press_and_load(page)
        page.wait_for_url(re.compile(rf".*/console/cases/{case}\?sealed=\d+#alert-{seq}"))
        assert "start review on alert" in page.locator("#sealed-notice").inner_text()
        # the disposition: none is chosen; Tab enters the group at its first choice without
        # choosing it, the arrow key chooses the next; then why, and Close with Enter
        form = f"#alert-{seq}-close"
        radios = page.locator(f"{form} input[name=disposition]")
        assert radios.evaluate_all("rs => rs.filter(r => r.checked).length") == 0
        assert tab_to(page, f"{form} input[name=disposition]")["id"] == f"alert-{seq}-close-d-FALSE_POSITIVE"
        assert radios.evaluate_all("rs => rs.filter(r => r.checked).length") == 0
        page.keyboard.press("ArrowDown")  # moves to, and chooses, the next: NO_FURTHER_ACTION
        assert focused(page)["id"] == f"alert-{seq}-close-d-NO_FURTHER_ACTION"
        assert page.locator(f"{form}-d-NO_FURTHER_ACTION").is_checked()
        page.keyboard.press("Tab")  # out of the group, to the rationale
        assert focused(page)["id"] == f"alert-{seq}-close-rationale"
        page.keyboard.type("The customer documented the source of funds.")
        page.keyboard.press("Tab")
        at = focused(page)
        assert at["text"] == "Close alert"
        assert at["outline"] != "none" and at["width"] > 0  # the focus is visible
        press_and_load(page)
        page.wait_for_url(re.compile(rf".*/console/cases/{case}\?sealed=\d+#alert-{seq}"))
        state = page.locator("#case-state").inner_text()  # its one alert closed: the case is closed
        assert state.startswith("closed at ") and state.endswith("its alerts closed as No further action (1)")
        assert page.locator(f"#alert-{seq} dd[data-state]").get_attribute("data-state") == "closed"
        events = page.locator("#timeline li[data-kind=event]").evaluate_all(
            "ls => ls.map(l => l.dataset.action)")
        assert events == ["assign", "start_review", "close"]


def client_as(srv: ServerProcess, cert: Path, key: Path) -> httpx.Client:
    """An HTTP client over mutual TLS presenting ``cert``: trusts only the dev CA, as the
    payment system's own client does."""
    ctx = ssl.create_default_context(cafile=str(srv.files.ca))
    ctx.load_cert_chain(str(cert), str(key))
    return httpx.Client(base_url=srv.url, verify=ctx, timeout=10.0)


def outcomes(client: httpx.Client, after: int = 0) -> dict[str, Any]:
    """One poll of the payment system's outcome feed."""
    r = client.get("/v1/outcomes", params={"after": after})
    assert r.status_code == 200, r.text
    got: dict[str, Any] = r.json()
    return got


def feed_end(client: httpx.Client) -> int:
    """The cursor at the end of the feed as ``client`` sees it now: polled until nothing is new."""
    cursor = 0
    while True:
        page = outcomes(client, cursor)
        if not page["items"]:
            return cursor
        cursor = page["next_cursor"]


def poll(client: httpx.Client, after: int, timeout: float = 10.0) -> dict[str, Any]:
    """Poll the feed from ``after`` until something new comes (or ``timeout`` passes)."""
    deadline = time.monotonic() + timeout
    while True:
        page = outcomes(client, after)
        if page["items"] or time.monotonic() > deadline:
            return page
        time.sleep(0.1)


def test_release_of_a_held_payment(browser: Browser, server: ServerProcess,  # noqa: F811
                                   tmp_path: Path) -> None:
    """The officer releases the HOLD in the browser; the payment system that asked for the decision
    (the scorer certificate) sees it RELEASED on its next poll of /v1/outcomes; another payment
    system's scorer certificate does not."""
    srv = server
    payments = srv.client("scorer")  # the scorer score() decided every payment with
    other = client_as(srv, *issue(srv.files, tmp_path, "sealtrail-scorer-2", "scorer"))
    with payments, other, browser.as_role(srv, "officer") as page:
        seq, case = alone_in_case(page, srv, "HOLD")
        trace = page.locator(f"#queue tr[data-alert='{seq}']").get_attribute("data-trace-id")
        assert trace
        scorer_cert = x509.load_pem_x509_certificate(srv.files.client_cert("scorer")[0].read_bytes())
        with srv.client("officer") as officer:  # the alert's decision was asked for by that certificate
            alert = officer.get(f"/v1/alerts/{seq}")
        assert alert.status_code == 200, alert.text
        assert alert.json()["scorer_fingerprint_sha256"] == scorer_cert.fingerprint(hashes.SHA256()).hex()
        cursor = feed_end(payments)
        assert trace not in {o["trace_id"] for o in outcomes(payments)["items"]}  # held: no outcome yet

        page.goto(f"{srv.url}/console/cases/{case}")
        assert page.locator(f"#alert-{seq} dd[data-payment]").get_attribute("data-payment") == "HELD"
        page.locator(f"#alert-{seq}-decide-rationale").fill("Beneficiary verified by a call-back.")
        follow(page, f"#alert-{seq}-release")
        page.wait_for_url(re.compile(rf".*sealed=\d+#alert-{seq}"))
        receipt = re.search(r"sealed=(\d+)", page.url)
        assert receipt
        sealed = int(receipt.group(1))  # the seq of the release the page sealed
        assert page.locator(f"#alert-{seq} dd[data-payment]").get_attribute("data-payment") == "RELEASED"
        assert page.locator(f"#alert-{seq}-close").count() == 1  # decided: it can be closed now

        # the payment system sees it: the one new outcome since its cursor, the event the page sealed
        seen = poll(payments, cursor)
        assert [(o["trace_id"], o["outcome"], o["alert_seq"], o["seq"]) for o in seen["items"]] == [
            (trace, "RELEASED", int(seq), sealed)]
        assert seen["next_cursor"] == sealed
        assert outcomes(payments, seen["next_cursor"]) == {"items": [], "next_cursor": sealed}  # once
        # another payment system (a scorer certificate that asked for none of these) sees nothing
        assert outcomes(other) == {"items": [], "next_cursor": 0}
        assert outcomes(other, cursor) == {"items": [], "next_cursor": cursor}


def test_the_same_officer_cannot_approve_their_own_block_release(browser: Browser,  # noqa: F811
                                                                 server: ServerProcess,
                                                                 tmp_path: Path) -> None:
    srv = server
    with browser.as_role(srv, "officer") as page:
        seq, case = alone_in_case(page, srv, "BLOCK")
        page.goto(f"{srv.url}/console/cases/{case}")
        assert "needs a second officer" in page.locator(f"#alert-{seq}-decide-hint").inner_text()
        page.locator(f"#alert-{seq}-decide-rationale").fill("The list hit is a namesake.")
        follow(page, f"#alert-{seq}-release")
        page.wait_for_url(re.compile(rf".*sealed=\d+#alert-{seq}"))
        assert "You proposed releasing" in page.locator(f"#alert-{seq}-pending").inner_text()
        assert page.locator(f"#alert-{seq}-approve").count() == 0  # no Approve for the proposer
        # posting the approval anyway (the form another officer's page has: a stale tab, a crafted post)
        page.evaluate("""([url, alert]) => {
            const f = document.createElement('form');
            f.method = 'post'; f.action = url; f.id = 'crafted';
            const fields = [['form', 'alert-' + alert + '-second'], ['alert', alert], ['action', 'approve']];
            for (const [k, v] of fields) {
                const i = document.createElement('input');
                i.type = 'hidden'; i.name = k; i.value = v; f.append(i);
            }
            const b = document.createElement('button');
            b.type = 'submit'; b.textContent = 'Approve'; f.append(b);
            document.querySelector('main').append(f);
        }""", [f"/console/cases/{case}/act", seq])
        follow(page, "#crafted button")
        refused = page.locator("#action-refused")
        refused.wait_for()
        assert refused.get_attribute("data-status") == "403"
        assert "four-eyes" in refused.inner_text() and "cannot approve it too" in refused.inner_text()
        assert page.locator(f"#alert-{seq} dd[data-payment]").get_attribute("data-payment") == "HELD"
    cert, key = issue(srv.files, tmp_path, "sealtrail-officer-2")
    with as_cert(browser, srv, cert, key) as second:
        second.goto(f"{srv.url}/console/cases/{case}")
        assert "CN=sealtrail-officer,O=sealtrail dev proposed releasing" in second.locator(
            f"#alert-{seq}-pending").inner_text()
        follow(second, f"#alert-{seq}-approve")
        second.wait_for_url(re.compile(rf".*sealed=\d+#alert-{seq}"))
        assert second.locator(f"#alert-{seq} dd[data-payment]").get_attribute("data-payment") == "RELEASED"


def test_reject_a_held_payment_then_file_the_report_and_close_the_case(browser: Browser,  # noqa: F811
                                                                       server: ServerProcess) -> None:
    srv = server
    with browser.as_role(srv, "officer") as page:
        # a case of a held payment and another alert, none of them held but that one
        page.goto(f"{srv.url}/console/alerts?view=open")
        got = page.locator("#queue tr[data-alert]").evaluate_all(
            "rs => rs.map(r => [r.dataset.alert, r.dataset.case, r.querySelector('.pay.HELD') !== null])")
        per_case = Counter(case for _, case, _ in got)
        held = Counter(case for _, case, h in got if h)
        seq, case = next((a, c) for a, c, h in got if h and held[c] == 1 and per_case[c] >= 2)
        follow(page, f"#queue tr[data-alert='{seq}'] td[data-label=Case] a")
        page.wait_for_url(f"**/console/cases/{case}*")
        assert page.evaluate(UNLABELED) == []
        # reject the held payment, then close its alert
        page.locator(f"#alert-{seq}-decide-rationale").fill("Beneficiary on an internal watch list.")
        follow(page, f"#alert-{seq}-reject")
        page.wait_for_url(re.compile(rf".*sealed=\d+#alert-{seq}"))
        assert page.locator(f"#alert-{seq} dd[data-payment]").get_attribute("data-payment") == "REJECTED"
        page.locator(f"#alert-{seq}-close-d-FALSE_POSITIVE").focus()
        page.keyboard.press("ArrowDown")
        assert page.locator(f"#alert-{seq}-close-d-NO_FURTHER_ACTION").is_checked()
        page.locator(f"#alert-{seq}-close-rationale").fill("Payment rejected; the case's report follows.")
        follow(page, f"#alert-{seq}-close button[value=close]")
        page.wait_for_url(re.compile(rf".*sealed=\d+#alert-{seq}"))
        assert page.locator(f"#alert-{seq} dd[data-state]").get_attribute("data-state") == "closed"
        assert page.locator("#case-state").inner_text() == "open"  # its other alert is open
        assert page.locator("#case-close-d-REPORT_FILED").is_disabled()  # no report yet
        # draft: nothing sealed, the document shown with its SHA-256
        page.locator("#report-draft-reason").fill("Payments to a beneficiary on an internal watch list.")
        page.locator("#report-draft-indicators").fill("HRJUR")
        page.locator("#report-draft-rates").fill("USD=0.9215\nGBP=1.1702\nCHF=1.0480\nJPY=0.0061")
        assert page.evaluate(UNLABELED) == []
        follow(page, "#report-draft-submit")
        xml = page.locator("#report-xml").text_content() or ""
        sha = hashlib.sha256(xml.encode()).hexdigest()
        assert page.locator("#report-draft-sha256").inner_text() == sha
        assert f"<entity_reference>case-{case}</entity_reference>" in xml
        # file exactly what was shown: the hold, then the sealed event
        page.locator("#report-file-rationale").fill("Approved by the MLRO.")
        follow(page, "#report-file-submit")
        page.wait_for_url(re.compile(rf".*/console/cases/{case}\?sealed=\d+#report"))
        assert "file report on the case" in page.locator("#sealed-notice").inner_text()
        row = page.locator(f"#report-versions tr[data-sha256='{sha}']")
        assert row.get_attribute("data-in-force") == "true"
        hold = row.locator(f"li[data-hold='case-{case}-{sha[:8]}']")
        assert hold.get_attribute("data-active") == "true" and "active" in hold.inner_text()
        document_hold = row.locator(f"li[data-hold='case-{case}-{sha[:8]}.report']")
        assert document_hold.get_attribute("data-active") == "true"
        with page.expect_download() as download:  # the API's route, over the same certificate
            row.locator("a").focus()
            page.keyboard.press("Enter")
        assert hashlib.sha256(Path(download.value.path()).read_bytes()).hexdigest() == sha
        # close the case as REPORT_FILED, by the keyboard
        keyboard(page, "#case-close-d-REPORT_FILED", "Space")
        assert page.locator("#case-close-d-REPORT_FILED").is_checked()
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.id") == "case-close-rationale"
        page.keyboard.type("STR filed; relationship under review.")
        follow(page, "#case-close button[value=close]")
        page.wait_for_url(re.compile(rf".*/console/cases/{case}\?sealed=\d+#case-actions"))
        assert page.locator("#case-state").inner_text().startswith("closed as Report filed")
        assert page.locator(f"#report-versions li[data-hold='case-{case}-{sha[:8]}']").get_attribute(
            "data-active") == "true"


def test_the_queue_fits_a_375_px_phone_without_sideways_scrolling(browser: Browser,  # noqa: F811
                                                                  server: ServerProcess) -> None:
    srv = server
    with browser.as_role(srv, "officer", viewport={"width": 375, "height": 812}) as page:
        page.goto(f"{srv.url}/console/alerts?view=open")
        assert page.locator("#queue tr[data-alert]").count() > 0
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 375, f"the queue is {width} px wide"
        shapes = page.locator("#queue tbody tr").evaluate_all(
            "rs => rs.map(r => getComputedStyle(r).display)")
        assert set(shapes) == {"block"}  # stacked rows, each cell labelled by its column
        label = page.locator("#queue td[data-label=Payment]").first.evaluate(
            "td => getComputedStyle(td, '::before').content")
        assert label == '"Payment"'
        case = page.locator("#queue tr[data-alert]").first.get_attribute("data-case")
        page.goto(f"{srv.url}/console/cases/{case}")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 375, f"the case page is {width} px wide"
