"""`inspect eval emobench/emobench`: emobench's cases as an inspect task, one sample per (case, seed).

The config is loaded as `emobench run` loads it (its flags become task parameters); the task's
metadata carries what a run's manifest says of the run, for `emobench import inspect`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai._util.error import PrerequisiteError
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import model_roles

import emobench as package
from emobench.config import RunConfig
from emobench.episode.roles import Provenance
from emobench.errors import EmobenchError, InputError
from emobench.inspect_task.roles import check_defaults
from emobench.inspect_task.scorers import emobench_scores
from emobench.inspect_task.solver import MANIFEST_KEY, EpisodeSetup, play_and_judge
from emobench.library_paths import library_root
from emobench.prompts import cases_language, load_language_template
from emobench.registry import Case
from emobench.run.binding import load_prompts, run_registry
from emobench.run.flags import flag_overrides, load_run_config
from emobench.run.runner import manifest, select_cases

DEFAULT_CONFIG = "configs/standard.yaml"
def case_sample(case: Case, seed: int) -> Sample:
    """One (case, seed); its metadata carries the case's fields the leaderboard slices by."""
    metadata = {
        "case_id": case.id, "seed": seed, "scenario_id": case.scenario.id, "persona_id": case.persona.id,
        "category": case.scenario.category, "dominant_axis": case.dominant_axis, "difficulty": case.difficulty,
        "threshold": case.persona.threshold, "valence": case.valence, "language": case.language,
    }
    return Sample(id=f"{case.id}|{seed}", input=case.opening, metadata=metadata)


# inspect reads `-T seeds=0,1,2` as a list of strings and `-T seeds=0` as an integer.
Listed = str | int | list[str] | list[int] | None


def _comma(value: Listed) -> str | None:
    if value is None:
        return None
    return ",".join(str(v) for v in value) if isinstance(value, list) else str(value)


def task_config(
    config: str, split: str | None, seeds: Listed, max_turns: int | None, min_turns: int | None,
    language: str | None, cases: Listed, limit: int | None, subject: str | None = None,
) -> RunConfig:
    """The config file with the task parameters on top, checked as `emobench run` checks its flags.
    ``subject`` (an emobench binding) plays the subject seat instead of inspect's model."""
    if language is not None and split is not None and language != "en" and not split.endswith(f"-{language}"):
        split = f"{split}-{language}"  # the library's Chinese splits are test-zh, dev-zh, demo-zh

    def load(subjects: list[str] | None) -> RunConfig:
        overrides = flag_overrides(subjects, None, None, split, _comma(seeds), max_turns, min_turns, limit)
        if cases is not None:
            overrides["cases"] = [c.strip() for c in str(_comma(cases)).split(",") if c.strip()]
        return load_run_config(Path(config), None, overrides, notes=[])[0]

    run_config = load(None)
    if subject is None:
        return run_config
    # One of the config's subjects or references (scripted:platitude) as it stands there; else bound as --subject binds it.
    named = [s for s in run_config.subjects if subject in (s.name, s.binding)][:1]
    return run_config.model_copy(update={"subjects": named or load([subject]).subjects[:1]})


def _as_parameter(exc: EmobenchError) -> str:
    """The error in the task's words: `emobench run`'s --max-turns is -T max_turns here."""
    if isinstance(exc, InputError) and exc.source.startswith("--"):
        where = f"-T {exc.source[2:].replace('-', '_')}"
        return f"{where}: {exc.field}: {exc.problem}" if exc.field else f"{where}: {exc.problem}"
    return str(exc)


@task(name="emobench")
def emobench(
    config: str = DEFAULT_CONFIG,
    split: str | None = None,
    seeds: Listed = None,
    max_turns: int | None = None,
    min_turns: int | None = None,
    language: str | None = None,
    cases: Listed = None,
    limit: int | None = None,
    subject: str | None = None,
) -> Task:
    """emobench's episodes: the model under evaluation is the subject (or `subject`, an emobench
    binding such as a scripted reference); user, judge (judge_2, …) and director are model roles,
    the config's bindings where a role is not given."""
    root = library_root()
    try:
        run_config = task_config(config, split, seeds, max_turns, min_turns, language, cases, limit, subject)
        registry = run_registry(run_config, root)
        played = select_cases(registry, run_config)
        case_language = cases_language(played)
        prompts = load_prompts(root, run_config, case_language)
        if "director" in model_roles() and prompts.director is None:  # an LLM director only inspect named
            prompts = replace(prompts, director=load_language_template(root, "prompts", "director.j2", case_language))
        check_defaults(run_config, subject is not None)
    except EmobenchError as exc:  # inspect prints this kind in one line, without a traceback
        raise PrerequisiteError(f"error: {_as_parameter(exc)}") from None
    registry_version = registry.version(run_config.split)
    setup = EpisodeSetup(
        config=run_config, cases={c.id: c for c in played}, prompts=prompts, root=root, language=case_language,
        subject_from_config=subject is not None,
        provenance=Provenance(run_config.split, registry_version, run_config.config_hash(), package.__version__),
    )
    about = manifest(run_config, "inspect", registry_version, prompts, {}, root, case_language)
    return Task(
        dataset=MemoryDataset([case_sample(c, s) for c in played for s in run_config.seeds], name=f"emobench-{run_config.split}"),
        solver=play_and_judge(setup),
        scorer=emobench_scores(setup),
        metadata={MANIFEST_KEY: about},
        version=package.__version__,
    )
