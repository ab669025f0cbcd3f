"""A small, safe condition language over named facts.

Grammar (recursive descent; nothing is ever passed to ``eval``)::

    expr    := and ("or" and)*
    and     := unary ("and" unary)*
    unary   := "not" unary | compare
    compare := operand [("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not" "in") operand]
    operand := FACT | NUMBER | STRING | "true" | "false" | "[" [operand ("," operand)*] "]"
             | "(" expr ")"

Parentheses, lists and ``not`` nest at most ``MAX_NESTING`` levels deep (deeper text is an
error, never a ``RecursionError``). Facts are dotted names from ``optkit.catalog.factspec.FACTS``.
``compile_condition`` parses and type-checks against that registry, so an unknown fact, a
comparison of a number with a string, a version fact against a string that is no PEP 440
version, or a string outside a fact's choices is an error when the catalog loads, not when a
plan runs.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Callable, Mapping

from packaging.version import Version

from optkit.catalog.textfile import MAX_INT_DIGITS
from optkit.errors import ConditionError, InternalError, did_you_mean
from optkit.catalog.factspec import FACTS, FactSpec, unknown_fact_hint
from optkit.value import valueclass

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<num>-?\d+(?:\.\d+)?(?![\w.]))
    | (?P<str>'[^'\\]*'|"[^"\\]*")
    | (?P<op>==|!=|<=|>=|<|>|\(|\)|\[|\]|,)
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
    )""",
    re.VERBOSE,
)
_BLANK = re.compile(r"\s*\Z")
_KEYWORDS = {"and", "or", "not", "in", "true", "false"}
MAX_NESTING = 32
"""Deepest nesting of parentheses, lists and ``not`` (the parser recurses once per level)."""
_ORDER_OPS = {"<", "<=", ">", ">="}


@valueclass(frozen=True)
class Token:
    kind: str  # num, str, op, name, kw, end
    text: str
    column: int


def tokenize(text: str) -> list[Token]:
    """Split a condition into tokens; anything unrecognised is an error with its column."""
    tokens, pos = [], 0
    while pos < len(text):
        if _BLANK.match(text, pos):  # not text[pos:].strip(): that copies the rest once per token
            break
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise ConditionError(text, f"unexpected character {text[pos:].lstrip()[0]!r}",
                                 len(text) - len(text[pos:].lstrip()))
        kind = match.lastgroup
        value = match.group(kind)
        column = match.start(kind)
        if kind == "name" and value in _KEYWORDS:
            kind = "kw"
        tokens.append(Token(kind, value, column))
        pos = match.end()
    tokens.append(Token("end", "", len(text)))
    return tokens


# --- typed AST -------------------------------------------------------------------------------


@valueclass(frozen=True)
class Node:
    type: str

    def evaluate(self, facts: Mapping[str, Any]) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def fact_names(self) -> tuple[str, ...]:
        return ()


@valueclass(frozen=True)
class Literal(Node):
    value: Any

    def evaluate(self, facts):
        return self.value


@valueclass(frozen=True)
class Fact(Node):
    name: str

    def evaluate(self, facts):
        try:
            return facts[self.name]
        except KeyError:
            raise InternalError(f"fact {self.name!r} has no value in this request") from None

    def fact_names(self):
        return (self.name,)


@valueclass(frozen=True)
class ListOf(Node):
    items: tuple[Node, ...]

    def evaluate(self, facts):
        return [item.evaluate(facts) for item in self.items]

    def fact_names(self):
        return tuple(n for item in self.items for n in item.fact_names())


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "in": lambda a, b: a in b,
    "not in": lambda a, b: a not in b,
}


@valueclass(frozen=True)
class Compare(Node):
    op: str
    left: Node
    right: Node

    def evaluate(self, facts):
        return _COMPARE[self.op](self.left.evaluate(facts), self.right.evaluate(facts))

    def fact_names(self):
        return self.left.fact_names() + self.right.fact_names()


@valueclass(frozen=True)
class Logic(Node):
    op: str  # and, or
    parts: tuple[Node, ...]

    def evaluate(self, facts):
        values = (part.evaluate(facts) for part in self.parts)
        return all(values) if self.op == "and" else any(values)

    def fact_names(self):
        return tuple(n for part in self.parts for n in part.fact_names())


@valueclass(frozen=True)
class Not(Node):
    operand: Node

    def evaluate(self, facts):
        return not self.operand.evaluate(facts)

    def fact_names(self):
        return self.operand.fact_names()


# --- parser + type checker ---------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str, facts: Mapping[str, FactSpec]):
        self.text = text
        self.facts = facts
        self.tokens = tokenize(text)
        self.pos = 0
        self.depth = 0

    def error(self, message: str, token: Token | None = None, hint: str = "") -> ConditionError:
        token = token or self.tokens[self.pos]
        return ConditionError(self.text, message, token.column, hint)

    def peek(self) -> Token:
        return self.tokens[self.pos]

    def take(self) -> Token:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def accept(self, text: str) -> bool:
        if self.peek().text == text and self.peek().kind in ("op", "kw"):
            self.pos += 1
            return True
        return False

    def parse(self) -> Node:
        if self.peek().kind == "end":
            raise self.error("empty condition", hint="write e.g. parallel.tp == 2")
        node = self.parse_or()
        if self.peek().kind != "end":
            raise self.error(f"unexpected {self.peek().text!r}", hint="join clauses with and/or")
        return self.require_bool(node, self.tokens[0])

    def parse_or(self) -> Node:
        return self.parse_logic("or", self.parse_and)

    def parse_and(self) -> Node:
        return self.parse_logic("and", self.parse_unary)

    def parse_logic(self, op: str, sub: Callable[[], Node]) -> Node:
        start = self.peek()
        parts = [sub()]
        while self.accept(op):
            operand_token = self.peek()
            parts.append(self.require_bool(sub(), operand_token))
        if len(parts) == 1:
            return parts[0]
        self.require_bool(parts[0], start)
        return Logic("bool", op, tuple(parts))

    def nested(self, token: Token, parse: Callable[[], Node]) -> Node:
        """``parse()`` one level deeper; refused beyond MAX_NESTING levels."""
        if self.depth == MAX_NESTING:
            raise self.error(f"nested more than {MAX_NESTING} levels deep", token, "split it into several rules")
        self.depth += 1
        try:
            return parse()
        finally:
            self.depth -= 1

    def parse_unary(self) -> Node:
        token = self.peek()
        if self.accept("not"):
            return Not("bool", self.require_bool(self.nested(token, self.parse_unary), self.peek()))
        return self.parse_compare()

    def parse_compare(self) -> Node:
        left_token = self.peek()
        left = self.parse_operand()
        token = self.peek()
        if token.kind == "op" and token.text in _COMPARE:
            self.take()
            op = token.text
        elif token.text == "in" and token.kind == "kw":
            self.take()
            op = "in"
        elif token.text == "not" and self.tokens[self.pos + 1].text == "in":
            self.pos += 2
            op = "not in"
        else:
            return left
        right_token = self.peek()
        right = self.parse_operand()
        return self.check_compare(op, left, right, token, left_token, right_token)

    def parse_operand(self) -> Node:
        token = self.take()
        if token.kind == "num":
            if len(token.text) > MAX_INT_DIGITS:
                raise self.error(f"a number of {len(token.text)} characters; no fact is that large", token)
            value = float(token.text) if "." in token.text else int(token.text)
            return Literal("float" if isinstance(value, float) else "int", value)
        if token.kind == "str":
            return Literal("str", token.text[1:-1])
        if token.kind == "kw" and token.text in ("true", "false"):
            return Literal("bool", token.text == "true")
        if token.kind == "name":
            return self.fact(token)
        if token.text == "(":
            node = self.nested(token, self.parse_or)
            if not self.accept(")"):
                raise self.error("missing ')'")
            return node
        if token.text == "[":
            return self.nested(token, lambda: self.parse_list(token))
        if token.kind == "end":
            raise self.error("condition ends too early", token)
        raise self.error(f"unexpected {token.text!r}", token)

    def parse_list(self, start: Token) -> Node:
        items: list[Node] = []
        if not self.accept("]"):
            while True:
                item = self.parse_operand()
                if not isinstance(item, Literal):
                    raise self.error("list items must be literal values", start)
                items.append(item)
                if self.accept("]"):
                    break
                if not self.accept(","):
                    raise self.error("expected ',' or ']' in list")
        kinds = {_numeric(i.type) for i in items}
        if len(kinds) > 1:
            raise self.error("list mixes value types", start)
        element = kinds.pop() if kinds else "any"
        return ListOf(f"list[{element}]", tuple(items))

    def fact(self, token: Token) -> Node:
        spec = self.facts.get(token.text)
        if spec is None:
            hint = unknown_fact_hint(token.text, self.facts) or "see `optkit facts --list`"
            raise self.error(f"unknown fact {token.text!r}", token, hint)
        return Fact(spec.type, spec.name)

    def require_bool(self, node: Node, token: Token) -> Node:
        if node.type != "bool":
            what = f"fact {node.name!r} is {node.type}" if isinstance(node, Fact) else f"a {node.type} value"
            raise self.error(f"expected a true/false test, but {what}", token,
                             "compare it, e.g. parallel.tp == 2")
        return node

    def check_compare(self, op, left, right, token, left_token, right_token) -> Node:
        if op in ("in", "not in"):
            return self.check_membership(op, left, right, token, right_token)
        left, right = self.coerce_versions(left, right, left_token, right_token)
        lt, rt = _numeric(left.type), _numeric(right.type)
        if lt != rt:
            raise self.error(f"cannot compare {left.type} with {right.type} using {op!r}", token)
        if op in _ORDER_OPS and lt in ("bool", "str") or op in _ORDER_OPS and lt.startswith("list"):
            raise self.error(f"{op!r} needs numbers or versions, not {lt}", token)
        self.check_choice(left, right, right_token)
        self.check_choice(right, left, left_token)
        return Compare("bool", op, left, right)

    def check_membership(self, op, left, right, token, right_token) -> Node:
        if not right.type.startswith("list["):
            raise self.error(f"{op!r} needs a list on its right, got {right.type}", right_token)
        element = _numeric(right.type[5:-1])
        if element != "any" and _numeric(left.type) != element:
            raise self.error(f"cannot look for a {left.type} in a list of {right.type[5:-1]}", token)
        if isinstance(right, ListOf):
            for item in right.items:
                self.check_choice(left, item, right_token)
        return Compare("bool", op, left, right)

    def coerce_versions(self, left, right, left_token, right_token):
        if left.type == "version" and isinstance(right, Literal):
            return left, self.version_literal(right, right_token)
        if right.type == "version" and isinstance(left, Literal):
            return self.version_literal(left, left_token), right
        return left, right

    def version_literal(self, node: Literal, token: Token) -> Literal:
        try:
            return Literal("version", Version(str(node.value)))
        except ValueError:  # InvalidVersion, or a number too long for int()
            raise self.error(f"{node.value!r} is not a version", token,
                             "write a PEP 440 version such as '0.26.0'") from None

    def check_choice(self, fact: Node, value: Node, token: Token) -> None:
        if not isinstance(fact, Fact) or not isinstance(value, Literal):
            return
        choices = self.facts[fact.name].choices
        if choices and value.value not in choices:
            hint = did_you_mean(str(value.value), choices) or f"one of {', '.join(choices)}"
            raise self.error(f"{fact.name} is never {value.value!r}", token, hint)


def _numeric(type_: str) -> str:
    return "number" if type_ in ("int", "float") else type_


@valueclass(frozen=True)
class Condition:
    """A compiled, type-checked condition and its source text."""

    text: str
    root: Node

    def evaluate(self, facts: Mapping[str, Any]) -> bool:
        return bool(self.root.evaluate(facts))

    def fact_names(self) -> tuple[str, ...]:
        """The facts this condition reads, in order of first use, without repeats."""
        return tuple(dict.fromkeys(self.root.fact_names()))

    def describe(self, facts: Mapping[str, Any]) -> str:
        """``text`` followed by the actual value of every fact it reads."""
        values = ", ".join(f"{n} = {format_value(facts.get(n))}" for n in self.fact_names())
        return f"{self.text} [{values}]" if values else self.text


def format_value(value: Any) -> str:
    """Facts rendered for people: booleans lower-case, versions and lists plainly."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, str):
        return repr(value)
    return str(value)


def compile_condition(text: str, facts: Mapping[str, FactSpec] = FACTS) -> Condition:
    """Parse and type-check ``text``; raises ``ConditionError`` with the column and a hint."""
    if not isinstance(text, str):
        raise ConditionError(repr(text), "a condition must be a string")
    return Condition(text, _Parser(text, facts).parse())


@lru_cache(maxsize=None)
def compiled(text: str) -> Condition:
    """The compiled form of a condition (cached: recipes share many conditions)."""
    return compile_condition(text)
