"""Translate rule-file regexes into the dialect durable-rules runs, rejecting what it cannot run.

Rule authors write a documented subset of Python's regex syntax; the pattern must match the *whole*
value (as ``re.fullmatch``). durable-rules' own dialect differs: escapes use ``%`` instead of a
backslash, a backslash is a literal character, ``^``/``$``/``(?i)`` do not work, a leading ``-`` in a
character class is an error, and an invalid pattern is accepted silently. So every pattern is parsed
here and either translated or rejected with a message that says what to write instead.

Supported: literal characters; ``.``; ``*``, ``+``, ``?`` and ``{m}``/``{m,n}`` after an atom; groups
``(…)`` with ``|``; character classes ``[…]``/``[^…]`` with ranges; escapes ``\\d`` (digit), ``\\w``
(letter, digit or underscore) and a backslash before any punctuation character to make it literal.
Case-insensitive matching is the ``imatches`` operator, not ``(?i)``. ``.`` matches one byte, so
patterns over non-ASCII text should use ``.*`` or ``.+`` around it.

A repetition nested inside a repeated group (``(a+)+``, ``(a*b?)*``, ``(x{1,5})+``) is refused: Python's
``re``, which ``advisor explain`` and ``rules test`` use to show each comparison, backtracks exponentially on
such patterns when the value does not match.
"""

from __future__ import annotations

import re

_META = set(".*+?{}()[]|\\")
_ESCAPABLE = set("\\.*+?{}()[]|^$-/#@:%&~!'\"<>=,;` ")
_CLASS_ESCAPES = {"d": "0-9", "w": "A-Za-z0-9_"}
_QUANTIFIER = re.compile(r"\{(\d+)(,(\d*))?\}")


class UnsupportedRegex(ValueError):
    """The pattern cannot be run by the rule engine; the message explains why and what to use."""


def translate(pattern: str) -> str:
    """Return the durable-rules spelling of ``pattern``; raise UnsupportedRegex if it cannot run."""
    try:
        re.compile(pattern)
    except re.error as exc:
        raise UnsupportedRegex(f"is not a valid regular expression ({exc})") from exc
    if not pattern:
        raise UnsupportedRegex("is empty")
    return _Translator(pattern).run()


class _Translator:
    def __init__(self, pattern: str) -> None:
        self.src = pattern
        self.pos = 0
        self.out: list[str] = []
        self.atom_open = False  # whether the last emitted token can take a quantifier
        self.repeated = False  # whether a repetition came earlier in the pattern
        self.groups: list[bool] = []  # for each open group: whether a repetition occurs inside it
        self.closed_repeats = False  # the last token is ')' of a group with a repetition inside

    def run(self) -> str:
        while self.pos < len(self.src):
            ch = self.src[self.pos]
            if ch == "\\":
                self._escape()
            elif ch == "[":
                self._char_class()
            elif ch in "*+?":
                self._quantifier(ch)
            elif ch == "{":
                self._counted()
            elif ch == "(":
                if self.src.startswith("(?", self.pos):
                    raise UnsupportedRegex(
                        "uses '(?…)' (flags, non-capturing or look-around groups), which the rule engine "
                        "cannot run; use a plain group '(…)', and the 'imatches' operator for case-insensitive"
                    )
                if self.repeated:
                    self._check_alternation()
                self._emit("(", atom=False)
                self.groups.append(False)
            elif ch == ")":
                inner = self.groups.pop() if self.groups else False
                if inner and self.groups:
                    self.groups[-1] = True
                self._emit(")", atom=True)
                self.closed_repeats = inner
            elif ch == "|":
                self._emit("|", atom=False)
            elif ch in "^$":
                raise UnsupportedRegex(
                    f"uses the anchor {ch!r}; patterns always match the whole value, so drop the anchor "
                    "(and add '.*' where a partial match was meant)"
                )
            elif ch == ".":
                self._emit(".", atom=True)
            elif ch == "%":
                self._emit("%%", atom=True)
            else:
                self._emit(ch, atom=True)
            self.pos += 1
        return "".join(self.out)

    def _check_alternation(self) -> None:
        """durable-rules mis-matches (or refuses) an alternation of multi-character branches after a repetition."""
        depth, index, branches, current = 0, self.pos + 1, [], ""
        while index < len(self.src):
            ch = self.src[index]
            if ch == "\\":
                current += self.src[index : index + 2]
                index += 2
                continue
            if ch == "(":
                depth += 1
            elif ch == ")":
                if depth == 0:
                    break
                depth -= 1
            elif ch == "|" and depth == 0:
                branches.append(current)
                current = ""
                index += 1
                continue
            current += ch
            index += 1
        branches.append(current)
        if len(branches) > 1 and any(len(b.replace("\\", "")) > 1 for b in branches):
            raise UnsupportedRegex(
                "has an alternation of multi-character branches after a repetition ('*', '+' or '{m,n}'), which "
                "the rule engine mis-matches; use an 'any:' of separate conditions, or start the pattern with the group"
            )

    def _emit(self, text: str, atom: bool) -> None:
        self.out.append(text)
        self.atom_open = atom
        self.closed_repeats = False

    def _repetition(self, upper: int | None) -> None:
        """Note a quantifier that repeats (``upper`` None: unbounded); refuse it on a group that repeats inside."""
        if upper is not None and upper < 2:
            return
        if self.closed_repeats:
            raise UnsupportedRegex(
                "nests a repetition inside a repeated group (like '(a+)+'), which takes exponential time on values "
                "that do not match; repeat the group or its inside, not both (e.g. '(ab)+' or 'a+')")
        if self.groups:
            self.groups[-1] = True

    def _escape(self) -> None:
        self.pos += 1
        ch = self.src[self.pos]
        if ch in _CLASS_ESCAPES:
            self._emit(f"[{_CLASS_ESCAPES[ch]}]", atom=True)
        elif ch == "\\":
            self._emit("\\", atom=True)
        elif ch == "-":
            self._emit("-", atom=True)
        elif ch == "%":
            self._emit("%%", atom=True)
        elif ch in _ESCAPABLE:
            self._emit(f"%{ch}" if ch in _META else ch, atom=True)
        else:
            raise UnsupportedRegex(
                f"uses the escape '\\{ch}', which the rule engine cannot run; supported escapes are \\d, \\w "
                "and a backslash before punctuation"
            )

    def _quantifier(self, ch: str) -> None:
        if not self.atom_open:
            raise UnsupportedRegex(f"has the quantifier {ch!r} with nothing to repeat at position {self.pos}")
        if self.pos + 1 < len(self.src) and self.src[self.pos + 1] in "?+":
            raise UnsupportedRegex("uses a lazy or possessive quantifier, which the rule engine cannot run")
        self._repetition(1 if ch == "?" else None)
        self.repeated = True
        self._emit(ch, atom=False)

    def _counted(self) -> None:
        match = _QUANTIFIER.match(self.src, self.pos)
        if match is None or not self.atom_open:
            raise UnsupportedRegex(f"has a '{{' at position {self.pos} that is not a repetition count; write '\\{{'")
        if match.group(2) is not None and not match.group(3):
            raise UnsupportedRegex("uses an open repetition '{m,}'; write '{m,n}' or a '+'/'*' instead")
        self._repetition(int(match.group(3) or match.group(1)) if len(match.group(3) or match.group(1)) < 6 else None)
        self.repeated = True
        self._emit(match.group(0), atom=False)
        self.pos = match.end() - 1
        if self.pos + 1 < len(self.src) and self.src[self.pos + 1] in "?+":
            raise UnsupportedRegex("uses a lazy or possessive quantifier, which the rule engine cannot run")

    def _char_class(self) -> None:
        end = self.pos + 1
        body: list[str] = []
        if end < len(self.src) and self.src[end] == "^":
            body.append("^")
            end += 1
        members: list[str] = []
        dash_literal = False
        while end < len(self.src) and self.src[end] != "]":
            ch = self.src[end]
            if ch == "\\":
                end += 1
                nxt = self.src[end]
                if nxt in _CLASS_ESCAPES:
                    members.append(_CLASS_ESCAPES[nxt])
                elif nxt == "-":
                    dash_literal = True
                elif nxt == "]":
                    members.append("%]")
                elif nxt == "%":
                    members.append("%%")
                elif nxt in _ESCAPABLE:
                    members.append(nxt)
                else:
                    raise UnsupportedRegex(f"uses the escape '\\{nxt}' inside a character class")
            elif ch == "-" and (not members or end + 1 < len(self.src) and self.src[end + 1] == "]"):
                dash_literal = True
            elif ch == "[":
                raise UnsupportedRegex("nests '[' inside a character class; write '\\[' for a literal bracket")
            elif ch == "%":
                members.append("%%")
            else:
                members.append(ch)
            end += 1
        if not members and not dash_literal:
            raise UnsupportedRegex("has an empty character class")
        body.extend(members)
        if dash_literal:
            body.append("-")  # the engine accepts a literal dash only at the end of a class
        self._emit("[" + "".join(body) + "]", atom=True)
        self.pos = end
