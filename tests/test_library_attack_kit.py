"""The adversarial kit as a test (issue 39): seeded variants of each fault class, planted in
copies of the small English and Chinese libraries, are caught at the rate the class's record
states (90% unless it says, honestly, less). The hermetic sample plants one variant of each
of tests/library_attack_text.py's classes; the soak runs every class at several seeds."""

from __future__ import annotations

import random
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.library_attack_kit import README, TARGET, FaultClass, all_classes, measure, readme_table, run_kit, table
from tests.library_attack_text import CLASSES as TEXT_CLASSES


def _sample(fault: FaultClass, count: int) -> FaultClass:
    return replace(fault, variants=lambda rng: fault.variants(rng)[:count])


def test_a_seeded_variant_of_each_text_class_is_caught(tmp_path: Path) -> None:
    rates = run_kit([_sample(f, 1) for f in TEXT_CLASSES], seed=0, work=tmp_path)
    missed = [(r.name, r.language, r.missed) for r in rates if r.missed]
    assert not missed, missed
    assert {(r.name, r.language) for r in rates} == {(f.name, f.language) for f in TEXT_CLASSES}


def test_variants_are_seeded_and_at_least_five_per_class() -> None:
    for fault in all_classes():
        first, again = fault.variants(random.Random(7)), fault.variants(random.Random(7))
        assert first == again, fault.name
        assert len(first) >= 5, (fault.name, fault.language, len(first))


def test_the_table_has_a_row_per_class_and_a_column_per_language(tmp_path: Path) -> None:
    fault = _sample(TEXT_CLASSES[0], 1)
    rates = [measure(fault, random.Random(0), tmp_path)]
    assert table(rates).splitlines() == ["| fault class | English | Chinese |", "|---|---|---|",
                                         f"| {fault.name} | 1/1 (100%) | — |"]


@pytest.mark.soak
# derandomized: the same two seeds each run (with seed 0 below, three), so a class near its floor
# does not flicker; two, not three, since the earlier editions' classes joined the kit
@settings(max_examples=2, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31))
def test_every_class_is_caught_at_its_stated_rate(tmp_path: Path, seed: int) -> None:
    work = Path(tempfile.mkdtemp(dir=tmp_path))
    classes = all_classes()
    assert all(fault.floor <= TARGET for fault in classes)
    low = [(rate.name, rate.language, f"{rate.rate:.0%} < {fault.floor:.0%}", rate.missed)
           for rate, fault in zip(run_kit(classes, seed, work), classes, strict=True) if rate.rate < fault.floor]
    assert not low, low


@pytest.mark.soak
def test_the_readme_shows_the_kit_at_seed_0(tmp_path: Path) -> None:
    assert readme_table(README.read_text(encoding="utf-8")) == table(run_kit(all_classes(), 0, tmp_path))
