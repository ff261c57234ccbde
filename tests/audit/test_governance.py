"""Rule governance: proposed -> approved (four-eyes) -> active, every step a ledger record,
the state derived from those records, and the pipeline scoring with the active module only."""

from __future__ import annotations

import base64
import hashlib
import threading
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from sqlalchemy import select

from audit.decide.pipeline import Pipeline
from audit.decide.principal import Principal
from audit.errors import (
    CasesFailedError,
    DuplicateRulesetError,
    FourEyesError,
    GovernanceRecordError,
    NoActiveRulesetError,
    RulesetRefusedError,
    StateError,
    UnknownRulesetError,
)
from audit.governance.service import DEFAULT_PACK, KINDS, Governance, recorded_principal, same_person
from audit.governance.state import normalised_dn
from inference.backends import load_backend
from inference.model import ModelFiles
from ledger import NoteSigner, Record, store
from ledger.append import Ledger
from ledger.jcs import canonical_bytes
from ledger.verify import verify_ledger
from tests.audit.test_pipeline import submissions
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox, compile_ruleset, parse_ruleset

PACK_TEXT = DEFAULT_PACK.read_text()
CASES_TEXT = DEFAULT_PACK.with_name("aml_core_cases.jsonl").read_text()
N_CASES = len(CASES_TEXT.splitlines())
VERSION = parse_ruleset(PACK_TEXT).version
OPERATOR = Principal.local("operator")


def cert_principal(cn: str, role: str, *, org: str = "sealtrail dev",
                   key: ec.EllipticCurvePrivateKey | None = None) -> Principal:
    """A real certificate's principal (a fresh key unless given, so a fresh fingerprint each call)."""
    key = ec.generate_private_key(ec.SECP256R1()) if key is None else key
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = datetime(2026, 1, 1, tzinfo=UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(now + timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName(
                [x509.UniformResourceIdentifier(f"spiffe://sealtrail.dev/role/{role}")]), critical=False)
            .sign(key, hashes.SHA256()))
    return Principal.from_certificate(cert)


OFFICER = cert_principal("alice", "officer")
APPROVER = cert_principal("bob", "approver")


def pack(version: str, extra: str = "") -> str:
    text = PACK_TEXT.replace(f'version = "{VERSION}"', f'version = "{version}"', 1)
    assert text != PACK_TEXT
    return text + extra


@pytest.fixture
def gov(ledger: Ledger, sandbox: Sandbox) -> Governance:
    return Governance(ledger, sandbox=sandbox)


def entries(ledger: Ledger) -> list[tuple[int, str, dict]]:  # type: ignore[type-arg]
    e = store.entries
    with ledger.engine.connect() as conn:
        rows = conn.execute(select(e.c.seq, e.c.kind, e.c.record).where(e.c.kind.in_(KINDS))
                            .order_by(e.c.seq)).all()
    return [(seq, kind, orjson.loads(bytes(rec))["record"]) for seq, kind, rec in rows]


@pytest.mark.requirement("SEC-17a4f-audit-trail", "SR11-7-change-control")
def test_full_lifecycle_two_principals_every_step_a_record(gov: Governance, ledger: Ledger,
                                                           signer: NoteSigner) -> None:
    boot = gov.bootstrap_default(principal=OPERATOR)
    assert boot is not None and boot.status == "active" and boot.bootstrapped and not boot.four_eyes
    assert boot.id == f"aml_core@{VERSION}" and boot.cases == {
        "sha256": hashlib.sha256(CASES_TEXT.encode()).hexdigest(), "count": N_CASES, "passed": N_CASES}

    p = gov.propose(pack("2027.1.0"), OFFICER, "raise nothing, new version", cases=CASES_TEXT)
    assert (p.id, p.status, p.approved, p.activated) == ("aml_core@2027.1.0", "proposed", None, None)
    assert p.proposed.fingerprint_sha256 == OFFICER.fingerprint_sha256
    assert gov.active() == gov.get(boot.id)  # a proposal changes nothing that scores

    a = gov.approve(p.id, APPROVER, "reviewed", module_sha256=p.module_sha256)
    assert a.status == "approved" and a.four_eyes and a.approved is not None
    assert (a.approved.subject, a.approved.fingerprint_sha256) == (APPROVER.subject,
                                                                   APPROVER.fingerprint_sha256)

    act = gov.activate(p.id, APPROVER)
    assert act.status == "active" and act.activated is not None
    assert gov.active() == act
    old = gov.get(boot.id)
    assert old.status == "retired" and old.retired_seq == act.activated.seq

    assert [v.id for v in gov.list()] == [boot.id, p.id]
    recs = entries(ledger)
    assert [k for _, k, _ in recs] == ["ruleset.bootstrapped", "ruleset.proposed", "ruleset.approved",
                                       "ruleset.activated"]
    assert [s for s, _, _ in recs] == [boot.proposed.seq, p.proposed.seq, a.approved.seq, act.activated.seq]
    b_boot, b_prop, b_appr, b_act = (b for _, _, b in recs)
    assert b_boot["four_eyes"] is False and "NOT four-eyes" in b_boot["note"]
    assert b_boot["operator"] == OPERATOR.to_json()
    assert b_prop["schema"] == "sealtrail.ruleset.proposed/1" and b_prop["source"] == pack("2027.1.0")
    assert b_prop["proposer"] == {**OFFICER.to_json(), "spki_sha256": OFFICER.spki_sha256}  # and its key
    assert len(OFFICER.spki_sha256) == 64 and b_prop["comment"] == "raise nothing, new version"
    assert b_prop["rules"][0] == {"id": "STRUCTURING_ORIG_24H", "outcome": "HOLD"}
    assert b_appr == {"schema": "sealtrail.ruleset.approved/1", "id": p.id, "module_sha256": p.module_sha256,
                      "approver": recorded_principal(APPROVER), "comment": "reviewed"}
    assert b_act["previous_active"] == boot.id and b_act["activator"] == recorded_principal(APPROVER)
    verify_ledger(ledger.engine, [signer.verifier])


@pytest.mark.requirement("SR11-7-change-control")
def test_self_approval_is_refused_same_certificate_or_same_subject(gov: Governance, ledger: Ledger) -> None:
    p = gov.propose(pack("2027.2.0"), OFFICER)
    size = ledger.size()
    with pytest.raises(FourEyesError, match="four-eyes"):
        gov.approve(p.id, OFFICER)
    alice_again = cert_principal("alice", "approver")  # same person, a second certificate
    assert alice_again.fingerprint_sha256 != OFFICER.fingerprint_sha256
    assert alice_again.subject == OFFICER.subject
    with pytest.raises(FourEyesError):
        gov.approve(p.id, alice_again)
    assert ledger.size() == size and gov.get(p.id).status == "proposed"


def test_four_eyes_rule_by_principal_kind() -> None:
    a, b = OFFICER.to_json(), APPROVER.to_json()
    assert not same_person(a, b)
    assert same_person(a, {**b, "subject": a["subject"]})  # same DN, another certificate
    assert same_person(a, {**b, "fingerprint_sha256": a["fingerprint_sha256"]})  # same certificate
    alice, bob = Principal.local("alice").to_json(), Principal.local("bob").to_json()
    assert same_person(alice, Principal.local("alice").to_json()) and not same_person(alice, bob)
    assert not same_person(alice, b)  # empty fingerprints never match each other's certificate


@pytest.mark.parametrize(("proposer", "approver"), [
    (("SEALTRAIL-OFFICER", "sealtrail dev"), ("sealtrail-officer", "sealtrail dev")),  # case
    (("Alice  Smith", "Example Bank"), (" alice smith ", "EXAMPLE   BANK")),  # spaces
    (("\uff21lice", "sealtrail dev"), ("alice", "sealtrail dev")),  # a full-width A (NFKC)
    (("ali\u00adce", "sealtrail dev"), ("alice", "sealtrail dev")),  # a soft hyphen (mapped to nothing)
])
def test_four_eyes_compares_subject_dns_as_a_directory_does(
        gov: Governance, ledger: Ledger, proposer: tuple[str, str], approver: tuple[str, str]) -> None:
    p = gov.propose(pack("2027.2.1"), cert_principal(proposer[0], "officer", org=proposer[1]))
    size = ledger.size()
    second = cert_principal(approver[0], "approver", org=approver[1])
    assert second.subject != gov.get(p.id).proposed.subject  # not byte for byte the same...
    with pytest.raises(FourEyesError, match="four-eyes"):  # ...but the same name
        gov.approve(p.id, second)
    assert ledger.size() == size and gov.get(p.id).status == "proposed"


def test_four_eyes_refuses_the_proposers_key_under_another_name(gov: Governance, ledger: Ledger) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    p = gov.propose(pack("2027.2.2"), cert_principal("alice", "officer", key=key))
    size = ledger.size()
    with pytest.raises(FourEyesError):
        gov.approve(p.id, cert_principal("mallory", "approver", org="elsewhere", key=key))
    assert ledger.size() == size
    assert gov.approve(p.id, APPROVER).status == "approved"  # another name and another key may


def test_normalised_dns_and_keys_in_same_person() -> None:
    assert normalised_dn("CN=alice,O=Example Bank") == normalised_dn("O=example  bank,CN=ALICE")
    assert normalised_dn("CN=alice") == normalised_dn("2.5.4.3=alice")  # a type by name or by OID
    assert normalised_dn("CN=alice,OU=ops") != normalised_dn("CN=ops,OU=alice")  # types stay paired
    assert normalised_dn("CN=alice") != normalised_dn("CN=alice,O=Example Bank")
    a, b = recorded_principal(OFFICER), recorded_principal(APPROVER)
    assert not same_person(a, b)
    assert same_person(a, {**b, "subject": a["subject"].upper()})
    assert same_person(a, {**b, "spki_sha256": a["spki_sha256"]})  # one key, two certificates
    older = {k: v for k, v in b.items() if k != "spki_sha256"}  # a record written before keys were kept
    assert not same_person(a, older) and same_person(a, {**older, "subject": a["subject"]})


def test_a_sealed_case_variant_self_approval_makes_governance_underivable(
        gov: Governance, ledger: Ledger) -> None:
    p = gov.propose(pack("2027.2.3"), OFFICER)
    shouting = {**OFFICER.to_json(), "subject": OFFICER.subject.upper(), "fingerprint_sha256": "ab" * 32}
    body = {"schema": "sealtrail.ruleset.approved/1", "id": p.id, "module_sha256": p.module_sha256,
            "approver": shouting, "comment": None}
    ledger.append_many([Record.from_canonical_body("ruleset.approved", canonical_bytes(body))])
    with pytest.raises(GovernanceRecordError, match="self-approval"):
        gov.list()


@pytest.mark.parametrize("version", ["2027.1-\u2603", "2027.1\x00", "2027.1\x1b", "2027/1", "2" * 65, ".1",
                                     "1 2"])
def test_a_version_outside_the_identifier_set_is_refused_before_anything_is_sealed(
        gov: Governance, ledger: Ledger, version: str) -> None:
    size = ledger.size()
    escaped = "".join(c if c.isprintable() else f"\\u{ord(c):04X}" for c in version)
    with pytest.raises(RulesetRefusedError, match="version") as info:
        gov.propose(pack(escaped), OFFICER)
    assert info.value.field == "ruleset.version"
    assert ledger.size() == size and gov.list() == []


def test_a_version_of_64_identifier_characters_is_proposed(gov: Governance) -> None:
    version = "2027.1.0-rc_1." + "9" * 50
    assert len(version) == 64
    assert gov.propose(pack(version), OFFICER).id == f"aml_core@{version}"


def test_local_principals_can_approve_each_other_but_not_themselves(gov: Governance) -> None:
    p = gov.propose(pack("2027.3.0"), Principal.local("alice"))
    with pytest.raises(FourEyesError):
        gov.approve(p.id, Principal.local("alice"))
    assert gov.approve(p.id, Principal.local("bob")).status == "approved"


def test_steps_out_of_order_are_refused_and_write_nothing(gov: Governance, ledger: Ledger) -> None:
    with pytest.raises(UnknownRulesetError):
        gov.approve("nope@1", APPROVER)
    with pytest.raises(UnknownRulesetError):
        gov.activate("nope@1", APPROVER)
    p = gov.propose(pack("2027.4.0"), OFFICER)
    size = ledger.size()
    with pytest.raises(StateError, match="not approved"):
        gov.activate(p.id, APPROVER)
    with pytest.raises(StateError, match="module"):
        gov.approve(p.id, APPROVER, module_sha256="00" * 32)  # not what the approver reviewed
    assert ledger.size() == size
    gov.approve(p.id, APPROVER)
    with pytest.raises(StateError, match="already approved"):
        gov.approve(p.id, cert_principal("carol", "approver"))
    gov.activate(p.id, APPROVER)
    size = ledger.size()
    with pytest.raises(StateError, match="already active"):
        gov.activate(p.id, APPROVER)
    assert ledger.size() == size


def test_a_retired_approved_ruleset_can_be_activated_again(gov: Governance) -> None:
    first = gov.propose(pack("2027.5.0"), OFFICER)
    second = gov.propose(pack("2027.6.0"), OFFICER)
    for v in (first, second):
        gov.approve(v.id, APPROVER)
    gov.activate(first.id, APPROVER)
    gov.activate(second.id, APPROVER)
    assert gov.get(first.id).status == "retired"
    back = gov.activate(first.id, APPROVER, "roll back")
    assert back.status == "active" and gov.get(second.id).status == "retired"


def test_duplicate_proposal_is_refused(gov: Governance, ledger: Ledger) -> None:
    gov.propose(pack("2027.7.0"), OFFICER)
    size = ledger.size()
    with pytest.raises(DuplicateRulesetError, match=r"aml_core@2027\.7\.0"):
        gov.propose(pack("2027.7.0", "\n# only a comment differs\n"), APPROVER)
    assert ledger.size() == size


@pytest.mark.parametrize(("text", "match", "where"), [
    (pack("2027.8.0").replace('when = "', 'when = "nonexistent_feature > 1 or ', 1),
     r"rule STRUCTURING_ORIG_24H, line 1, column \d+: .*nonexistent_feature",
     ("STRUCTURING_ORIG_24H", 1)),
    ("[ruleset]\nid = 'x'\n", "missing key 'version'", None),
    ("this is not toml = = =", "not a valid UTF-8 TOML document", None),
])
def test_compile_errors_are_refused_with_the_compilers_message(
        gov: Governance, ledger: Ledger, text: str, match: str, where: tuple[str, int] | None) -> None:
    size = ledger.size()
    with pytest.raises(RulesetRefusedError, match=match) as info:
        gov.propose(text, OFFICER)
    if where is not None:
        assert (info.value.rule_id, info.value.line) == where and info.value.column
    assert ledger.size() == size and gov.list() == []


def test_features_the_pipeline_does_not_produce_are_refused(gov: Governance, ledger: Ledger) -> None:
    text = pack("2027.9.0").replace('features = [', 'features = ["made_up_feature", ', 1)
    with pytest.raises(RulesetRefusedError, match="made_up_feature"):
        gov.propose(text, OFFICER)
    assert gov.list() == []


def test_failing_cases_refuse_the_proposal(gov: Governance, ledger: Ledger) -> None:
    text = pack("2027.10.0").replace('outcome = "BLOCK"', 'outcome = "REVIEW"', 1)
    size = ledger.size()
    with pytest.raises(CasesFailedError, match="cases fail") as info:
        gov.propose(text, OFFICER, cases=CASES_TEXT)
    assert info.value.failures and all(f["line"] for f in info.value.failures)
    assert ledger.size() == size
    bad_cases = '{"case": "x", "features": {"no_such": 1}, "expect": {"decision": "ALLOW"}}\n'
    with pytest.raises(RulesetRefusedError, match=r"line 1.*no_such"):
        gov.propose(pack("2027.10.0"), OFFICER, cases=bad_cases)
    assert gov.propose(text, OFFICER).cases is None  # without cases: recorded as none run


def test_module_bytes_round_trip_to_the_proposals_sha(gov: Governance, ledger: Ledger) -> None:
    text = pack("2027.11.0")
    p = gov.propose(text, OFFICER)
    data = gov.module_bytes(p.id)
    assert data == compile_ruleset(parse_ruleset(text))  # the same bytes the compiler gives
    assert hashlib.sha256(data).hexdigest() == p.module_sha256
    (body,) = [b for _, k, b in entries(ledger) if k == "ruleset.proposed"]
    assert base64.b64decode(body["module"]) == data and body["module_sha256"] == p.module_sha256
    with pytest.raises(UnknownRulesetError):
        gov.module_bytes("nope@1")


def test_proposal_gives_back_the_sealed_source_for_proposed_and_bootstrapped(gov: Governance) -> None:
    boot = gov.bootstrap_default(principal=OPERATOR)
    assert boot is not None
    assert gov.proposal(boot.id)["source"] == PACK_TEXT
    text = pack("2027.12.0")
    p = gov.propose(text, OFFICER, comment="tighter")
    body = gov.proposal(p.id)
    assert body["source"] == text and body["module_sha256"] == p.module_sha256 and body["id"] == p.id
    with pytest.raises(UnknownRulesetError):
        gov.proposal("nope@1")


def test_bootstrap_happens_once(gov: Governance, ledger: Ledger) -> None:
    first = gov.bootstrap_default(principal=OPERATOR)
    assert first is not None
    size = ledger.size()
    assert gov.bootstrap_default(principal=OPERATOR) is None
    assert ledger.size() == size
    assert [v.id for v in gov.list()] == [first.id]


def test_bootstrap_is_skipped_once_anything_was_active(gov: Governance) -> None:
    p = gov.propose(pack("2027.12.0"), OFFICER)
    gov.approve(p.id, APPROVER)
    gov.activate(p.id, APPROVER)
    assert gov.bootstrap_default(principal=OPERATOR) is None
    assert [v.id for v in gov.list()] == [p.id]


def test_bootstrapped_ruleset_is_not_approvable(gov: Governance) -> None:
    boot = gov.bootstrap_default(principal=OPERATOR)
    assert boot is not None
    with pytest.raises(StateError, match="bootstrapped"):
        gov.approve(boot.id, APPROVER)


def test_load_active_follows_activation_into_decision_records(
        gov: Governance, ledger: Ledger, sandbox: Sandbox, signer: NoteSigner) -> None:
    with pytest.raises(NoActiveRulesetError):
        gov.load_active(sandbox)
    boot = gov.bootstrap_default(principal=OPERATOR)
    assert boot is not None
    rules = gov.load_active(sandbox)
    assert rules.module.sha256 == boot.module_sha256
    files = ModelFiles.open()
    pipe = Pipeline(ledger, load_backend("numpy", files.weights_path), rules)
    subs = submissions(20)
    half = len(subs) // 2
    pipe.decide(subs[:half])

    p = gov.propose(pack("2028.1.0"), OFFICER, cases=CASES_TEXT)
    gov.approve(p.id, APPROVER)
    gov.activate(p.id, APPROVER)
    new = gov.load_active(sandbox)
    assert new.module.sha256 == p.module_sha256 != boot.module_sha256
    assert new.module.manifest.version == "2028.1.0"
    pipe.activate(new)
    pipe.decide(subs[half:])

    e = store.entries
    with ledger.engine.connect() as conn:
        recs = [orjson.loads(bytes(r))["record"]["rules"] for r in conn.execute(
            select(e.c.record).where(e.c.kind == "decision").order_by(e.c.seq)).scalars()]
    assert len(recs) == len(subs)
    assert recs[:half] == [{"module_sha256": boot.module_sha256, "ruleset_id": "aml_core",
                            "version": VERSION}] * half
    assert recs[half:] == [{"module_sha256": p.module_sha256, "ruleset_id": "aml_core",
                            "version": "2028.1.0"}] * (len(subs) - half)
    verify_ledger(ledger.engine, [signer.verifier])


def test_racing_approvals_let_exactly_one_through(sqlite_db: Db, signer: NoteSigner,
                                                  sandbox: Sandbox) -> None:
    ledger = make_ledger(sqlite_db, signer)
    gov = Governance(ledger, sandbox=sandbox)
    p = gov.propose(pack("2028.2.0"), OFFICER)
    approvers = [cert_principal(f"approver{i}", "approver") for i in range(4)]
    start = threading.Barrier(len(approvers))
    outcomes: list[str] = []

    def go(who: Principal) -> None:
        start.wait()
        try:
            gov.approve(p.id, who)
            outcomes.append("ok")
        except StateError:
            outcomes.append("refused")

    threads = [threading.Thread(target=go, args=(a,)) for a in approvers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["ok", "refused", "refused", "refused"]
    assert [k for _, k, _ in entries(ledger)] == ["ruleset.proposed", "ruleset.approved"]


def test_the_under_lock_recheck_refuses_what_the_first_check_missed(gov: Governance, ledger: Ledger) -> None:
    """Another replica approves between our check and our append: the recheck under the
    sequencer lock sees it and nothing of ours is written."""
    p = gov.propose(pack("2028.3.0"), OFFICER)
    other = Governance(ledger)
    real_append = ledger.append_many

    def racing_append(records, **kw):  # type: ignore[no-untyped-def]
        ledger.append_many = real_append  # type: ignore[method-assign]
        other.approve(p.id, cert_principal("dave", "approver"))  # lands first
        return real_append(records, **kw)

    ledger.append_many = racing_append  # type: ignore[method-assign]
    with pytest.raises(StateError, match="already approved"):
        gov.approve(p.id, APPROVER)
    assert [k for _, k, _ in entries(ledger)] == ["ruleset.proposed", "ruleset.approved"]


@pytest.mark.parametrize(("role", "match"), [
    ("approver", "self-approval"), ("activator", "not approved"),
    (None, "not a well-formed governance record"),
])
def test_records_written_around_governance_stop_it_fail_closed(
        gov: Governance, ledger: Ledger, sandbox: Sandbox, role: str | None, match: str) -> None:
    """The rules hold in the derivation too: a self-approval or an unapproved activation
    appended straight to the ledger does not count as one; governance refuses to go on."""
    p = gov.propose(pack("2028.4.0"), OFFICER)
    body = {"id": p.id} if role is None else {"id": p.id, "module_sha256": p.module_sha256,
                                              role: OFFICER.to_json()}
    kind = "ruleset.activated" if role == "activator" else "ruleset.approved"
    (r,) = ledger.append_many([Record(kind, body)])
    with pytest.raises(GovernanceRecordError, match=f"ledger entry {r.seq} .*{match}"):
        gov.list()
    with pytest.raises(GovernanceRecordError):
        gov.load_active(sandbox)
