"""The library's training configs and training pages train on no test split and no test case.

Where the library ships beside them (the repository itself): every training config under
configs/ (a config with a `reward:` section, a train*.yaml, verl's agent-loop entries'
`overrides`, and any config a training entry point names: an agent-loop entry's `config`, a
training page's `--config`) names its split, since a run config's default split is test, and names no test
split nor test case; every docs page about training (train*.md, or one that mentions
emobench.env, verl, GRPO or train_example) names no test case and passes no test split to a training command. The entry
points refuse the same at run time (emobench/env/held_out.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from emobench.errors import InputError
from emobench.registry.loader import Registry, display_path
from emobench.yaml_io import load_capped

TEST = "test"
_ADVICE = "train on dev or demo, never on the held-out test split"
_CASE_ID = re.compile(r"\b([a-z]+\d*-\d\d)\b")
_TRAINING_PAGE = re.compile(r"emobench\.env\b|\bverl\b|train_example|\bGRPO\b|\bPPO\b")
# A split given on a line: --split test, split=test, split: 'test-zh', "split": "test"
_SPLIT = re.compile(r"""(?:--split[=\s]+|\bsplit["']?\s*[:=]\s*)["']?([a-z]+(?:-[a-z0-9]+)?)\b""")
_EVALUATION = re.compile(r"\bemobench\s+(?:run|gate|score|report|publish|judge|scenarios)\b")
# A config a command or a call trains on: --config configs/x.yaml, load_training_config(Path("x.yaml"))
_NAMED_CONFIG = re.compile(r"""(?:--config[=\s]+|load_training_config\(\s*Path\(\s*)["']?([\w./-]+\.ya?ml)\b""")


def is_test_split(name: str) -> bool:
    """test, a language's test split (test-zh) or an archived one (test-v3)."""
    return name == TEST or name.startswith(f"{TEST}-")


def check_training(reg: Registry) -> Iterator[InputError]:
    test_ids = {case.id for split in reg.edition_splits if is_test_split(split) for case in reg.cases(split)}
    configs, docs = reg.root / "configs", reg.root / "docs"
    pages = sorted(docs.rglob("*.md")) if docs.is_dir() else []
    # A config is a training one by what names it, not only by its name or a reward section:
    # an entry point may train on a config written for evaluation.
    named = _entry_points(reg.root, sorted(configs.rglob("*.yaml")) if configs.is_dir() else [], pages)
    for path in sorted(configs.rglob("*.yaml")) if configs.is_dir() else []:
        yield from _config(path, test_ids, named.pop(path.resolve(), None))
    for path, by in sorted(named.items()):
        yield from _config(path, test_ids, by)
    for page in pages:
        yield from _page(page, test_ids)


def _entry_points(root: Path, configs: list[Path], pages: list[Path]) -> dict[Path, str]:
    """Each config in the library that a training entry point names, and where it is named."""
    named: dict[Path, str] = {}

    def add(name: str, where: str) -> None:
        path = (root / name).resolve()
        if path.is_file() and path.is_relative_to(root.resolve()):
            named.setdefault(path, where)

    for path in configs:
        data = _load(path)
        for i, entry in enumerate(data if isinstance(data, list) else []):
            overrides = entry.get("overrides") if isinstance(entry, dict) else None
            if isinstance(entry, dict) and isinstance(entry.get("config"), str) and not (
                    isinstance(overrides, dict) and "split" in overrides):
                add(entry["config"], f"{display_path(path)} [{i}].config")
    for page in pages:
        text = page.read_text(encoding="utf-8")
        if page.stem.startswith("train") or _TRAINING_PAGE.search(text):
            for number, line in enumerate(text.splitlines(), 1):
                if not _EVALUATION.search(line):
                    for name in _NAMED_CONFIG.findall(line):
                        add(name, f"{display_path(page)} line {number}")
    return named


def _load(path: Path) -> Any:
    try:
        return load_capped(path.read_text(encoding="utf-8"), display_path(path))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None  # not a config this check can read; loading it for a run reports why


def _config(path: Path, test_ids: set[str], named_by: str | None = None) -> Iterator[InputError]:
    data, shown = _load(path), display_path(path)
    by = f" ({named_by} trains on it)" if named_by else ""
    if isinstance(data, list):  # verl's agent-loop entries: each may override the config's keys
        for i, entry in enumerate(data):
            overrides = entry.get("overrides") if isinstance(entry, dict) else None
            if isinstance(overrides, dict):
                yield from _names(overrides, shown, test_ids, f"[{i}].overrides.")
        return
    if not isinstance(data, dict) or not ("reward" in data or path.name.startswith("train") or named_by):
        return
    if "split" not in data and not data.get("cases") and not data.get("local_split"):
        yield InputError(shown, "split", f"missing{by}: a run config's default split is test; {_ADVICE}")
    yield from _names(data, shown, test_ids, by=by)


def _names(data: dict[str, Any], shown: str, test_ids: set[str], prefix: str = "",
           by: str = "") -> Iterator[InputError]:
    split = data.get("split")
    if isinstance(split, str) and is_test_split(split):
        yield InputError(shown, f"{prefix}split", f"trains on the held-out test split {split!r}{by}: "
                         "train on dev or demo")
    cases = data.get("cases")
    for i, case_id in enumerate(cases if isinstance(cases, list) else []):
        if case_id in test_ids:
            yield InputError(shown, f"{prefix}cases[{i}]", f"trains on test case {case_id!r}: {_ADVICE}")


def _page(page: Path, test_ids: set[str]) -> Iterator[InputError]:
    text = page.read_text(encoding="utf-8")
    if not (page.stem.startswith("train") or _TRAINING_PAGE.search(text)):
        return
    shown = display_path(page)
    for number, line in enumerate(text.splitlines(), 1):
        for case_id in _CASE_ID.findall(line):
            if case_id in test_ids:
                yield InputError(shown, f"line {number}", f"uses test case {case_id!r}: {_ADVICE}")
        if _EVALUATION.search(line):
            continue  # `emobench run --split test` evaluates the trained policy, as it should
        for split in _SPLIT.findall(line):
            if is_test_split(split):
                yield InputError(shown, f"line {number}", f"passes the held-out split {split!r}: {_ADVICE}")
