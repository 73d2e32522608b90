"""`emobench import inspect LOG… --out RUN`: inspect logs of the emobench task as a run directory.

Each finished sample's store holds its Episode and EpisodeJudgement as `emobench run` writes them
(emobench/inspect_task/solver.py); the task's metadata holds what a run's manifest says of the
run. The run is then scored as any run is (finalize_run), so every command reads it alike.
A sample that ended in an error has no episode: it is counted, not imported. Evaluations of one
config that differ in their subject (a model, and the config's scripted references played with
`-T subject=scripted:NAME`) make one run, as `emobench run` plays them together; each episode
keeps the config hash it was played under, the manifest's is the run's.
"""

from __future__ import annotations

import zipfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from inspect_ai.log import EvalLog, read_eval_log
from pydantic import ValidationError

from emobench.config import RoleConfig, RunConfig
from emobench.errors import InputError
from emobench.inspect_task.solver import CONFIG_KEY, MANIFEST_KEY, stored_records
from emobench.records import Episode, EpisodeJudgement
from emobench.run.binding import run_registry
from emobench.run.finalize import finalize_run
from emobench.rundir import RunDir, append_line

TASK = "emobench/emobench"


@dataclass
class Imported:
    episodes: list[Episode] = field(default_factory=list)
    judgements: list[EpisodeJudgement] = field(default_factory=list)
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)  # config hash -> config as played
    # (subject, sample id) -> why it has no episode; a later log (eval-retry's) may finish it
    failed: dict[tuple[str, str], str] = field(default_factory=dict)
    finished: set[tuple[str, str]] = field(default_factory=set)
    logs: list[dict[str, Any]] = field(default_factory=list)
    manifest: dict[str, Any] | None = None

    @property
    def unfinished(self) -> Counter[str]:
        """Why samples finished in none of the logs have no episode."""
        return Counter(why for sample, why in self.failed.items() if sample not in self.finished)


def read_log(path: Path) -> EvalLog:
    """The log, or one line saying why it is not one of this task's."""
    if not path.is_file():
        raise InputError(path, "", "no such log file")
    try:
        log = read_eval_log(str(path), exclude_fields={"messages", "events", "attachments"})
    except (zipfile.BadZipFile, ValueError, KeyError, OSError, EOFError) as exc:
        raise InputError(path, "", f"not a readable inspect log (truncated or damaged?): {type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    if log.eval.task != TASK:
        raise InputError(path, "eval.task", f"{log.eval.task!r} is not emobench's task ({TASK})")
    if not isinstance((log.eval.metadata or {}).get(MANIFEST_KEY), dict):
        raise InputError(path, f"eval.metadata.{MANIFEST_KEY}", "missing: not written by emobench's task")
    return log


def collect(paths: list[Path]) -> Imported:
    found = Imported()
    seen: set[str] = set()
    for path in paths:
        log = read_log(path)
        about = dict((log.eval.metadata or {})[MANIFEST_KEY])
        if found.manifest is not None and about.get("registry_version") != found.manifest.get("registry_version"):
            raise InputError(path, f"eval.metadata.{MANIFEST_KEY}.registry_version",
                             "differs from the first log's: the case cards changed between the evaluations")
        found.manifest = found.manifest or about
        found.logs.append({"log": str(path), "eval_id": log.eval.eval_id, "status": log.status,
                           "task_version": log.eval.task_version, "inspect_version": log.eval.packages.get("inspect_ai"),
                           "created": log.eval.created})
        subject = str((log.eval.task_args or {}).get("subject") or log.eval.model)
        for number, sample in enumerate(log.samples or [], start=1):
            which = (subject, str(sample.id))
            try:
                records = stored_records(sample.store)
            except ValidationError as exc:
                raise InputError(path, f"samples[{number}].store", f"not an emobench record: {exc.errors()[0]['msg']}") from None
            if records is None:
                found.failed[which] = sample.error.message.splitlines()[0] if sample.error else "no episode"
                continue
            found.finished.add(which)
            episode, judgement = records
            if episode.key in seen:  # a retried eval's log repeats the samples it carried over
                continue
            seen.add(episode.key)
            found.episodes.append(episode)
            found.judgements.append(judgement)
            found.configs[episode.config_hash] = sample.store[CONFIG_KEY]
    return found


def _infos(episode: Episode, name: str) -> list[dict[str, Any]]:
    value = episode.roles[name]
    return [r.model_dump() for r in (value if isinstance(value, list) else [value])]


def _roles(episodes: list[Episode], panel: str) -> dict[str, Any]:
    """The manifest's roles, as `emobench run` writes them (BoundRoles.info): every subject played."""
    subjects = {info["label"]: info for e in episodes for info in _infos(e, "subject")}
    first = episodes[0]
    return {
        "subjects": list(subjects.values()),
        "user": _infos(first, "user")[0],
        "judges": _infos(first, "judges"),
        "director": _infos(first, "director")[0] if "director" in first.roles else "rule",
        "panel": panel,
    }


def run_config(configs: list[dict[str, Any]], source: Path) -> RunConfig:
    """One config for the run: the evaluations' own, which may differ in their subject only (a
    model and the scripted references, each its own evaluation), with every subject listed."""
    rest = [{k: v for k, v in c.items() if k != "subjects"} for c in configs]
    if any(r != rest[0] for r in rest[1:]):
        raise InputError(source, "samples", "evaluations of different configs or roles: import each into its own run")
    subjects = {RoleConfig.model_validate(s).name: s for c in configs for s in c["subjects"]}
    return RunConfig.model_validate({**configs[0], "subjects": list(subjects.values())})


def import_inspect(paths: list[Path], out_dir: Path, *, root: Path) -> dict[str, Any]:
    """Write the run directory from the logs; returns what was imported, for the command's line."""
    out = RunDir(out_dir)
    if out.manifest.exists():
        raise InputError(out.manifest, "", "already exists; import into a new run directory")
    found = collect(paths)
    if not found.episodes:
        why = "; ".join(f"{n} × {reason}" for reason, n in found.unfinished.items()) or "the logs hold no sample"
        raise InputError(paths[0], "samples", f"no finished episode to import ({why})")
    assert found.manifest is not None  # collect read at least one log
    played = run_config(list(found.configs.values()), paths[0])
    registry = run_registry(played, root)
    out.create()
    for episode, judgement in zip(found.episodes, found.judgements, strict=True):
        out.append_episode(episode)
        append_line(out.judgements, judgement.model_dump_json().encode())
    imported_at = datetime.now(UTC).isoformat(timespec="seconds")
    out.write_json(out.manifest, {
        **found.manifest,
        "run_id": out.path.name,
        "config": played.model_dump(mode="json"),
        "config_hash": played.config_hash(),
        "roles": _roles(found.episodes, played.panel.name),
        "inspect": {"logs": found.logs, "unfinished_samples": dict(found.unfinished), "imported_at": imported_at},
    })
    out.mark_latest()
    finalize_run(out, registry)
    return {"episodes": len(found.episodes), "unfinished": dict(found.unfinished), "logs": len(paths)}
