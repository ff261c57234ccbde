"""Benchmark of the payment-message parsers: messages per second per format, one core.

Seeded, varied, valid payments (``bench.messages_samples``) are rendered as MT103, MT202,
MT202COV, pacs.008, pacs.009 (core and COV) and pain.001 before timing; the JSON messages are the
canonical ``to_json()`` of each parsed MT103 (what sealtrail itself writes). A pain.001 carries
several payments (several PmtInf of several CdtTrfTxInf each, ``PAIN001_MIX``); every other message
one. Every message is parsed once and checked against the payments it was made from (0 refused, as
many transactions, and each with the same reference, amount, currency, value date and UETR, and
for the ISO 20022 formats the same parties). Then each format's whole set is parsed over and over
for at least ``--seconds``, the formats taking turns pass by pass; pain.001 is also reported per
transaction. The ``mt103`` package from PyPI is timed side by side on the same MT103 messages.
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

from bench.machine import host_info, probe_ms, report_probe, version_of
from bench.messages_samples import (
    PAIN001_MIX,
    SEED,
    Payment,
    mt103,
    mt202,
    pacs008,
    pacs009,
    pain001_messages,
    payments,
)
from bench.report import Row, format_table, verdict, write_json
from inference.messages.errors import MessageError
from inference.messages.mt import parse_mt
from inference.messages.transaction import Party, Transaction

Parser = Callable[[bytes], Sequence[Transaction]]
# transactions per second (one per message, except pain.001's several)
TARGETS = {"MT103": 20_000.0, "pacs.008": 5_000.0, "pacs.009": 5_000.0, "pacs.009COV": 5_000.0,
           "pain.001": 5_000.0}
MT103_OVER_PACKAGE = 1.5  # ours against the mt103 package on the same messages, same run
PACKAGES = ("mt103", "schwifty", "iso4217", "pycountry", "defusedxml", "pydantic")


Parties = Callable[[Transaction], tuple[object, ...]]
Expected = Callable[[Payment], tuple[object, ...]]


@dataclass(frozen=True)
class Rendered:
    """One message and the payments it carries, in order; ``uetr``: whether it writes their UETRs."""

    raw: bytes
    payments: tuple[Payment, ...]
    uetr: bool = True


@dataclass(frozen=True)
class Format:
    """A message format: how payments are written in it, our parser for it, and which parties to
    compare (what the parser read, what the payment says) where the format carries them."""

    name: str
    render: Callable[[Sequence[Payment]], list[Rendered]]
    parse: Parser | None  # None when the parser is not importable (yet)
    note: str = ""
    parties: tuple[Parties, Expected] | None = None


@dataclass(frozen=True)
class Cell:
    """One parser on one set of messages: every timed pass."""

    fmt: str
    engine: str
    messages: int  # per pass
    transactions: int  # per pass (the messages, except where one carries several)
    mean_bytes: float  # per message
    rates: tuple[float, ...]  # transactions per second, each pass
    seconds: float
    cpu_seconds: float  # the process's CPU time over the same passes: below ``seconds`` when other work
    # on the host took the core from it (a shared VM), which the rates then show as slowness

    @property
    def on_cpu(self) -> float:
        """The share of the timed wall-clock time this process was running."""
        return self.cpu_seconds / self.seconds

    @property
    def per_second(self) -> float:
        """Messages per second, the median pass: steadier than the mean where other work shares
        the cores."""
        return self.tx_per_second * self.messages / self.transactions

    @property
    def tx_per_second(self) -> float:
        """Transactions per second, the median pass."""
        return statistics.median(self.rates)

    @property
    def message_rates(self) -> tuple[float, ...]:
        return tuple(r * self.messages / self.transactions for r in self.rates)

    @property
    def mean_per_second(self) -> float:
        return self.messages * len(self.rates) / self.seconds

    @property
    def us_per_message(self) -> float:
        return 1e6 / self.per_second

    @property
    def us_per_transaction(self) -> float:
        return 1e6 / self.tx_per_second

    def figures(self) -> dict[str, Any]:
        """JSON-ready figures."""
        return {"format": self.fmt, "engine": self.engine, "messages_per_pass": self.messages,
                "transactions_per_pass": self.transactions,
                "mean_bytes": round(self.mean_bytes, 1), "passes": len(self.rates),
                "seconds": self.seconds, "messages_per_s_median_pass": self.per_second,
                "transactions_per_s_median_pass": self.tx_per_second,
                "messages_per_s_mean": self.mean_per_second,
                "us_per_message": self.us_per_message, "us_per_transaction": self.us_per_transaction,
                "cpu_seconds": self.cpu_seconds, "on_cpu": self.on_cpu,
                "pass_rates": list(self.message_rates)}


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


def _one(render: Callable[[Payment], bytes]) -> Callable[[Sequence[Payment]], list[Rendered]]:
    """A renderer of one payment per message, over a set of payments."""
    return lambda pays: [Rendered(render(p), (p,)) for p in pays]


def _pain001(pays: Sequence[Payment]) -> list[Rendered]:
    return [Rendered(raw, carried, b"<UETR>" in raw) for raw, carried in pain001_messages(list(pays))]


def _customers(t: Transaction) -> tuple[object, ...]:
    """Originator and beneficiary as customers: name and account each."""
    return t.originator.name, t.originator.account, t.beneficiary.name, t.beneficiary.account


def _customers_of(p: Payment) -> tuple[object, ...]:
    return p.originator.name, p.originator.account, p.beneficiary.name, p.beneficiary.account


def _banks(t: Transaction) -> tuple[object, ...]:
    """Originator and beneficiary as institutions (a pacs.009's debtor and creditor)."""
    return t.originator.bic, t.beneficiary.bic, t.beneficiary.account


def _banks_of(p: Payment) -> tuple[object, ...]:
    return p.originator.bank, p.beneficiary.bank, p.beneficiary.account if p.op_code == "CRED" else None


def formats() -> list[Format]:
    """Every format; an ISO 20022 or JSON one without a parser when its parser cannot be imported."""
    found: dict[str, Parser | None] = {}
    notes: dict[str, str] = {}
    for name, module, func in (("pacs.008", "inference.messages.pacs008", "parse_pacs008"),
                               ("pacs.009", "inference.messages.pacs008", "parse_pacs009"),
                               ("pain.001", "inference.messages.pain001", "parse_pain001"),
                               ("JSON", "inference.messages.json_message", "parse_json")):
        try:
            found[name] = getattr(importlib.import_module(module), func)
        except (ImportError, AttributeError) as exc:
            found[name], notes[name] = None, f"{module}.{func} not importable ({exc}); skipped"
    customers, banks = (_customers, _customers_of), (_banks, _banks_of)
    return [Format("MT103", _one(mt103), parse_fin), Format("MT202", _one(mt202), parse_fin),
            Format("MT202COV", _one(lambda p: mt202(p, cov=True)), parse_fin),
            Format("pacs.008", _one(pacs008), found["pacs.008"], notes.get("pacs.008", ""), customers),
            Format("pacs.009", _one(pacs009), found["pacs.009"], notes.get("pacs.009", ""), banks),
            Format("pacs.009COV", _one(lambda p: pacs009(p, cov=True)), found["pacs.009"],
                   notes.get("pacs.009", ""), customers),
            Format("pain.001", _pain001, found["pain.001"], notes.get("pain.001", ""), customers),
            Format("JSON", _one(json_of), found["JSON"], notes.get("JSON", ""))]


def check(fmt: Format, messages: Sequence[Rendered]) -> dict[str, Any]:
    """Parse every message once: refusals, messages read as another number of transactions, and
    transactions whose key fields (and parties, where compared) differ from their payment."""
    assert fmt.parse is not None
    refused, miscounted, differ, first = 0, 0, 0, ""
    for m in messages:
        try:
            got_all = fmt.parse(m.raw)
        except MessageError as exc:
            refused += 1
            first = first or f"refused: {exc}\n{m.raw.decode(errors='replace')}"
            continue
        if len(got_all) != len(m.payments):
            miscounted += 1
            first = first or f"read {len(got_all)} transactions, generated {len(m.payments)}"
            continue
        for t, p in zip(got_all, m.payments, strict=True):
            got: tuple[object, ...] = (t.reference, t.amount, t.currency, t.value_date, t.uetr)
            want: tuple[object, ...] = (p.reference, p.amount, p.currency, p.value_date,
                                        p.uetr if m.uetr else None)
            if fmt.parties is not None:
                got, want = (*got, *fmt.parties[0](t)), (*want, *fmt.parties[1](p))
            if got != want:
                differ += 1
                first = first or f"parsed {got}, generated {want}"
    return {"messages": len(messages), "transactions": sum(len(m.payments) for m in messages),
            "refused": refused, "transactions_miscounted": miscounted, "transactions_differ": differ,
            "parties_compared": fmt.parties is not None, "first": first}


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


# engine, fn, items, messages and transactions in one pass over the items, mean bytes a message
Job = tuple[str, Callable[[Any], object], Sequence[Any], int, int, float]


def side_by_side(msgs: Sequence[bytes], checks: dict[str, Any]) -> list[Job]:
    """The mt103 package on the same MT103s (checked for agreement first) and ours on one RJE
    file, to be timed in passes interleaved with ours."""
    n, mean = len(msgs), sum(map(len, msgs)) / len(msgs)
    rje = b"\n$\n".join(msgs)
    jobs: list[Job] = [("ours, one RJE file", lambda b: sum(1 for _ in parse_mt(b)), [rje], n, n,
                        len(rje) / n)]
    try:
        import mt103 as package
    except ImportError:
        print("            mt103 package: MISSING (pip install mt103); its figures are left out")
        return jobs
    texts = [m.decode() for m in msgs]
    checks["mt103 package"] = a = package_agreement(texts, [parse_fin(m)[0] for m in msgs])
    agree = ", ".join(f"{k} {v:,}" for k, v in a["fields_agreeing"].items())
    print(f"            mt103 package: regex matched {a['regex_matched']:,}/{n:,}; agrees with ours on "
          f"{agree} ({a['beneficiary_59f']:,} use 59F, which it folds into the field before)")
    return [("mt103 package", package.MT103, texts, n, n, mean), *jobs]


def measure(timed: Sequence[tuple[str, Job]], seconds: float, min_passes: int) -> list[Cell]:
    """Whole passes over each job's items (each named by its format), all the jobs taking turns, one
    pass each a round (so that a slow spell of a shared machine hits every format alike, not the
    one being timed then), until each has run ``seconds`` and ``min_passes``."""
    jobs = [job for _, job in timed]
    for _, fn, items, _, _, _ in jobs:
        for x in items[:200]:
            fn(x)
    gc.collect()
    clock, cpu = time.perf_counter, time.process_time
    used = [0.0] * len(jobs)
    rates: list[list[float]] = [[] for _ in jobs]
    spent = [0.0] * len(jobs)
    while min(spent) < seconds or min(map(len, rates)) < min_passes:
        for k, (_, fn, items, _, transactions, _) in enumerate(jobs):
            if spent[k] >= seconds and len(rates[k]) >= min_passes:
                continue
            t0, c0 = clock(), cpu()
            for x in items:
                fn(x)
            dt = clock() - t0
            used[k] += cpu() - c0
            rates[k].append(transactions / dt)
            spent[k] += dt
    return [Cell(fmt, engine, messages, transactions, mean, tuple(r), t, c)
            for (fmt, (engine, _, _, messages, transactions, mean)), r, t, c
            in zip(timed, rates, spent, used, strict=True)]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    ap = argparse.ArgumentParser(prog="python -m bench.messages", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer messages and shorter cells")
    ap.add_argument("--messages", type=int, default=None, help="messages per format (default 3,000)")
    ap.add_argument("--seconds", type=float, default=None, help="time per cell (default 1.0, quick 0.3)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    return ap.parse_args(argv)


def grid(cells: Sequence[Cell]) -> str:
    """Every cell as an aligned table (txs: transactions a pass, where a message carries several)."""
    head = ("format", "parser", "messages", "txs", "mean bytes", "msgs/s", "us/msg", "txs/s",
            "passes [min-max] msgs/s", "mean msgs/s", "on CPU")
    several = [c.transactions != c.messages for c in cells]
    body = [(c.fmt, c.engine, f"{c.messages:,}", f"{c.transactions:,}" if many else "",
             f"{c.mean_bytes:,.0f}", f"{c.per_second:,.0f}", f"{c.us_per_message:.1f}",
             f"{c.tx_per_second:,.0f}" if many else "",
             f"{len(c.rates)} [{min(c.message_rates):,.0f}-{max(c.message_rates):,.0f}]",
             f"{c.mean_per_second:,.0f}", f"{c.on_cpu:.0%}") for c, many in zip(cells, several, strict=True)]
    widths = [max(len(r[i]) for r in (head, *body)) for i in range(len(head))]
    lines = ["  ".join(v.rjust(w) if i >= 2 else v.ljust(w)
                       for i, (v, w) in enumerate(zip(r, widths, strict=True))).rstrip()
             for r in (head, *body)]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def summary(cells: Sequence[Cell]) -> tuple[list[Row], dict[str, Any]]:
    """A row per format (targets where set; per transaction where a message carries several),
    the MT103 ratio to the mt103 package, and the JSON verdicts."""
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
        ok = target is not None and c.tx_per_second >= target
        goal, met = (f">= {target:,.0f}/s", verdict(ok)) if target else ("(info)", "")
        if c.transactions != c.messages:
            per = c.transactions / c.messages
            rows.append(Row(f"{c.fmt}: transactions/s ({c.us_per_transaction:.1f} us/tx)",
                            f"{c.tx_per_second:,.0f}/s", "", "", goal, met))
            rows.append(Row(f"{c.fmt}: messages/s ({per:.1f} txs, {c.us_per_message:.0f} us/msg)",
                            f"{c.per_second:,.0f}/s", "", "", "(info)", ""))
        else:
            rows.append(Row(f"{c.fmt}: messages/s ({c.us_per_message:.1f} us/msg)", f"{c.per_second:,.0f}/s",
                            base, ratio, goal, met))
        verdicts[c.fmt] = {"messages_per_s": c.per_second, "transactions_per_s": c.tx_per_second,
                           "target_transactions_per_s": target, "target_met": ok if target else None}
        if other is not None:
            x = c.per_second / other.per_second
            verdicts["mt103_ours_over_package"] = x
            rows.append(Row(f"{c.fmt}: ours over the mt103 package", f"{x:.2f}x", base, ratio,
                            f">= {MT103_OVER_PACKAGE:.2f}x", verdict(x >= MT103_OVER_PACKAGE)))
    for fmt, target in TARGETS.items():
        if (fmt, "ours") not in at:
            rows.append(Row(f"{fmt}: transactions/s", "not timed", "", "", f">= {target:,.0f}/s", "n/a"))
            verdicts[fmt] = {"messages_per_s": None, "transactions_per_s": None,
                             "target_transactions_per_s": target, "target_met": None}
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
          f"{time.perf_counter() - t0:.1f} s, rendered and checked before timing; one per message, except "
          f"pain.001: {PAIN001_MIX}")
    print(f"Timing:     whole passes over each set, >= {seconds:g} s and >= {passes} passes per cell, every "
          "cell taking turns (one pass each a round); msgs/s = median pass; the mt103 package gets "
          "pre-decoded str; on CPU = the process's CPU time over the wall-clock time timed (under 100%: "
          "other work on the host took the core, and the rates are low by as much)\n")
    timed: list[tuple[str, Job]] = []
    checks: dict[str, Any] = {}
    problems = 0
    for fmt in formats():
        if fmt.parse is None:
            print(f"{fmt.name:<11} {fmt.note}")
            continue
        rendered = fmt.render(pays)
        msgs = [m.raw for m in rendered]
        mean = sum(map(len, msgs)) / len(msgs)
        checks[fmt.name] = c = check(fmt, rendered)
        txs = c["transactions"]
        counted = f" of {txs:,} transactions ({txs / len(msgs):.1f} a message)" if txs != len(msgs) else ""
        keys = "reference, amount, currency, value date, UETR" + (", parties" if fmt.parties else "")
        print(f"{fmt.name:<11} {len(msgs):,} messages{counted}, mean {mean:,.0f} bytes: "
              f"{c['refused']} refused, {c['transactions_miscounted']} read as another number of "
              f"transactions, key fields ({keys}) differ on {c['transactions_differ']}")
        if c["refused"] or c["transactions_miscounted"] or c["transactions_differ"]:
            print(f"            first problem: {c['first']}")
            problems += 1
            continue
        jobs: list[Job] = [("ours", fmt.parse, msgs, len(msgs), txs, mean)]
        if fmt.name == "MT103":
            jobs += side_by_side(msgs, checks)
        timed += [(fmt.name, job) for job in jobs]
    cells = measure(timed, seconds, passes)
    report_probe(machine, probe_before, "CPU probe: ")
    print("\n" + grid(cells))
    rows, verdicts = summary(cells)
    print("\n" + format_table(rows, subject="ours"))
    if args.json is not None:
        write_json(args.json, {"machine": machine, "workload": {"seed": SEED, "payments_per_format": n,
                                                                "pain001_mix": PAIN001_MIX},
                               "settings": {"seconds_per_cell": seconds, "min_passes": passes},
                               "checks": checks, "cells": [c.figures() for c in cells],
                               "verdicts": verdicts, "targets_transactions_per_s": TARGETS,
                               "target_mt103_over_package": MT103_OVER_PACKAGE})
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
