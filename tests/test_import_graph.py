"""Dependencies point one way, ``cluster <- faults <- harness <- reports``, and the
units of each layer import each other without a cycle; read from the sources with
`ast` (`tests.import_graph`). The checker itself is tried on small trees of its own."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.import_graph import (
    LAYERS,
    Import,
    Site,
    cycles,
    read_imports,
    unit,
    unit_graph,
    upward_imports,
)

ROOT = Path(__file__).resolve().parent.parent


def check_layers(root: Path) -> None:
    upward = upward_imports(read_imports(root))
    if upward:
        pytest.fail("imports of a later layer (the order is " + " <- ".join(LAYERS) + "; "
                    "move the code down or pass it in from above):\n"
                    + "\n".join(f"  {imp}" for imp in upward), pytrace=False)


def check_cycles(root: Path) -> None:
    found = cycles(unit_graph(read_imports(root)))
    if found:
        pytest.fail("import cycles between the units of a layer (break one import of "
                    "each):\n" + "\n".join(str(cycle) for cycle in found), pytrace=False)


def test_the_real_tree_is_read() -> None:
    """The checks below see every layer (a wrong root would pass them all)."""
    importers = {unit(imp.importer).split(".")[0] for imp in read_imports(ROOT)}
    assert importers == set(LAYERS)


def test_no_layer_imports_a_later_one() -> None:
    check_layers(ROOT)


def test_no_import_cycle_between_the_units_of_a_layer() -> None:
    check_cycles(ROOT)


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Every layer's package, plus ``files`` (path -> source)."""
    for layer in LAYERS:
        (root / layer).mkdir()
        (root / layer / "__init__.py").write_text("")
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.parent != root and not (path.parent / "__init__.py").exists():
            (path.parent / "__init__.py").write_text("")
        path.write_text(textwrap.dedent(source))
    return root


CLEAN = {
    "cluster/core/broker.py": "import json\nfrom cluster.store import log\n",
    "cluster/store/log.py": "from . import segment\nfrom .segment import Segment\n",
    "cluster/store/segment.py": "from cluster.store import log  # a cycle inside a unit\n",
    "faults/nemesis/run.py": "from cluster.core import broker\nfrom faults import seeds\n",
    "faults/seeds.py": "import random\n",
    "harness/run/command.py": """\
        from faults.nemesis.run import go
        from harness.checker import check
        def later():
            from cluster.store.log import Log
        """,
    "harness/checker/__init__.py": "from ..history import read\n",
    "harness/history/__init__.py": "",
    "reports/cli.py": "import harness.run.command\nfrom reports.render import page\n",
    "reports/render.py": "from harness.checker import check\n",
}


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    root = write_tree(tmp_path, CLEAN)
    check_layers(root)
    check_cycles(root)


def test_relative_and_submodule_imports_resolve(tmp_path: Path) -> None:
    root = write_tree(tmp_path, CLEAN)
    found = {(imp.importer, imp.imported) for imp in read_imports(root)}
    assert ("cluster.store.log", "cluster.store.segment") in found  # from . import segment
    assert ("harness.checker", "harness.history") in found  # from ..history in an __init__
    assert ("faults.nemesis.run", "faults.seeds") in found  # from faults import seeds
    assert ("cluster.core.broker", "json") not in found  # outside the layers


@pytest.mark.parametrize("where, source, line", [
    ("faults/process/local.py", "from harness.process_node import NodeProcess\n", 1),
    ("cluster/node.py", "import reports\n", 1),
    ("harness/run/command.py", "def summary():\n    from reports import render\n", 2),
    ("harness/run/command.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                               "    from reports.load import RunReport\n", 3),
])
def test_an_upward_import_fails(tmp_path: Path, where: str, source: str, line: int) -> None:
    root = write_tree(tmp_path, {**CLEAN, where: source})
    with pytest.raises(pytest.fail.Exception, match=f"{where}:{line}: "):
        check_layers(root)
    [upward] = upward_imports(read_imports(root))
    assert upward.site == Site(Path(where), line)


def test_a_cycle_fails_and_names_every_import_on_it(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {
        **CLEAN,
        "cluster/amqp/channel.py": "from cluster.core.broker import Broker\n",
        "cluster/core/broker.py": "import json\n\nfrom cluster.ha import queue\n",
        "cluster/ha/queue.py": "def later():\n    from cluster.amqp import channel\n",
    })
    check_layers(root)
    with pytest.raises(pytest.fail.Exception) as failure:
        check_cycles(root)
    message = str(failure.value)
    assert "cycle cluster.amqp -> cluster.core -> cluster.ha -> cluster.amqp" in message
    for site in ("cluster/amqp/channel.py:1", "cluster/core/broker.py:3",
                 "cluster/ha/queue.py:2"):
        assert site in message
    [cycle] = cycles(unit_graph(read_imports(root)))
    assert cycle.units == ("cluster.amqp", "cluster.core", "cluster.ha")
    assert cycle.edges[2] == (Import(Site(Path("cluster/ha/queue.py"), 2),
                                     "cluster.ha.queue", "cluster.amqp.channel"),)


def test_every_edge_of_a_tangle_is_on_a_reported_cycle(tmp_path: Path) -> None:
    """Two cycles through one unit: both are reported, not just the first found."""
    root = write_tree(tmp_path, {
        "harness/a.py": "from harness import b, c\n",
        "harness/b.py": "from harness import a\n",
        "harness/c.py": "import harness.a\n",
    })
    found = cycles(unit_graph(read_imports(root)))
    assert sorted(cycle.units for cycle in found) == [("harness.a", "harness.b"),
                                                      ("harness.a", "harness.c")]
