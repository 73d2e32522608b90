"""An adaptive run's stopping record (`run --stop-when`), replayed on the submitted records: its
rules are asked again after each wave of the seeded order, and where they stop, what they say and
how many cases were played must be what the record says. So an adaptive run's partial grid is
accepted only with its stopping record intact: a wave dropped, or a stop claimed early, is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emobench.config import RunConfig
from emobench.errors import InputError
from emobench.registry import Registry
from emobench.rundir import RunDir

Cell = tuple[str, int]
CHECKED = ("cases_played", "waves_played", "stopped", "reason")  # what the replay must give as recorded


def replay_stop(folder: Path, record: Any, config: RunConfig, registry: Registry,
                cases: list[str]) -> tuple[set[Cell], list[tuple[str, str]]]:
    """The cells the stopping rules played, and (field, problem) where the record is not the replay's."""
    from emobench.run.adaptive import ORDER_SEED, AdaptiveRun
    from emobench.run.stop_spec import parse_rule

    if not isinstance(record, dict) or record.get("mode") != "run" or not isinstance(record.get("rules"), list):
        return set(), [("adaptive", "not the stopping record of an adaptive run")]
    try:
        rules = [parse_rule(str(rule)) for rule in record["rules"]]
        if record.get("order_seed") != ORDER_SEED or record.get("population") != len(cases):
            return set(), [("adaptive.population", f"{record.get('population')} cases in order seed "
                            f"{record.get('order_seed')}; the run declared {len(cases)} in order seed {ORDER_SEED}")]
        stopper = AdaptiveRun.for_run(rules, config, registry, len(cases), int(record["wave"]))
    except (InputError, KeyError, TypeError, ValueError) as exc:
        return set(), [("adaptive", f"its rules do not replay: {exc}")]
    played: list[Cell] = []
    for wave in stopper.waves([(case, seed) for case in cases for seed in config.seeds]):
        played += wave
        if stopper.after_wave(RunDir(folder), played):
            break
    wrong = [(f"adaptive.{name}", f"{record.get(name)!r}; its rules on these records give {stopper.state.get(name)!r}")
             for name in CHECKED if record.get(name) != stopper.state.get(name)]
    return set(played), wrong
