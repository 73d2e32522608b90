"""The fact rules read a fault said in other words (issue 39): each form is refused against the
facts it contradicts and passes where the facts agree, read straight from the rule functions."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from emobench.registry.checks.fields import Field
from emobench.registry.checks.lang.en import pronouns as prose_pronouns
from emobench.registry.checks.lang.en import prose_facts as prose_rules
from emobench.registry.checks.lang.en.prose_words import Person
from emobench.registry.checks.story_shape import scripted_outcome
from emobench.registry.models import Persona

REG: Any = SimpleNamespace(info=SimpleNamespace(present_year=2026))
SAMI = Person("Sami", "husband", "alive", 1970, None, "f0")
RUTH_DEAD = Person("Ruth", "mother", "dead", 1950, 2016, "f1")
RUTH_ALIVE = Person("Ruth", "mother", "alive", 1950, None, "f1")
TOM_DEAD = Person("Tom", "brother", "dead", 1980, 2020, "f2")
TOM_ALIVE = Person("Tom", "brother", "alive", 1980, None, "f2")
ASH_DEAD = Person("Ash", "half-brother", "dead", 1978, 2015, "f3")
CARL = Person("Carl", "stepbrother", "alive", 1982, None, "f4")


def _facts(people: list[Person], text: str, memory: bool = False, since: int | None = None) -> list[str]:
    field = Field("card.yaml", "stages[0]", text, memory, since)
    return [str(e) for e in [*prose_rules._death_and_life(people, field),
                             *prose_rules._durations(REG, None, people, field)]]  # type: ignore[arg-type]


@pytest.mark.parametrize(("people", "text", "fits"), [
    ([SAMI], "She talks about my late husband and the garden.", [Person("Sami", "husband", "dead", 1970, 2020, "f0")]),
    ([SAMI], "Ever since I became a widow the house is quiet.", [Person("Sami", "husband", "dead", 1970, 2020, "f0")]),
    ([RUTH_ALIVE], "My mother loved the sea, so we scattered her ashes off the pier.", [RUTH_DEAD]),
    ([RUTH_DEAD], "Mum has been gone three years now.", [Person("Ruth", "mother", "dead", 1950, 2023, "f1")]),
    ([RUTH_DEAD], "My mother passed away, God rest her, about two years ago.",
     [Person("Ruth", "mother", "dead", 1950, 2024, "f1")]),
    ([TOM_DEAD], "I talked to my brother on the phone yesterday.", [TOM_ALIVE]),
    ([TOM_DEAD], "Yesterday I spoke with Tom about the boat.", [TOM_ALIVE]),
    ([TOM_DEAD, CARL], "My brother rang me yesterday.", [TOM_ALIVE, CARL]),
    ([TOM_ALIVE, ASH_DEAD], "She says her brother's funeral was small.", [Person("Tom", "brother", "dead", 1980, 2021, "f2")]),
])
def test_a_fact_said_another_way_is_refused_and_the_true_one_passes(people: list[Person], text: str,
                                                                   fits: list[Person]) -> None:
    assert len(_facts(people, text)) == 1
    assert _facts(fits, text) == []


def test_a_pronoun_is_not_read_as_someone_else_who_died() -> None:
    # "her ashes" may be the dead mother's, not the living sister's
    sister = Person("Lia", "sister", "alive", 1985, None, "f5")
    assert _facts([sister, RUTH_DEAD], "Lia drove up after Mum died, and we scattered her ashes together.") == []
    assert _facts([sister], "Lia drove up, and we scattered her ashes together.") != []


def test_a_memory_set_after_a_death_is_read_for_contact() -> None:
    text = "Her mother keeps asking when the workshop opens."
    assert _facts([RUTH_DEAD], text, memory=True, since=2024) != []
    assert _facts([RUTH_DEAD], text, memory=True, since=2010) == []  # before 2016: a memory of her alive
    assert _facts([RUTH_DEAD], text, memory=True, since=None) == []


def _persona(born: int = 1986, job: str = "ferry mechanic", home: str = "Brindle") -> Any:
    facts = SimpleNamespace(born=born, job=job, home=home)
    return SimpleNamespace(facts=facts, name="Iris Vale", id="iris")


@pytest.mark.parametrize(("check", "text", "persona", "fits"), [
    ("ages", "honestly I hit thirty-five and nobody told me.", _persona(), _persona(born=1991)),
    ("ages", "She says she just reached fifty.", _persona(), _persona(born=1976)),
    ("job", "ok so as a nurse i know how to sign for things.", _persona(), _persona(job="nurse")),
    ("job", "Being a teacher, I plan every first day.", _persona(), _persona(job="maths teacher")),
    ("job", "I'm a fully fledged electrician now.", _persona(job="apprentice electrician"),
     _persona(job="electrician")),
    ("home", "ive lived in Carrow since the ferry started.", _persona(), _persona(home="Carrow")),
    ("home", "I'm based in Dunmere these days.", _persona(), _persona(home="Dunmere")),
])
def test_age_job_and_home_in_other_words(check: str, text: str, persona: Persona, fits: Persona) -> None:
    field = Field("card.yaml", "opening", text)

    def problems(who: Persona) -> list[Any]:
        if check == "ages":
            return list(prose_rules._ages(REG, who, field))
        return [p for p in prose_rules._job_and_home(who, field) if f"facts.{check}" in p.problem]
    assert len(problems(persona)) == 1
    assert problems(fits) == []


@pytest.mark.parametrize("stage", ["Later that evening, he asks who holds the spare key.",
                                   "At the workshop door he hesitates."])
def test_a_pronoun_after_the_first_words_is_the_persona(stage: str) -> None:
    assert prose_pronouns.pronoun_problem(stage, "she") is not None
    assert prose_pronouns.pronoun_problem(stage, "he") is None
    assert prose_pronouns.pronoun_problem("When Sam calls, he says hi.", "she") is None
    assert prose_pronouns.pronoun_problem("After the call her brother says he will come.", "she") is None


@pytest.mark.parametrize(("stage", "language"), [
    ("By the end they have booked a table.", "en"), ("She ends up ringing her mother.", "en"),
    ("By the time the conversation ends she has signed.", "en"), ("She finally accepts the offer.", "en"),
    ("到最后他还是去了医院。", "zh"), ("结果她还是打了电话。", "zh"), ("末了，他把照片收进了抽屉。", "zh"),
])
def test_a_stage_that_tells_its_ending_in_other_words_scripts_the_outcome(stage: str, language: str) -> None:
    assert scripted_outcome(stage, language) is not None  # type: ignore[arg-type]


def test_a_past_ending_or_a_weighing_is_not_scripted() -> None:
    assert scripted_outcome("They mention they have told only one person, who cried, so they ended up "
                            "doing the comforting.") is None
    assert scripted_outcome("She considers ringing her mother by the end of the week.") is None


def test_chinese_death_and_contact_in_other_words() -> None:
    from emobench.registry.checks.lang.zh import prose_facts as zh_prose

    mother = zh_prose.Person("周丽", "mother", "alive", 1970, None, "f")
    brother = zh_prose.Person("李强", "older-brother", "dead", 1990, 2020, "f")

    def said(person: Any, text: str, memory: bool = False, since: int | None = None) -> list[Any]:
        return list(zh_prose._death_and_life([person], Field("card.yaml", "stages[0]", text, memory, since)))
    for text in ("清明那天我们把我妈的骨灰撒进了江里。", "她说今年要给她妈烧纸。", "我妈走了快十年了。"):
        assert said(mother, text), text
        assert not said(zh_prose.Person("周丽", "mother", "dead", 1970, 2016, "f"), text)
    for text in ("昨天跟我哥打了电话，聊到很晚。", "今天和我哥视频了一会儿。"):
        assert said(brother, text), text
        assert not said(zh_prose.Person("李强", "older-brother", "alive", 1990, None, "f"), text)
    assert said(brother, "我哥每天打电话问我吃了没。", memory=True, since=2024)
    assert not said(brother, "我哥每天打电话问我吃了没。", memory=True, since=2010)
