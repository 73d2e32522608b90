"""A run's config as `run` (and `play`) build it: the config file, or the resumed run's, with the
command-line flags on top; errors in a flag's value name the flag."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from emobench.cli_support import SPLITS, against_flags
from emobench.errors import InputError

if TYPE_CHECKING:
    from emobench.config import RunConfig
    from emobench.run.adaptive import AdaptiveRun


def flag_overrides(
    subject: list[str] | None,
    user: str | None,
    judge: list[str] | None,
    split: str | None,
    seeds: str | None,
    max_turns: int | None,
    min_turns: int | None,
    limit: int | None,
    local_split: Path | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if local_split is not None:  # the folder names its split; a --split beside it must agree
        from emobench.registry.local import read_split_info

        data["local_split"] = str(local_split.resolve())
        data["split"] = read_split_info(local_split)["split"]
    if subject:
        data["subjects"] = [{"binding": s} for s in subject]
    if user:
        data["user"] = {"binding": user}
    if judge:
        data["judges"] = [{"binding": j, "label": f"judge-{i}" if len(judge) > 1 else None} for i, j in enumerate(judge)]
    if split and data.get("split", split) != split:
        raise InputError("--split", "", f"{split!r}, but --local-split {local_split} holds split {data['split']!r}")
    if split:
        data["split"] = split
    if seeds is not None:
        try:
            data["seeds"] = [int(s) for s in seeds.split(",") if s.strip()]
        except ValueError:
            raise InputError("--seeds", "", f"{seeds!r} is not a comma-separated list of integers") from None
        if not data["seeds"]:
            raise InputError("--seeds", "", f"{seeds!r} holds no seed")
    for key, value in (("max_turns", max_turns), ("min_turns", min_turns), ("limit_cases", limit)):
        if value is not None:
            data[key] = value
    return data


# The config field each flag of `run` sets (the key flag_overrides uses -> the validated field).
FLAGS = {
    "subjects": "--subject", "user": "--user", "judges": "--judge", "split": "--split", "seeds": "--seeds",
    "max_turns": "--max-turns", "min_turns": "--min-turns", "limit_cases": "--limit", "local_split": "--local-split",
}
FLAG_FIELDS = {key: "panel.judges" if key == "judges" else key for key in FLAGS}


def _merge_roles(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """CLI bindings replace the config's binding but keep its sampling when the role exists."""
    merged = {**base, **override}
    if "judges" in override:
        # The panel's judges are replaced; its other settings (rubrics, holistic, pairwise) stay.
        old, new = base["panel"]["judges"], merged.pop("judges")
        if len(old) == len(new):
            new = [{**b, "binding": o["binding"], "label": o["label"]} for b, o in zip(old, new, strict=True)]
        merged["panel"] = {**base["panel"], "judges": new}
    if "subjects" in override and "subjects" in base and len(base["subjects"]) == len(override["subjects"]):
        merged["subjects"] = [
            {**b, "binding": o["binding"], "label": None} for b, o in zip(base["subjects"], override["subjects"], strict=True)
        ]
    if "user" in override and "user" in base:
        merged["user"] = {**base["user"], "binding": override["user"]["binding"], "label": None}
    return merged


def _lower_min_turns(data: dict[str, Any], overrides: dict[str, Any], source: Path, notes: list[str]) -> dict[str, Any]:
    """A --max-turns below the config's min_turns (and no --min-turns) lowers min_turns to it,
    so that a short trial run of a full config needs one flag, not two."""
    from emobench.config import RunConfig

    max_turns = overrides.get("max_turns")
    min_turns = data.get("min_turns", RunConfig.model_fields["min_turns"].default)
    if not isinstance(max_turns, int) or max_turns < 1 or "min_turns" in overrides or not isinstance(min_turns, int):
        return data  # a bad --max-turns is reported against the flag, with nothing lowered
    if min_turns <= max_turns:
        return data
    notes.append(f"note: --max-turns {max_turns} is below min_turns {min_turns} of {source}: min_turns lowered to "
                 f"{max_turns} (set it with --min-turns)")
    return {**data, "min_turns": max_turns}


def load_run_config(
    config: Path | None, resume: Path | None, overrides: dict[str, Any], notes: list[str] | None = None
) -> tuple[RunConfig, dict[str, str]]:
    """The run's config as `run` validates it: the file (or the resumed run's), the panel, the
    flags on top; errors in a flag's value name the flag. Returns it with the flags given.

    What the flags changed beyond their own field goes to ``notes`` for the caller to print
    once its input is all checked (a refusal is one line); without it, printed here."""
    from emobench.config import load_config_data, resolve_panel, validate_config
    from emobench.run.runner import ROOT
    from emobench.rundir import RunDir

    if resume is not None and not RunDir(resume).manifest.exists():
        raise InputError(resume, "", "no manifest.json: not a run directory to resume")
    source = config or (resume / "manifest.json" if resume else ROOT / "configs" / "demo.yaml")
    base = RunDir(resume).read_config() if resume and config is None else load_config_data(source)
    flags = {FLAG_FIELDS[key]: flag for key, flag in FLAGS.items() if key in overrides}
    said: list[str] = []
    merged = _lower_min_turns(_merge_roles(resolve_panel(base, source, ROOT), overrides), overrides, source, said)
    local = merged.get("local_split") is not None  # a local folder names its own split
    if config is not None and "split" not in overrides and not local and merged.get("split", "test") not in SPLITS:
        raise InputError(source, "split", f"unknown split {merged['split']!r} (known: {', '.join(SPLITS)})")
    with against_flags(flags):
        validated = validate_config(merged, source)
    if notes is None:
        for line in said:
            typer.echo(line, err=True)
    else:
        notes += said
    return validated, flags



def stop_plan(stop_when: list[str] | None, wave: int | None, shard: str | None, config: RunConfig) -> AdaptiveRun | None:
    """The adaptive run `--stop-when` asks for (run/adaptive.py), or None for the whole grid.
    Refused with --shard: a shard holds some seeds of a case, so no case's mean is known in it."""
    from emobench.run.stop_spec import FLAG, parse_stop_when

    rules = parse_stop_when(stop_when)
    if not rules:
        if wave is not None:
            raise InputError("--wave", "", f"{wave}: waves are for an adaptive run; give --stop-when too")
        return None
    if shard is not None:
        raise InputError(FLAG, "", "an adaptive run cannot be sharded (--shard): its waves need every episode of a case")
    from emobench.run.adaptive import AdaptiveRun
    from emobench.run.runner import ROOT, run_registry, select_cases

    registry = run_registry(config, ROOT)
    return AdaptiveRun.for_run(rules, config, registry, len(select_cases(registry, config)), wave)
