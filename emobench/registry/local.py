"""A local split: case records kept outside the library, in a folder the user owns.

Written by an importer (e.g. `emobench import empa-cases`) for cards emobench may not ship.
The folder holds cases.jsonl (validated Case records, one split) and split.json (the split's
name and provenance). A run given the folder plays its cases instead of a library split.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from emobench.errors import InputError
from emobench.registry.hashing import card_hash, case_hash
from emobench.registry.loader import Edition, Registry, load_registry
from emobench.registry.models import Case, LibraryInfo, PersonaCard, ScenarioCard
from emobench.rundir import read_records

CASES_FILE = "cases.jsonl"
SPLIT_FILE = "split.json"


def read_split_info(folder: Path) -> dict[str, Any]:
    path = folder / SPLIT_FILE
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(path, "", "missing: not a local split folder (make one with `emobench import empa-cases`)") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(path, "", f"not readable JSON: {exc}") from None
    if not isinstance(info, dict) or not isinstance(info.get("split"), str):
        raise InputError(path, "split", "missing")
    return info


def read_local_cases(folder: Path) -> list[Case]:
    """The folder's cases, each checked against its own content hashes."""
    info = read_split_info(folder)
    path = folder / CASES_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(path, "", f"not readable: {exc.strerror}") from None
    cases = []
    for number, line in enumerate(lines, start=1):
        try:
            case = Case.model_validate_json(line)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise InputError(path, f"line {number}: {'.'.join(str(p) for p in err['loc'])}", err["msg"]) from None
        persona = PersonaCard.model_validate(case.persona.model_dump(exclude={"content_hash"}))
        scenario = ScenarioCard.model_validate(case.scenario.model_dump(exclude={"content_hash"}))
        expected = case_hash(case.id, card_hash(scenario), card_hash(persona), case.iedr.model_dump(),
                             case.opening_override, case.case_need.model_dump() if case.case_need else None, case.stratum)
        if expected != case.content_hash or case.split != info["split"]:
            raise InputError(path, f"line {number}", "edited after import (hash or split differs); import again")
        cases.append(case)
    if not cases:
        raise InputError(path, "", "holds no case")
    return cases


def local_registry(folder: Path, root: Path) -> Registry:
    """A registry of the folder's one split, set in the year it is read."""
    return _registry_of(read_local_cases(folder), folder / CASES_FILE, root)


def registry_for(run_dir: Path, root: Path) -> Registry:
    """The cards a run was scored against: its own cases.jsonl when imported, else the library."""
    path = Path(run_dir) / CASES_FILE
    if not path.exists():
        return load_registry(root)
    return _registry_of(read_records(path, Case), path, root)


def _registry_of(cases: list[Case], source: Path, root: Path) -> Registry:
    # Cards kept beside a run or a split are a library of their own: one edition, set in the year it is read.
    edition = Edition(
        personas={c.persona.id: (source, c.persona) for c in cases},
        scenarios={c.scenario.id: (source, c.scenario) for c in cases},
        cases={split: [c for c in cases if c.split == split] for split in dict.fromkeys(c.split for c in cases)},
        sources={},
    )
    return Registry(root, edition, LibraryInfo(edition=1, present_year=date.today().year))
