"""The project's import graph, read from the source files with `ast` (nothing is
imported), and the two rules it must keep.

Layers: dependencies point one way, ``cluster <- faults <- harness <- reports``. A
module may import its own layer and the layers before it, never one after it. Every
import statement counts, wherever it stands: at the top, inside a function, or under
``if TYPE_CHECKING:`` (a type-only dependency on a later layer is still one).

Units: the second-level packages and modules of each layer (``cluster.amqp``,
``harness.checker``, ``reports.soak`` …; a layer's own ``__init__`` is the unit named
like the layer). Imports between the units of one layer must not form a cycle.
"""

from __future__ import annotations

import ast
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

LAYERS = ("cluster", "faults", "harness", "reports")


@dataclass(frozen=True, order=True)
class Site:
    """Where an import statement stands."""

    path: Path
    line: int

    def __str__(self) -> str:
        return f"{self.path.as_posix()}:{self.line}"


@dataclass(frozen=True, order=True)
class Import:
    """Module ``importer`` imports module ``imported`` at ``site``."""

    site: Site
    importer: str
    imported: str

    def __str__(self) -> str:
        return f"{self.site}: {self.importer} imports {self.imported}"


@dataclass(frozen=True)
class Cycle:
    """Units that import each other in a ring: ``units[0]`` imports ``units[1]`` …, and the
    last imports ``units[0]``; ``edges[i]`` are the imports behind the i-th step."""

    units: tuple[str, ...]
    edges: tuple[tuple[Import, ...], ...]

    def __str__(self) -> str:
        lines = ["cycle " + " -> ".join((*self.units, self.units[0]))]
        for i, unit in enumerate(self.units):
            lines.append(f"  {unit} -> {self.units[(i + 1) % len(self.units)]}:")
            lines.extend(f"    {imp}" for imp in self.edges[i])
        return "\n".join(lines)


def module_name(root: Path, path: Path) -> str:
    """The dotted name of the module in ``path`` (a file below ``root``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files(root: Path, packages: Iterable[str] = LAYERS) -> list[Path]:
    return sorted(path for package in packages if (root / package).is_dir()
                  for path in (root / package).rglob("*.py"))


def read_imports(root: Path, packages: Sequence[str] = LAYERS) -> list[Import]:
    """Every import of a module of ``packages`` by a module of ``packages`` under ``root``;
    ``from a import b`` imports ``a.b`` when that is a module of the tree, else ``a``.
    Sites are given relative to ``root``; each import once, in file and line order."""
    files = source_files(root, packages)
    modules = {module_name(root, path) for path in files}
    found: set[Import] = set()
    for path in files:
        importer = module_name(root, path)
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        site_path = path.relative_to(root)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for imported in _targets(node, importer, is_package, modules):
                if imported.split(".")[0] in packages:
                    found.add(Import(Site(site_path, node.lineno), importer, imported))
    return sorted(found)


def _targets(node: ast.Import | ast.ImportFrom, importer: str, is_package: bool,
             modules: set[str]) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        package = importer.split(".") if is_package else importer.split(".")[:-1]
        base = package[:len(package) - (node.level - 1)]
        stem = ".".join([*base, node.module] if node.module else base)
    else:
        stem = node.module or ""
    targets = []
    for alias in node.names:
        submodule = f"{stem}.{alias.name}"
        targets.append(submodule if submodule in modules else stem)
    return targets


def upward_imports(imports: Iterable[Import], layers: Sequence[str] = LAYERS) -> list[Import]:
    """The imports of a later layer by an earlier one."""
    rank = {layer: i for i, layer in enumerate(layers)}
    return [imp for imp in imports
            if rank[imp.imported.split(".")[0]] > rank[imp.importer.split(".")[0]]]


def unit(module: str) -> str:
    """The second-level package or module a module belongs to (``cluster.amqp`` for
    ``cluster.amqp.connection``; ``cluster`` for the layer's own ``__init__``)."""
    return ".".join(module.split(".")[:2])


Graph = Mapping[str, Mapping[str, Sequence[Import]]]


def unit_graph(imports: Iterable[Import]) -> dict[str, dict[str, list[Import]]]:
    """Imports between different units of the same layer: importer unit -> imported
    unit -> the imports, in file and line order."""
    graph: dict[str, dict[str, list[Import]]] = defaultdict(lambda: defaultdict(list))
    for imp in imports:
        source, target = unit(imp.importer), unit(imp.imported)
        if source != target and source.split(".")[0] == target.split(".")[0]:
            graph[source][target].append(imp)
    return {source: {target: sorted(found) for target, found in targets.items()}
            for source, targets in graph.items()}


def cycles(graph: Graph) -> list[Cycle]:
    """Cycles that, together, use every edge that lies on any cycle: for each such edge
    ``a -> b`` not yet on a reported cycle, the shortest way back from ``b`` to ``a``."""
    found: list[Cycle] = []
    for component in _strongly_connected(graph):
        if len(component) < 2:
            continue
        covered: set[tuple[str, str]] = set()
        for source in sorted(component):
            for target in sorted(graph.get(source, {})):
                if target not in component or (source, target) in covered:
                    continue
                ring = [source, *_shortest_path(graph, target, source, component)[:-1]]
                edges = list(zip(ring, [*ring[1:], ring[0]], strict=True))
                covered.update(edges)
                found.append(Cycle(tuple(ring),
                                   tuple(tuple(graph[a][b]) for a, b in edges)))
    return found


def _shortest_path(graph: Graph, start: str, end: str, within: set[str]) -> list[str]:
    previous: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == end:
            break
        for nxt in sorted(graph.get(node, {})):
            if nxt in within and nxt not in previous:
                previous[nxt] = node
                queue.append(nxt)
    path = [end]
    while (step := previous[path[-1]]) is not None:
        path.append(step)
    return path[::-1]


def _strongly_connected(graph: Graph) -> list[set[str]]:
    """Tarjan's algorithm, without recursion."""
    nodes = sorted(set(graph) | {t for targets in graph.values() for t in targets})
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, {}))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, {})))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    components.append(component)
    return components
