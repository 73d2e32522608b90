"""Hidden needs are the persona's own in this situation (from the third edition): a need is of
the persona's dominant axis, differs from its siblings in a counterfactual set, and restates
neither a stage, the case's opening nor the persona's why (read in words here; meaning.py reads
the same pairs by meaning).

Each check yields one InputError per problem, naming the file and the field.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import combinations

from emobench.errors import InputError
from emobench.registry.checks.facts import case_where
from emobench.registry.checks.pack import TextTools
from emobench.registry.checks.word_files import normalised
from emobench.registry.loader import Registry
from emobench.registry.models import Case

MAX_NEED_OVERLAP = 0.5  # share of the hidden need's content words one stage may repeat
MAX_SIBLING_JACCARD = 0.3  # concepts shared by two hidden needs of one counterfactual set
MAX_WHY_SHARE = 0.35  # share of a need's content words found in the persona's own why


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def case_needs(reg: Registry) -> Iterator[InputError]:
    for case in reg.edition_cases():
        need = case.case_need
        if need is not None and need.axis != case.dominant_axis:
            yield InputError(*case_where(reg, case, "hidden_need.axis"), f"{need.axis}, but persona "
                             f"{case.persona.id!r} has dominant need {case.dominant_axis}")
    for scenario_id, cases in reg.counterfactual_sets().items():
        seen: dict[str, Case] = {}
        for case in cases:
            key = normalised(case.hidden_need)
            if key in seen and seen[key].persona.id != case.persona.id:
                yield InputError(*case_where(reg, case, "hidden_need.text"), f"the same hidden need "
                                 f"as {seen[key].id} in counterfactual set {scenario_id!r}; each "
                                 "persona needs what its own dominant axis makes it need")
            seen.setdefault(key, case)


def need_overlap(case: Case, words_of: Callable[[str], set[str]]) -> tuple[float, int]:
    """The largest share of the hidden need's content words found in one stage, and that stage."""
    need = words_of(case.hidden_need)
    if not need:
        return 0.0, 0
    shares = [len(need & words_of(stage)) / len(need) for stage in case.scenario.stages]
    best = max(range(len(shares)), key=shares.__getitem__)
    return shares[best], best


def need_overlaps(reg: Registry, words_of: Callable[[str], set[str]]) -> Iterator[InputError]:
    for case in reg.edition_cases():
        share, stage = need_overlap(case, words_of)
        if share >= MAX_NEED_OVERLAP:
            yield InputError(*case_where(reg, case, "hidden_need.text"), f"shares {share:.0%} of its "
                             f"content words with stage {stage + 1} of {case.scenario.id!r} (limit "
                             f"{MAX_NEED_OVERLAP:.0%}): the need restates the story")




def check_needs(reg: Registry, tt: TextTools) -> Iterator[InputError]:
    for scenario_id, cases in reg.counterfactual_sets().items():
        for a, b in combinations(cases, 2):
            if a.persona.id == b.persona.id:
                continue
            score = jaccard(tt.concept_words(a.hidden_need, True), tt.concept_words(b.hidden_need, True))
            if score >= MAX_SIBLING_JACCARD:
                source = reg.current.sources[b.id]
                yield InputError(source.file, source.field("hidden_need.text"), f"shares {score:.0%} of "
                                 f"its concepts with {a.id}'s need in counterfactual set {scenario_id!r} "
                                 f"(limit {MAX_SIBLING_JACCARD:.0%}): siblings need different things")
    for case in reg.edition_cases():
        if case.case_need is None:
            continue
        source = reg.current.sources[case.id]
        where = (source.file, source.field("hidden_need.text"))
        need = tt.concept_words(case.hidden_need, False)
        why = case.persona.needs[case.dominant_axis].why
        share = len(need & tt.concept_words(why, False)) / max(len(need), 1)
        run = next((r for r in tt.runs(case.hidden_need, tt.why_run) if r in set(tt.runs(why, tt.why_run))
                    and tt.run_content(r) >= tt.why_run_content), "")
        if share >= MAX_WHY_SHARE or run:
            detail = f"{tt.why_run} {tt.unit} in a row, {run!r}" if run else f"{share:.0%} of its content words"
            yield InputError(*where, f"restates persona {case.persona.id!r}'s needs."
                             f"{case.dominant_axis}.why ({detail}): the need is what this situation asks")
        opening = len(need & tt.concept_words(case.opening, False)) / max(len(need), 1)
        if opening >= MAX_NEED_OVERLAP:
            yield InputError(*where, f"shares {opening:.0%} of its content words with the case's "
                             f"opening (limit {MAX_NEED_OVERLAP:.0%}): the user never says the need")
