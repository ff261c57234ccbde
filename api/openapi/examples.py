"""Complete example bodies for the OpenAPI document: each one is a message the API accepts.

The JSON transaction and the MT103 describe the same payment; ``tests/api/test_openapi.py``
parses every example with the parsers the routes use, so an example that stops being accepted
fails a test rather than misleading a reader.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ALERT_ACTION", "ALERT_BULK_ASSIGN", "ANNOTATION", "BATCH_JSON", "CASE_ACTION",
           "CLEARANCE_APPROVE", "CLEARANCE_PROPOSE", "CLEARANCE_REVOKE", "EXPORT",
           "LIST_CSV", "LIST_JSON", "LIST_UN_XML", "LIST_WITHDRAW", "MT103", "MT103_RJE", "PACS008",
           "RULESET_CASES", "RULESET_TOML", "STEP", "TRANSACTION_JSON"]

# A cross-border USD wire from a private person identified by national id (no account given).
TRANSACTION_JSON: dict[str, Any] = {
    "schema": "sealtrail.transaction/2",
    "reference": "PAY-2026-00018",
    "uetr": "3f2504e0-4f89-41d3-9a0c-0305e82c3301",
    "bank_operation_code": "CRED",
    "value_date": "2026-12-01",
    "amount": "25000.00",
    "currency": "USD",
    "originator": {"name": "MUELLER HANS PETER", "address_lines": ["FRIEDRICHSTRASSE 123", "10117 BERLIN"],
                   "country": "DE",
                   "identifiers": [{"scheme": "NIDN", "value": "T22000129", "country": "DE"}]},
    "beneficiary": {"name": "ACME TRADING LLC", "account": "US12345678901234",
                    "address_lines": ["350 FIFTH AVENUE", "NEW YORK NY 10118"], "country": "US"},
    "agents": [{"role": "sender", "bic": "COBADEFFXXX"}, {"role": "receiver", "bic": "CHASUS33XXX"},
               {"role": "ordering_institution", "bic": "COBADEFF"},
               {"role": "intermediary", "bic": "IRVTUS3N"}, {"role": "account_with", "bic": "CHASUS33"}],
    "remittance": "/RFB/INV-2026-991\nPO 77812",
    "charges": "OUR",
}

# An intra-European CHF wire between two banks' customers, both sides with IBAN and BIC.
_SECOND_JSON: dict[str, Any] = {
    "schema": "sealtrail.transaction/2",
    "reference": "FR-INTRA-44",
    "bank_operation_code": "CRED",
    "value_date": "2026-11-30",
    "amount": "100000.00",
    "currency": "CHF",
    "originator": {"account": "FR7630006000011234567890189", "bic": "BNPAFRPP"},
    "beneficiary": {"account": "CH9300762011623852957", "bic": "UBSWCHZH80A"},
    "agents": [{"role": "sender", "bic": "BNPAFRPPXXX"}, {"role": "receiver", "bic": "UBSWCHZHXXX"}],
    "charges": "BEN",
}

BATCH_JSON: list[dict[str, Any]] = [TRANSACTION_JSON, _SECOND_JSON]

MT103 = """\
{1:F01COBADEFFAXXX1234123456}{2:I103CHASUS33XXXXN}{3:{121:3f2504e0-4f89-41d3-9a0c-0305e82c3301}}{4:
:20:PAY-2026-00018
:23B:CRED
:32A:261201USD25000,
:50F:NIDN/DE/T22000129
1/MUELLER HANS PETER
2/FRIEDRICHSTRASSE 123
3/DE/10117 BERLIN
:52A:COBADEFF
:56A:IRVTUS3N
:57A:CHASUS33
:59F:/US12345678901234
1/ACME TRADING LLC
2/350 FIFTH AVENUE
3/US/NEW YORK NY 10118
:70:/RFB/INV-2026-991
PO 77812
:71A:OUR
-}{5:{CHK:A1B2C3D4E5F6}}
"""

# An RJE file: FIN messages separated by a line holding '$'.
MT103_RJE = MT103 + """\
$
{1:F01BNPAFRPPAXXX0000000000}{2:I103UBSWCHZHXXXXU}{4:
:20:FR-INTRA-44
:23B:CRED
:32A:261130CHF100000,00
:50A:/FR7630006000011234567890189
BNPAFRPP
:59A:/CH9300762011623852957
UBSWCHZH80A
:71A:BEN
-}
"""

PACS008 = """\
<?xml version="1.0" encoding="UTF-8"?>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:pacs.008.001.08">
  <FIToFICstmrCdtTrf>
    <GrpHdr>
      <MsgId>DEUTDEFF-20260602-000017</MsgId>
      <CreDtTm>2026-06-02T08:15:00.000+02:00</CreDtTm>
      <NbOfTxs>1</NbOfTxs>
      <TtlIntrBkSttlmAmt Ccy="EUR">1814.28</TtlIntrBkSttlmAmt>
      <IntrBkSttlmDt>2026-06-02</IntrBkSttlmDt>
      <SttlmInf><SttlmMtd>CLRG</SttlmMtd></SttlmInf>
      <PmtTpInf><SvcLvl><Cd>SEPA</Cd></SvcLvl></PmtTpInf>
    </GrpHdr>
    <CdtTrfTxInf>
      <PmtId>
        <InstrId>SCT-2026-0602-17</InstrId>
        <EndToEndId>RECHNUNG-48213</EndToEndId>
        <TxId>DEUT20260602000017</TxId>
      </PmtId>
      <IntrBkSttlmAmt Ccy="EUR">1814.28</IntrBkSttlmAmt>
      <ChrgBr>SLEV</ChrgBr>
      <Dbtr>
        <Nm>Müller Werkzeugbau GmbH</Nm>
        <PstlAdr>
          <Ctry>DE</Ctry><AdrLine>Industriestraße 7</AdrLine><AdrLine>70565 Stuttgart</AdrLine>
        </PstlAdr>
      </Dbtr>
      <DbtrAcct><Id><IBAN>DE89370400440532013000</IBAN></Id></DbtrAcct>
      <DbtrAgt><FinInstnId><BICFI>COBADEFFXXX</BICFI></FinInstnId></DbtrAgt>
      <CdtrAgt><FinInstnId><BICFI>BNPAFRPP</BICFI></FinInstnId></CdtrAgt>
      <Cdtr>
        <Nm>Atelier Lefèvre SARL</Nm>
        <PstlAdr><Ctry>FR</Ctry><AdrLine>12 rue des Tanneurs</AdrLine><AdrLine>75003 Paris</AdrLine></PstlAdr>
      </Cdtr>
      <CdtrAcct><Id><IBAN>FR1420041010050500013M02606</IBAN></Id></CdtrAcct>
      <RmtInf><Ustrd>Rechnung 48213 vom 20.05.2026</Ustrd></RmtInf>
    </CdtTrfTxInf>
  </FIToFICstmrCdtTrf>
</Document>
"""

RULESET_TOML = """\
[ruleset]
id = "aml_core"
version = "2027.1.0"
description = "Structuring under the USD 10,000 threshold, FATF R.16 originator information, model score"
features = ["amount_usd", "cross_border", "orig_name_present", "orig_account_present",
            "orig_address_or_id_present", "orig_near_threshold_count_24h", "model_score"]

[ruleset.feature_tables]
fx_rates = "ecb-2025-10"

[[rules]]
id = "STRUCTURING_ORIG_24H"
when = "orig_near_threshold_count_24h >= 3"
outcome = "HOLD"
reason = "Three or more transfers of USD 8,000 to 9,999 from the originator within 24 hours"
severity = "high"

[[rules]]
id = "R16_ORIGINATOR_INCOMPLETE"
when = '''cross_border == 1 and not (amount_usd < 1000)
  and not (orig_name_present == 1 and orig_account_present == 1 and orig_address_or_id_present == 1)'''
outcome = "HOLD"
reason = "FATF R.16: cross-border wire of USD 1,000 or more without complete originator information"
severity = "high"

[[rules]]
id = "MODEL_SCORE_REVIEW"
when = "0.5 <= model_score < 0.8"
outcome = "REVIEW"
reason = "Model risk score in [0.5, 0.8)"
severity = "medium"

[[rules]]
id = "MODEL_SCORE_HOLD"
when = "model_score >= 0.8"
outcome = "HOLD"
reason = "Model risk score of 0.8 or more"
severity = "high"
"""

RULESET_CASES = "\n".join([
    '{"case": "three near-threshold transfers", "features": {"amount_usd": 9500, '
    '"orig_name_present": 1, "orig_account_present": 1, "orig_address_or_id_present": 1, '
    '"orig_near_threshold_count_24h": 3}, "expect": {"decision": "HOLD", "fired": ["STRUCTURING_ORIG_24H"]}}',
    '{"case": "cross-border wire without an originator account", "features": {"amount_usd": 25000, '
    '"cross_border": 1, "orig_name_present": 1, "orig_address_or_id_present": 1}, '
    '"expect": {"decision": "HOLD", "fired": ["R16_ORIGINATOR_INCOMPLETE"]}}',
    '{"case": "a domestic payment scored 0.6", "features": {"amount_usd": 120, "orig_name_present": 1, '
    '"orig_account_present": 1, "orig_address_or_id_present": 1, "model_score": 0.6}, '
    '"expect": {"decision": "REVIEW", "fired": ["MODEL_SCORE_REVIEW"]}}',
]) + "\n"

STEP: dict[str, Any] = {
    "comment": "Reviewed against the October 2025 FATF lists; thresholds as documented in the pack.",
    "module_sha256": "514aa205a2ece6016286b2639e933dab148501ab9fc51390ef0f31e4b888816e",  # RULESET_TOML's
}

ANNOTATION: dict[str, Any] = {
    "disposition": "CORRECTION",
    "note": "Originator identified by national id; account confirmed by the ordering bank (ticket AML-4411).",
    "correction": {"decision": "ALLOW", "reason": "R.16 information completed by the ordering institution"},
}

EXPORT: dict[str, Any] = {
    "from": "2026-12-01T00:00:00Z", "to": "2026-12-08T00:00:00Z",
    "account": "US12345678901234", "decision": "HOLD",
}

# An officer closes an alert; the rationale is sealed with the event and kept as long as the ledger.
ALERT_ACTION: dict[str, Any] = {
    "action": "close", "disposition": "NO_FURTHER_ACTION",
    "rationale": "Customer documented the source of funds (sale of property, deed on file AML-5120).",
}

ALERT_BULK_ASSIGN: dict[str, Any] = {
    "alerts": [41873, 41880, 41902], "action": "assign",
    "assignee": {"subject": "CN=Alice Martin,OU=Financial Crime,O=Example Bank",
                 "fingerprint_sha256": "3b1f5e0c9d8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c"},
}

CASE_ACTION: dict[str, Any] = {
    "action": "link", "link": 41210,
    "rationale": "Same beneficiary network as case 41210 (three shared counterparties).",
}

# Sanctions list files as an admin loads them (POST /v1/lists): the bank's own exit list as CSV
# (format internal-csv; its publication date is given as `published`) and as JSON (internal-json,
# loaded under the name it states), and one entry of the UN Security Council Consolidated List
# (un-xml; the file states its date).
LIST_CSV = """\
entry_id,kind,name,aliases,dob,countries,identifiers,bics,programmes
EX-0101,individual,Jonathan Q. EXAMPLE,Jon Example,1970-03-04,GB,PASSPORT:123456789:GB,,EXIT-2026
EX-0102,entity,"Example Trading Co., Ltd.",Example Trading,,CY,COMPANY REG:HE123456:CY,EXTRCY2L,EXIT-2026
"""

LIST_JSON: dict[str, Any] = {
    "list": "bank-exits", "published": "2026-11-30",
    "entries": [{"entry_id": "EX-0101", "kind": "individual", "name": "Jonathan Q. EXAMPLE",
                 "aliases": ["Jon Example"], "dob": ["1970-03-04"], "countries": ["GB"],
                 "identifiers": ["PASSPORT:123456789:GB"], "programmes": ["EXIT-2026"]}],
}

LIST_UN_XML = """\
<?xml version="1.0" encoding="UTF-8"?>
<CONSOLIDATED_LIST dateGenerated="2026-11-30T00:00:00.000Z">
  <INDIVIDUALS>
    <INDIVIDUAL>
      <DATAID>2975590</DATAID>
      <FIRST_NAME>MALIK</FIRST_NAME>
      <SECOND_NAME>NOORZAI</SECOND_NAME>
      <UN_LIST_TYPE>Taliban</UN_LIST_TYPE>
      <REFERENCE_NUMBER>TAi.154</REFERENCE_NUMBER>
      <LISTED_ON>2011-10-04</LISTED_ON>
      <NATIONALITY><VALUE>Afghanistan</VALUE></NATIONALITY>
      <INDIVIDUAL_ALIAS><QUALITY>Good</QUALITY><ALIAS_NAME>MALIK NOORZAY</ALIAS_NAME></INDIVIDUAL_ALIAS>
    </INDIVIDUAL>
  </INDIVIDUALS>
  <ENTITIES/>
</CONSOLIDATED_LIST>
"""

LIST_WITHDRAW: dict[str, Any] = {
    "rationale": "Merged into the group exit list (bank-group-exits) from today.",
}

# A good-guy clearance of a name hit: proposed from the decision whose record shows it, then approved
# by a second officer (or revoked).
CLEARANCE_PROPOSE: dict[str, Any] = {
    "trace_id": "01938f2a-7c41-7d22-9a51-0c1d2e3f4a5b", "where": "beneficiary", "list": "ofac-sdn",
    "entry_id": "12057", "until": "2027-06-30",
    "rationale": "Customer since 2011, born 1984 in Porto (passport seen); the listed Mohammad Reza NAQDI "
                 "was born 1952 in Najaf: not the same person.",
}
CLEARANCE_APPROVE: dict[str, Any] = {"rationale": "Checked the passport copy and the KYC file: agreed."}
CLEARANCE_REVOKE: dict[str, Any] = {"rationale": "The FIU reopened the customer's file; clear no more."}
