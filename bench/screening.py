"""Sanctions screening: name-matching quality on independent pairs, the alert rate on names that
are on no list, and CPU per payment against a 30,000-entry list.

Quality (``--part quality``). The pairs are ``bench/data/screening/pairs.csv`` (made by
``python -m bench.screening_pairs``; its README names every source and licence): positives from
independent variant sources (published transliteration standards, the UN list's own alias groups,
a public labelled pair set, typos, initials, word order, honorifics, company forms), never from
sealtrail's normaliser, and hard negatives. Each pair's second name is indexed as a listed name
(one entry each, all together, so token weights come from a list of that size); the first is
screened with ``ListIndex.match_name``: a pair scores what its listed name scored, 0 when
candidate generation did not return it (a miss of the system, counted as such). The pairs are
split in two by a hash of the pair: the alert threshold is the lowest score at which precision on
the *tuning* half reaches 0.95, and precision, recall and F1 are reported on the *held-out* half
at that threshold and at the pack's thresholds (REVIEW and HOLD). Baseline, same run: plain
Jaro-Winkler on the lower-cased names (``rapidfuzz``, its default processing), its threshold chosen
the same way on the same tuning half.

Alert rate (``--part alerts``). A list of ``--entries`` (default 30,000) entries: every entry of
the UN list's alias groups in ``bench/data/screening/un_alias_groups.json`` (223 entries, 775
aliases) and, for the rest, synthetic entries recombining the UN list's own words (a real list's
vocabulary: mostly Arabic, Afghan, Central African and Korean names); 100,000 synthetic customer
names from ``bench.screening_pairs.nonlisted_names`` (seed 2; 17 naming cultures, Arabic among
them) are screened against it, and the share that reaches the REVIEW threshold is the alert rate.
A drawn name equal to a listed one is counted apart: no name-only screening can tell them apart.

Speed (``--part speed``). Batches of 1,024 synthetic payments (originator, beneficiary, a remittance
line, two agents' BICs) screened with ``inference.screening.screen.screen`` against the same list;
CPU per payment is a batch's process time over its payments (the median batch of ``--batches``:
warm, the screener's word caches holding what the batches before it met), and the same for one more
batch screened cold (every word cache and the index's memo emptied first, as after a start;
``cold_cpu_us_per_payment``). Names repeat across a bank's payments; here every party name is drawn
fresh from the pools (they still repeat where the pools do: the share of repeated names is printed).
Brute force, same run: each party name compared with every listed name by
``rapidfuzz.process.extractOne`` (Jaro-Winkler, C++) on a sample of payments. Also timed: building
the index of the list (the load). Screening budget: the units
(``inference.screening.screen.units_needed``) screening in full costs each payment of the last batch
and the training simulator's payments (seed 5, 20,000 normal ones over 7 days, with address lines
and look-alikes) (their 99th percentile and maximum: what sizing ``screening_budget`` reads), and
the long remittance of listed words screened as a payment under the default budget (CPU until it
stops, and where), and under the budget a list load screens held payments again with. Run from the
repository root:
``python -m bench.screening [--part all|quality|alerts|speed]
[--entries N] [--names N] [--batches N] [--json PATH]``.
"""

from __future__ import annotations

import sys

if not __package__:
    sys.exit("run it as a module from the repository root: python -m bench.screening")

import argparse
import csv
import hashlib
import io
import platform
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest import mock

import orjson
from rapidfuzz import process, utils
from rapidfuzz.distance import JaroWinkler

from audit.screening.held import HELD_BUDGET_FACTOR
from bench.machine import cpu_model, ram_gib
from bench.screening_pairs import nonlisted_names
from inference.messages.transaction import Agent, Party, Transaction
from inference.screening import screen as screen_module
from inference.screening.entries import ENTRY_KINDS, EntryKind, ListEntry, SanctionsList
from inference.screening.index import ListIndex
from inference.screening.match import token_keys, token_similarity
from inference.screening.normalise import name_tokens, skeleton
from inference.screening.screen import DEFAULT_BUDGET, screen, screen_text, units_needed
from inference.simulate import SimConfig, simulate

DATA = Path(__file__).parent / "data" / "screening"
# thresholds proposed for the rule pack (which does not read screening scores yet): REVIEW from 850, HOLD 920
REVIEW, HOLD = 850, 920
TARGET_PRECISION = 0.95


# What kind of pair a category is. Spelling variants are decidable from the two strings alone; the
# lists' alias groups also pair names that share nothing (a nom de guerre, a former name, an
# acronym, a translation), which no name matcher can tie: a list carries each such alias, and a
# payment naming one is matched against that alias itself.
VARIANT_GROUPS = ("transliteration", "script", "typo", "order-initials-titles", "company-form")
_ALIASES = ("alias", "title-and-name", "ex-name", "former", "fka", "hull", "registry", "second-", "trap",
            "barge", "vessel-ex", "current-name")


def _group(category: str) -> str:
    c = category.lower()
    if ("translat" in c and "transliter" not in c) or c.startswith(_ALIASES):
        return "alias-or-translation"
    if "transliter" in c or "romani" in c or "translit" in c or "russian-based" in c:
        return "transliteration"
    if "script" in c or "native" in c or "multilingual" in c:
        return "script"
    if c.startswith("typo") or "doubled" in c or "accent" in c or "spacing" in c or "punctuation" in c:
        return "typo"
    if c in ("initials", "word-order", "word-order-comma", "honorific", "annotation", "uppercase-export") or \
            "abbreviation" in c:
        return "order-initials-titles"
    if "form" in c or "legal" in c or "suffix" in c:
        return "company-form"
    return "other"


def _pairs() -> list[dict[str, str]]:
    with (DATA / "pairs.csv").open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _held_out(row: dict[str, str]) -> bool:
    return hashlib.sha256(f"{row['name_a']}\x00{row['name_b']}".encode()).digest()[0] & 1 == 1


def _prf(scored: Sequence[tuple[int | float, int]], threshold: float) -> dict[str, float]:
    tp = sum(1 for s, y in scored if s >= threshold and y == 1)
    fp = sum(1 for s, y in scored if s >= threshold and y == 0)
    fn = sum(1 for s, y in scored if s < threshold and y == 1)
    p = tp / (tp + fp) if tp + fp else 1.0
    r = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    return {"threshold": threshold, "precision": round(p, 4), "recall": round(r, 4), "f1": round(f1, 4),
            "tp": tp, "fp": fp, "fn": fn}


def _tune(scored: Sequence[tuple[int | float, int]]) -> float:
    """The lowest threshold at which precision on ``scored`` reaches the target."""
    for t in sorted({s for s, _ in scored}):
        if _prf(scored, t)["precision"] >= TARGET_PRECISION:
            return t
    return max(s for s, _ in scored) + 1


def quality() -> dict[str, Any]:
    rows = _pairs()
    listed = sorted({r["name_b"] for r in rows})
    kinds = {r["name_b"]: r["kind"] for r in rows}
    entries = tuple(ListEntry(str(i), _kind(kinds[n]), (n,)) for i, n in enumerate(listed))
    index = ListIndex([SanctionsList("internal", "pairs", None, "0" * 64, entries, "bench")])
    entry_of = {n: str(i) for i, n in enumerate(listed)}
    ours: list[tuple[int, int, bool, str]] = []
    base: list[tuple[float, int, bool, str]] = []
    t0 = time.process_time()
    for r in rows:
        y, held = int(r["label"]), _held_out(r)
        hits = {h.entry.entry_id: h.score for h in index.match_name(r["name_a"], 0)}
        ours.append((hits.get(entry_of[r["name_b"]], 0), y, held, r["category"]))
    ours_s = time.process_time() - t0
    for r in rows:
        s = JaroWinkler.normalized_similarity(r["name_a"], r["name_b"], processor=utils.default_process)
        base.append((round(s * 1000), int(r["label"]), _held_out(r), r["category"]))

    def report(scored: list[Any], fixed: dict[str, int]) -> dict[str, Any]:
        tune = [(s, y) for s, y, h, _ in scored if not h]
        test = [(s, y) for s, y, h, _ in scored if h]
        t = _tune(tune)
        out: dict[str, Any] = {"tuned_threshold": t, "held_out": _prf(test, t),
                               "all_pairs": _prf([(s, y) for s, y, *_ in scored], t)}
        for name, v in fixed.items():
            out[name] = _prf(test, v)
        misses: dict[str, int] = {}
        for s, y, h, cat in scored:
            if h and ((y == 1 and s < t) or (y == 0 and s >= t)):
                misses[cat] = misses.get(cat, 0) + 1
        out["errors_by_category_held_out"] = dict(sorted(misses.items(), key=lambda kv: -kv[1]))
        return out

    # recall by kind of variant (positives) and the false-alarm share by kind of negative, at REVIEW
    groups: dict[str, list[int]] = {}
    for s_, y, _h, cat in ours:
        g = groups.setdefault(f"{'pos' if y else 'neg'}:{_group(cat)}", [0, 0])
        g[0] += 1
        g[1] += s_ >= REVIEW
    by_group = {k: {"pairs": n, "at_review": round(hit / n, 4)} for k, (n, hit) in sorted(groups.items())}
    variants = [(s_, y) for s_, y, h, cat in ours if h and (y == 0 or _group(cat) in VARIANT_GROUPS)]
    by_cat: dict[str, list[int]] = {}
    for r in rows:
        c = by_cat.setdefault(r["category"], [0, 0])
        c[int(r["label"])] += 1
    return {"pairs": len(rows), "positives": sum(int(r["label"]) for r in rows), "categories": by_cat,
            "sealtrail": report(ours, {"at_review": REVIEW, "at_hold": HOLD}),
            "sealtrail_spelling_variants_held_out": {"at_review": _prf(variants, REVIEW),
                                                     "at_hold": _prf(variants, HOLD)},
            "by_group": by_group,
            "baseline_jaro_winkler": report(base, {}),
            "sealtrail_cpu_us_per_pair": round(ours_s / len(rows) * 1e6, 1)}


def _list_entries(n: int) -> tuple[ListEntry, ...]:
    """The UN list's entries as published (names and aliases), then synthetic entries made of the
    UN list's own words (given names and family names of its individuals recombined, words of its
    organisations recombined), so that the list has a real list's vocabulary at ``n`` entries."""
    from inference.screening.normalise import normalise

    groups = orjson.loads((DATA / "un_alias_groups.json").read_bytes())
    items = groups["entries"] if isinstance(groups, dict) else groups
    out: list[ListEntry] = []
    people: list[list[str]] = []
    orgs: list[list[str]] = []
    for g in items:
        names = tuple(x for x in [g["name"], *g.get("aliases", [])] if x and x.strip())
        if not names:
            continue
        kind = g.get("kind", "individual")
        out.append(ListEntry(f"un-{g.get('ref', len(out))}", _kind(kind), names))
        words = [w for w in normalise(g["name"]).split() if len(w) > 1]
        if len(words) >= 2:
            (people if kind == "individual" else orgs).append(words)
    rng = random.Random(1)
    seen = {e.names[0] for e in out}
    while len(out) < n:
        if rng.random() < 0.7:
            first, last = rng.choice(people), rng.choice(people)
            words = [*first[:rng.choice((1, 1, 2))], *last[-rng.choice((1, 1, 2)):]]
            kind = "individual"
        else:
            picked = (rng.choice(orgs), rng.choice(orgs))
            words = [w for org in picked for w in rng.sample(org, min(2, len(org)))]
            kind = "entity"
        name = " ".join(w.upper() if i == len(words) - 1 else w.capitalize() for i, w in enumerate(words))
        if name not in seen:
            seen.add(name)
            out.append(ListEntry(f"syn-{len(out)}", _kind(kind), (name,)))
    return tuple(out[:n])


def list_csv(n: int) -> bytes:
    """``_list_entries(n)`` as a bank's own list file (``internal-csv``), for benchmarks that seal a
    list: every name whole (the csv module quotes commas and quotes), ";" (which separates aliases)
    read as a space, kinds other than individual and entity as entity."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["entry_id", "kind", "name", "aliases", "dob", "countries", "identifiers", "bics",
                "programmes"])
    for e in _list_entries(n):
        kind = e.kind if e.kind in ("individual", "entity") else "entity"
        names = [name.replace(";", " ") for name in e.names]
        w.writerow([e.entry_id, kind, names[0], ";".join(names[1:]), "", "", "", "", "BENCH"])
    return out.getvalue().encode()


def _kind(text: str) -> EntryKind:
    for k in ENTRY_KINDS:
        if text == k:
            return k
    return "unknown"


def alerts(entries: tuple[ListEntry, ...], index: ListIndex, names: int) -> dict[str, Any]:
    listed = {e.names[0].casefold() for e in entries}
    queries = nonlisted_names(names, seed=2)
    alerted = exact = held = 0
    examples: list[tuple[str, str, int]] = []
    t0 = time.process_time()
    for q in queries:
        hits = index.match_name(q, REVIEW)
        if not hits:
            continue
        if q.casefold() in listed:
            exact += 1
            continue
        alerted += 1
        held += hits[0].score >= HOLD
        if len(examples) < 12:
            examples.append((q, hits[0].entry.names[hits[0].name_index], hits[0].score))
    cpu = time.process_time() - t0
    return {"names": len(queries), "alert_rate": round(alerted / len(queries), 5),
            "hold_rate": round(held / len(queries), 5), "exact_same_name_drawn": exact,
            "us_per_name": round(cpu / len(queries) * 1e6, 1), "examples": examples}


def _payments(n: int, rng: random.Random, names: list[str], bics: list[str]) -> list[Transaction]:
    words = ["INVOICE", "PAYMENT", "ORDER", "GOODS", "SERVICES", "CONTRACT", "RENT", "SALARY", "FEES", "REF"]
    out = []
    for _ in range(n):
        out.append(Transaction(
            message_type="json", reference=f"R{rng.randrange(10**9)}",
            amount=Decimal(rng.randrange(100, 10**6)),
            currency="USD", value_date=date(2026, 12, 1),
            originator=Party(name=rng.choice(names), country="GB"),
            beneficiary=Party(name=rng.choice(names), country="DE"),
            raw_sha256="0" * 64,
            remittance=" ".join(rng.choice(words) for _ in range(4)) + f" {rng.randrange(10**6)}",
            agents=(Agent("debtor_agent", bic=rng.choice(bics)),
                    Agent("creditor_agent", bic=rng.choice(bics)))))
    return out


# normal payments of the training simulator (parties with address lines, look-alikes among them) whose
# screening costs are counted beside the last batch's (a screening each)
BUDGET_SAMPLE = 20_000
LONG_WORDS = 300  # words: over BOUNDED_FROM, and short enough for the baseline to finish in seconds


def empty_caches(index: ListIndex | None = None) -> None:
    """Empty every word-level memo screening keeps (the matcher's, the normaliser's and, given one,
    the index's own), so that the next payment is screened as the first after a start."""
    for memo in (token_keys, token_similarity, name_tokens, skeleton):
        memo.cache_clear()
    if index is not None:
        index._reach.clear()


def speed(entries: tuple[ListEntry, ...], index: ListIndex, batches: int) -> dict[str, Any]:
    rng = random.Random(7)
    names = nonlisted_names(200_000, seed=3)
    bics = [f"{''.join(rng.choice('ABCDEFGHIJKLMNOPQRSTUVWXYZ') for _ in range(4))}GB2L" for _ in range(500)]
    per: list[float] = []
    drawn: list[str] = []
    for _ in range(batches):
        txs = _payments(1024, rng, names, bics)
        drawn += [t.originator.name or "" for t in txs] + [t.beneficiary.name or "" for t in txs]
        t0 = time.process_time()
        for t in txs:
            screen(t, index)
        per.append((time.process_time() - t0) / len(txs))
    cold_txs = _payments(1024, rng, names, bics)
    empty_caches(index)
    t0 = time.process_time()
    for t in cold_txs:
        screen(t, index)
    cold = (time.process_time() - t0) / len(cold_txs)
    listed = [n for e in entries for n in e.names]
    sample = _payments(16, rng, names, bics)
    t0 = time.process_time()
    for t in sample:
        for name in (t.originator.name, t.beneficiary.name):
            process.extractOne(name, listed, scorer=JaroWinkler.normalized_similarity,
                               processor=utils.default_process)
    brute = (time.process_time() - t0) / len(sample)
    ours = statistics.median(per)
    simulated = [s.transaction for s in simulate(SimConfig(seed=5, n_normal=BUDGET_SAMPLE, days=7,
                                                           lookalikes=True))]
    need = sorted(units_needed(t, index) for t in [*txs, *simulated])
    return {"batch": 1024, "batches": batches, "cpu_us_per_payment": round(ours * 1e6, 1),
            "cold_cpu_us_per_payment": round(cold * 1e6, 1),
            "brute_force_cpu_us_per_payment": round(brute * 1e6, 1),
            "ratio_brute_over_ours": round(brute / ours, 1),
            "repeated_party_names": round(1 - len(set(drawn)) / len(drawn), 4),
            "budget_units": {"payments": len(need), "p99": need[int(0.99 * (len(need) - 1))], "max": need[-1],
                             "default": DEFAULT_BUDGET},
            "long_remittance": long_remittance(entries, index, rng, sample[0])}


def long_remittance(entries: tuple[ListEntry, ...], index: ListIndex, rng: random.Random,
                    carrier: Transaction, words: int = LONG_WORDS) -> dict[str, Any]:
    """A remittance of ``words`` words drawn from the listed names' own words (what a hostile sender
    would write to make every window a candidate's), screened as free text; same-run baseline: the
    same text with every window scored (the windows' bound off), which must find the same hits.
    Then the same text as the remittance of ``carrier``, screened as the decision does, under the
    default budget, and as a list load screens a held payment again (``HELD_BUDGET_FACTOR`` times it)."""
    vocab = sorted({w for e in entries[:500] for n in e.names for w in n.split()})
    text = " ".join(rng.choice(vocab) for _ in range(words))
    empty_caches(index)  # each run compares its words afresh
    t0 = time.process_time()
    hits = screen_text(index, "remittance", text)
    ours = time.process_time() - t0
    empty_caches(index)
    with mock.patch.object(screen_module, "BOUNDED_FROM", 1 << 62):  # no text takes the bound
        t0 = time.process_time()
        every = screen_text(index, "remittance", text)
        base = time.process_time() - t0
    same = sorted((h.entry_id, h.score) for h in hits) == sorted((h.entry_id, h.score) for h in every)
    empty_caches(index)
    t0 = time.process_time()
    budgeted = screen(replace(carrier, remittance=text), index, budget=DEFAULT_BUDGET)
    cut = time.process_time() - t0
    empty_caches(index)
    t0 = time.process_time()
    held = screen(replace(carrier, remittance=text), index, budget=DEFAULT_BUDGET * HELD_BUDGET_FACTOR)
    held_s = time.process_time() - t0
    return {"words": words, "distinct_words": len(vocab), "hits": len(hits), "cpu_s": round(ours, 2),
            "every_window_cpu_s": round(base, 2), "ratio_every_window_over_ours": round(base / ours, 1),
            "same_hits": same, "under_default_budget": {"cpu_s": round(cut, 3), "stopped": budgeted.stopped,
                                                        "hits": len(budgeted.hits)},
            "held_rescreen_budget": {"cpu_s": round(held_s, 3), "stopped": held.stopped,
                                     "hits": len(held.hits)}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--part", choices=("all", "quality", "alerts", "speed"), default="all")
    ap.add_argument("--entries", type=int, default=30_000)
    ap.add_argument("--names", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    machine = {"cpu": cpu_model(), "ram_gib": ram_gib(), "python": platform.python_version()}
    doc: dict[str, Any] = {"machine": machine,
                           "thresholds": {"review": REVIEW, "hold": HOLD}}
    if args.part in ("all", "quality"):
        doc["quality"] = quality()
        _print("quality", doc["quality"])
    if args.part in ("all", "alerts", "speed"):
        t0 = time.process_time()
        entries = _list_entries(args.entries)
        lst = SanctionsList("internal", "bench", None, "0" * 64, entries, "bench")
        index = ListIndex([lst])
        doc["index"] = {"entries": len(entries), "names": len(index),
                        "build_cpu_s": round(time.process_time() - t0, 2)}
        _print("index", doc["index"])
        if args.part in ("all", "alerts"):
            doc["alerts"] = alerts(entries, index, args.names)
            _print("alerts", doc["alerts"])
        if args.part in ("all", "speed"):
            doc["speed"] = speed(entries, index, args.batches)
            _print("speed", doc["speed"])
    if args.json:
        args.json.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    return 0


_VERBOSE = ("categories", "errors_by_category_held_out")  # in --json only


def _print(title: str, doc: dict[str, Any], indent: str = "") -> None:
    print(f"{indent}{title}:")
    for k, v in doc.items():
        if k in _VERBOSE:
            continue
        if isinstance(v, dict):
            _print(k, v, indent + "  ")
        else:
            print(f"{indent}  {k}: {v}")


if __name__ == "__main__":
    raise SystemExit(main())
