"""The small expression and template language of rule files, checked at load time, evaluated safely.

* Expressions (``gain_us``, ``= …`` values of derived facts): numbers, ``alias.field`` references to
  matched facts, ``+ - * /``, unary minus, parentheses and ``min(…)``, ``max(…)``, ``abs(…)``. Nothing
  else parses, so a rule pack cannot run code.
* Templates (``explain``, ``key``): text with ``{alias.field}`` or ``{alias.field:format}`` placeholders,
  e.g. ``{b.free_ratio:.0%}``; ``{{``/``}}`` are literal braces.

A reference to a field whose value is unknown makes an expression evaluate to None (unknown) and a
placeholder render as ``n/a``.

Rule packs are not trusted to be sensible, so everything is bounded when a rule loads (and ``rules lint``
says so): an expression has at most MAX_EXPRESSION_CHARS characters, MAX_EXPRESSION_NODES parts and
MAX_EXPRESSION_DEPTH levels of nesting; every number in it is finite and at most MAX_CONSTANT in size, and
so is every part computed from numbers alone (``1e308*10`` is refused); a format's width is at most
MAX_FORMAT_WIDTH and its precision at most MAX_FORMAT_PRECISION. At run time an expression whose value is
not a finite number (an overflow on the facts' values) evaluates to None, like an unknown value.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

_BINARY: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
_FUNCTIONS: dict[str, Callable[..., float]] = {"min": min, "max": max, "abs": abs}
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)(?::([^{}]*))?\}|[{}]")

Resolver = Callable[[str, str], Any]

MAX_EXPRESSION_CHARS = 500
MAX_EXPRESSION_NODES = 100
MAX_EXPRESSION_DEPTH = 30
MAX_CONSTANT = 1e15
MAX_FORMAT_WIDTH = 64
MAX_FORMAT_PRECISION = 12
_FORMAT_SPEC = re.compile(
    r"(?:.?[<>=^])?[-+ ]?z?#?0?(?P<width>\d+)?[_,]?(?:\.(?P<precision>\d+))?[bcdeEfFgGnosxX%]?", re.DOTALL)


class ExpressionError(ValueError):
    """An expression or template that is not allowed; the message says which part."""


@dataclass(frozen=True)
class Reference:
    alias: str
    field: str


class Expression:
    """A parsed, validated arithmetic expression over fact fields."""

    def __init__(self, text: str) -> None:
        self.text = text
        shown = text if len(text) <= 80 else text[:77] + "…"
        if len(text) > MAX_EXPRESSION_CHARS:
            raise ExpressionError(f"expression {shown!r} is longer than {MAX_EXPRESSION_CHARS} characters")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as exc:
            raise ExpressionError(f"expression {shown!r} does not parse ({exc.msg})") from exc
        except (RecursionError, MemoryError, ValueError, OverflowError) as exc:
            raise ExpressionError(f"expression {shown!r} does not parse ({type(exc).__name__})") from exc
        self._tree = tree.body
        self.references: list[Reference] = []
        nodes = sum(1 for _ in ast.walk(self._tree))
        if nodes > MAX_EXPRESSION_NODES:
            raise ExpressionError(f"expression {shown!r} has {nodes} parts, more than {MAX_EXPRESSION_NODES}")
        depth = _depth(self._tree)
        if depth > MAX_EXPRESSION_DEPTH:
            raise ExpressionError(f"expression {shown!r} nests {depth} levels deep, more than {MAX_EXPRESSION_DEPTH}")
        self._check(self._tree)
        self._check_constant_parts(self._tree)

    def evaluate(self, resolve: Resolver) -> Any:
        """Evaluate with ``resolve(alias, field)``; None if any referenced value is unknown."""
        try:
            value = self._eval(self._tree, resolve)
        except (_Unknown, ArithmeticError, RecursionError):  # unknown, divided by zero, overflowed
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not _finite(value):
            return None  # an overflow: as unknown as a missing value
        return value

    def _check_constant_parts(self, node: ast.AST) -> None:
        """Every part made of numbers alone must compute to a finite number of bounded size."""
        if not any(isinstance(n, ast.Attribute) for n in ast.walk(node)):
            try:
                value = self._eval(node, lambda _alias, _field: None)
            except ZeroDivisionError as exc:
                raise ExpressionError(f"expression {self.text!r}: {ast.unparse(node)!r} divides by zero") from exc
            except (ArithmeticError, _Unknown) as exc:
                raise ExpressionError(f"expression {self.text!r}: {ast.unparse(node)!r} overflows") from exc
            if not _finite(value) or abs(value) > MAX_CONSTANT:
                raise ExpressionError(f"expression {self.text!r}: {ast.unparse(node)!r} is not a finite number of at "
                                      f"most {MAX_CONSTANT:.0e}")
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr) and not isinstance(child, ast.Name):  # a Name is a function's name
                self._check_constant_parts(child)

    def _check(self, node: ast.AST) -> None:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise ExpressionError(f"expression {self.text!r}: only numbers may appear as constants")
            if not _finite(node.value) or abs(node.value) > MAX_CONSTANT:
                raise ExpressionError(f"expression {self.text!r}: the number {ast.unparse(node)[:20]} is not finite or "
                                      f"larger than {MAX_CONSTANT:.0e}")
        elif isinstance(node, ast.Attribute):
            if not isinstance(node.value, ast.Name):
                raise ExpressionError(f"expression {self.text!r}: references are written alias.field")
            self.references.append(Reference(node.value.id, node.attr))
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            self._check(node.left)
            self._check(node.right)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            self._check(node.operand)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
            if node.keywords or not node.args:
                raise ExpressionError(f"expression {self.text!r}: {node.func.id}() takes positional arguments")
            for arg in node.args:
                self._check(arg)
        else:
            allowed = "numbers, alias.field, + - * /, parentheses, min(), max(), abs()"
            raise ExpressionError(f"expression {self.text!r}: {ast.unparse(node)!r} is not allowed ({allowed})")

    def _eval(self, node: ast.AST, resolve: Resolver) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Attribute):
            value = resolve(node.value.id, node.attr)  # type: ignore[attr-defined]
            if value is None:
                raise _Unknown
            return value
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](self._eval(node.left, resolve), self._eval(node.right, resolve))
        if isinstance(node, ast.UnaryOp):
            value = self._eval(node.operand, resolve)
            return -value if isinstance(node.op, ast.USub) else value
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        return _FUNCTIONS[node.func.id](*(self._eval(arg, resolve) for arg in node.args))


class Template:
    """A parsed text template with ``{alias.field[:format]}`` placeholders."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.parts: list[str | tuple[Reference, str]] = []
        position = 0
        for match in _PLACEHOLDER.finditer(text):
            self.parts.append(text[position : match.start()])
            token = match.group(0)
            if token in ("{{", "}}"):
                self.parts.append(token[0])
            elif match.group(1) is None:
                raise ExpressionError(
                    f"template {text!r}: stray {token!r} at position {match.start()}; placeholders are "
                    "{alias.field} or {alias.field:format}, literal braces are {{ and }}"
                )
            else:
                self.parts.append((Reference(match.group(1), match.group(2)), match.group(3) or ""))
            position = match.end()
        self.parts.append(text[position:])
        for _reference, spec in self.references:
            check_format_size(spec)

    @property
    def references(self) -> list[tuple[Reference, str]]:
        return [p for p in self.parts if isinstance(p, tuple)]

    def render(self, resolve: Resolver) -> str:
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            reference, spec = part
            out.append(format_value(resolve(reference.alias, reference.field), spec))
        return "".join(out)


def format_value(value: Any, spec: str) -> str:
    """Format one placeholder value; unknown values are 'n/a', a spec that does not fit is ignored."""
    if value is None:
        return "n/a"
    try:
        check_format_size(spec)
        return format(value, spec)
    except (ValueError, TypeError, OverflowError, MemoryError, ExpressionError):
        return str(value)


def check_format_size(spec: str) -> None:
    """Raise ExpressionError for a format spec that is not one, or whose width or precision is over the caps."""
    match = _FORMAT_SPEC.fullmatch(spec)
    if match is None:
        raise ExpressionError(f"format spec {spec[:40]!r} is not a format ([[fill]align][sign][#][0][width][,][.precision][type])")
    width, precision = match.group("width"), match.group("precision")
    if width is not None and (len(width) > 4 or int(width) > MAX_FORMAT_WIDTH):
        raise ExpressionError(f"format spec {spec[:40]!r}: a width over {MAX_FORMAT_WIDTH} characters")
    if precision is not None and (len(precision) > 4 or int(precision) > MAX_FORMAT_PRECISION):
        raise ExpressionError(f"format spec {spec[:40]!r}: a precision over {MAX_FORMAT_PRECISION} digits")


def check_format_spec(spec: str, sample: Any) -> None:
    """Raise ExpressionError if ``spec`` cannot format a value like ``sample`` (or is over the size caps)."""
    check_format_size(spec)
    try:
        format(sample, spec)
    except (ValueError, TypeError, OverflowError, MemoryError) as exc:
        raise ExpressionError(f"format spec {spec!r} does not fit a {type(sample).__name__} ({exc})") from exc


def resolver(matched: Mapping[str, Mapping[str, Any]]) -> Resolver:
    """A resolver over matched facts given as alias → field values."""

    def resolve(alias: str, field: str) -> Any:
        return matched.get(alias, {}).get(field)

    return resolve


class _Unknown(Exception):
    pass


def _finite(value: Any) -> bool:
    """A number that is finite as a float (a huge int is not: it cannot become one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _depth(node: ast.AST) -> int:
    depth, level = 0, [node]
    while level:
        depth += 1
        level = [child for parent in level for child in ast.iter_child_nodes(parent)]
    return depth
