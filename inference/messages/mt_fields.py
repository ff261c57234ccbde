"""SWIFT FIN field options for parties and agents (50a, 52a-58a, 59a), per the public MT
field specifications: option A (BIC), B (location), C (account), D/K (name and address),
F (structured party identification)."""

from __future__ import annotations

import re
from datetime import date

from inference.messages.errors import MessageError
from inference.messages.fields import bic_or_none, country_or_none, iban_checked
from inference.messages.findings import note
from inference.messages.transaction import Agent, Identifier, Party

__all__ = ["agent", "beneficiary_customer", "institution_party", "ordering_customer"]

_ACCOUNT = re.compile(r"/(?:[CD]/)?([^/\s][^\s]{0,33})")
_PARTY_ID = re.compile(r"(ARNU|CCPT|CUST|DRLC|EMPL|NIDN|SOSE|TXID)/([A-Z]{2})/(.{1,27})")
_ID_SCHEMES = {"ARNU", "CCPT", "CUST", "DRLC", "EMPL", "NIDN", "SOSE", "TXID"}


def _lines(value: str, tag: str, most: int, width: int = 35) -> list[str]:
    """The lines of a field; more lines or longer ones than the format allows are kept, with
    ``LINE_TOO_LONG`` (a party's name and address are read as sent)."""
    lines = value.split("\n")
    if len(lines) > most or any(len(ln) > width for ln in lines):
        note("LINE_TOO_LONG", tag, f"{len(lines)} lines, the longest {max(map(len, lines))} characters; "
                                   f"at most {most} lines of {width}")
    return lines


def _split_account(lines: list[str]) -> tuple[str | None, list[str]]:
    """A leading '/account' line (optionally '/C/' or '/D/' party identifier) and the rest."""
    if lines and lines[0].startswith("/"):
        m = _ACCOUNT.fullmatch(lines[0])
        if m is None:
            return lines[0][1:] or None, lines[1:]
        return m.group(1), lines[1:]
    return None, lines


def _party(name: str | None, account: str | None, address: list[str], tag: str,
           *, bic_code: str | None = None, country_code: str | None = None,
           identifiers: tuple[Identifier, ...] = ()) -> Party:
    return Party(name=name or None, account=account, iban=iban_checked(account, tag) if account else None,
                 bic=bic_code, address_lines=tuple(a for a in address if a), country=country_code,
                 identifiers=identifiers)


def _structured(lines: list[str], tag: str, codes: str = "12345678") -> tuple[
        str | None, list[str], str | None, list[Identifier]]:
    """Lines '1/name', '2/address', '3/CC/town', '4/YYYYMMDD', '5/CC/place', '6/CC/issuer/id',
    '7/CC/id', '8/continuation' of options 50F and 59F (59F allows 1-3 only)."""
    names: list[str] = []
    address: list[str] = []
    ctry: str | None = None
    ids: list[Identifier] = []
    last = 0
    extend = None  # what an '8/' line continues: names, address or the last identifier
    for ln in lines:
        if len(ln) < 2 or ln[1] != "/" or not ln[0].isdigit():
            raise MessageError(f"structured line {ln!r} must start with a digit and '/'", field=tag)
        code, text = int(ln[0]), ln[2:]
        if ln[0] not in codes:
            raise MessageError(f"structured line code {code} is not defined here", field=tag)
        if code < last and code != 8:
            raise MessageError(f"structured line {ln!r} is out of order", field=tag)
        last = code
        if code == 1:
            names.append(text)
            extend = "name"
        elif code == 2:
            address.append(text)
            extend = "address"
        elif code == 3:
            cc, _, town = text.partition("/")
            ctry = country_or_none(cc, tag)
            if town:
                address.append(town)
            extend = "address"
        elif code == 4:
            if not re.fullmatch(r"[0-9]{8}", text):
                raise MessageError(f"date of birth {text!r} is not YYYYMMDD", field=tag)
            try:
                born = date(int(text[0:4]), int(text[4:6]), int(text[6:8]))
            except ValueError:
                raise MessageError(f"date of birth {text!r} is not a date", field=tag) from None
            ids.append(Identifier("DOB", born.isoformat()))
            extend = None
        elif code == 5:
            cc, _, place = text.partition("/")
            if not place:
                raise MessageError(f"place of birth {text!r} needs CC/place", field=tag)
            ids.append(Identifier("POB", f"{place}, {cc}", country_or_none(cc, tag)))
            extend = "id"
        elif code in (6, 7):
            parts = text.split("/")
            issuer = country_or_none(parts[0], tag)
            value = "/".join(parts[1:])
            if not value:
                raise MessageError(f"identifier line {ln!r} has no identifier", field=tag)
            ids.append(Identifier("CUST" if code == 6 else "NIDN", value, issuer))
            extend = "id"
        else:  # code 8: continues the line before it
            if extend == "name":
                names[-1] += text
            elif extend == "address":
                address[-1] += text
            elif extend == "id":
                i = ids[-1]
                if i.scheme == "POB":  # "place, CC": the continuation belongs to the place
                    place, _, cc = i.value.rpartition(", ")
                    ids[-1] = Identifier("POB", f"{place}{text}, {cc}", i.country)
                else:
                    ids[-1] = Identifier(i.scheme, i.value + text, i.country)
            else:
                raise MessageError("line 8 continues nothing", field=tag)
    return (" ".join(names) or None), address, ctry, ids


def ordering_customer(option: str, value: str) -> Party:
    """:50A: (account + BIC), :50F: (structured), :50K: (account + name and address)."""
    tag = f":50{option}:"
    lines = _lines(value, tag, 5)
    if option == "A":
        account, rest = _split_account(lines)
        if len(rest) != 1:
            raise MessageError("option A needs one BIC line", field=tag)
        code = bic_or_none(rest[0], tag)
        return _party(None, account, [], tag, bic_code=code,
                      identifiers=(Identifier("BIC", code),) if code else ())
    if option == "K":
        account, rest = _split_account(lines)
        if not rest:
            raise MessageError("has no name line", field=tag)
        return _party(rest[0], account, rest[1:], tag)
    if option == "F":
        first, rest = lines[0], lines[1:]
        ids: list[Identifier] = []
        acct: str | None = None
        m = _PARTY_ID.fullmatch(first)
        if first.startswith("/"):
            acct = first[1:]
        elif m:
            ids.append(Identifier(m.group(1), m.group(3), country_or_none(m.group(2), tag)))
        else:
            raise MessageError(f"party identifier {first!r} is neither /account nor "
                               "CODE/CC/identifier", field=tag)
        name, address, ctry, more = _structured(rest, tag)
        return _party(name, acct, address, tag, country_code=ctry,
                      identifiers=tuple(ids + more))
    raise MessageError(f"option {option} is not allowed (A, F or K)", field=tag)


def beneficiary_customer(option: str, value: str) -> Party:
    """:59: (account + name and address), :59A: (account + BIC), :59F: (structured)."""
    tag = f":59{option}:"
    lines = _lines(value, tag, 5)
    account, rest = _split_account(lines)
    if option == "":
        if not rest:
            raise MessageError("has no name line", field=tag)
        return _party(rest[0], account, rest[1:], tag)
    if option == "A":
        if len(rest) != 1:
            raise MessageError("option A needs one BIC line", field=tag)
        code = bic_or_none(rest[0], tag)
        bic_ids = (Identifier("BIC", code),) if code else ()
        return _party(None, account, [], tag, bic_code=code, identifiers=bic_ids)
    if option == "F":
        name, address, ctry, ids = _structured(rest, tag, codes="123")
        return _party(name, account, address, tag, country_code=ctry, identifiers=tuple(ids))
    raise MessageError(f"option {option} is not allowed (no letter, A or F)", field=tag)


_OPTIONS = {"52": "AD", "53": "ABD", "54": "ABD", "55": "ABD", "56": "ACD", "57": "ABCD",
            "58": "AD"}


def agent(role: str, number: str, option: str, value: str) -> Agent:
    """Institution fields 52a-58a in the options the MT103/MT202 specifications allow."""
    tag = f":{number}{option}:"
    lines = _lines(value, tag, 5)
    account, rest = _split_account(lines)
    if option not in _OPTIONS.get(number, "ABCD") or not option:
        note("OPTION_NOT_ALLOWED", tag, f"option {option or '(none)'} is not allowed (only "
                                        f"{', '.join(_OPTIONS.get(number, 'ABCD'))}); lines kept")
        return Agent(role, account=account, name_address=tuple(rest))
    if option == "A":
        if len(rest) != 1:
            note("OPTION_NOT_ALLOWED", tag, f"option A holds {len(rest)} lines besides the account, not one "
                                            "BIC; lines kept")
            return Agent(role, account=account, name_address=tuple(rest))
        return Agent(role, bic=bic_or_none(rest[0], tag), account=account)
    if option == "C":
        if rest or account is None:
            note("OPTION_NOT_ALLOWED", tag, "option C is one /account line; lines kept")
            return Agent(role, account=account, name_address=tuple(rest))
        return Agent(role, account=account)
    return Agent(role, account=account, name_address=tuple(rest))


def institution_party(option: str, value: str, tag_no: str) -> Party:
    """An institution as originator or beneficiary of an MT202 (52a / 58a)."""
    ag = agent("party", tag_no, option, value)
    name = ag.name_address[0] if ag.name_address else None  # a BIC is an identifier, not a name
    ids = (Identifier("BIC", ag.bic),) if ag.bic else ()
    return Party(name=name, account=ag.account, iban=iban_checked(ag.account, tag_no) if ag.account else None,
                 bic=ag.bic, address_lines=ag.name_address[1:], identifiers=ids)
