"""English: words and capitals (words.py), the fact and prose rules that read English prose
(facts.py, prose_facts.py), and MiniLM for meaning (checks/similarity.py)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from emobench.registry.card_files import CASE_NEEDS
from emobench.registry.checks.lang.en import words
from emobench.registry.checks.lang.en.facts import check_facts
from emobench.registry.checks.lang.en.prose_facts import check_prose
from emobench.registry.checks.lang.en.prose_words import prose_words
from emobench.registry.checks.pack import LanguagePack, MeaningReader, Meter, StoryShape, TextTools
from emobench.registry.checks.similarity import english_meter
from emobench.registry.checks.word_files import first_match, normalised, patterns
from emobench.registry.models import Scenario

MIN_NAME_CHARS = 3  # shorter English name words (Li, Jo) are too common to count as a shared person
SHAPE_WORDS = words.HERE / "shape_words.yaml"
STORY_WORDS = 40
# "She needs", "What Priya needs is": the frame every need opens with says nothing the opening
# could say, and leaving it out lets the encoder compare what is needed with what is said.
_NEED_FRAME = re.compile(r"^(?:\w+, )?(?:what )?(?:[\w'-]+ )?(?:needs|wants)(?: is)?(?: to)?\s+", re.IGNORECASE)
_YEAR = re.compile(r"\b(19\d\d|20\d\d)\b")


def _names(*names: str | None) -> set[str]:
    return {w for w in words.name_words(*names)
            if len(w) >= MIN_NAME_CHARS and w not in prose_words().place_words}


def _asks(text: str) -> str | None:
    return "?" if "?" in text else first_match(text, patterns(SHAPE_WORDS, "request_phrases"))


def _scripted(stage: str) -> str | None:
    return first_match(stage, patterns(SHAPE_WORDS, "scripted_outcomes"))


def _opening_move(stage: str, names: list[str]) -> str:
    return words.first_verb(stage, words.name_words(*names))


def _admits(stage: str, names: list[str]) -> bool:
    return (words.first_verb(stage, words.name_words(*names)) in words.story_words().admission_verbs
            or "admit" in stage.lower())


def _story(scenario: Scenario) -> str:
    # the story's set-up: its topic and first stages, 40 words (a third of the tokens of the
    # whole, and the legitimate pairs peaked lower: 0.50 against 0.59)
    return " ".join(" ".join([scenario.topic, *scenario.stages]).split()[:STORY_WORDS])


def _meter(_corpus: Sequence[str]) -> Meter | None:
    return english_meter()


PACK = LanguagePack(
    code="en",
    tools=TextTools(words.content_words, words.concept_words, words.word_runs, _names,
                    shared_run=8, why_run=4, why_run_content=2, unit="words", whole_names=True),
    shape=StoryShape(_asks, _scripted, _opening_move, _admits),
    meaning=MeaningReader(
        meter=_meter,
        # The cosine at or above which a pair is one text said twice (meaning.py's docstring).
        cuts={"need~opening": 0.65, "need~why": 0.6, "siblings": 0.67, "story": 0.56, "twin": 0.83},
        # a phrase of the why: five words holding at least two content words
        story=_story, units=lambda text: normalised(text.replace("\u2019", "'")).split(), phrase=5,
        joiner=" ", lemma=words.lemma, need_frame=_NEED_FRAME,
        concepts=words.concept_lemmas, concept_weight=0.5,
        concept_kinds=frozenset({"need~opening", "siblings", "twin"}),
        unchecked="English needs against openings, whys and siblings by meaning, retold test stories, "
                  "twin test personas"),
    year=_YEAR,
    facts_from=CASE_NEEDS,
    facts=check_facts,
    family_of=words.english_family,
    prose=check_prose,
)
