"""The test split is held out (from the fourth edition): no test persona, scenario, name, run
of words or story appears in another split, and the demo replays dev. Read in words here, with
each language's tools; meaning.py reads retold stories and twin personas by meaning.

Each check yields one InputError per problem, naming the file and the field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from emobench.errors import InputError
from emobench.registry.checks.needs import jaccard
from emobench.registry.checks.normalise import fold
from emobench.registry.checks.pack import TextTools
from emobench.registry.checks.packs import tools
from emobench.registry.loader import Registry, display_path
from emobench.registry.models import Case, Persona, Scenario

TEST = "test"
DEMO, DEV = "demo", "dev"
MAX_STORY_JACCARD = 0.2  # content words shared by a test story and another split's story
_WORDS = re.compile(r"[^\W\d_]+")  # a name word is matched whole; "Tobin's" holds "Tobin"


@dataclass(frozen=True)
class Text:
    """One text field of a card the test split or another split uses."""

    file: str
    field: str
    text: str


def _scenario_texts(path: Path, scenario: Scenario) -> Iterator[Text]:
    file = display_path(path)
    yield Text(file, "topic", scenario.topic)
    yield Text(file, "opening", scenario.opening)
    for i, stage in enumerate(scenario.stages):
        yield Text(file, f"stages[{i}]", stage)
    for i, memory in enumerate(scenario.memories):
        yield Text(file, f"memories[{i}].text", memory.text)


def _persona_texts(path: Path, persona: Persona) -> Iterator[Text]:
    file = display_path(path)
    yield Text(file, "background", persona.background)
    for axis in ("C", "A", "P"):
        yield Text(file, f"needs.{axis}.why", persona.needs[axis].why)


def _case_texts(reg: Registry, case: Case) -> Iterator[Text]:
    source = reg.current.sources[case.id]
    if case.opening_override is not None:
        yield Text(source.file, source.field("opening"), case.opening_override)
    if case.case_need is not None:
        yield Text(source.file, source.field("hidden_need.text"), case.case_need.text)


@dataclass
class Side:
    """What one side of the held-out line uses: cards, cases, names and texts."""

    personas: dict[str, str]  # persona id -> file
    scenarios: dict[str, str]
    names: dict[str, tuple[str, str]]  # name word -> (file, field) where it first appears
    texts: list[Text]
    stories: dict[str, set[str]]  # scenario id -> content words of its story and cases


def _names_of(path: Path, persona: Persona | None = None, scenario: Scenario | None = None,
              listed: bool = False) -> Iterator[tuple[str, str, str]]:
    """The names a card gives people and places; with `listed`, its other_names too (which
    outside test may not list a test name either; test's own are places and brands that may
    be anyone's)."""
    file = display_path(path)
    if persona is not None:
        yield file, "name", persona.name
        if persona.facts is not None:
            yield file, "facts.home", persona.facts.home or ""
            for i, rel in enumerate(persona.facts.relatives):
                yield file, f"facts.relatives[{i}].name", rel.name
                yield file, f"facts.relatives[{i}].home", rel.home or ""
    if scenario is not None:
        for i, member in enumerate(scenario.cast or []):
            yield file, f"cast[{i}].name", member.name
            yield file, f"cast[{i}].home", member.home or ""
        for i, other in enumerate((scenario.other_names or []) if listed else []):
            yield file, f"other_names[{i}]", other


def _side(reg: Registry, splits: list[str], tt: TextTools) -> Side:
    held_out = reg.named(TEST) not in splits
    side = Side({}, {}, {}, [], {})
    for split in splits:
        for case in reg.cases(split):
            persona_path, persona = reg.current.personas[case.persona.id]
            scenario_path, scenario = reg.current.scenarios[case.scenario.id]
            for file, field, name in [*_names_of(persona_path, persona=persona),
                                      *_names_of(scenario_path, scenario=scenario, listed=held_out)]:
                for word in tt.names(name):
                    side.names.setdefault(word, (file, field))
            if persona.id not in side.personas:
                side.personas[persona.id] = display_path(persona_path)
                side.texts += _persona_texts(persona_path, persona)
            if scenario.id not in side.scenarios:
                side.scenarios[scenario.id] = display_path(scenario_path)
                side.texts += _scenario_texts(scenario_path, scenario)
            case_texts = list(_case_texts(reg, case))
            side.texts += case_texts
            story = side.stories.setdefault(scenario.id, set())
            for text in [*_scenario_texts(scenario_path, scenario), *case_texts]:
                story |= tt.concept_words(text.text, False)
    return side


@dataclass(frozen=True)
class Overlap:
    """How far the test split is held out from the splits a user may train or tune on."""

    personas: list[str]
    names: list[str]
    runs: int
    story: float
    story_pair: tuple[str, str]


def overlap_rows(reg: Registry) -> list[tuple[str, str, str, str, bool]]:
    """(measure, detail, value, bound, met) rows for `scenarios stats`; none without a test split."""
    found = overlap(reg)
    if found is None:
        return []
    tt = tools(reg)
    shown = ", ".join(found.personas[:3]) or "-"
    names = ", ".join(found.names[:3]) or "-"
    return [
        ("held out: personas", shown, str(len(found.personas)), "0", not found.personas),
        ("held out: names", names, str(len(found.names)), "0", not found.names),
        ("held out: text", f"{tt.shared_run}-{tt.unit[:-1]} runs", str(found.runs), "0", not found.runs),
        ("held out: story", " ~ ".join(found.story_pair), f"{found.story:.2f}",
         f"< {MAX_STORY_JACCARD}", found.story < MAX_STORY_JACCARD),
    ]


def held_out_sides(reg: Registry) -> tuple[Side, Side] | None:
    test, tt = reg.named(TEST), tools(reg)
    if test not in reg.edition_splits:
        return None
    return _side(reg, [test], tt), _side(reg, [s for s in reg.edition_splits if s != test], tt)


def overlap(reg: Registry) -> Overlap | None:
    """The figures `scenarios stats` reports; None when the edition has no test split."""
    sides = held_out_sides(reg)
    if sides is None:
        return None
    test, rest = sides
    runs = sum(1 for _ in _shared_runs(test, rest, tools(reg)))
    best, pair = 0.0, ("-", "-")
    for a, words in test.stories.items():
        for b, others in rest.stories.items():
            score = jaccard(words, others) if a != b else 0.0
            if score > best:
                best, pair = score, (a, b)
    return Overlap(sorted(set(test.personas) & set(rest.personas)),
                   sorted(set(test.names) & set(rest.names)), runs, best, pair)


def _shared_runs(test: Side, rest: Side, tt: TextTools) -> Iterator[tuple[Text, Text, str]]:
    """Each test text that shares a run of tt.shared_run words with a text of another card."""
    index: dict[str, Text] = {}
    for other in rest.texts:
        for run in tt.runs(other.text, tt.shared_run):
            index.setdefault(run, other)
    for text in test.texts:
        found = next(((run, index[run]) for run in tt.runs(text.text, tt.shared_run)
                      if run in index and index[run].file != text.file), None)
        if found is not None:
            yield text, found[1], found[0]


def check_held_out(reg: Registry) -> Iterator[InputError]:
    sides = held_out_sides(reg)
    if sides is None:
        return
    test, rest = sides
    tt, name = tools(reg), reg.named(TEST)
    for scenario_id, file in test.scenarios.items():
        if scenario_id in rest.scenarios:
            yield InputError(file, "id", f"{name} scenario {scenario_id!r} is also played in "
                             f"{_splits_of(reg, scenario_id)}: the test split's stories appear nowhere else")
    for persona_id, file in test.personas.items():
        if persona_id in rest.personas:
            yield InputError(file, "id", f"{name} persona {persona_id!r} is also played in "
                             f"{_splits_of(reg, persona_id)}: the test split's people appear nowhere else")
    said = _said(rest.texts, tt.whole_names)
    for word, (file, field) in test.names.items():
        # a card field, else any text: a name at the start of a sentence is still the name
        other_file, other_field = rest.names.get(word) or said(word) or (file, "")
        if other_file != file:  # a card on both sides is reported once, above
            yield InputError(file, field, f"the name {word!r} also appears outside {name}, in "
                             f"{other_file} ({other_field}): test people and places are held out")
    for t, o, run in _shared_runs(test, rest, tt):
        yield InputError(t.file, t.field, f"shares {tt.shared_run} {tt.unit} in a row ({run!r}) with "
                         f"{o.file} ({o.field}): test text appears nowhere else")
    for a, words in test.stories.items():
        for b, others in rest.stories.items():
            score = jaccard(words, others)
            if score >= MAX_STORY_JACCARD and a != b:
                yield InputError(test.scenarios[a], "stages", f"its story shares {score:.0%} of its "
                                 f"content words with {b!r} ({rest.scenarios[b]}), limit "
                                 f"{MAX_STORY_JACCARD:.0%}: a test story is told nowhere else")
    yield from _demo_from_dev(reg)


def _said(texts: list[Text], english: bool) -> Callable[[str], tuple[str, str] | None]:
    """Where a name word first appears in the texts, read folded (a Cyrillic о is an o)."""
    if english:
        seen: dict[str, tuple[str, str]] = {}
        for text in texts:
            for word in _WORDS.findall(fold(text.text)):
                seen.setdefault(word, (text.file, text.field))
        return seen.get
    folded = [(fold(text.text), text) for text in texts]
    return lambda word: next(((t.file, t.field) for body, t in folded if word in body), None)


def _splits_of(reg: Registry, card_id: str) -> str:
    splits = sorted({c.split for c in reg.edition_cases()
                     if card_id in (c.persona.id, c.scenario.id) and c.split != reg.named(TEST)})
    return ", ".join(splits)


def _demo_from_dev(reg: Registry) -> Iterator[InputError]:
    """Each demo case replays a dev case: the same scenario, persona and IEDR levels."""
    demo, dev_split = reg.named(DEMO), reg.named(DEV)
    if demo not in reg.edition_splits:
        return
    dev = ({(c.scenario.id, c.persona.id): c for c in reg.cases(dev_split)}
           if dev_split in reg.edition_splits else {})
    for case in reg.cases(demo):
        source = reg.current.sources[case.id]
        twin = dev.get((case.scenario.id, case.persona.id))
        if twin is None:
            yield InputError(source.file, source.field(), f"{case.id} plays scenario {case.scenario.id!r} "
                             f"with persona {case.persona.id!r}, which no dev case does: the demo replays dev")
        elif twin.iedr != case.iedr:
            yield InputError(source.file, source.field("iedr"), f"differs from {twin.id}'s levels: the demo "
                             "replays a dev case as it is")
