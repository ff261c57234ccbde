"""XSD validation time per message, against the scoring-path parse of the same files in the same run.

``python -m bench.xsd_validation [--rounds N]``: every ISO 20022 file of the public corpus
(tests/vectors/public/iso-*/) and of tests/vectors/messages/pacs008/, each parsed as the scoring
path parses it (``parse_messages``) and validated (``xsd_validation.validate_xml``), interleaved,
N rounds; prints the machine, the median time per message of each, their ratio, and the one-off
cost of compiling the schemas. Where lxml is installed (it is not a dependency) it also times
libxml2's XSD validation of the same files, for comparison; its parser is not defusedxml, so the
comparison is of speed only.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time
from pathlib import Path
from typing import Any

from bench.machine import host_info
from inference.messages import MessageError, parse_messages
from inference.messages import xsd_validation as xv

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted([*ROOT.glob("tests/vectors/public/iso-*/*.xml"),
                *ROOT.glob("tests/vectors/messages/pacs008/*.xml")])


def _validate(data: bytes) -> int:
    try:
        return sum(p.status != "not validated" for p in xv.validate_xml(data))
    except MessageError:
        return 0


def _lxml_validator() -> Any:
    """A function validating with lxml (libxml2) against the same shipped schemas, or None."""
    try:
        etree: Any = importlib.import_module("lxml.etree")
    except ImportError:
        return None
    folder = Path(xv.__file__).parent / "xsd"
    schemas = {name: etree.XMLSchema(etree.XML((folder / f"{name}.xsd").read_bytes())) for name in xv.SCHEMAS}
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)

    def validate(data: bytes) -> int:
        try:
            root = etree.fromstring(data, parser)
        except etree.XMLSyntaxError:
            return 0
        n = 0
        for el in root.iter():
            if not isinstance(el.tag, str) or el.tag.rpartition("}")[2] not in ("AppHdr", "Document"):
                continue
            name = xv.schema_for(el.tag[1:el.tag.index("}")] if el.tag.startswith("{") else "")
            if name is not None:
                schemas[name].validate(etree.ElementTree(el))
                n += 1
        return n

    return validate


def _doc_checked(data: bytes) -> bool:
    try:
        return any(p.part == "Document" and p.schema for p in xv.validate_xml(data))
    except MessageError:
        return False


def _time(groups: dict[str, list[bytes]], rounds: int, fns: dict[str, Any]) -> dict[tuple[str, str], float]:
    """Median seconds per message of each function on each group, the functions interleaved."""
    runs: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for group, blobs in groups.items():
            for key, fn in fns.items():
                t = time.perf_counter()
                for b in blobs:
                    fn(b)
                runs.setdefault((group, key), []).append((time.perf_counter() - t) / len(blobs))
    return {k: statistics.median(v) for k, v in runs.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    blobs = [f.read_bytes() for f in FILES]
    info = host_info()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['ram_gib']} GiB, {info['os']}, "
          f"Python {info['python']}")
    t0 = time.perf_counter()
    for name in sorted(xv.SCHEMAS):
        xv._load(name)
    compile_s = time.perf_counter() - t0
    groups = {"all": blobs, "schema shipped": [b for b in blobs if _doc_checked(b)]}
    fns: dict[str, Any] = {"parse": lambda b: parse_messages(b, "auto"), "xmlschema": _validate}
    lxml = _lxml_validator()
    if lxml is not None:
        fns["lxml"] = lxml
    med = _time(groups, args.rounds, fns)
    print(f"schemas: {len(xv.SCHEMAS)} compiled once per process in {compile_s:.2f} s "
          f"({compile_s / len(xv.SCHEMAS) * 1000:.0f} ms each, on first use of each)")
    print(f"{args.rounds} rounds, median time per message, "
          "the scoring-path parse (parse_messages) as baseline:")
    for group, gb in groups.items():
        parse_us = med[(group, "parse")] * 1e6
        line = f"  {group:<15} {len(gb):3d} messages: parse {parse_us:7.0f} us"
        for key in fns:
            if key != "parse":
                us = med[(group, key)] * 1e6
                line += f" | {key} {us:7.0f} us ({us / parse_us:4.1f}x)"
        print(line)
    if lxml is None:
        print("lxml: not installed, not compared")

if __name__ == "__main__":
    main()
