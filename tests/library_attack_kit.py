"""The library's adversarial kit (issue 39): seeded generators write paraphrased variants of
each fault class, plant them in a copy of a small library, run the checks and count what they
catch, per class and language.

A fault class is a `FaultClass`: its name and language, a generator `variants(rng)` of
`Plant`s, and `plant(root, variant)`, which writes one variant into a library copy. A variant
is caught when a check reports a problem naming the file (and, where the variant says, the
field) it expects. Classes whose variants each report at their own field (`batch=True`) are
planted all together in one copy, so a class costs one validation, not five.

The classes live in tests/library_attack_text.py (wording, invisible characters, names,
training), tests/library_attack_meaning.py (meaning and facts) and
tests/library_attack_editions.py (the faults the earlier editions' checks were built for); `python -m
tests.library_attack_kit [--seed N]` prints the table that scenarios/README.md shows.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import random
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from emobench.errors import InputError
from emobench.registry.checks.engine import check_library
from emobench.registry.loader import display_path, load_registry
from emobench.registry.reader import read

Language = Literal["en", "zh"]
DATA = Path(__file__).parent / "data"
# The small libraries the variants are planted in: an English and a Chinese fourth edition,
# each with a held-out test split, a dev split and a demo split.
LIBRARIES: dict[Language, Path] = {"en": DATA / "registry" / "ed4", "zh": DATA / "zh_library"}
CLASS_MODULES = ("tests.library_attack_text", "tests.library_attack_meaning", "tests.library_attack_editions")
TARGET = 0.9  # the catch rate each class aims for


@dataclass(frozen=True)
class Plant:
    """One variant of a fault: what it says, where it goes, and where a catch must point."""

    label: str  # the variant as the table's misses show it
    file: str  # the library file a catch must name (relative to the library root)
    field: str = ""  # the field a catch must name; "" accepts any field of the file
    text: str = ""  # the planted text, for classes that write text into `file`/`field`
    expect: tuple[str, ...] = ()  # words one of which the catching problem says ("" = any)
    into_file: str = ""  # where the text goes, when not where the catch points (default: file)
    into: str = ""  # the field the text goes into (default: field)
    data: Any = dataclasses.field(default=None, compare=False)  # whatever else the plant needs (an edit, unequal closures)


def problems_of(root: Path) -> list[InputError]:
    """What `scenarios validate` reports on the library at root (a load error is one problem)."""
    try:
        return check_library(load_registry(root))
    except InputError as exc:
        return [exc]


@dataclass(frozen=True)
class FaultClass:
    """A kind of fault, as many ways of writing it as its generator finds."""

    name: str
    language: Language
    variants: Callable[[random.Random], list[Plant]]
    plant: Callable[[Path, Plant], None]
    batch: bool = False  # variants report at distinct fields, so one copy holds them all
    check: Callable[[Path], list[InputError]] = problems_of
    floor: float = TARGET  # the rate tests/test_library_attack_kit.py asserts: what the checks achieve


def caught(root: Path, plant: Plant, problems: Sequence[InputError]) -> bool:
    want = display_path(root / plant.file)
    return any(p.source == want and (not plant.field or p.field == plant.field
                                     or p.field.startswith(plant.field + "."))
               and (not plant.expect or any(words in p.problem for words in plant.expect))
               for p in problems)


@dataclass(frozen=True)
class Rate:
    name: str
    language: Language
    caught: int
    total: int
    missed: tuple[str, ...]

    @property
    def rate(self) -> float:
        return self.caught / self.total if self.total else 0.0


def _copy(language: Language, into: Path) -> Path:
    root = Path(tempfile.mkdtemp(dir=into))
    shutil.copytree(LIBRARIES[language], root, dirs_exist_ok=True)
    return root


Reader = Callable[[Path], list[InputError]]


def reader_of(binding: str) -> Reader:
    """`validate --reader BINDING`'s findings on a library (none where it does not load: the
    rules report that)."""
    def findings(root: Path) -> list[InputError]:
        try:
            reg = load_registry(root)
        except InputError:
            return []
        return read(reg, binding)
    return findings


def found(root: Path, plant: Plant, problems: Sequence[InputError], findings: Sequence[InputError]) -> bool:
    """Caught by a rule (in the words it says), or by a reader's finding at the same file and field."""
    return caught(root, plant, problems) or caught(root, dataclasses.replace(plant, expect=()), findings)


def measure(fault: FaultClass, rng: random.Random, work: Path, reader: Reader | None = None) -> Rate:
    """Plant every variant of one class (together when it batches) and count the catches."""
    plants = fault.variants(rng)
    hits: list[bool] = []
    if fault.batch:
        root = _copy(fault.language, work)
        for plant in plants:
            fault.plant(root, plant)
        problems, findings = fault.check(root), reader(root) if reader else []
        hits = [found(root, plant, problems, findings) for plant in plants]
    else:
        for plant in plants:
            root = _copy(fault.language, work)
            fault.plant(root, plant)
            hits.append(found(root, plant, fault.check(root), reader(root) if reader else []))
    missed = tuple(p.label for p, hit in zip(plants, hits, strict=True) if not hit)
    return Rate(fault.name, fault.language, sum(hits), len(plants), missed)


def all_classes() -> list[FaultClass]:
    """Every registered class, in the order their modules list them."""
    found: list[FaultClass] = []
    for name in CLASS_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue  # a class module not written yet
        found += module.CLASSES
    return found


def run_kit(classes: Sequence[FaultClass], seed: int, work: Path, reader: Reader | None = None) -> list[Rate]:
    rng = random.Random(seed)
    return [measure(fault, random.Random(rng.random()), work, reader) for fault in classes]


def table(rates: Sequence[Rate]) -> str:
    """The markdown table: one row per class, a column per language."""
    names = list(dict.fromkeys(r.name for r in rates))
    cells = {(r.name, r.language): f"{r.caught}/{r.total} ({r.rate:.0%})" for r in rates}
    lines = ["| fault class | English | Chinese |", "|---|---|---|"]
    lines += [f"| {n} | {cells.get((n, 'en'), '—')} | {cells.get((n, 'zh'), '—')} |" for n in names]
    return "\n".join(lines)


# Helpers the class modules share.

def edit_yaml(root: Path, file: str, change: Callable[[Any], None]) -> None:
    path = root / file
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")


def _step(node: Any, part: str) -> tuple[Any, Any]:
    name, _, index = part.partition("[")
    if index:
        return node[name] if name else node, int(index.rstrip("]"))
    return node, name


def append_text(root: Path, plant: Plant) -> None:
    """Add the variant's text to the end of the field it names (`stages[1]`, `cases[0].opening`,
    `needs.A.why`; a split file's field starts at `cases`)."""
    path = plant.into or plant.field

    def change(data: Any) -> None:
        node: Any = {"cases": data} if path.startswith("cases") else data
        parts = path.split(".")
        for part in parts[:-1]:
            parent, key = _step(node, part)
            node = parent[key]
        parent, key = _step(node, parts[-1])
        joiner = "" if plant.text[:1] > "\u2e7f" else " "  # no space before CJK text
        parent[key] = f"{parent[key]}{joiner}{plant.text}"
    edit_yaml(root, plant.into_file or plant.file, change)


README = Path(__file__).parents[1] / "scenarios" / "README.md"
TABLE_START, TABLE_END = "<!-- kit table: python -m tests.library_attack_kit --seed 0 -->\n", "\n<!-- end of kit table -->"


def readme_table(text: str) -> str:
    """The table scenarios/README.md shows, between its markers."""
    return text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.library_attack_kit", description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--misses", action="store_true", help="list the variants that passed")
    parser.add_argument("--write-readme", action="store_true", help="put the table in scenarios/README.md")
    parser.add_argument("--reader", metavar="BINDING", help="count a reader's findings too (validate --reader)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        rates = run_kit(all_classes(), args.seed, Path(work), reader_of(args.reader) if args.reader else None)
    print(table(rates))
    if args.write_readme:
        text = README.read_text(encoding="utf-8")
        README.write_text(text.replace(TABLE_START + readme_table(text), TABLE_START + table(rates)), encoding="utf-8")
    if args.misses:
        for r in rates:
            for label in r.missed:
                print(f"missed [{r.name}, {r.language}]: {label}")


if __name__ == "__main__":
    main()
