"""The rule language: a TOML ruleset whose ``when`` expressions parse into a small typed IR.

Expressions are parsed by Python's ``ast`` in eval mode and accepted only through a whitelist:
numeric literals, declared features, ``+ - * /``, comparisons, ``and``/``or``/``not``,
``x in {1, 2}`` and ``min``/``max``/``abs``. Numbers and booleans are distinct types: a
``when`` must be boolean. Semantics (shared by the compiler and the reference evaluator) are
IEEE-754 binary64 with one rule for NaN: every comparison with a NaN operand is false.
"""

from __future__ import annotations

import ast
import hashlib
import re
import tomllib
from dataclasses import dataclass
from typing import Any, Literal

from wasm_rules.errors import RulesetError, RuleSyntaxError

__all__ = [
    "IDENTIFIER",
    "OUTCOMES",
    "Arith",
    "BoolOp",
    "Call",
    "Compare",
    "Const",
    "Expr",
    "Feature",
    "InSet",
    "Neg",
    "Not",
    "Rule",
    "Ruleset",
    "check_ruleset_limits",
    "check_toml_nesting",
    "parse_expression",
    "parse_ruleset",
    "toml_nesting",
]

OUTCOMES = ("ALLOW", "REVIEW", "HOLD", "BLOCK")  # codes 0..3, in order of severity
SEVERITIES = ("low", "medium", "high", "critical")
MAX_SOURCE = 2_000
MAX_DEPTH = 40
MAX_NODES = 500
MAX_RULES = 4_096
MAX_FEATURES = 1_024
MAX_RULESET_BYTES = 1 << 20  # a ruleset TOML document (the HTTP API's body limit too)
MAX_TOML_NESTING = 32  # arrays and inline tables inside each other; a ruleset needs 2
# What may name a version (and a feature table's version): it becomes part of the ruleset id
# "{id}@{version}", which is a path segment of the HTTP API and a key of sealed records.
IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_RULESET_ID = re.compile(r"[a-z][a-z0-9_]{0,63}")
_RULE_ID = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
_FEATURE = re.compile(r"[a-z_][a-z0-9_]{0,63}")
_FUNCS = {"min": (2, 64), "max": (2, 64), "abs": (1, 1)}
_TOML_SPECIAL = re.compile(r"""[\[\]{}#"']""")


@dataclass(frozen=True, slots=True)
class Const:
    value: float


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    index: int


@dataclass(frozen=True, slots=True)
class Neg:
    operand: Expr


@dataclass(frozen=True, slots=True)
class Arith:
    op: Literal["+", "-", "*", "/"]
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Call:
    fn: Literal["min", "max", "abs"]
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Compare:
    op: Literal["<", "<=", ">", ">=", "==", "!="]
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class InSet:
    operand: Expr
    values: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class BoolOp:
    op: Literal["and", "or"]
    operands: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Not:
    operand: Expr


Expr = Const | Feature | Neg | Arith | Call | Compare | InSet | BoolOp | Not
NUMERIC = (Const, Feature, Neg, Arith, Call)


@dataclass(frozen=True)
class Rule:
    id: str
    when: str
    expr: Expr
    outcome: str
    reason: str
    severity: str

    @property
    def outcome_code(self) -> int:
        return OUTCOMES.index(self.outcome)


@dataclass(frozen=True)
class Ruleset:
    id: str
    version: str
    description: str
    features: tuple[str, ...]
    rules: tuple[Rule, ...]
    feature_tables: tuple[tuple[str, str], ...]
    source_sha256: str


_BINOPS: dict[type[ast.operator], Literal["+", "-", "*", "/"]] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_CMPOPS: dict[type[ast.cmpop], Literal["<", "<=", ">", ">=", "==", "!="]] = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_REFUSED = {
    ast.Attribute: "attribute access is not allowed",
    ast.Subscript: "subscripts are not allowed",
    ast.Lambda: "lambdas are not allowed",
    ast.IfExp: "conditional expressions are not allowed",
    ast.JoinedStr: "strings are not allowed",
    ast.List: "lists are not allowed (use x in {1, 2})",
    ast.Tuple: "tuples are not allowed",
    ast.Dict: "dicts are not allowed",
    ast.NamedExpr: "assignment expressions are not allowed",
    ast.Starred: "starred expressions are not allowed",
}


class _Parser:
    def __init__(self, rule_id: str, features: dict[str, int]) -> None:
        self.rule_id = rule_id
        self.features = features
        self.nodes = 0

    def fail(self, node: ast.AST | None, reason: str) -> RuleSyntaxError:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0) + (0 if line == 1 else 1)  # "(" added on line 1
        return RuleSyntaxError(self.rule_id, line, max(col, 1), reason)

    def number(self, node: ast.expr, depth: int) -> Expr:
        e = self.expr(node, depth)
        if not isinstance(e, NUMERIC):
            raise self.fail(node, "expected a number here, got a condition")
        return e

    def condition(self, node: ast.expr, depth: int) -> Expr:
        e = self.expr(node, depth)
        if isinstance(e, NUMERIC):
            raise self.fail(node, "expected a condition here (a comparison), got a number; "
                                  "write e.g. 'flag == 1'")
        return e

    def literal(self, node: ast.expr) -> float:
        sign = 1.0
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            sign = -1.0 if isinstance(node.op, ast.USub) else 1.0
            node = node.operand
        if not isinstance(node, ast.Constant) or isinstance(node.value, bool) or not isinstance(
            node.value, int | float
        ):
            raise self.fail(node, "set members must be numeric literals")
        return sign * self.as_float(node, node.value)

    def as_float(self, node: ast.AST, value: int | float) -> float:
        try:
            f = float(value)
        except OverflowError as exc:
            raise self.fail(node, f"number {value} is too large for float64") from exc
        if isinstance(value, int) and int(f) != value:
            raise self.fail(node, f"integer {value} is not exactly representable as float64")
        if f != f or f in (float("inf"), float("-inf")):
            raise self.fail(node, f"number {value!r} is not finite")
        return f

    def expr(self, node: ast.expr, depth: int) -> Expr:
        self.nodes += 1
        if depth > MAX_DEPTH:
            raise self.fail(node, f"expression nests deeper than {MAX_DEPTH} levels")
        if self.nodes > MAX_NODES:
            raise self.fail(node, f"expression has more than {MAX_NODES} parts")
        d = depth + 1
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int | float):
                kind = "strings" if isinstance(node.value, str | bytes) else repr(node.value)
                raise self.fail(node, f"{kind} are not allowed; only numbers")
            return Const(self.as_float(node, node.value))
        if isinstance(node, ast.Name):
            if node.id not in self.features:
                known = ", ".join(sorted(self.features)) or "none"
                raise self.fail(node, f"unknown name {node.id!r} (declared features: {known})")
            return Feature(node.id, self.features[node.id])
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return Not(self.condition(node.operand, d))
            if isinstance(node.op, ast.USub):
                return Neg(self.number(node.operand, d))
            if isinstance(node.op, ast.UAdd):
                return self.number(node.operand, d)
            raise self.fail(node, "bitwise operators are not allowed")
        if isinstance(node, ast.BinOp):
            op = _BINOPS.get(type(node.op))
            if op is None:
                raise self.fail(node, f"operator {type(node.op).__name__} is not allowed "
                                      "(only + - * /)")
            return Arith(op, self.number(node.left, d), self.number(node.right, d))
        if isinstance(node, ast.BoolOp):
            bop: Literal["and", "or"] = "and" if isinstance(node.op, ast.And) else "or"
            return BoolOp(bop, tuple(self.condition(v, d) for v in node.values))
        if isinstance(node, ast.Compare):
            return self.compare(node, d)
        if isinstance(node, ast.Call):
            return self.call(node, d)
        if isinstance(node, ast.Set):
            raise self.fail(node, "a set literal is only allowed after 'in'")
        reason = _REFUSED.get(type(node), f"{type(node).__name__} expressions are not allowed")
        raise self.fail(node, reason)

    def compare(self, node: ast.Compare, d: int) -> Expr:
        parts: list[Expr] = []
        left = node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, ast.In):
                if not isinstance(right, ast.Set):
                    raise self.fail(right, "'in' needs a set literal such as {1, 2, 3}")
                self.nodes += len(right.elts)
                if self.nodes > MAX_NODES:
                    raise self.fail(right, f"expression has more than {MAX_NODES} parts")
                values = tuple(self.literal(v) for v in right.elts)
                parts.append(InSet(self.number(left, d), values))
            elif isinstance(op, ast.NotIn):
                raise self.fail(node, "'not in' is not allowed; write 'not (x in {...})'")
            elif type(op) in _CMPOPS:
                parts.append(Compare(_CMPOPS[type(op)], self.number(left, d),
                                     self.number(right, d)))
            else:
                raise self.fail(node, f"comparison {type(op).__name__} is not allowed")
            left = right
        return parts[0] if len(parts) == 1 else BoolOp("and", tuple(parts))

    def call(self, node: ast.Call, d: int) -> Expr:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name not in _FUNCS:
            shown = name or ast.unparse(node.func)
            raise self.fail(node, f"call to {shown!r} is not allowed (only min, max, abs)")
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise self.fail(node, f"{name}() takes plain positional arguments only")
        lo, hi = _FUNCS[name]
        if not lo <= len(node.args) <= hi:
            raise self.fail(node, f"{name}() takes {lo if lo == hi else f'{lo} to {hi}'} "
                                  f"arguments, got {len(node.args)}")
        fn: Literal["min", "max", "abs"] = name  # type: ignore[assignment]
        return Call(fn, tuple(self.number(a, d) for a in node.args))


def parse_expression(source: str, features: tuple[str, ...], rule_id: str = "?") -> Expr:
    """Parse one ``when`` expression into the IR; raise ``RuleSyntaxError``."""
    if not isinstance(source, str) or not source.strip():
        raise RuleSyntaxError(rule_id, 1, 1, "the 'when' expression is empty")
    if not source.isascii():  # Python would NFKC-fold a full-width 'ｘ' into the feature x
        col = next(i for i, c in enumerate(source) if not c.isascii()) + 1
        raise RuleSyntaxError(rule_id, 1, col, "only ASCII characters are allowed")
    if "#" in source:
        raise RuleSyntaxError(rule_id, 1, source.index("#") + 1,
                              "comments are not allowed inside an expression")
    if len(source) > MAX_SOURCE:
        raise RuleSyntaxError(rule_id, 1, MAX_SOURCE, f"expression is longer than {MAX_SOURCE} "
                                                      "characters")
    try:  # in parentheses, so an expression may span lines (TOML multi-line strings)
        tree = ast.parse(f"({source}\n)", mode="eval")
    except SyntaxError as exc:
        line = exc.lineno or 1
        col = max(1, (exc.offset or 1) - (1 if line == 1 else 0))
        raise RuleSyntaxError(rule_id, line, col, f"syntax error: {exc.msg}") from exc
    except (RecursionError, MemoryError, ValueError) as exc:
        raise RuleSyntaxError(rule_id, 1, 1, "expression is too deeply nested") from exc
    p = _Parser(rule_id, {f: i for i, f in enumerate(features)})
    try:
        return p.condition(tree.body, 0)
    except RecursionError as exc:
        raise RuleSyntaxError(rule_id, 1, 1, "expression is too deeply nested") from exc


def _get(table: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in table:
        raise RulesetError(f"{where}: missing key {key!r}")
    value = table[key]
    if not isinstance(value, kind):
        raise RulesetError(f"{where}: {key!r} must be a {kind.__name__}")
    return value


def _at(field: str, message: str) -> RulesetError:
    """A refusal naming the key at fault (``RulesetError.field``)."""
    err = RulesetError(message)
    err.field = field
    return err


def _shown(value: str) -> str:
    """``value`` as a refusal quotes it: escaped (no control character reaches a log or page), cut short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:76] + "...'"


def _identifier(value: str, pattern: re.Pattern[str], field: str, what: str) -> str:
    """``value`` if it matches ``pattern`` in full, else a refusal naming ``field``."""
    if not pattern.fullmatch(value):
        raise _at(field, f"{what} {_shown(value)} ({len(value)} characters) must match {pattern.pattern}")
    return value


def _check_keys(table: dict[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(table) - allowed)
    if extra:
        raise RulesetError(f"{where}: unknown key(s) {', '.join(extra)}")


def toml_nesting(text: str, stop_above: int | None = None) -> int:
    """How deep arrays and inline tables (``[``, ``{``) nest in TOML ``text``, outside strings
    and comments; a table header ``[[a]]`` counts 2. Read as TOML reads strings (basic,
    literal, multi-line with up to two extra closing quotes), so nothing a parser would nest
    hides in what looks like a string here. Malformed text gets a number too: the parser says
    what is wrong with it. With ``stop_above``, the scan ends as soon as the depth exceeds it."""
    depth = deepest = i = 0
    n = len(text)
    while (m := _TOML_SPECIAL.search(text, i)) is not None:
        i = m.start()
        c = text[i]
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if stop_above is not None and deepest > stop_above:
                break
        elif c in "]}":
            depth = max(0, depth - 1)
        elif c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c in "\"'":
            i = _string_end(text, i)
            continue
        i += 1
    return deepest


def _string_end(text: str, i: int) -> int:
    """The index just past the TOML string that starts at ``text[i]`` (a quote)."""
    q = text[i]
    escapes = q == '"'
    if text.startswith(q * 3, i):  # multi-line: ends at the next unescaped triple quote
        j = i + 3
        while True:
            end = text.find(q * 3, j)
            if end < 0:
                return len(text)
            if escapes and _escaped(text, end):
                j = end + 1
                continue
            end += 3
            for _ in range(2):  # """a"""" is the string a" : up to two quotes belong to it
                if end < len(text) and text[end] == q:
                    end += 1
            return end
    j = i + 1
    while j < len(text) and text[j] != "\n":
        if escapes and text[j] == "\\":
            j += 2
            continue
        if text[j] == q:
            return j + 1
        j += 1
    return j


def _escaped(text: str, at: int) -> bool:
    """Whether ``text[at]`` follows an odd run of backslashes."""
    k = at
    while k > 0 and text[k - 1] == "\\":
        k -= 1
    return (at - k) % 2 == 1


def check_toml_nesting(text: str, error: type[Exception] = RulesetError) -> None:
    """Refuse, before a TOML parser sees it, ``text`` nesting deeper than ``MAX_TOML_NESTING``
    (``tomllib`` recurses per level: 500 levels of ``[`` in 1 KB exhaust Python's stack).
    ``error`` (default ``RulesetError``) is raised with a message naming the limit; other TOML
    files (the role map) pass their own."""
    if toml_nesting(text, MAX_TOML_NESTING) > MAX_TOML_NESTING:
        raise error(f"arrays or inline tables nest more than {MAX_TOML_NESTING} levels deep "
                    "(the limit, MAX_TOML_NESTING)")


def check_ruleset_limits(raw: bytes) -> None:
    """Refuse, before any parsing, a ruleset document larger than ``MAX_RULESET_BYTES`` or
    nesting deeper than ``MAX_TOML_NESTING``. ``RulesetError`` names the limit."""
    if len(raw) > MAX_RULESET_BYTES:
        raise RulesetError(f"the ruleset is {len(raw):,} bytes; the limit is {MAX_RULESET_BYTES:,} "
                           "(MAX_RULESET_BYTES)")
    check_toml_nesting(raw.decode("utf-8", errors="replace"))


def parse_ruleset(source: bytes | str) -> Ruleset:
    """Parse and check a ruleset TOML document; every problem is a ``RulesetError``, including
    a document over the size or nesting limits (``check_ruleset_limits``)."""
    raw = source.encode() if isinstance(source, str) else source
    check_ruleset_limits(raw)
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RulesetError(f"not a valid UTF-8 TOML document: {exc}") from exc
    except RecursionError as exc:  # unreachable under MAX_TOML_NESTING; kept as a backstop
        raise RulesetError(f"the document nests too deeply to parse (limit {MAX_TOML_NESTING})") from exc
    _check_keys(doc, {"ruleset", "rules"}, "document")
    head = _get(doc, "ruleset", dict, "document")
    _check_keys(head, {"id", "version", "description", "features", "feature_tables"}, "[ruleset]")
    rid = _identifier(_get(head, "id", str, "[ruleset]"), _RULESET_ID, "ruleset.id", "[ruleset]: id")
    version = _get(head, "version", str, "[ruleset]").strip()
    if not version:
        raise _at("ruleset.version", "[ruleset]: version is empty")
    _identifier(version, IDENTIFIER, "ruleset.version", "[ruleset]: version")
    description = head.get("description", "")
    if not isinstance(description, str):
        raise RulesetError("[ruleset]: description must be a string")
    features = tuple(_get(head, "features", list, "[ruleset]"))
    if not features or len(features) > MAX_FEATURES:
        raise RulesetError(f"[ruleset]: features must list 1 to {MAX_FEATURES} names")
    for f in features:
        if not isinstance(f, str) or not _FEATURE.fullmatch(f) or f in _FUNCS:
            raise RulesetError(f"[ruleset]: feature name {f!r} must match {_FEATURE.pattern}")
    if len(set(features)) != len(features):
        raise RulesetError("[ruleset]: feature names must be unique")
    tables = head.get("feature_tables", {})
    if not isinstance(tables, dict) or not all(isinstance(v, str) for v in tables.values()):
        raise RulesetError("[ruleset.feature_tables]: values must be version strings")
    for name, table_version in tables.items():
        _identifier(name, _FEATURE, "ruleset.feature_tables", "[ruleset.feature_tables]: table name")
        _identifier(table_version, IDENTIFIER, f"ruleset.feature_tables.{name}",
                    f"[ruleset.feature_tables]: {name}")
    rules_raw = doc.get("rules")
    if not isinstance(rules_raw, list) or not rules_raw:
        raise RulesetError("a ruleset needs at least one [[rules]] table")
    if len(rules_raw) > MAX_RULES:
        raise RulesetError(f"a ruleset holds at most {MAX_RULES} rules")
    rules: list[Rule] = []
    seen: set[str] = set()
    for n, r in enumerate(rules_raw, 1):
        where = f"[[rules]] #{n}"
        if not isinstance(r, dict):
            raise RulesetError(f"{where}: must be a table")
        _check_keys(r, {"id", "when", "outcome", "reason", "severity"}, where)
        rule_id = _identifier(_get(r, "id", str, where), _RULE_ID, f"rules[{n - 1}].id", f"{where}: rule id")
        if rule_id in seen:
            raise RulesetError(f"{where}: duplicate rule id {rule_id}")
        seen.add(rule_id)
        where = f"rule {rule_id}"
        outcome = _get(r, "outcome", str, where)
        if outcome not in OUTCOMES:
            raise RulesetError(f"{where}: outcome {outcome!r} is not one of {', '.join(OUTCOMES)}")
        severity = _get(r, "severity", str, where)
        if severity not in SEVERITIES:
            raise RulesetError(f"{where}: severity {severity!r} is not one of "
                               f"{', '.join(SEVERITIES)}")
        reason = _get(r, "reason", str, where).strip()
        if not reason:
            raise RulesetError(f"{where}: reason is empty")
        when = _get(r, "when", str, where)
        rules.append(Rule(rule_id, when, parse_expression(when, features, rule_id), outcome,
                          reason, severity))
    return Ruleset(rid, version, description.strip(), features, tuple(rules),
                   tuple(sorted(tables.items())), hashlib.sha256(raw).hexdigest())
