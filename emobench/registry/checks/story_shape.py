"""The shape of the edition's stories, which `scenarios stats` reports (a model must not be
able to learn the template instead of the person), and the rule that no stage scripts the
outcome. Each language's pack reads a stage's shape (pack.StoryShape)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

from emobench.errors import InputError
from emobench.registry.checks.needs import MAX_NEED_OVERLAP, need_overlap
from emobench.registry.checks.pack import language_of
from emobench.registry.checks.packs import PACKS, tools
from emobench.registry.loader import Registry, display_path
from emobench.registry.models import DEFAULT_LANGUAGE, Language, Scenario

MAX_SHARE = Fraction(1, 3)  # of the scenarios opening with one move, or ending in an admission
MIN_GOOD_NEWS_SETS = Fraction(1, 3)  # of the counterfactual sets, positive or mixed
MAX_ASKING_OPENINGS = Fraction(1, 2)  # of a split's case openings, and of its first stages
MAX_ASKING_LAST = Fraction(1, 3)  # of a split's last stages


@dataclass(frozen=True)
class Share:
    """One shape measure: its value, the bound and whether it is met."""

    name: str
    detail: str
    count: int
    total: int
    bound: str
    met: bool


def _names(reg: Registry, scenario: Scenario) -> list[str]:
    """Names a stage may start with: the playing personas' and the cast's."""
    players = [c.persona.name for c in reg.edition_cases() if c.scenario.id == scenario.id]
    return [*players, *(m.name for m in scenario.cast or [])]


def opening_move(reg: Registry, scenario: Scenario) -> str:
    return PACKS[scenario.language].shape.opening_move(scenario.stages[0], _names(reg, scenario))


def ends_in_admission(reg: Registry, scenario: Scenario) -> bool:
    return PACKS[scenario.language].shape.admits(scenario.stages[-1], _names(reg, scenario))


def shape_shares(reg: Registry) -> list[Share]:
    scenarios = list(reg.scenarios.values())
    total = len(scenarios)
    moves = Counter(opening_move(reg, s) for s in scenarios)
    move, most = moves.most_common(1)[0] if moves else ("-", 0)
    admissions = sum(ends_in_admission(reg, s) for s in scenarios)
    sets = reg.counterfactual_sets()
    good = sum(reg.scenarios[sid].valence in ("positive", "mixed") for sid in sets)
    overlaps = [need_overlap(case, tools(reg).content_words)[0] for case in reg.edition_cases()]
    worst = max(overlaps, default=0.0)
    return [
        Share("opening move", f"most common: {move!r}", most, total, f"≤ {MAX_SHARE}",
              Fraction(most, max(total, 1)) <= MAX_SHARE),
        Share("ending in admission", "last stage admits", admissions, total, f"≤ {MAX_SHARE}",
              Fraction(admissions, max(total, 1)) <= MAX_SHARE),
        Share("counterfactual sets", "positive or mixed", good, len(sets), f"≥ {MIN_GOOD_NEWS_SETS}",
              Fraction(good, max(len(sets), 1)) >= MIN_GOOD_NEWS_SETS and len(sets) > 0),
        Share("hidden need in a stage", f"largest share of content words {worst:.2f}",
              sum(o >= MAX_NEED_OVERLAP for o in overlaps), len(overlaps), f"< {MAX_NEED_OVERLAP} each",
              worst < MAX_NEED_OVERLAP),
    ]


def asks(text: str, language: Language = DEFAULT_LANGUAGE) -> str | None:
    """What makes a text ask for practical help: a question mark, or the first request phrase
    of the language pack's shape_words.yaml found anywhere in it; None when it does not ask."""
    return PACKS[language].shape.asks(text)


def scripted_outcome(stage: str, language: Language = DEFAULT_LANGUAGE) -> str | None:
    """The words by which a stage decides what the person does, or None."""
    return PACKS[language].shape.scripted_outcome(stage)


def asking_shares(reg: Registry, split: str) -> list[Share]:
    """How much of a split asks: its case openings, and its scenarios' first and last stages."""
    cases, language = reg.cases(split), reg.language(split)
    scenarios = list({case.scenario.id: case.scenario for case in cases}.values())
    openings = sum(asks(case.opening, language) is not None for case in cases)
    first = sum(asks(s.stages[0], language) is not None for s in scenarios)
    last = sum(asks(s.stages[-1], language) is not None for s in scenarios)
    rows = [("case openings", "ask: a ? or a request", openings, len(cases), MAX_ASKING_OPENINGS),
            ("first stages", "ask, of the scenarios", first, len(scenarios), MAX_ASKING_OPENINGS),
            ("last stages", "ask, of the scenarios", last, len(scenarios), MAX_ASKING_LAST)]
    return [Share(name, detail, count, total, f"≤ {bound}", Fraction(count, max(total, 1)) <= bound)
            for name, detail, count, total, bound in rows]


def check_scripted(reg: Registry) -> Iterator[InputError]:
    language = language_of(reg)
    for path, scenario in reg.current.scenarios.values():
        for i, stage in enumerate(scenario.stages):
            if words := scripted_outcome(stage, language):
                yield InputError(display_path(path), f"stages[{i}]", f"scripts the outcome ({words!r}): "
                                 "the subject is scored on what the person decides, so no stage decides it")


