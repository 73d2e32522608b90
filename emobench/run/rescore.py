"""Rescore a finished run with another judge panel, regenerating no conversation.

New judgements, scores and a leaderboard go to RUN_DIR/panels/<panel name>/, beside the
run's own; the per-turn MDEP verdicts are replayed over the fixed transcripts and the EPM
trajectory is recomputed from them.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console

from emobench.config import PanelConfig, load_config_data, validate_config
from emobench.endpoints.batch import batched
from emobench.endpoints.cache import ResponseCache
from emobench.endpoints.pool import EndpointPool
from emobench.episode.roles import role_caller
from emobench.errors import InputError
from emobench.judging.stage import bind_panel, judge_episodes, judge_pairwise
from emobench.library_paths import library_root
from emobench.prompts import cases_language
from emobench.registry.local import registry_for
from emobench.run.preflight import preflight
from emobench.rundir import RunDir


def load_panel(path: Path) -> PanelConfig:
    try:
        return PanelConfig.model_validate(load_config_data(path))
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(path, ".".join(str(p) for p in err["loc"]), err["msg"]) from None


async def rescore(
    run_dir: Path,
    panel_path: Path,
    *,
    root: Path | None = None,
    cache: ResponseCache | None = None,
    force: bool = False,
    console: Console | None = None,
    tick: Callable[[str, int, int], None] | None = None,
    batch_poll_s: float | None = None,
) -> RunDir:
    """batch_poll_s, when given, sends every judge call through the Batch API (endpoints/batch.py),
    polling each batch this often."""
    console = console or Console(stderr=True)
    root = root or library_root()
    source = RunDir(run_dir)
    manifest = source.read_manifest()
    if "play" in manifest and cache is not None:
        # People's words (and the judges' quotes of them) must stay where a delete reaches them: the run directory.
        console.print("note: a run of emobench play is judged without the response cache (docs/play.md)")
        cache = None
    config = validate_config(manifest["config"], source.manifest, root)
    panel_config = load_panel(panel_path)
    registry = registry_for(source.path, root)  # an imported run keeps its own cards
    # A run on an earlier edition finds its cases in the archived split (e.g. test-v1).
    if registry.split_with_version(manifest["registry_version"]) is None and not force:
        raise InputError(
            source.manifest, "registry_version", "the case cards changed since this run; pass --force to rescore anyway"
        )
    out = RunDir(source.path / "panels" / panel_config.name)
    preflight(
        roles=[(f"judges[{i}]", judge) for i, judge in enumerate(panel_config.judges)], panel=panel_config,
        scoring_profile=config.scoring_profile, out_dir=out.path, root=root, source=panel_path,
        tracker="external" not in manifest,  # an imported run's scores come with it
    )
    out.create()
    out.repair()
    episodes = source.read_episodes()
    async with AsyncExitStack() as stack:
        wrap = None
        if batch_poll_s is not None:
            ledger, poll = out.path / "batches.jsonl", batch_poll_s
            wrap = lambda client: batched(client, ledger, poll)  # noqa: E731
        pool = EndpointPool(stack, out.logs, cache, on_fault=out.log_fault, wrap=wrap)
        judges = []
        for role in panel_config.judges:
            client, info = await pool.resolve(role)
            judges.append(role_caller("judge", client, info))
        language = cases_language(registry.case(e.case_id) for e in episodes)
        panel = bind_panel(panel_config, tuple(judges), root, config.judges_language(language))
        out.write_json(
            out.manifest,
            {
                **manifest,
                "run_id": f"{manifest['run_id']}+{panel_config.name}",
                "config": {**manifest["config"], "panel": panel_config.model_dump(mode="json")},
                "prompt_versions": {
                    **manifest["prompt_versions"],
                    "judge": panel.mdep.version,
                    **{f"rubric_{k}": v for k, v in panel.versions.items()},
                },
                "roles": {**manifest["roles"], "judges": [j.info.model_dump() for j in judges], "panel": panel_config.name},
                "panel": panel_config.model_dump(mode="json"),
                "rescored_from": str(source.path),
                "rescored_at": datetime.now(UTC).isoformat(timespec="seconds"),
            },
        )
        console.print(f"rescoring {len(episodes)} episode(s) of {source.path} with panel {panel_config.name!r}")
        # In batches every request waits for its batch: all of them at once, so that one batch holds them.
        concurrency = config.concurrency if batch_poll_s is None else max(1, len(episodes))
        await judge_episodes(out, episodes, registry, panel, config.limits(), concurrency, replay=True, tick=tick)
        if tick is not None and panel_config.pairwise:
            tick("pairwise", 0, 1)  # one batch: every pair of transcripts at once
        await judge_pairwise(out, episodes, registry, panel, config.limits(), concurrency)
    return out
