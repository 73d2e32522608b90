"""Issue 53, part 2: three faults the guards passed for a structural reason, not a missing word:
an undated 'current' memory read as set two years back, a training entry point whose named
config was never read, and accented letters reaching the injection rules unfolded."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from emobench.registry.checks.injection import addressed_to_models
from emobench.registry.checks.normalise import fold
from emobench.registry.cli import app
from tests.test_registry_errors import edit_yaml
from tests.test_registry_fixture_faults import one_validate_error
from tests.test_registry_heldout_faults import IRIS, WORKSHOP
from tests.test_registry_heldout_faults import lib as lib  # the fixture


def _rowan_died(root: Path, year: int) -> None:
    """Iris's mother Rowan died `year` rather than 2020, in her facts and in the cast."""
    edit_yaml(root / IRIS, lambda d: d["facts"]["relatives"][0].update(died=year))
    edit_yaml(root / WORKSHOP, lambda d: d["cast"][0].update(died=year))


def test_an_undated_current_memory_is_set_in_the_present(lib: Path) -> None:
    # Rowan died last year (the library's present is 2026): a current memory is now, after her
    # death, though two years back (2024) would have been before it.
    _rowan_died(lib, 2025)
    edit_yaml(lib / WORKSHOP, lambda d: d["memories"][2].update(text="Rowan rings every Sunday to ask about it."))
    line = one_validate_error(lib, WORKSHOP, "memories[2].text")
    assert "Rowan is dead" in line and "died 2025" in line


def test_a_current_memory_dated_before_the_death_may_tell_her_alive(lib: Path) -> None:
    _rowan_died(lib, 2025)
    edit_yaml(lib / WORKSHOP, lambda d: d["memories"][2].update(
        text="Rowan rings every Sunday to ask about the keys.", year=2024))
    result = CliRunner().invoke(app, ["validate", str(lib)])
    assert result.exit_code == 0, result.output
