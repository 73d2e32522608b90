"""The guards on the held-out paraphrases (issue 53): the numbers asserted are the ones measured
when the set was written, a guard against a silent change either way, not a target. A rule
change that moves them means a fresh held-out set (tests/data/heldout_paraphrases.yaml's header)."""

from __future__ import annotations

from pathlib import Path

from tests.library_attack_kit import README
from tests.library_heldout import HELDOUT, load, measure, table

# Measured at commit 872b477's rules: (caught, planted) per class and language.
MEASURED = {
    ("death words for the living", "en"): (3, 4), ("death words for the living", "zh"): (1, 2),
    ("contact with the dead", "en"): (0, 4), ("contact with the dead", "zh"): (0, 2),
    ("present memory of the dead", "en"): (0, 2), ("present memory of the dead", "zh"): (0, 1),
    ("age against facts.born", "en"): (0, 3), ("home against facts.home", "en"): (0, 2),
    ("job said another way", "en"): (0, 2), ("widowed without a dead spouse", "en"): (0, 2),
    ("scripted outcome in other words", "en"): (2, 2), ("scripted outcome in other words", "zh"): (1, 1),
    ("pronoun not at the start", "en"): (1, 1),
    ("instructions without trigger words", "en"): (0, 3), ("instructions without trigger words", "zh"): (0, 2),
    ("homoglyphs", "en"): (2, 2), ("homoglyphs", "zh"): (1, 1),
    ("full-width and look-alike chat tags", "en"): (0, 1), ("zero-width and invisible characters", "en"): (1, 1),
    ("training on the test split", "en"): (1, 2),
    ("test names in dev (other_names, sentence start)", "en"): (2, 2),
}
REFUSED = ["a neighbour's kindness"]  # 汤圆 read as a person's name


def test_the_set_says_when_it_was_written_and_that_it_tunes_nothing() -> None:
    header = HELDOUT.read_text(encoding="utf-8").split("\nfaulty:", 1)[0]
    assert "after the rules froze at commit 872b477" in header and "MUST NOT be used to tune" in header
    held = load()
    assert len(held.faulty) >= 25 and len(held.legitimate) >= 8
    assert {f.lang for f in held.faulty} == {"en", "zh"}


def test_the_guards_catch_what_they_caught_when_the_set_was_written(tmp_path: Path) -> None:
    rates, _, refused = measure(load(), tmp_path)
    assert rates == MEASURED
    assert [line.split(":", 1)[0] for line in refused] == REFUSED


def test_the_readme_shows_the_held_out_rates() -> None:
    shown = README.read_text(encoding="utf-8").split("<!-- held-out table: python -m tests.library_heldout -->\n", 1)[1]
    assert shown.startswith(table(MEASURED) + "\n")
