"""Benchmark of the payment-message parsers: messages per second per format, one core.

Seeded, varied, valid payments (``bench.messages_samples``) are rendered as MT103, MT202,
MT202COV and pacs.008 before timing; the JSON messages are the canonical ``to_json()`` of each
parsed MT103 (what sealtrail itself writes). Every message is parsed once and checked against
the payment it was made from (0 refused, same reference, amount, currency, value date, UETR).
Then each format's whole set is parsed over and over for at least ``--seconds``. The
``mt103`` package from PyPI is timed side by side on the same MT103 messages.
Run from the repository root: ``python -m bench.messages [--quick] [--json PATH]``.
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.messages")

import argparse
import gc
import importlib.metadata
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench.machine import host_info, probe_ms, version_of
from bench.messages_samples import SEED, Payment, mt103, mt202, pacs008, payments
from bench.report import Row, format_table, verdict, write_json
from inference.messages.errors import MessageError
from inference.messages.mt import parse_mt
from inference.messages.transaction import Party, Transaction

Parser = Callable[[bytes], Sequence[Transaction]]
TARGETS = {"MT103": 20_000.0, "pacs.008": 5_000.0}  # messages per second
PACKAGES = ("mt103", "schwifty", "iso4217", "pycountry", "defusedxml", "pydantic")


@dataclass(frozen=True)
class Format:
    """A message format: how a payment is written in it, and our parser for it."""

    name: str
    render: Callable[[Payment], bytes]
    parse: Parser | None  # None when the parser is not importable (yet)
    note: str = ""


@dataclass(frozen=True)
class Cell:
    """One parser on one set of messages: every timed pass."""

    fmt: str
    engine: str
    messages: int  # per pass
    mean_bytes: float
    rates: tuple[float, ...]  # messages per second, each pass
    seconds: float

    @property
    def per_second(self) -> float:
        """The median pass: steadier than the mean where other work shares the cores."""
        return statistics.median(self.rates)

    @property
    def mean_per_second(self) -> float:
        return self.messages * len(self.rates) / self.seconds

    @property
    def us_per_message(self) -> float:
        return 1e6 / self.per_second

    def figures(self) -> dict[str, Any]:
        """JSON-ready figures."""
        return {"format": self.fmt, "engine": self.engine, "messages_per_pass": self.messages,
                "mean_bytes": round(self.mean_bytes, 1), "passes": len(self.rates),
                "seconds": self.seconds, "messages_per_s_median_pass": self.per_second,
                "messages_per_s_mean": self.mean_per_second,
                "us_per_message": self.us_per_message, "pass_rates": list(self.rates)}


def parse_fin(raw: bytes) -> list[Transaction]:
    """Our FIN parser, raising the first refusal like the other formats do."""
    out = []
    for got in parse_mt(raw):
        if isinstance(got, MessageError):
            raise got
        out.append(got)
    return out


def json_of(p: Payment) -> bytes:
    """The canonical JSON of the payment's MT103 as parsed (one in three indented)."""
    return json.dumps(parse_fin(mt103(p))[0].to_json(), indent=2 if p.mur else None).encode()


def formats() -> list[Format]:
    """Every format; pacs.008 and JSON without a parser when theirs cannot be imported."""
    found: dict[str, Parser | None] = {}
    notes: dict[str, str] = {}
    for name, module, func in (("pacs.008", "inference.messages.pacs008", "parse_pacs008"),
                               ("JSON", "inference.messages.json_message", "parse_json")):
        try:
            found[name] = getattr(importlib.import_module(module), func)
        except (ImportError, AttributeError) as exc:
            found[name], notes[name] = None, f"{module}.{func} not importable ({exc}); skipped"
    return [Format("MT103", mt103, parse_fin), Format("MT202", mt202, parse_fin),
            Format("MT202COV", lambda p: mt202(p, cov=True), parse_fin),
            Format("pacs.008", pacs008, found["pacs.008"], notes.get("pacs.008", "")),
            Format("JSON", json_of, found["JSON"], notes.get("JSON", ""))]


def check(fmt: Format, messages: Sequence[bytes], pays: Sequence[Payment]) -> dict[str, Any]:
    """Parse every message once: refusals, and parsed key fields that differ from the payment."""
    assert fmt.parse is not None
    refused, differ, first = 0, 0, ""
    for raw, p in zip(messages, pays, strict=True):
        try:
            t = fmt.parse(raw)[0]
        except MessageError as exc:
            refused += 1
            first = first or f"refused: {exc}\n{raw.decode(errors='replace')}"
            continue
        got = (t.reference, t.amount, t.currency, t.value_date, t.uetr)
        want = (p.reference, p.amount, p.currency, p.value_date, p.uetr)
        if got != want:
            differ += 1
            first = first or f"parsed {got}, generated {want}"
    return {"messages": len(messages), "refused": refused, "key_fields_differ": differ, "first": first}


def _same_party(text: str | None, party: Party) -> bool:
    """The package's raw party text holds our account, name and BIC (all those we found)."""
    parts = [v for v in (party.account, party.name, party.bic) if v]
    return text is not None and all(v in text for v in parts)


def package_agreement(texts: Sequence[str], ours: Sequence[Transaction]) -> dict[str, Any]:
    """What the mt103 package makes of each message, field by field against our parser."""
    import mt103 as package

    fields = ("reference", "bank_operation_code", "value_date", "currency", "amount", "ordering_customer",
              "beneficiary", "remittance", "charges", "uetr")
    agree = dict.fromkeys(fields, 0)
    matched = 0
    for text, t in zip(texts, ours, strict=True):
        m = package.MT103(text)
        if not (m and m.text):
            continue
        matched += 1
        x = m.text
        amount = x.interbank_settled_amount
        theirs = {"reference": x.transaction_reference == t.reference,
                  "bank_operation_code": x.bank_operation_code == t.bank_operation_code,
                  "value_date": x.date == t.value_date,
                  "currency": x.interbank_settled_currency == t.currency,
                  "amount": amount is not None and Decimal(amount.replace(",", ".")) == t.amount,
                  "ordering_customer": _same_party(x.ordering_customer, t.originator),
                  "beneficiary": _same_party(x.beneficiary, t.beneficiary),
                  "remittance": x.remittance_information == t.remittance,
                  "charges": x.details_of_charges == t.charges,
                  "uetr": m.user_header.uetr == t.uetr}
        for k, ok in theirs.items():
            agree[k] += ok
    return {"messages": len(texts), "regex_matched": matched, "fields_agreeing": agree,
            "beneficiary_59f": sum(":59F:" in t for t in texts)}


Job = tuple[str, Callable[[Any], object], Sequence[Any], int, float]  # engine, fn, items, per item, bytes


def side_by_side(msgs: Sequence[bytes], checks: dict[str, Any]) -> list[Job]:
    """The mt103 package on the same MT103s (checked for agreement first) and ours on one RJE
    file, to be timed in passes interleaved with ours."""
    n, mean = len(msgs), sum(map(len, msgs)) / len(msgs)
    rje = b"\n$\n".join(msgs)
    jobs: list[Job] = [("ours, one RJE file", lambda b: sum(1 for _ in parse_mt(b)), [rje], n, len(rje) / n)]
    try:
        import mt103 as package
    except ImportError:
        print("          mt103 package: MISSING (pip install mt103); its figures are left out")
        return jobs
    texts = [m.decode() for m in msgs]
    checks["mt103 package"] = a = package_agreement(texts, [parse_fin(m)[0] for m in msgs])
    agree = ", ".join(f"{k} {v:,}" for k, v in a["fields_agreeing"].items())
    print(f"          mt103 package: regex matched {a['regex_matched']:,}/{n:,}; agrees with ours on {agree} "
          f"({a['beneficiary_59f']:,} use 59F, which it folds into the field before)")
    return [("mt103 package", package.MT103, texts, 1, mean), *jobs]


def measure(fmt: str, jobs: Sequence[Job], seconds: float, min_passes: int) -> list[Cell]:
    """Whole passes over each job's items, the jobs taking turns (so that a slow spell of a shared
    machine hits them alike), until each has run ``seconds`` and ``min_passes``."""
    for _, fn, items, _, _ in jobs:
        for x in items[:200]:
            fn(x)
    gc.collect()
    clock = time.perf_counter
    rates: list[list[float]] = [[] for _ in jobs]
    spent = [0.0] * len(jobs)
    while min(spent) < seconds or min(map(len, rates)) < min_passes:
        for k, (_, fn, items, per_item, _) in enumerate(jobs):
            if spent[k] >= seconds and len(rates[k]) >= min_passes:
                continue
            t0 = clock()
            for x in items:
                fn(x)
            dt = clock() - t0
            rates[k].append(len(items) * per_item / dt)
            spent[k] += dt
    return [Cell(fmt, engine, len(items) * per_item, mean, tuple(r), t)
            for (engine, _, items, per_item, mean), r, t in zip(jobs, rates, spent, strict=True)]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    ap = argparse.ArgumentParser(prog="python -m bench.messages", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer messages and shorter cells")
    ap.add_argument("--messages", type=int, default=None, help="messages per format (default 3,000)")
    ap.add_argument("--seconds", type=float, default=None, help="time per cell (default 1.0, quick 0.3)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    return ap.parse_args(argv)


def grid(cells: Sequence[Cell]) -> str:
    """Every cell as an aligned table."""
    head = ("format", "parser", "messages", "mean bytes", "msgs/s", "us/msg", "passes [min-max] msgs/s",
            "mean msgs/s")
    body = [(c.fmt, c.engine, f"{c.messages:,}", f"{c.mean_bytes:,.0f}", f"{c.per_second:,.0f}",
             f"{c.us_per_message:.1f}", f"{len(c.rates)} [{min(c.rates):,.0f}-{max(c.rates):,.0f}]",
             f"{c.mean_per_second:,.0f}") for c in cells]
    widths = [max(len(r[i]) for r in (head, *body)) for i in range(len(head))]
    lines = ["  ".join(v.rjust(w) if i >= 2 else v.ljust(w)
                       for i, (v, w) in enumerate(zip(r, widths, strict=True))).rstrip()
             for r in (head, *body)]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def summary(cells: Sequence[Cell]) -> tuple[list[Row], dict[str, Any]]:
    """A row per format (targets where set) and the JSON verdicts."""
    at = {(c.fmt, c.engine): c for c in cells}
    rows: list[Row] = []
    verdicts: dict[str, Any] = {}
    for c in cells:
        if c.engine != "ours":
            continue
        target = TARGETS.get(c.fmt)
        other = at.get((c.fmt, "mt103 package"))
        base, ratio = "", ""
        if other is not None:
            x = c.per_second / other.per_second
            base, ratio = f"mt103 package {other.per_second:,.0f}/s", f"ours/theirs {x:.2f}x"
            verdicts["mt103_ours_over_package"] = x
        ok = target is not None and c.per_second >= target
        rows.append(Row(f"{c.fmt}: messages/s ({c.us_per_message:.1f} us/msg)", f"{c.per_second:,.0f}/s",
                        base, ratio, f">= {target:,.0f}/s" if target else "(info)",
                        verdict(ok) if target else ""))
        verdicts[c.fmt] = {"messages_per_s": c.per_second, "target": target,
                           "target_met": ok if target else None}
    for fmt, target in TARGETS.items():
        if (fmt, "ours") not in at:
            rows.append(Row(f"{fmt}: messages/s", "not timed", "", "", f">= {target:,.0f}/s", "n/a"))
            verdicts[fmt] = {"messages_per_s": None, "target": target, "target_met": None}
    return rows, verdicts


def main(argv: Sequence[str] | None = None) -> int:
    """Generate, check, time every format, print the machine, the figures and the verdicts."""
    args = parse_args(argv)
    n = args.messages or (1000 if args.quick else 3000)
    seconds = args.seconds if args.seconds is not None else (0.3 if args.quick else 1.0)
    passes = 2 if args.quick else 3
    machine: dict[str, Any] = {**host_info(), "packages": {d: version_of(d) for d in PACKAGES}}
    probe_before = probe_ms()
    print(f"CPU:        {machine['cpu']} ({machine['cores']} cores; one process, one thread timed)")
    print(f"RAM:        {machine['ram_gib']} GiB")
    print(f"OS:         {machine['os']}")
    pkgs = ", ".join(f"{k} {v}" for k, v in machine["packages"].items())
    print(f"Python:     {machine['python']}; {pkgs}")
    t0 = time.perf_counter()
    pays = payments(n)
    print(f"Messages:   {n:,} seeded payments per format (seed {SEED}, 1,024 customers), generated in "
          f"{time.perf_counter() - t0:.1f} s, rendered and checked before timing")
    print(f"Timing:     whole passes over each set, >= {seconds:g} s and >= {passes} passes per cell, MT103 "
          "parsers taking turns; msgs/s = median pass; the mt103 package gets pre-decoded str\n")
    cells: list[Cell] = []
    checks: dict[str, Any] = {}
    problems = 0
    for fmt in formats():
        if fmt.parse is None:
            print(f"{fmt.name:<9} {fmt.note}")
            continue
        msgs = [fmt.render(p) for p in pays]
        mean = sum(map(len, msgs)) / n
        checks[fmt.name] = c = check(fmt, msgs, pays)
        print(f"{fmt.name:<9} {n:,} messages, mean {mean:,.0f} bytes: {c['refused']} refused, key fields "
              f"(reference, amount, currency, value date, UETR) differ on {c['key_fields_differ']}")
        if c["refused"] or c["key_fields_differ"]:
            print(f"          first problem: {c['first']}")
            problems += 1
            continue
        jobs: list[Job] = [("ours", fmt.parse, msgs, 1, mean)]
        if fmt.name == "MT103":
            jobs += side_by_side(msgs, checks)
        cells += measure(fmt.name, jobs, seconds, passes)
    probe_after = probe_ms()
    print(f"\nCPU probe:  {probe_before:.1f} ms before, {probe_after:.1f} ms after (a fixed pure-Python "
          "loop; a slower probe means the shared host was slower, and so are these figures)")
    machine["cpu_probe_ms"] = {"before": probe_before, "after": probe_after}
    print("\n" + grid(cells))
    rows, verdicts = summary(cells)
    print("\n" + format_table(rows, subject="ours"))
    if args.json is not None:
        write_json(args.json, {"machine": machine, "workload": {"seed": SEED, "messages_per_format": n},
                               "settings": {"seconds_per_cell": seconds, "min_passes": passes},
                               "checks": checks, "cells": [c.figures() for c in cells],
                               "verdicts": verdicts, "targets_messages_per_s": TARGETS})
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
