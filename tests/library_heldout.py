"""The guards on a held-out set (tests/data/heldout_paraphrases.yaml, issue 53): faults said in
words written after the rules froze, and legitimate edits that must pass. Each entry is planted
in its own copy of the kit's small library of its language; the rate per class is what the
rules catch of text they were not written against, shown in scenarios/README.md beside the
kit's. `python -m tests.library_heldout` prints the table and the entries that passed.
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict

from emobench.errors import InputError
from tests.library_attack_kit import Language, Plant, Reader, _copy, append_text, edit_yaml, found, problems_of, reader_of

HELDOUT = Path(__file__).parent / "data" / "heldout_paraphrases.yaml"


class Edit(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    lang: Language
    file: str
    field: str
    text: str
    op: Literal["append", "stage", "write"] = "append"


class Fault(Edit):
    fault_class: str = ""
    catch_file: str | None = None
    catch_field: str | None = None
    expect: tuple[str, ...] = ()

    def plant(self) -> Plant:
        return Plant(self.text, self.catch_file or self.file,
                     self.field if self.catch_field is None else self.catch_field,
                     self.text, self.expect, into_file=self.file, into=self.field)


class Legitimate(Edit):
    name: str


class HeldOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    faulty: list[Fault]
    legitimate: list[Legitimate]


def load(path: Path = HELDOUT) -> HeldOut:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    for entry in data["faulty"]:
        entry["fault_class"] = entry.pop("class")
    return HeldOut.model_validate(data)


def apply(root: Path, edit: Edit) -> None:
    if edit.op == "write":
        (root / edit.file).parent.mkdir(parents=True, exist_ok=True)
        (root / edit.file).write_text(edit.text, encoding="utf-8")
    elif edit.op == "stage":
        index = int(edit.field.removeprefix("stages[").rstrip("]"))
        edit_yaml(root, edit.file, lambda d: d["stages"].__setitem__(index, edit.text))
    else:
        append_text(root, Plant(edit.text, edit.file, edit.field, edit.text))


Check = Callable[[Path], list[InputError]]


def measure(held: HeldOut, work: Path, reader: Reader | None = None, check: Check = problems_of
            ) -> tuple[dict[tuple[str, str], tuple[int, int]], list[str], list[str]]:
    """Per (class, language): (caught, total); the faulty entries that passed; the legitimate
    ones refused, each with its first problem."""
    hits: Counter[tuple[str, str]] = Counter()
    totals: Counter[tuple[str, str]] = Counter()
    missed, refused = [], []
    for fault in held.faulty:
        root = _copy(fault.lang, work)
        apply(root, fault)
        key = (fault.fault_class, fault.lang)
        totals[key] += 1
        if found(root, fault.plant(), check(root), reader(root) if reader else []):
            hits[key] += 1
        else:
            missed.append(f"{fault.fault_class} ({fault.lang}): {fault.text!r}")
    for legit in held.legitimate:
        root = _copy(legit.lang, work)
        apply(root, legit)
        if problems := [*check(root), *(reader(root) if reader else [])]:
            refused.append(f"{legit.name}: {problems[0]}")
    return {key: (hits[key], totals[key]) for key in totals}, missed, refused


def table(rates: dict[tuple[str, str], tuple[int, int]]) -> str:
    names = list(dict.fromkeys(name for name, _ in rates))
    cell = {key: f"{c}/{t}" for key, (c, t) in rates.items()}
    lines = ["| fault class | English | Chinese |", "|---|---|---|"]
    lines += [f"| {n} | {cell.get((n, 'en'), '—')} | {cell.get((n, 'zh'), '—')} |" for n in names]
    caught_all = sum(c for c, _ in rates.values())
    lines.append(f"| all | {caught_all}/{sum(t for _, t in rates.values())} | |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.library_heldout", description=__doc__.splitlines()[0])
    parser.add_argument("--reader", metavar="BINDING", help="count a reader's findings too (validate --reader)")
    args = parser.parse_args(argv)
    held = load()
    with tempfile.TemporaryDirectory() as work:
        rates, missed, refused = measure(held, Path(work), reader_of(args.reader) if args.reader else None)
    print(table(rates))
    print(f"\nlegitimate edits refused: {len(refused)} of {len(held.legitimate)}")
    for line in [*refused, *(f"passed: {m}" for m in missed)]:
        print(f"  {line}")


if __name__ == "__main__":
    main()
