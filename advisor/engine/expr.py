"""The small expression and template language of rule files, checked at load time, evaluated safely.

* Expressions (``gain_us``, ``= …`` values of derived facts): numbers, ``alias.field`` references to
  matched facts, ``+ - * /``, unary minus, parentheses and ``min(…)``, ``max(…)``, ``abs(…)``. Nothing
  else parses, so a rule pack cannot run code.
* Templates (``explain``, ``key``): text with ``{alias.field}`` or ``{alias.field:format}`` placeholders,
  e.g. ``{b.free_ratio:.0%}``; ``{{``/``}}`` are literal braces.

A reference to a field whose value is unknown makes an expression evaluate to None (unknown) and a
placeholder render as ``n/a``.
"""

from __future__ import annotations

import ast
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
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as exc:
            raise ExpressionError(f"expression {text!r} does not parse ({exc.msg})") from exc
        self._tree = tree.body
        self.references: list[Reference] = []
        self._check(self._tree)

    def evaluate(self, resolve: Resolver) -> Any:
        """Evaluate with ``resolve(alias, field)``; None if any referenced value is unknown."""
        try:
            return self._eval(self._tree, resolve)
        except _Unknown:
            return None
        except ZeroDivisionError:
            return None

    def _check(self, node: ast.AST) -> None:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise ExpressionError(f"expression {self.text!r}: only numbers may appear as constants")
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
        return format(value, spec)
    except (ValueError, TypeError):
        return str(value)


def check_format_spec(spec: str, sample: Any) -> None:
    """Raise ExpressionError if ``spec`` cannot format a value like ``sample``."""
    try:
        format(sample, spec)
    except (ValueError, TypeError) as exc:
        raise ExpressionError(f"format spec {spec!r} does not fit a {type(sample).__name__} ({exc})") from exc


def resolver(matched: Mapping[str, Mapping[str, Any]]) -> Resolver:
    """A resolver over matched facts given as alias → field values."""

    def resolve(alias: str, field: str) -> Any:
        return matched.get(alias, {}).get(field)

    return resolve


class _Unknown(Exception):
    pass
