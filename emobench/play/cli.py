"""`emobench play`: serve the page on which people play the user or the supporter.

Assembly only: read the config, open (or continue) the run directory, bind the roles the seat
needs, and serve until Ctrl-C. The conversations run in emobench.play.session.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from emobench.cli_support import SplitName, against_flags, one_line_errors
from emobench.errors import InputError

if TYPE_CHECKING:
    from aiohttp import web

    from emobench.config import PlayConfig, RunConfig
    from emobench.play.session import PlayHub, Seat

Mode = Literal["user", "supporter"]


def _check_run_dir(manifest: dict[str, Any], path: Path, seat: str) -> None:
    """A run directory holds one seat's episodes, and only people's: a leaderboard of model
    subjects played by people must not mix with one of people against the simulator."""
    play = manifest.get("play")
    if not isinstance(play, dict):
        raise InputError(path / "manifest.json", "play", "not a run directory of `emobench play`; choose a new -o")
    if play.get("seat") != seat:
        raise InputError(path / "manifest.json", "play.seat", f"people played the {play.get('seat')} seat here, not the {seat}")


def _seat_needs(seat: str, field: str) -> bool:
    """Whether a config role is played by a model: a person takes the user's or the subjects' seat."""
    if field == "user":
        return seat == "subject"
    return seat == "user" or not field.startswith("subjects")


def check_assets() -> None:
    """The page's templates, script and style ship with the package; without them nothing is served or written."""
    from emobench.play.server import ASSETS

    for path in ASSETS:
        if not path.is_file():
            raise InputError(path, "", "the play page's files are not installed; reinstall emobench")


@asynccontextmanager
async def open_hub(config: RunConfig, seat: Seat, run_dir: Path, *, force: bool = False,
                   say: Callable[[str], None] = print) -> AsyncIterator[tuple[PlayHub, web.Application]]:
    """The hub and its page's application, on a run directory checked and repaired; not yet listening."""
    import emobench
    from emobench.endpoints.pool import EndpointPool
    from emobench.episode.roles import Provenance, RoleCaller, WorldRoles
    from emobench.judging.mdep import judge_turn
    from emobench.judging.stage import bind_panel
    from emobench.play.guards import Guard
    from emobench.play.limits import ModelBudget, Quota
    from emobench.play.rebuild import Bound
    from emobench.play.recovery import repair
    from emobench.play.server import STATIC, TEMPLATES, make_app
    from emobench.play.session import PlayHub
    from emobench.play.store import PlayStore, page_version
    from emobench.prompts import cases_language
    from emobench.registry import load_registry
    from emobench.run.preflight import preflight
    from emobench.run.runner import ROOT, _caller, _check_resume, load_prompts, manifest, select_cases
    from emobench.rundir import RunDir

    check_assets()
    registry = load_registry(ROOT)
    cases = select_cases(registry, config)
    if not cases:
        raise InputError("config", "cases", "no case to play")
    registry_version = registry.version(config.split)
    rd = RunDir(run_dir)
    if rd.manifest.exists():
        _check_run_dir(rd.read_manifest(), rd.path, seat)
        _check_resume(rd, config, registry_version, True, force)
    preflight(roles=[(f, r) for f, r in config.bindings() if _seat_needs(seat, f)], panel=config.panel,
              scoring_profile=config.scoring_profile, out_dir=rd.path, root=ROOT, source="config")
    rd.create()
    rd.repair()
    language = cases_language(cases)
    prompts = load_prompts(ROOT, config, language)
    version = page_version([TEMPLATES, STATIC])
    async with AsyncExitStack() as stack:
        pool = EndpointPool(stack, rd.logs, None, on_fault=rd.log_fault)  # no response cache: people's words stay here

        async def bind(role: str, rc: Any) -> RoleCaller:
            client, info = await pool.resolve(rc)
            return _caller(role, client, info)

        judges = tuple([await bind("judge", j) for j in config.judges])
        world = WorldRoles(
            user=await bind("user", config.user) if seat == "subject" else None,
            judges=judges, judge_turn=judge_turn,
            director=await bind("director", config.director) if config.director else None,
        )
        subjects = {s.info.label: s for s in [await bind("subject", s) for s in config.subjects]} if seat == "user" else {}
        roles_info = {
            "subjects": [s.info.model_dump() for s in subjects.values()],
            "user": world.user.info.model_dump() if world.user else "human",
            "judges": [j.info.model_dump() for j in judges],
            "director": world.director.info.model_dump() if world.director else "rule",
            "panel": config.panel.name,
        }
        info = manifest(config, rd.path.name, registry_version, prompts, roles_info, ROOT, language)
        info["play"] = {"seat": seat, "page_version": version}
        rd.write_json(rd.manifest, info)
        provenance = Provenance(config.split, registry_version, config.config_hash(), emobench.__version__)
        panel = bind_panel(config.panel, judges, ROOT, config.judges_language(language))
        store = PlayStore(rd, registry, panel, config.limits(), version)
        for note in repair(store):
            say(f"repaired {note}")
        play = config.play
        quota = Quota(play.open_per_player, play.open_total, play.handles_per_address, play.open_per_address,
                      play.idle_expire_s, play.evict_idle_s)
        hub = PlayHub(store, Bound(world, subjects, prompts, config.limits(), provenance), seat, cases, config.seeds[0], quota,
                      ModelBudget(play.server_per_minute))
        yield hub, make_app(hub, Guard(play, store))


@asynccontextmanager
async def listening(app: web.Application, config: PlayConfig, host: str, port: int) -> AsyncIterator[str]:
    """The application served on host:port, every connection through emobench.play.doors; yields its address."""
    from emobench.play.doors import PlayRunner
    from emobench.play.listener import GuardedSite

    runner = PlayRunner(app, config)
    await runner.setup()
    try:
        site = GuardedSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            raise InputError("--port", "", f"cannot listen on {host}:{port}: {exc.strerror}") from None
        yield f"{site.name}/"
    finally:
        await runner.cleanup()


async def serve(
    config: RunConfig, seat: Seat, run_dir: Path, host: str, port: int, *, force: bool = False,
    announce: Callable[[str], None] = print, say: Callable[[str], None] = print,
) -> None:
    """Serve until cancelled or sent SIGTERM (a container's stop: there the server is often process 1,
    which the default action of SIGTERM does not end). `announce` gets the page's address once the
    server listens; `say` what start-up repaired and what the background catch-up did."""
    from emobench.play.recovery import catch_up

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with open_hub(config, seat, run_dir, force=force, say=say) as (hub, app), \
            listening(app, config.play, host, port) as address:
        announce(address)
        catching_up = asyncio.create_task(catch_up(hub, say))
        try:
            await stop.wait()
        finally:
            catching_up.cancel()


def _with_play(cfg: RunConfig, origins: list[str] | None, *limits: float | None) -> RunConfig:
    """The config with the command line's play options over its `play:` section."""
    from pydantic import ValidationError

    from emobench.config import PlayConfig

    names = ("open_per_player", "open_total", "player_per_minute", "server_per_minute", "anonymous_per_minute",
             "handles_per_address", "open_per_address", "connections_per_address", "max_connections",
             "anonymous_total_per_minute", "idle_expire_s", "evict_idle_s",
             "write_timeout_s")
    changes: dict[str, Any] = {name: value for name, value in zip(names, limits, strict=True) if value is not None}
    if origins:
        changes["allowed_origins"] = [*cfg.play.allowed_origins, *origins]
    try:
        play = PlayConfig.model_validate({**cfg.play.model_dump(), **changes})
    except ValidationError as exc:
        err = exc.errors()[0]
        name = str(err["loc"][0])
        flag = "--allow-origin" if name == "allowed_origins" else "--" + name.removesuffix("_s").replace("_", "-")
        raise InputError(flag, "", f"{err['msg']} (got {err.get('input')!r})") from None
    return cfg.model_copy(update={"play": play})


def play(
    config: Annotated[Path | None, typer.Option(help="Run config YAML (default: configs/demo.yaml).")] = None,
    mode: Annotated[str, typer.Option(help="user: people play the user, a model supports; supporter: the reverse.")] = "user",
    subject: Annotated[list[str] | None, typer.Option(help="Subject binding (mode user); repeat for several.")] = None,
    user: Annotated[str | None, typer.Option(help="User-simulator binding (mode supporter).")] = None,
    judge: Annotated[list[str] | None, typer.Option(help="Judge binding; repeat for a panel.")] = None,
    split: Annotated[SplitName | None, typer.Option(help="Split whose cases are offered (default: the config's).")] = None,
    limit: Annotated[int | None, typer.Option(help="Offer only the first N cases of the split.")] = None,
    max_turns: Annotated[int | None, typer.Option(help="Turn limit per episode.")] = None,
    min_turns: Annotated[int | None, typer.Option(help="First turn at which EPM and meter stop rules apply.")] = None,
    out: Annotated[Path, typer.Option("-o", "--out", help="The run directory episodes go to (continued if it exists).")] = Path(
        "runs/play"),
    host: Annotated[str, typer.Option(help="Address to listen on; 0.0.0.0 opens the page to the network.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on; 0 picks a free one.")] = 8765,
    force: Annotated[bool, typer.Option(help="Continue the run directory even when the config hash differs.")] = False,
    allow_origin: Annotated[list[str] | None, typer.Option(
        help="An origin (scheme://host[:port]) the page may be used from besides the served one, e.g. behind a proxy; "
        "repeat for several (config: play.allowed_origins).")] = None,
    open_per_player: Annotated[int | None, typer.Option(help="Unfinished episodes one person may hold (default 3).")] = None,
    open_total: Annotated[int | None, typer.Option(help="Unfinished episodes on the server (default 50).")] = None,
    player_per_minute: Annotated[int | None, typer.Option(help="API requests per minute per person (default 60).")] = None,
    server_per_minute: Annotated[int | None, typer.Option(help="API requests per minute, all people (default 600).")] = None,
    anonymous_per_minute: Annotated[int | None, typer.Option(
        help="API requests per minute from one address without a player's link: joins, unknown links (default 30).")] = None,
    handles_per_address: Annotated[int | None, typer.Option(
        help="Handles one client address may hold (default 5; raise it for a lab behind one NAT).")] = None,
    open_per_address: Annotated[int | None, typer.Option(
        help="Unfinished episodes one client address may hold (default 10; raise it for a lab behind one NAT).")] = None,
    connections_per_address: Annotated[int | None, typer.Option(
        help="Open connections of one client address (default 64).")] = None,
    max_connections: Annotated[int | None, typer.Option(
        help="Open connections in all (default 1000; at most the open-file limit less 256).")] = None,
    anonymous_total_per_minute: Annotated[int | None, typer.Option(
        help="Requests per minute without a player's link from all addresses, shared fairly per network (default 600).")] = None,
    idle_expire_s: Annotated[float | None, typer.Option(
        help="Seconds without a turn after which an unfinished episode ends as left (default 900).")] = None,
    evict_idle_s: Annotated[float | None, typer.Option(
        help="When the server is full, a start ends the longest-idle episode, idle this long, of the network holding "
             "the most (default 120).")] = None,
    write_timeout: Annotated[float | None, typer.Option(
        help="Seconds a response may wait for its client to read it before the connection is closed (default 10).")] = None,
) -> None:
    """Serve a page where people play the user or the supporter; episodes go to a normal run directory."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from emobench.run.flags import flag_overrides, load_run_config

    with one_line_errors():
        if mode not in ("user", "supporter"):
            raise InputError("--mode", "", f"{mode!r} is not user or supporter")
        cfg, flags = load_run_config(config, None, flag_overrides(subject, user, judge, split, None, max_turns, min_turns, limit))
        cfg = _with_play(cfg, allow_origin, open_per_player, open_total, player_per_minute, server_per_minute,
                         anonymous_per_minute, handles_per_address, open_per_address, connections_per_address,
                         max_connections, anonymous_total_per_minute, idle_expire_s, evict_idle_s,
                         write_timeout)
        seat: Seat = "user" if mode == "user" else "subject"

        def announce(url: str) -> None:
            typer.echo(f"emobench play ({mode}) → {url}  episodes in {out}; Ctrl-C stops", err=True)

        def say(line: str) -> None:
            typer.echo(line, err=True)

        with against_flags(flags):
            try:
                asyncio.run(serve(cfg, seat, out, host, port, force=force, announce=announce, say=say))
            except KeyboardInterrupt:
                pass
            typer.echo("stopped", err=True)
