"""A self-contained HTML report as a fragment of another page (how a report shows itself in Jupyter)."""

from __future__ import annotations

import itertools
import re

SCOPE_CLASS = "advisor-report"
_STYLE = re.compile(r"<style[^>]*>(.*?)</style>", re.S | re.I)
_BODY = re.compile(r"<body[^>]*>(.*)</body>", re.S | re.I)
_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_PAGE_SELECTOR = re.compile(r"^(?::root|html|body)(?![\w-])")
_FRAGMENT_IDS = itertools.count(1)


def html_fragment(document: str, scope: str = SCOPE_CLASS) -> str:
    """A self-contained HTML document as one ``<div>`` to put inside another page.

    Its style sheet is kept, with every rule confined to the div (``body`` and ``:root`` become the div
    itself), and its element ids get a prefix of their own, so two reports on one page link each to its own
    findings and neither restyles the page around it.
    """
    body = _BODY.search(document)
    if body is None:
        raise ValueError("not an HTML document: no <body>")
    # notebooks style tables themselves (JupyterLab: a fixed layout, 12 px, right-aligned cells, striped and
    # highlighted rows): the report's tables keep their own look, these rules being as specific as JupyterLab's and
    # later on the page (the rest of the look is the report's style sheet, scoped below)
    css = "\n".join([f".{scope} table {{table-layout: auto; font-size: inherit;}}",
                     f".{scope} td, .{scope} th {{line-height: inherit; max-width: none;}}",
                     f".{scope} tbody tr:nth-child(odd), .{scope} tbody tr:hover {{background: transparent;}}",
                     *(scope_css(block, f".{scope}") for block in _STYLE.findall(document))])
    prefix = f"{scope}-{next(_FRAGMENT_IDS)}-"
    content = re.sub(r'(\sid=")([^"]+")', rf"\1{prefix}\2", body.group(1))
    content = re.sub(r'(\s(?:xlink:)?href="#)([^"]+")', rf"\1{prefix}\2", content)  # links, and the charts' <use>
    content = re.sub(r'(\sclip-path="url\(#)([^)"]+\)")', rf"\1{prefix}\2", content)  # the charts' clip paths
    return f'<div class="{scope}">\n<style>\n{css}\n</style>\n{content.strip()}\n</div>\n'


def scope_css(css: str, scope: str) -> str:
    """Every rule of ``css`` confined to the elements inside ``scope`` (a selector), @media blocks included."""
    css = _COMMENT.sub("", css)
    rules = []
    position = 0
    while True:
        start = css.find("{", position)
        if start < 0:
            break
        prelude = css[position:start].strip()
        end, depth = start + 1, 1
        while depth and end < len(css):
            depth += {"{": 1, "}": -1}.get(css[end], 0)
            end += 1
        block = css[start + 1 : end - 1]
        if prelude.startswith(("@media", "@supports", "@container")):
            rules.append(f"{prelude} {{\n{scope_css(block, scope)}\n}}")
        elif prelude.startswith("@"):  # @font-face, @keyframes, @page: not about elements of the page
            rules.append(f"{prelude} {{{block}}}")
        else:
            rules.append(f"{', '.join(_scoped(s, scope) for s in _selectors(prelude))} {{{block.strip()}}}")
        position = end
    return "\n".join(rules)


def _selectors(prelude: str) -> list[str]:
    """The selectors of a rule's prelude, split at commas outside parentheses (``:is(a, b)`` stays whole)."""
    parts, depth, current = [], 0, []
    for char in prelude:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def _scoped(selector: str, scope: str) -> str:
    if selector == "*":
        return f"{scope}, {scope} *"
    page = _PAGE_SELECTOR.match(selector)
    if page:  # the page itself is the fragment's container
        return scope + selector[page.end():]
    return f"{scope} {selector}"
