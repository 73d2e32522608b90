"""Imports follow the data: registry -> episode -> trackers/judging -> scoring -> run -> publish.
Read from the source (every import, a function's own included), so a deferred import counts too."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

from emobench.run.runner import ROOT

PACKAGE = ROOT / "emobench"
# What runs after each stage: a stage's modules import none of these.
DOWNSTREAM = ("emobench.run", "emobench.publish",
              "emobench.gate", "emobench.validation", "emobench.viewer", "emobench.cli", "emobench.play",
              "emobench.importers", "emobench.external", "emobench.env", "emobench.anchor", "emobench.board",
              "emobench.inspect_task")


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return {name for name in found if name.split(".")[0] == "emobench"}


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(f"{p}.") for p in prefixes)


@pytest.mark.parametrize(("stage", "later"), [
    ("emobench.registry", ("emobench.episode", "emobench.trackers", "emobench.judging", "emobench.scoring", *DOWNSTREAM)),
    ("emobench.trackers", ("emobench.judging", "emobench.scoring", *DOWNSTREAM)),
    ("emobench.scoring", ("emobench.judging", *DOWNSTREAM)),
    ("emobench.judging", DOWNSTREAM),
    # Every stage reads the config, so it reads none of them.
    ("emobench.config", ("emobench.registry", "emobench.episode", "emobench.trackers", "emobench.judging", "emobench.scoring",
                         *DOWNSTREAM)),
    # The run reads cards through the registry, never through the front doors that make them.
    ("emobench.run", tuple(d for d in DOWNSTREAM if d != "emobench.run")),
    # The inspect task is a front door beside `run`: it plays through the run's bindings, read by the importers.
    ("emobench.inspect_task", tuple(d for d in DOWNSTREAM if d not in ("emobench.run", "emobench.inspect_task"))),
])
def test_a_stage_imports_nothing_that_runs_after_it(stage: str, later: tuple[str, ...]) -> None:
    back = sorted(f"{name} imports {imported}" for name, path in _modules().items() if _under(name, (stage,))
                  for imported in _imports(path) if _under(imported, later))
    assert back == []


def test_no_import_circle() -> None:
    modules = _modules()
    graph: TopologicalSorter[str] = TopologicalSorter()
    for name, path in modules.items():
        for imported in _imports(path):
            while imported not in modules:  # `from emobench.x import name`: the module is emobench.x
                imported = imported.rpartition(".")[0]
            if imported not in (name, "emobench"):
                graph.add(name, imported)
    try:
        graph.prepare()
    except CycleError as exc:
        pytest.fail(f"import circle: {' -> '.join(exc.args[1])}")
