"""The alert queue and case pages in a real browser over mutual TLS: an officer triages from the
queue to a closed case with the keyboard alone, releases a held payment, is refused approving
their own release of a blocked one (a second officer's certificate approves it), rejects a held
payment, drafts and files the case's report and closes the case as REPORT_FILED with the legal hold
listed, and reads the queue on a phone-width screen without sideways scrolling.

A real ``sealtrail serve`` (tests/api/server_proc.py) and Debian's Chromium driven by Playwright
(tests/api/console/browser.py), as in test_browser.py; the second officer is a certificate the
dev CA issues here, which the server's role map grants ``officer`` by its SAN.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

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


def issue_officer(files: ServerFiles, out: Path, cn: str) -> tuple[Path, Path]:
    """A second officer's client certificate from the dev CA (the role map grants it by its SAN)."""
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
            .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(role_uri("officer"))]),
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


def keyboard(page: Any, selector: str, key: str = "Enter") -> None:
    """Reach a control and operate it with a key, as a keyboard user does."""
    page.locator(selector).focus()
    page.keyboard.press(key)


def follow(page: Any, selector: str) -> None:
    """Activate a link or a submit button with Enter and wait for the page it loads (the URL
    alone may not change: two actions in a row both land on the same case and alert)."""
    page.locator(selector).focus()
    with page.expect_navigation():
        page.keyboard.press("Enter")


def test_triage_from_the_queue_to_a_closed_case_by_keyboard(browser: Browser,  # noqa: F811
                                                            server: ServerProcess) -> None:
    srv = server
    with browser.as_role(srv, "officer") as page:
        seq, case = alone_in_case(page, srv, "REVIEW")
        page.goto(f"{srv.url}/console/alerts?view=unassigned&outcome=REVIEW")
        assert page.evaluate(UNLABELED) == []
        assert any(r["alert"] == seq for r in rows(page))
        keyboard(page, f"#pick-{seq}", "Space")
        assert page.locator(f"#pick-{seq}").is_checked()
        follow(page, "#assign-to-me")
        page.wait_for_url(re.compile(r".*assigned=1"))
        assert "Assigned 1 alert to you" in page.locator("#queue-notice").inner_text()
        follow(page, "nav.tabs a[data-view=mine]")
        page.wait_for_url(re.compile(r".*view=mine"))
        assert [r["alert"] for r in rows(page)] == [seq]
        follow(page, f"#queue tr[data-alert='{seq}'] td[data-label=Case] a")
        page.wait_for_url(f"**/console/cases/{case}#alert-{seq}")
        assert page.evaluate(UNLABELED) == []
        follow(page, f"#alert-{seq}-quick button[value=start_review]")
        page.wait_for_url(re.compile(rf".*/console/cases/{case}\?sealed=\d+#alert-{seq}"))
        assert "start review on alert" in page.locator("#sealed-notice").inner_text()
        # the disposition: none is chosen; the keyboard picks one, then writes why and closes
        form = f"#alert-{seq}-close"
        radios = page.locator(f"{form} input[name=disposition]")
        assert radios.evaluate_all("rs => rs.filter(r => r.checked).length") == 0
        page.locator(f"{form}-d-FALSE_POSITIVE").focus()
        page.keyboard.press("ArrowDown")  # moves to, and chooses, the next: NO_FURTHER_ACTION
        assert page.locator(f"{form}-d-NO_FURTHER_ACTION").is_checked()
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.id") == f"alert-{seq}-close-rationale"
        page.keyboard.type("The customer documented the source of funds.")
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent.trim()") == "Close alert"
        outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
        assert outline != "none"  # the focus is visible
        with page.expect_navigation():
            page.keyboard.press("Enter")
        page.wait_for_url(re.compile(rf".*/console/cases/{case}\?sealed=\d+#alert-{seq}"))
        state = page.locator("#case-state").inner_text()  # its one alert closed: the case is closed
        assert state.startswith("closed at ") and state.endswith("its alerts closed as No further action (1)")
        assert page.locator(f"#alert-{seq} dd[data-state]").get_attribute("data-state") == "closed"
        events = page.locator("#timeline li[data-kind=event]").evaluate_all(
            "ls => ls.map(l => l.dataset.action)")
        assert events == ["assign", "start_review", "close"]


def test_release_of_a_held_payment(browser: Browser, server: ServerProcess) -> None:  # noqa: F811
    srv = server
    with browser.as_role(srv, "officer") as page:
        seq, case = alone_in_case(page, srv, "HOLD")
        page.goto(f"{srv.url}/console/cases/{case}")
        assert page.locator(f"#alert-{seq} dd[data-payment]").get_attribute("data-payment") == "HELD"
        page.locator(f"#alert-{seq}-decide-rationale").fill("Beneficiary verified by a call-back.")
        follow(page, f"#alert-{seq}-release")
        page.wait_for_url(re.compile(rf".*sealed=\d+#alert-{seq}"))
        assert page.locator(f"#alert-{seq} dd[data-payment]").get_attribute("data-payment") == "RELEASED"
        assert page.locator(f"#alert-{seq}-close").count() == 1  # decided: it can be closed now
    db = sqlite3.connect(srv.files.db.removeprefix("sqlite:///"))
    try:
        got = db.execute("SELECT outcome FROM audit_payment_outcomes WHERE alert_seq = ?",
                         (int(seq),)).fetchall()
    finally:
        db.close()
    assert got == [("RELEASED",)]  # what the payment system reads from /v1/outcomes


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
    cert, key = issue_officer(srv.files, tmp_path, "sealtrail-officer-2")
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
