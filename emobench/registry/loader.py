"""Load and validate the whole library up front: cards, splits, cross references, hashes.

Everything is checked before a Registry exists, so a caller either gets a complete library
or one InputError naming the file, the field and the problem.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict, defaultdict
from dataclasses import dataclass
from pathlib import Path

from emobench.errors import InputError
from emobench.registry.card_files import (
    CASE_NEEDS,
    _card_files,
    _in_its_folder,
    _language_cards,
    _mapping,
    _unique,
    _validate,
    load_persona,
    load_scenario,
    split_language,
)
from emobench.registry.filters import filter_cases
from emobench.registry.hashing import case_hash, registry_version
from emobench.registry.models import (
    DEFAULT_LANGUAGE,
    LANGUAGES,
    ArchivedEdition,
    Case,
    CaseEntry,
    Language,
    LibraryInfo,
    Persona,
    Scenario,
)
from emobench.yaml_io import MAX_FILE_BYTES, read_yaml
from emobench.yaml_io import display_path as display_path


@dataclass(frozen=True)
class Source:
    """Where a case was written: its split file and its place in that file."""

    path: Path
    index: int

    @property
    def file(self) -> str:
        return display_path(self.path)

    def field(self, name: str = "") -> str:
        return f"cases[{self.index}]" + (f".{name}" if name else "")


@dataclass
class Edition:
    """One edition's cards and cases, with where each came from (for error lines)."""

    personas: dict[str, tuple[Path, Persona]]
    scenarios: dict[str, tuple[Path, Scenario]]
    cases: dict[str, list[Case]]
    sources: dict[str, Source]


class Registry:
    """A fully validated library: the current edition, plus archived editions' splits
    (named like test-v1) so runs made on them can be rescored. Build it with load_registry."""

    def __init__(self, root: Path, current: Edition, info: LibraryInfo,
                 archived: dict[str, list[Case]] | None = None) -> None:
        self.root = root
        self.info = info
        self.current = current
        self.personas = {card_id: card for card_id, (_, card) in current.personas.items()}
        self.scenarios = {card_id: card for card_id, (_, card) in current.scenarios.items()}
        self._archived = archived or {}
        self._splits = {**current.cases, **self._archived}
        self.archived_splits = sorted(archived or {})
        self._by_id = {case.id: case for cases in self._splits.values() for case in cases}
        self._splits_dir = display_path(root / "scenarios" / "splits")

    @property
    def splits(self) -> list[str]:
        return sorted(self._splits)

    @property
    def languages(self) -> list[Language]:
        """The languages of the current edition's splits and cards, English first."""
        found = {split_language(split) for split in self.current.cases}
        found |= {persona.language for persona in self.personas.values()}
        found |= {scenario.language for scenario in self.scenarios.values()}
        return [lang for lang in LANGUAGES if lang in found]

    def view(self, language: Language) -> Registry:
        """The current edition's cards and splits in one language (archived editions are
        English), so the authoring rules hold each library on its own."""
        cur = self.current
        splits = {name: cases for name, cases in cur.cases.items() if split_language(name) == language}
        edition = Edition(
            {k: v for k, v in cur.personas.items() if v[1].language == language},
            {k: v for k, v in cur.scenarios.items() if v[1].language == language},
            splits,
            {case.id: cur.sources[case.id] for cases in splits.values() for case in cases},
        )
        archived = self._archived if language == DEFAULT_LANGUAGE else {}
        return Registry(self.root, edition, self.info, archived)

    def named(self, base: str) -> str:
        """A split's name in this library's language: test, or test-zh in a Chinese view."""
        langs = {split_language(split) for split in self.current.cases}
        lang = next(iter(langs)) if len(langs) == 1 else DEFAULT_LANGUAGE
        return base if lang == DEFAULT_LANGUAGE else f"{base}-{lang}"

    def language(self, split: str) -> Language:
        """A split's language (every case of a split shares it; the loader checks)."""
        cases = self.cases(split)
        return cases[0].language if cases else split_language(split)

    @property
    def edition_splits(self) -> list[str]:
        """The current edition's splits, without the archived ones."""
        return sorted(self.current.cases)

    def cases(self, split: str) -> list[Case]:
        if split not in self._splits:
            known = ", ".join(self.splits) or "none"
            raise InputError(self._splits_dir, "split", f"unknown split {split!r} (known: {known})")
        return list(self._splits[split])

    def all_cases(self) -> list[Case]:
        """Every case of every split, archived editions included."""
        return [case for split in self.splits for case in self._splits[split]]

    def edition_cases(self) -> list[Case]:
        return [case for split in self.edition_splits for case in self._splits[split]]

    def case(self, case_id: str) -> Case:
        if case_id not in self._by_id:
            raise InputError(self._splits_dir, "case", f"unknown case {case_id!r}")
        return self._by_id[case_id]

    def version(self, split: str) -> str:
        return registry_version((case.id, case.content_hash) for case in self.cases(split))

    def split_with_version(self, version: str) -> str | None:
        """The split, current or archived, whose cases hash to this registry version."""
        return next((split for split in self.splits if self.version(split) == version), None)

    def counterfactual_sets(self) -> dict[str, list[Case]]:
        """Scenario id -> its cases, for the current edition's scenarios played by two or more personas."""
        sets: dict[str, list[Case]] = defaultdict(list)
        for case in self.edition_cases():
            if case.counterfactual_set:
                sets[case.counterfactual_set].append(case)
        return dict(sets)

    def filter(self, split: str | None = None, category: str | None = None,
               difficulty: str | None = None, dominant_axis: str | None = None,
               threshold: str | None = None, valence: str | None = None) -> list[Case]:
        pool = self.cases(split) if split is not None else self.all_cases()
        return filter_cases(pool, category=category, difficulty=difficulty,
                            dominant_axis=dominant_axis, threshold=threshold, valence=valence)


def _edition_fields(entry: CaseEntry, edition: int, path: Path, source: Source) -> None:
    """From edition 3 a case brings its own opening and hidden need; before, it had no need."""
    if edition >= CASE_NEEDS:
        for name in ("opening", "hidden_need"):
            if getattr(entry, name) is None:
                raise InputError(display_path(path), source.field(name), f"missing required field "
                                 f"(edition {edition}: every case states its own {name.replace('_', ' ')})")
    elif entry.hidden_need is not None:
        raise InputError(display_path(path), source.field("hidden_need"), f"not a case field in "
                         f"edition {edition} (the scenario holds the hidden need)")


def _one_language(path: Path, source: Source, entry: CaseEntry, scenario: Scenario,
                  persona: Persona) -> None:
    """A case is one language, and a split holds one: its name says which (test-zh)."""
    if persona.language != scenario.language:
        raise InputError(display_path(path), source.field("persona"), f"persona {entry.persona!r} is "
                         f"{persona.language} but scenario {entry.scenario!r} is {scenario.language}: "
                         "a case's cards share one language")
    wanted = split_language(path.stem)
    if scenario.language != wanted:
        raise InputError(display_path(path), source.field("scenario"), f"scenario {entry.scenario!r} "
                         f"is {scenario.language}, but split {path.stem!r} is {wanted}: a split is one "
                         "language (Chinese splits are named like test-zh)")


def _load_edition(root: Path, edition: int, suffix: str = "", present_year: int | None = None) -> Edition:
    """Cards and splits under root, as that edition's schema has them; split names get the
    suffix (archived editions)."""
    personas = _unique([(p, _in_its_folder(p, load_persona(p), lang, "persona"))
                        for p, lang in _language_cards(root / "personas")], "persona")
    scenarios = _unique([(p, _in_its_folder(p, load_scenario(p, edition), lang, "scenario"))
                         for p, lang in _language_cards(root / "scenarios")], "scenario")

    entries: dict[str, list[tuple[Source, CaseEntry]]] = {}
    seen_case: dict[str, Path] = {}
    for path in _card_files(root / "scenarios" / "splits"):
        data = read_yaml(path)
        if not isinstance(data, list):
            got = "an empty file" if data is None else type(data).__name__
            raise InputError(display_path(path), "", f"expected a list of cases, got {got}")
        split_entries = []
        for i, item in enumerate(data):
            source = Source(path, i)
            entry = _validate(CaseEntry, item, path, prefix=source.field())
            _edition_fields(entry, edition, path, source)
            if entry.id in seen_case:
                other = display_path(seen_case[entry.id])
                raise InputError(display_path(path), source.field("id"),
                                 f"duplicate case id {entry.id!r} (also in {other})")
            for kind, ref, known in (("scenario", entry.scenario, scenarios),
                                     ("persona", entry.persona, personas)):
                if ref not in known:
                    raise InputError(display_path(path), source.field(kind), f"unknown {kind} {ref!r}")
            _one_language(path, source, entry, scenarios[entry.scenario][1], personas[entry.persona][1])
            seen_case[entry.id] = path
            split_entries.append((source, entry))
        name = path.stem + suffix
        if name in entries:
            raise InputError(display_path(path), "", f"split {path.stem!r} is defined twice")
        entries[name] = split_entries

    # A scenario is a counterfactual set once two distinct personas play it, in any split.
    players: dict[str, set[str]] = defaultdict(set)
    for split_entries in entries.values():
        for _, entry in split_entries:
            players[entry.scenario].add(entry.persona)

    cases_by_split: dict[str, list[Case]] = {}
    sources: dict[str, Source] = {}
    for split, split_entries in entries.items():
        cases_by_split[split] = []
        for source, entry in split_entries:
            scenario, persona = scenarios[entry.scenario][1], personas[entry.persona][1]
            sources[entry.id] = source
            cases_by_split[split].append(Case(
                id=entry.id, split=split, scenario=scenario, persona=persona, iedr=entry.iedr,
                content_hash=case_hash(entry.id, scenario.content_hash, persona.content_hash,
                                       entry.iedr.model_dump(), entry.opening,
                                       entry.hidden_need.model_dump() if entry.hidden_need else None),
                counterfactual_set=entry.scenario if len(players[entry.scenario]) >= 2 else None,
                opening_override=entry.opening, case_need=entry.hidden_need, present_year=present_year,
            ))
    return Edition(personas, scenarios, cases_by_split, sources)


def _load_archived(folder: Path) -> dict[str, list[Case]]:
    """An archived edition's splits, each checked against the version its runs recorded."""
    info_path = folder / "edition.yaml"
    info = _validate(ArchivedEdition, _mapping(info_path), info_path)
    cases = _load_edition(folder, info.edition, suffix=f"-{folder.name}").cases
    for split, pinned in info.versions.items():
        name = f"{split}-{folder.name}"
        if name not in cases:
            raise InputError(display_path(info_path), f"versions.{split}", "no such split in this edition")
        actual = registry_version((case.id, case.content_hash) for case in cases[name])
        if actual != pinned:
            raise InputError(display_path(info_path), f"versions.{split}",
                             f"the archived cards changed (version {actual[:16]}, pinned "
                             f"{pinned[:16]}); an archived edition is frozen")
    unpinned = sorted(set(cases) - {f"{split}-{folder.name}" for split in info.versions})
    if unpinned:
        raise InputError(display_path(info_path), "versions", f"split {unpinned[0]!r} has no pinned version")
    return cases


def load_library_info(path: Path) -> LibraryInfo:
    return _validate(LibraryInfo, _mapping(path), path)


# Libraries already loaded in this process, by what their files were when loaded: a command
# that needs the cards twice (a run, then its scores) pays for the 500-odd files once.
_LOADED: OrderedDict[tuple[str, str, str], Registry] = OrderedDict()
_KEEP_LOADED = 4


def _library_state(root: Path) -> str:
    """A digest of the library's files as they are now: their paths and bytes (a timestamp can
    miss an edit made within its resolution)."""
    digest = hashlib.blake2b(digest_size=16)
    paths = [root / "library.yaml"]
    for top in ("personas", "scenarios", "editions"):
        for folder, dirs, files in os.walk(root / top):
            dirs.sort()
            paths.extend(Path(folder, name) for name in sorted(files))
    for path in paths:
        try:
            st = path.stat()
            # A file over the size limit is refused unread, so it is known here by its stat only.
            data = path.read_bytes() if st.st_size <= MAX_FILE_BYTES else str(st.st_mtime_ns).encode()
            digest.update(f"{path}\0{st.st_size}\0".encode() + data)
        except OSError:
            digest.update(f"{path}\0unreadable".encode())
    return digest.hexdigest()


def load_registry(root: Path) -> Registry:
    """Load and validate every card and split under root, and every archived edition under
    root/editions; raise InputError on the first problem. Authoring rules are checked apart
    (emobench.registry.checks.engine), so every broken rule can be reported at once. A library whose
    files have not changed since it was last loaded in this process is not read again."""
    root = Path(root)
    key = (str(root.resolve()), os.getcwd(), _library_state(root))  # cwd: the paths errors show
    if key in _LOADED:
        _LOADED.move_to_end(key)
        return _LOADED[key]
    registry = _read_registry(root)
    _LOADED[key] = registry
    while len(_LOADED) > _KEEP_LOADED:
        _LOADED.popitem(last=False)
    return registry


def _read_registry(root: Path) -> Registry:
    info_path = root / "library.yaml"
    if not info_path.is_file():
        raise InputError(display_path(info_path), "", "file not found (a library root names its "
                         "edition and present_year there)")
    info = load_library_info(info_path)
    current = _load_edition(root, info.edition, present_year=info.present_year)
    archived: dict[str, list[Case]] = {}
    editions = root / "editions"
    for folder in sorted(editions.iterdir()) if editions.is_dir() else []:
        if folder.is_dir():
            archived.update(_load_archived(folder))
    seen: dict[str, str] = {c.id: split for split, cases in current.cases.items() for c in cases}
    for split, cases in archived.items():
        for case in cases:
            if case.id in seen:
                raise InputError(display_path(editions), split,
                                 f"case id {case.id!r} is also in split {seen[case.id]!r}; "
                                 "case ids stay unique across editions so old runs resolve")
            seen[case.id] = split
    return Registry(root, current, info, archived)
