"""The layer rule (docs/architecture.md): advisor's folders and top-level modules form layers, and a module imports
only from its own layer or the layers below it, with no cycle between folders or modules.

Read from the source (ast), so imports inside functions count as much as those at the top; imports under
``if TYPE_CHECKING:`` are for annotations only (they import nothing at run time) and do not count.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "advisor"

# Lowest first. A unit is a folder of advisor/ or a top-level module ("advisor" is the package's __init__.py).
LAYERS: tuple[tuple[str, ...], ...] = (
    # foundations: errors, texts, indented JSON, the shared vocabularies (severity, verdict, category, platform), versions, bundled
    # data, the gain budget, a run's settings (RunOptions), process pools, interval arithmetic, tests over columns of
    # names (each distinct name once), and the seeds'
    # formulas (MC2 tiles, HCCL_BUFFSIZE, parallel strategy)
    ("errors", "text", "jsontext", "vocabulary", "version", "resources", "budget", "runoptions", "parallel", "intervals",
     "names", "planners"),
    # read: a path on disk becomes a Profile of typed tables; what the profile does not record comes from the user
    ("ingest",),
    ("usercontext", "yamlcache"),
    # compute: facts from the tables
    ("facts",),
    # match: the rule engine, then rule packs, knowledge and the tools that write and check them
    ("engine",),
    ("knowledge", "gates", "scaffold", "validation", "rulebook", "lint", "ruledocs", "packbuild"),
    # show: the renderers (they name the report models in annotations only), then the documents they render,
    # which render themselves in Jupyter
    ("render",),
    ("frames", "report", "comparison"),
    # run: rank the findings, analyse a cluster's ranks, diagnose a profile, compare two, explain a rule
    ("findings", "distributed", "cluster"),
    ("diagnose",),
    ("compare", "explain", "ruletests"),
    # entry points
    ("api", "mcp", "mcprun", "mcpviews"),
    ("cli", "__main__", "advisor"),
)
LAYER = {unit: index for index, units in enumerate(LAYERS) for unit in units}


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ["advisor", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


MODULES = _modules()


def unit_of(module: str) -> str:
    """The folder (advisor/<folder>/…) or top-level module a module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "advisor"


def _is_type_checking(node: ast.If) -> bool:
    return (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING") or (
        isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")


def _runtime_nodes(tree: ast.AST):
    """Every node but those under ``if TYPE_CHECKING:`` (its ``else`` branch runs and is kept)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))


def _resolve(name: str) -> str:
    """The advisor module an imported name is in (``advisor.x.y`` where y is a function: ``advisor.x``)."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imports_of(module: str) -> list[tuple[str, int]]:
    """(imported advisor module, line) for every import the module runs, wherever it is in the file."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return runtime_imports(path.read_text(encoding="utf-8"), package)


def runtime_imports(source: str, package: str) -> list[tuple[str, int]]:
    """The advisor modules that code in ``package`` imports at run time, with their lines."""
    found = []
    for node in _runtime_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(_resolve(a.name), node.lineno) for a in node.names if a.name.split(".")[0] == "advisor"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            if base.split(".")[0] == "advisor":
                found += [(_resolve(f"{base}.{a.name}"), node.lineno) for a in node.names]
    return found


def _edges() -> dict[tuple[str, str], list[str]]:
    """(importing unit, imported unit) -> where, for imports between different units."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module in MODULES:
        for target, line in sorted(set(imports_of(module))):
            if unit_of(module) != unit_of(target):
                edges.setdefault((unit_of(module), unit_of(target)), []).append(
                    f"{MODULES[module].relative_to(PACKAGE.parent)}:{line} imports {target}")
    return edges


def test_every_folder_and_top_level_module_has_a_layer():
    units = {unit_of(m) for m in MODULES}
    assert not units - LAYER.keys(), f"place these in LAYERS (and docs/architecture.md): {sorted(units - LAYER.keys())}"
    assert not LAYER.keys() - units, f"LAYERS names what advisor/ no longer has: {sorted(LAYER.keys() - units)}"


def test_no_module_imports_from_a_layer_above_its_own():
    upward = [where for (source, target), places in sorted(_edges().items()) if LAYER[target] > LAYER[source]
              for where in places]
    assert not upward, "imports from a higher layer:\n" + "\n".join(upward)


def test_no_import_cycle_between_folders_or_top_level_modules():
    graph: dict[str, set[str]] = {}
    for source, target in _edges():
        graph.setdefault(source, set()).add(target)
    cycles = [component for component in _strongly_connected(graph) if len(component) > 1]
    edges = _edges()
    detail = [f"{' ↔ '.join(sorted(c))}: "
              + "; ".join(w for (s, t), places in edges.items() if s in c and t in c for w in places) for c in cycles]
    assert not cycles, "import cycles:\n" + "\n".join(detail)


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def test_the_check_sees_imports_inside_functions_and_skips_annotation_only_ones():
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import errors\n"
        "if TYPE_CHECKING:\n"
        "    from advisor.report import Report\n"
        "def to_html(report):\n"
        "    from advisor.render.documents import render_html\n"
        "    import advisor.render.fragment\n"
    )
    assert sorted(runtime_imports(source, "advisor")) == [
        ("advisor.errors", 2), ("advisor.render.documents", 6), ("advisor.render.fragment", 7)]


ARCHITECTURE_DOC = PACKAGE.parent / "docs" / "architecture.md"


def test_the_architecture_doc_maps_every_module():
    doc = ARCHITECTURE_DOC.read_text(encoding="utf-8")
    mapped = set(re.findall(r"^\| `(advisor/[\w/]+\.py)` \| \S", doc, re.MULTILINE))
    files = {str(path.relative_to(PACKAGE.parent)) for path in MODULES.values()}
    assert not files - mapped, f"docs/architecture.md's folder map lacks: {sorted(files - mapped)}"
    assert not mapped - files, f"docs/architecture.md maps modules that are gone: {sorted(mapped - files)}"


def test_the_architecture_doc_lists_the_layers_of_this_test():
    block = ARCHITECTURE_DOC.read_text(encoding="utf-8").split("The layers, lowest first", 1)[1].split("```")[1]
    listed = [tuple(line.split(". ", 1)[1].split(", ")) for line in block.strip().splitlines()]
    assert listed == list(LAYERS)


def _platform_branches(source: str) -> list[int]:
    """Lines that test a ``platform`` (a name or an attribute) against a literal: ``==``/``!=``/``in`` a string or a
    collection of strings, or ``.startswith``/``.endswith``."""
    def is_platform(node: ast.AST) -> bool:
        return (isinstance(node, ast.Name) and node.id == "platform") or (
            isinstance(node, ast.Attribute) and node.attr == "platform")

    def literal(node: ast.AST) -> bool:
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(literal(element) for element in node.elts)
        return isinstance(node, ast.Constant) and isinstance(node.value, str)

    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(is_platform(s) for s in sides) and any(literal(s) for s in sides):
                lines.append(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("startswith", "endswith") and is_platform(node.func.value)):
            lines.append(node.lineno)
    return sorted(lines)


def test_the_fact_families_read_platform_differences_as_data_not_branches():
    """Platform differences live in facts/platforms.py's PLATFORM_TRAITS and the tables' Provenance; a fact
    module that asks ``rank.platform == "gpu"`` undoes a reader's work instead."""
    found = {str(path.relative_to(PACKAGE.parent)): lines for path in sorted((PACKAGE / "facts").glob("*.py"))
             if (lines := _platform_branches(path.read_text(encoding="utf-8")))}
    assert found == {}
    probe = ('if rank.platform == "gpu":\n    pass\nx = "ascend" != meta.platform\ny = platform in ("gpu",)\n'
             'z = rank.platform.startswith("asc")\nw = base.platform == target.platform\n')
    assert _platform_branches(probe) == [1, 3, 4, 5]
