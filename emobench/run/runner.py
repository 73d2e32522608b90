"""The batch layer: schedule episodes, bind endpoints, append results, resume, finalise.

The episode loop stays pure; everything with side effects (servers, files, progress) is here.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import emobench
from emobench.config import RunConfig
from emobench.endpoints.cache import ResponseCache
from emobench.endpoints.pool import EndpointPool
from emobench.episode.loop import run_episode
from emobench.episode.roles import EpisodePrompts, Provenance, RoleCaller
from emobench.episode.roles import role_caller as _caller  # noqa: F401  (the name the commands import)
from emobench.errors import EndpointError, InputError
from emobench.judging.stage import Panel, bind_panel, judge_episodes, judge_finished, judge_pairwise
from emobench.library_paths import git_sha, library_root
from emobench.prompts import cases_language, load_language_template
from emobench.records import EpisodeJudgement, Limits, PairwiseCall, PairwiseVerdict
from emobench.registry import Case, Registry
from emobench.registry.local import CASES_FILE, read_split_info
from emobench.run.adaptive import Stopper
from emobench.run.batch_judging import batched_panel, check_batch, judge_deferred
from emobench.run.binding import PLAYING_GC_THRESHOLD, bind_roles, load_prompts, run_registry
from emobench.run.preflight import preflight
from emobench.rundir import RunDir, atomic_write_bytes, iter_records

ROOT = library_root()


@dataclass(frozen=True)
class RunResult:
    run_dir: Path
    new_episodes: int
    total_episodes: int


def select_cases(registry: Registry, config: RunConfig) -> list[Case]:
    cases = registry.cases(config.split)
    if config.cases:
        known = {c.id for c in cases}
        missing = [c for c in config.cases if c not in known]
        if missing:
            raise InputError("config", "cases", f"not in split {config.split!r}: {', '.join(missing)}")
        cases = [c for c in cases if c.id in set(config.cases)]
    return cases[: config.limit_cases] if config.limit_cases else cases


def prompt_versions(prompts: EpisodePrompts) -> dict[str, str]:
    return {
        "simulator": prompts.simulator.version,
        "judge": prompts.judge.version,
        "subject_system": prompts.subject_system.version if prompts.subject_system else "none",
        "director": prompts.director.version if prompts.director else "rule",
        "probe": prompts.probe.version if prompts.probe else "none",
    }


def manifest(
    config: RunConfig, run_id: str, registry_version: str, prompts: EpisodePrompts, roles: dict[str, Any], root: Path,
    language: str = "en",
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "config": config.model_dump(mode="json"),
        "config_hash": config.config_hash(),
        "split": config.split,
        "language": language,  # from the start, so a run that never finishes still says it
        "registry_version": registry_version,
        "prompt_versions": prompt_versions(prompts),
        # Which language's templates played and judged the cases: the judges' may be pinned.
        "templates_language": {"prompts": language, "judges": config.judges_language(language),
                               "judge_language": config.judge_language},
        "roles": roles,
        "emobench_version": emobench.__version__,
        "git_sha": git_sha(root),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _check_resume(rd: RunDir, config: RunConfig, registry_version: str, resume: bool, force: bool) -> None:
    if not rd.manifest.exists():
        return
    if not resume:
        raise InputError(rd.path, "", "run directory already exists; pass --resume to continue it")
    old = rd.read_manifest()
    if old.get("split") != config.split:  # even --force: one run directory holds one split
        raise InputError(rd.manifest, "split", f"the run is of split {old.get('split')!r}, this config of {config.split!r}")
    if old.get("config_hash") != config.config_hash() and not force:
        raise InputError(
            rd.manifest,
            "config_hash",
            f"{old.get('config_hash')} differs from this config's {config.config_hash()}; pass --force to resume anyway",
        )
    if old.get("registry_version") != registry_version and not force:
        raise InputError(
            rd.manifest, "registry_version", "the case cards changed since this run; pass --force to resume anyway"
        )


def _finished(rd: RunDir, split: list[Case]) -> tuple[set[str], set[str]]:
    """Keys of the finished and of the judged episodes. Every record is read and checked
    first, so that a run directory that cannot be resumed is refused before anything is written."""
    done: set[str] = set()
    known = {case.id for case in split}
    for number, episode in enumerate(rd.iter_episodes(), start=1):  # one at a time: the driver keeps the keys only
        if episode.key in done:
            raise InputError(rd.episodes, f"record {number}", f"episode {episode.key} appears twice")
        if episode.case_id not in known:
            raise InputError(rd.episodes, f"record {number}", f"case {episode.case_id!r} is not in this run's split")
        done.add(episode.key)
    judged = {j.key for j in iter_records(rd.judgements, EpisodeJudgement)}
    for path, model in ((rd.pairwise_log, PairwiseVerdict), (rd.pairwise_calls, PairwiseCall)):
        for _ in iter_records(path, model):  # checked, not kept
            pass
    rd.fault_counts()
    return done, judged


def _progress(console: Console, enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]episodes"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[calls]} calls · {task.fields[retries]} retries · {task.fields[turns]} turns"),
        console=console,
        disable=not enabled,
        transient=False,
    )


@contextmanager
def long_lived_heap() -> Iterator[None]:
    """Fewer cyclic-GC passes while episodes run. Every episode in flight keeps its transcript and
    call records alive, and each collection walks them again: at 1,000 episodes in flight the
    collector took a third of the harness's CPU per call. Objects made before the run (registry,
    templates, modules) are frozen out of the walks, and the young generation is collected every
    200,000 net allocations (at 50,000, 216 episodes in flight still spent 78 ms of GC in a run
    of 7,992 calls; now 12 ms); both are restored after."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*PLAYING_GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def in_shard(case_id: str, seed: int, shard: tuple[int, int] | None) -> bool:
    """Stable assignment of (case, seed) to shard i of n, the same on every machine."""
    if shard is None:
        return True
    index, count = shard
    digest = hashlib.blake2b(f"{case_id}|{seed}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % count == index


async def _judge_leftovers(
    rd: RunDir,
    registry: Registry,
    panel: Panel,
    limits: Limits,
    concurrency: int,
    shard: tuple[int, int] | None,
    console: Console,
    unjudged: set[str],
    subjects: set[str],
    batch: bool = False,
) -> None:
    """Episodes an earlier, interrupted run finished but did not judge still need their
    judgement; pairwise comparisons need every subject's episode. Only then is episodes.jsonl
    read back: episodes finished in this run were judged as they ended. ``subjects`` are those
    with episodes in the run directory."""
    pairwise = panel.config.pairwise and len(subjects) > 1
    if not unjudged and not pairwise:
        return
    # Without pairwise comparisons, only the unjudged episodes are read into memory, not the run's.
    episodes = [e for e in rd.iter_episodes() if in_shard(e.case_id, e.seed, shard) and (pairwise or e.key in unjudged)]
    if batch:  # the holistic and pairwise judging together, in one batch
        judged = await judge_deferred(rd, episodes, registry, panel, limits)
    else:
        judged = await judge_episodes(rd, episodes, registry, panel, limits, concurrency)
    if judged:
        console.print(f"judged {judged} episode(s) left unjudged by an earlier run, panel {panel.config.name!r}")
    if not batch:
        await judge_pairwise(rd, episodes, registry, panel, limits, concurrency)


async def run_benchmark(
    config: RunConfig,
    run_dir: Path,
    *,
    root: Path = ROOT,
    resume: bool = False,
    force: bool = False,
    console: Console | None = None,
    show_progress: bool = True,
    cache: ResponseCache | None = None,
    shard: tuple[int, int] | None = None,
    notes: Sequence[str] = (),
    ray: str | None = None,
    stop: Stopper | None = None,
    batch_poll_s: float | None = None,
) -> RunResult:
    """Run (or resume) every episode, judging each as it finishes. ``notes`` (what the command
    line changed) are printed under the run's first line, once preflight passed.
    ``ray`` ("local", "auto" or an address) plays the episodes on a Ray cluster's workers.
    ``stop`` (an adaptive run, run/adaptive.py) plays the cases in its waves and may end early;
    what it decided goes to the manifest's ``adaptive``. ``batch_poll_s``, when given, sends the
    holistic and pairwise judging through the Batch API after each wave (run/batch_judging.py),
    polling each batch this often."""
    console = console or Console(stderr=True)
    registry = run_registry(config, root)
    cases = select_cases(registry, config)
    registry_version = registry.version(config.split)
    rd = RunDir(run_dir)
    _check_resume(rd, config, registry_version, resume, force)
    preflight(
        roles=config.bindings(), panel=config.panel, scoring_profile=config.scoring_profile,
        out_dir=rd.path, root=root, source="config",
    )
    language = cases_language(cases)
    prompts = load_prompts(root, config, language)
    for rubric in config.panel.rubrics.values():  # in the judges' language, before anything is written
        load_language_template(root, "judges", rubric, config.judges_language(language))
    if ray is not None:  # imported only with --ray: emobench runs without Ray installed
        from emobench.run.ray_executor import check

        check(config)
    if rd.manifest.exists() and not force:  # a new edition changes the prompts: its episodes are not comparable
        recorded = rd.read_manifest().get("prompt_versions")
        if recorded != prompt_versions(prompts):
            raise InputError(rd.manifest, "prompt_versions", f"{recorded} differ from this library's "
                             f"{prompt_versions(prompts)}; pass --force to resume anyway")
    done, judged = _finished(rd, registry.cases(config.split))
    unjudged = done - judged
    check_batch(config, rd, batch_poll_s is not None, ray, bool(unjudged))
    console.print(
        f"emobench run → {rd.path}  (config {config.config_hash()}, split {config.split}, "
        f"{len(config.subjects)} subject(s), seeds {config.seeds})",
        soft_wrap=True,
    )
    for note in notes:
        console.print(note, soft_wrap=True, markup=False, highlight=False)
    rd.create()
    if done:  # a run becomes runs/latest once it holds an episode, so one that fails before never does
        rd.mark_latest()
    rd.repair()
    provenance = Provenance(config.split, registry_version, config.config_hash(), emobench.__version__)
    limits = config.limits()

    async with AsyncExitStack() as stack:
        pool = EndpointPool(stack, rd.logs, cache, on_fault=rd.log_fault)
        bound = await bind_roles(pool, config)
        judges, subjects = bound.judges, bound.subjects
        info = manifest(config, rd.path.name, registry_version, prompts, bound.info(config), root, language)
        info["shard"] = list(shard) if shard else None
        if config.local_split is not None:  # the cards travel with the run, for rescoring and reports
            local = Path(config.local_split)
            info["local_split"] = {k: v for k, v in read_split_info(local).items() if k in ("split", "language", "source")}
            atomic_write_bytes(rd.path / CASES_FILE, (local / CASES_FILE).read_bytes())
        cluster = None
        if ray is not None:
            from emobench.run.ray_executor import ray_cluster

            cluster = await stack.enter_async_context(ray_cluster(ray, config, root, cache, provenance, language, rd.log_fault))
            info["ray"] = cluster.provenance()
        rd.write_json(rd.manifest, info)

        jobs = [
            (subject, case, seed)
            for subject in subjects
            for case in cases
            for seed in config.seeds
            if f"{subject.info.label}|{case.id}|{seed}" not in done and in_shard(case.id, seed, shard)
        ]
        gate = asyncio.Semaphore(config.concurrency)
        window = 2 * config.concurrency  # episodes started at once: the gate's, and as many waiting to follow
        panel = bind_panel(config.panel, judges, root, config.judges_language(language))
        deferred = None  # with --batch: the panel whose holistic and pairwise judging waits for each wave's end
        if batch_poll_s is not None:
            deferred = await batched_panel(stack, rd, cache, config, root, language, batch_poll_s)

        marked = False  # the run was made runs/latest by its first episode written here

        async def keep(write_out: Callable[[], None]) -> None:
            nonlocal marked
            # Written off the event loop (the fsync would stall every episode) and not kept after;
            # shielded, so a run cancelled by another episode's failure still writes this one.
            write = asyncio.ensure_future(asyncio.to_thread(write_out))
            writes.add(write)
            write.add_done_callback(writes.discard)
            await asyncio.shield(write)
            if not marked:  # once: a symlink and a rename per episode were a few per cent of a call's CPU
                marked = True
                rd.mark_latest()

        async def one(subject: RoleCaller, case: Case, seed: int) -> int:
            if cluster is not None:  # a worker played and judged it; this process alone writes
                async with gate:
                    played = await cluster.play(subjects.index(subject), case.id, seed)
                await keep(partial(played.write, rd))
                return played.turns
            async with gate:
                episode = await run_episode(case, bound.episode_roles(subject), prompts, seed, limits, provenance)
            await keep(partial(rd.append_episode, episode))
            if deferred is None:
                await judge_finished(rd, episode, case, panel, limits)
            return len(episode.turns)

        writes: set[asyncio.Future[None]] = set()
        total = len(done) + len(jobs)
        grid = [(case.id, seed) for case in cases for seed in config.seeds]
        waves = stop.waves(grid) if stop is not None else [grid]
        played: list[tuple[str, int]] = []  # the (case, seed) cells of the waves played, in play order
        ran: list[tuple[RoleCaller, Case, int]] = []
        new = turns = 0
        try:
            with long_lived_heap(), _progress(console, show_progress) as progress:
                bar = progress.add_task("run", total=total, completed=len(done), calls=0, retries=0, turns=0)
                for wave in waves:
                    cells = set(wave)
                    batch = [job for job in jobs if (job[1].id, job[2]) in cells] if stop is not None else jobs
                    # Episodes start as others end, a window of them at a time: a task waiting at the gate
                    # costs its memory (1.5 KB) from the start, so one per episode of the run would grow
                    # the driver with the run's size (1.5 GB for a million episodes).
                    # Each task tells of its own end: asyncio.wait would walk the whole window per episode.
                    pending, tasks, ended = iter(batch), set[asyncio.Task[int]](), asyncio.Queue[asyncio.Task[int]]()
                    try:
                        while True:
                            for job in islice(pending, window - len(tasks)):
                                task = asyncio.create_task(one(*job))
                                task.add_done_callback(ended.put_nowait)
                                tasks.add(task)
                            if not tasks:
                                break
                            finished = await ended.get()
                            tasks.discard(finished)
                            turns += finished.result()  # an episode's error is raised; the finally cancels the rest
                            new += 1
                            progress.update(
                                bar,
                                advance=1,
                                turns=turns,
                                calls=sum(c.stats.calls for c in pool.clients()) + (cluster.calls if cluster else 0),
                                retries=sum(sum(c.stats.faults.values()) for c in pool.clients())
                                + (cluster.faults if cluster else 0),
                            )
                    finally:
                        for task in tasks:
                            task.cancel()
                        await asyncio.gather(*tasks, return_exceptions=True)
                        await asyncio.gather(*writes)  # every finished episode is on disk before we report
                    ran += batch
                    played += wave
                    if deferred is not None:  # before the stop: it weighs the wave's judging and its cost
                        waved = [e for e in rd.iter_episodes()
                                 if (e.case_id, e.seed) in cells and in_shard(e.case_id, e.seed, shard)]
                        console.print(f"judging {len(waved)} episode(s) in batches (each may take up to 24 hours)")
                        await judge_deferred(rd, waved, registry, deferred, limits)
                    elif stop is not None and len(subjects) > 1:
                        # Compared now, not after the last wave, so the stop counts the pairwise judge's calls too.
                        compared = [e for e in rd.iter_episodes() if (e.case_id, e.seed) in cells]
                        await judge_pairwise(rd, compared, registry, panel, limits, config.concurrency)
                    if stop is not None and stop.after_wave(rd, played):
                        break
            if stop is not None:
                rd.write_json(rd.manifest, {**rd.read_manifest(), "adaptive": stop.record()})
            # Subjects on disk: those of earlier runs' episodes and of every job played, all now finished.
            on_disk = {key.rsplit("|", 2)[0] for key in done} | {subject.info.label for subject, _, _ in ran}
            await _judge_leftovers(rd, registry, deferred or panel, limits, config.concurrency, shard, console, unjudged,
                                   on_disk, batch=deferred is not None)
        except EndpointError as exc:
            kept = len(rd.done_keys())
            are = "s are" if kept > 1 else " is"
            where = f"{kept} finished episode{are} kept in {rd.episodes}" if kept else "no episode finished"
            again = " --batch" if deferred is not None else ""
            raise EndpointError(exc.endpoint, f"{exc.problem}; {where}; rerun with --resume {rd.path}{again}") from None
    return RunResult(run_dir=rd.path, new_episodes=new, total_episodes=len(done) + new)
