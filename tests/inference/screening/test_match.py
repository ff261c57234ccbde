"""Name normalisation, token similarity, the index's candidates and scores, and screening a payment.

Expected values here are the behaviour an officer relies on (a transliterated or reordered
listed name is found; a different person sharing a common first name is not), not the
normaliser's own output fed back to it. Quality over thousands of independent pairs is measured
by ``python -m bench.screening``.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from inference.messages.transaction import Agent, Identifier, Party, Transaction
from inference.screening.entries import EntryId, ListEntry, SanctionsList
from inference.screening.index import ListIndex, identifier_key
from inference.screening.match import name_score, token_similarity
from inference.screening.normalise import name_tokens, normalise, skeleton
from inference.screening.screen import screen, screen_name, screen_text


def entries() -> tuple[ListEntry, ...]:
    return (
        ListEntry("1", "individual", ("Aleksandr Petrovich KOVALEV", "Alexander Kovalyov"),
                  dob_years=frozenset({1961}), countries=("RU",)),
        ListEntry("2", "entity", ("TEHRAN IMPORTS COMPANY",), bics=("TEHRIRTH",)),
        ListEntry("3", "individual", ("Mohammed Ali HASSAN",), dob_years=frozenset({1970})),
        ListEntry("4", "individual", ("XI Jinping",)),
        ListEntry("5", "entity", ("Sevmorneftegaz Trading LLC",),
                  identifiers=(EntryId("Registration ID", "1027700070518", "RU"),)),
        ListEntry("6", "individual", ("Abdul Rahman AL-HASHIMI", "Abd al-Rahman al-Hashimi"),
                  weak_aliases=frozenset({1})),
    )


@pytest.fixture(scope="module")
def index() -> ListIndex:
    return ListIndex([SanctionsList("internal", "bank-list", None, "ab" * 32, entries(), "test/1")])


def best(index: ListIndex, text: str) -> tuple[str, int] | None:
    hits = index.match_name(text, 0)
    return (hits[0].entry.entry_id, hits[0].score) if hits else None


def test_normalise_transliterates_and_strips_punctuation_and_case() -> None:
    assert normalise("Александр КОВАЛЁВ") == "aleksandr kovalev"
    assert normalise("O'Brien-Smith, Jr.") == "obrien smith jr"
    assert normalise("ＡＣＭＥ") == "acme"  # full-width letters
    assert normalise("Łukasz Żółć") == "lukasz zolc"
    assert normalise("金正恩") == "jin zheng en"  # one token per ideograph


def test_honorifics_dropped_and_legal_forms_apart() -> None:
    assert name_tokens("Dr. Mohammed Hassan").tokens == ("mohammed", "hassan")
    assert name_tokens("Acme Trading Limited") == name_tokens("ACME TRADING LTD.")
    assert name_tokens("Acme Trading Limited").forms == ("ltd",)
    assert name_tokens("AO Gazprom").forms == ("jsc",)
    assert name_tokens("Co").tokens == ("co",)  # a name that is only a form word stays a name


def test_skeleton_folds_transliteration_variants() -> None:
    assert skeleton("mohammed") == skeleton("muhammad") == skeleton("mukhammad")
    assert skeleton("aleksei") == skeleton("alexey") == skeleton("aleksej")
    assert skeleton("usama") == skeleton("osama")
    assert skeleton("a") == "a"  # never empty


def test_token_similarity_orders_variants_above_different_names() -> None:
    assert token_similarity("kovalev", "kovalev") == 1.0
    assert token_similarity("kovalev", "kovalyov") > 0.9
    assert token_similarity("j", "john") == pytest.approx(0.9)
    assert token_similarity("j", "smith") == 0.0
    assert token_similarity("kovalev", "kovalenko") < 0.85  # a different surname one suffix apart
    assert token_similarity("john", "johnson") < 0.85


def test_name_score_is_an_integer_per_mille_and_symmetric_in_order() -> None:
    def one(_: str) -> int:
        return 1

    assert name_score(("john", "smith"), ("john", "smith"), one) == 1000
    assert name_score(("smith", "john"), ("john", "smith"), one) == 1000
    assert name_score((), ("john",), one) == 0
    assert isinstance(name_score(("jon",), ("john",), one), int)


@pytest.mark.parametrize("query", [
    "Alexander Kovalev", "Kovalev, Aleksandr", "A. Kovalev", "Aleksandr Kovalyev",
    "Александр Ковалёв", "Mr Aleksandr Petrovich Kovalev",
])
def test_variants_of_a_listed_person_are_found(index: ListIndex, query: str) -> None:
    found = best(index, query)
    assert found is not None and found[0] == "1" and found[1] >= 900, found


def test_a_company_with_another_legal_form_is_found(index: ListIndex) -> None:
    assert best(index, "Tehran Imports Co.") == ("2", 1000)
    assert best(index, "TEHRAN IMPORTS LTD") == ("2", 1000)


def test_names_written_apart_or_together_are_found(index: ListIndex) -> None:
    found = best(index, "Xi Jin Ping")
    assert found is not None and found[0] == "4" and found[1] >= 900


def test_a_different_person_sharing_common_tokens_scores_low(index: ListIndex) -> None:
    partial = best(index, "Mohammed Ali")  # the listed man's two most common names, not his surname
    assert partial is None or partial[1] < 800
    other = best(index, "Aleksandr Kovalenko")
    assert other is None or other[1] < 900


def test_a_weak_alias_scores_below_the_same_name_as_a_strong_one() -> None:
    strong = ListEntry("x", "individual", ("Abd al-Rahman al-Hashimi",))
    weak = ListEntry("y", "individual", ("Abdul Rahman al-Hashimi", "Abd al-Rahman al-Hashimi"),
                     weak_aliases=frozenset({1}))
    query = "Abd al Rahman al Hashimi"
    s = ListIndex([SanctionsList("internal", "a", None, "a", (strong,), "t")]).match_name(query, 0)
    w = ListIndex([SanctionsList("internal", "b", None, "b", (weak,), "t")]).match_name(query, 0)
    assert s[0].score == 1000 and w[0].score < 1000


def test_identifiers_and_bics_match_exactly(index: ListIndex) -> None:
    assert identifier_key(" 1027-700 070518 ") == "1027700070518"
    assert [h.entry.entry_id for h in index.match_identifier("1027700070518")] == ["5"]
    assert index.match_identifier("1027700070519") == []
    assert [h.entry.entry_id for h in index.match_bic("TEHRIRTHXXX")] == ["2"]  # the branch of a listed BIC
    assert index.match_bic("TEHR") == []


def test_free_text_finds_a_listed_name_among_other_words(index: ListIndex) -> None:
    hits = screen_text(index, "remittance", "INVOICE 4411 GOODS FOR TEHRAN IMPORTS CO VIA DUBAI", 850)
    assert [h.entry_id for h in hits] == ["2"]
    assert screen_text(index, "remittance", "INVOICE 4411 OFFICE FURNITURE", 850) == []


def test_secondary_evidence_moves_the_score(index: ListIndex) -> None:
    def party(dob: str | None, country: str | None = None) -> Party:
        ids = (Identifier("DOB", dob),) if dob else ()
        return Party(name="Alexander Kovalev", identifiers=ids, country=country)

    plain = screen_name(index, "originator", "Alexander Kovalev", party(None), 0)[0].score
    assert screen_name(index, "originator", "Alexander Kovalev", party("1961-04-02"), 0)[0].score > plain
    assert screen_name(index, "originator", "Alexander Kovalev", party("1990-01-01"), 0)[0].score < plain
    assert screen_name(index, "originator", "Alexander Kovalev", party(None, "RU"), 0)[0].score > plain


def tx(**kw: object) -> Transaction:
    base: dict[str, object] = dict(
        message_type="json", reference="REF1", amount=Decimal("1000"), currency="USD",
        value_date=date(2026, 12, 1),
        originator=Party(name="Harbour Shipping Ltd", country="GB"),
        beneficiary=Party(name="Jane Doe", country="FR"), raw_sha256="0" * 64)
    base.update(kw)
    return Transaction(**base)  # type: ignore[arg-type]


def test_a_payment_is_screened_party_by_party_and_in_its_free_text(index: ListIndex) -> None:
    clean = screen(tx(), index)
    assert clean.hits == () and clean.lists == (("bank-list", "ab" * 32),)
    hit = screen(tx(beneficiary=Party(name="Aleksandr Kovalyev"),
                    remittance="PAYMENT ON BEHALF OF SEVMORNEFTEGAZ TRADING",
                    agents=(Agent("intermediary", bic="TEHRIRTH"),),
                    originator=Party(name="Harbour Shipping Ltd",
                                     identifiers=(Identifier("OTHR", "1027700070518"),))), index)
    found = {(h.where, h.entry_id, h.basis) for h in hit.hits}
    assert ("beneficiary", "1", "name") in found
    assert ("remittance", "5", "text") in found
    assert ("agent.intermediary.bic", "2", "bic") in found
    assert ("originator.identifier", "5", "identifier") in found
    assert hit.best == 1000
    assert [h.score for h in hit.hits] == sorted((h.score for h in hit.hits), reverse=True)


def test_the_same_lists_and_payment_screen_the_same_way_twice(index: ListIndex) -> None:
    t = tx(beneficiary=Party(name="Aleksandr Kovalyev"))
    again = ListIndex([SanctionsList("internal", "bank-list", None, "ab" * 32, entries(), "test/1")])
    assert screen(t, index).to_json() == screen(t, again).to_json()


def test_a_list_refuses_blank_names_and_duplicate_ids() -> None:
    with pytest.raises(ValueError, match="non-blank name"):
        ListEntry("1", "individual", ("  ",))
    with pytest.raises(ValueError, match="appears twice"):
        SanctionsList("internal", "x", None, "a", (entries()[0], entries()[0]), "t")
    with pytest.raises(ValueError, match="unknown list source"):
        SanctionsList("nowhere", "x", None, "a", (), "t")  # type: ignore[arg-type]


def test_a_sanctioned_region_on_the_banks_list_is_found_in_an_address_and_in_free_text() -> None:
    regions = (ListEntry("R-1", "region", ("Crimea", "Krym", "Autonomous Republic of Crimea")),
               ListEntry("R-2", "region", ("Sevastopol", "Sebastopol")))
    idx = ListIndex([SanctionsList("internal", "bank-regions", None, "cd" * 32, regions, "test/1")])
    found = screen(tx(beneficiary=Party(name="Jane Doe", address_lines=("ul. Lenina 5", "295000 SIMFEROPOL",
                                                                        "KRYM")),
                      remittance="GOODS DELIVERED TO SEBASTOPOL PORT"), idx)
    assert {(h.where, h.entry_id) for h in found.hits} == {("beneficiary.address", "R-1"),
                                                            ("remittance", "R-2")}
    assert screen(tx(remittance="GOODS DELIVERED TO ODESA PORT"), idx).hits == ()


def test_a_y_gliding_off_a_vowel_meets_its_i_spelling_so_cyrillic_romanisations_are_found() -> None:
    # Cyrillic й is romanised y or i: "Шейх" reads "Sheykh", the list writes "Shaikh"; "Зейд" / "Zeid"
    from inference.screening.entries import ListEntry, SanctionsList
    from inference.screening.index import ListIndex
    from inference.screening.normalise import name_tokens
    from inference.screening.screen import screen_name

    assert name_tokens("Зейд").tokens == name_tokens("Zeid").tokens == name_tokens("Zeyd").tokens
    assert name_tokens("Bayer").tokens == ("bayer",)  # a y before a vowel is a consonant: kept
    entries = (ListEntry("191", "individual", ("Khalid Shaikh MOHAMMED",)),
               ListEntry("5295", "individual", ("Abdelhamid Abou Zeid",)))
    index = ListIndex([SanctionsList("eu", "eu", None, "0" * 64, entries, "test")])
    for name, entry in (("Халид Шейх Мохаммед", "191"), ("Абдельхамид Абу Зейд", "5295")):
        (hit,) = screen_name(index, "beneficiary", name)
        assert hit.entry_id == entry and hit.score >= 920, (name, hit.score)
