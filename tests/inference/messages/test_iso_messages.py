"""ISO 20022 beyond pacs.008: pacs.009 (core and COV), pacs.004 returns, pain.001 initiations, every
pacs.008 version, envelopes and national variants; read on public samples (tests/vectors/public)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference.messages import MessageError, Transaction, detect_format, parse_messages

PUBLIC = Path(__file__).resolve().parents[2] / "vectors" / "public"
BAL = PUBLIC / "iso-ballerina-iso20022-to-swiftmt"
PHO = PUBLIC / "iso-phoughton-cbpr-ur"


def one(path: Path, fmt: str = "auto") -> Transaction:
    got = parse_messages(path.read_bytes(), fmt)  # type: ignore[arg-type]
    assert len(got) == 1 and isinstance(got[0], Transaction), got
    return got[0]


def test_the_format_is_told_by_the_documents_namespace() -> None:
    assert detect_format((BAL / "p_2_3_1_a pacs.009.cov-AtoB.xml").read_bytes()) == "pacs009"
    assert detect_format((BAL / "p_2_3_1_b pacs.004-CtoB.xml").read_bytes()) == "pacs004"
    assert detect_format((PHO / "2026_pain001_credit_initiation_sample.xml").read_bytes()) == "pain001"
    assert detect_format((BAL / "p_2_1_1 pacs.008-AtoB.xml").read_bytes()) == "pacs008"


def test_a_cover_payment_screens_the_customers_it_covers() -> None:
    """pacs.009 COV: the underlying customer credit transfer's debtor and creditor are the parties,
    as an MT202COV's sequence B; a core pacs.009's parties are the institutions, by BIC."""
    cov = one(BAL / "p_2_3_1_a pacs.009.cov-AtoB.xml")
    assert (cov.originator.name, cov.beneficiary.name) == ("A Debiter", "B Creditor Co")
    assert any(a.role == "debtor_agent" for a in cov.agents)
    core = one(BAL / "p_2_4_1 pacs.009-CtoD.xml")
    assert core.originator.bic and core.beneficiary.bic
    assert core.originator.identifiers[0].scheme == "BIC"


def test_a_return_runs_from_the_original_creditor_back_to_the_debtor() -> None:
    ret = one(BAL / "p_2_3_1_b pacs.004-CtoB.xml")
    assert ret.message_type == "pacs.004.001.09"
    assert ret.beneficiary.name == "A Debiter"  # the debtor of the payment returned
    assert ret.original is not None and ret.original.uetr == "7a562c67-ca16-48ba-b074-65581be6f001"
    assert ret.related_reference == ret.original.end_to_end_id
    assert ret.to_json()["original"]["uetr"] == ret.original.uetr


def test_an_initiation_takes_its_debtor_from_the_payment_information() -> None:
    got = [t for t in parse_messages((PUBLIC / "iso-moov-io-iso20022/musterfile_pain.001_Nov2020.xml")
                                     .read_bytes()) if isinstance(t, Transaction)]
    assert len(got) == 8  # several PmtInf, each its own debtor
    assert {t.originator.name for t in got} == {"Robert Schneider", "Robert Schneider SA", "Maria Bernasconi"}
    assert all(t.initiating_party is not None for t in got)
    assert all(t.message_type == "pain.001.001.03" for t in got)  # a Swiss Payment Standards variant
    assert all("NB_OF_TXS_MISMATCH" in {f.code for f in t.findings} for t in got)  # NbOfTxs says 7
    sample = one(PHO / "2026_pain001_credit_initiation_sample.xml")
    assert sample.message_type == "pain.001.001.09" and sample.initiating_party is not None


def test_an_application_header_naming_another_version_is_a_finding() -> None:
    t = one(BAL / "p_2_1_1 pacs.008-AtoB.xml")
    assert t.message_type == "pacs.008.001.12"
    assert ("APPHDR_VERSION_MISMATCH", "AppHdr/MsgDefIdr") in {(f.code, f.field) for f in t.findings}


def test_pacs008_format_reads_only_pacs008_and_names_what_else_it_was() -> None:
    (err,) = parse_messages((BAL / "p_2_3_1_b pacs.004-CtoB.xml").read_bytes(), "pacs008")
    assert isinstance(err, MessageError) and "unsupported message pacs.004.001.09" in err.reason
    assert isinstance(one(BAL / "p_2_3_1_b pacs.004-CtoB.xml", "iso20022"), Transaction)


@pytest.mark.parametrize("version", ["02", "04", "06"])
def test_early_pacs008_versions_and_their_element_names(version: str) -> None:
    """pacs.008.001.02 to .04 name a BIC ``BIC`` and an organisation's ``BICOrBEI``."""
    data = (PHO / "y2025_pacs.008.min.xml").read_bytes().replace(b"pacs.008.001.08", f"pacs.008.001.{version}"
                                                                   .encode()).replace(b"BICFI>", b"BIC>")
    got = parse_messages(data)
    assert isinstance(got[0], Transaction), got
    assert got[0].message_type == f"pacs.008.001.{version}"
    assert any(a.bic for a in got[0].agents)


def test_an_unsupported_iso_message_is_refused_naming_it() -> None:
    data = (PHO / "y2025_pacs.008.min.xml").read_bytes().replace(b"pacs.008.001.08", b"camt.053.001.08")
    (err,) = parse_messages(data)
    assert isinstance(err, MessageError) and err.field == "Document" and "camt.053.001.08" in err.reason
