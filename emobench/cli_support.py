"""How every emobench command reports failure: one line on stderr and a non-zero exit."""

from __future__ import annotations

import importlib
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import typer
from typer import _click  # typer vendors click: its own classes
from typer._click.exceptions import BadParameter, MissingParameter, NoArgsIsHelpError, UsageError
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from emobench.errors import EmobenchError, EndpointError, InputError

# Every split of the bundled library, archived editions' included (a test checks it against the
# registry): static, so that listing them in --help reads no card.
SPLITS = ("demo", "dev", "test", "dev-v1", "test-v1", "demo-v2", "dev-v2", "test-v2",
          "demo-v3", "dev-v3", "test-v3", "demo-zh", "dev-zh", "test-zh")
if TYPE_CHECKING:
    from emobench.config import RunConfig

    SplitName = str
else:
    SplitName = Literal[SPLITS]  # typer lists and checks the choices


# Every exit status of every command, for docs/reference.md (scripts/gen_reference.py writes it).
EXIT_CODES = {
    0: "Success; `gate`: no significant regression beyond the tolerance.",
    1: "`gate`: a significant regression beyond the tolerance; `scenarios stats`: a stratification target missed.",
    InputError.exit_code: "Bad input: a config, card, flag value, run directory or file, named in the one error line; "
                          "also a file-system error (an output path that is a file, a full disk).",
    EndpointError.exit_code: "A model endpoint failed in a way its retries could not fix, named in the error line; "
                             "finished episodes are kept, and `run --resume RUN` continues once the endpoint answers.",
    130: "Interrupted (Ctrl-C); finished work is kept.",
    143: "Terminated (SIGTERM); finished work is kept and the vLLM servers emobench started are stopped.",
}


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that every ``finally`` runs: without it the process dies
    at once and leaves the vLLM servers it started running."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


@dataclass
class Interruption:
    """What an interrupted command tells the user; ``run_dir`` once the run has one."""

    run_dir: Path | None = None


def _say(text: str) -> None:
    # One line, whatever the message holds; the spaces inside it (a value quoted back) are kept.
    print(" ".join(part.strip() for part in text.strip().splitlines() if part.strip()), file=sys.stderr)


@contextmanager
def one_line_errors() -> Iterator[Interruption]:
    """Turn an EmobenchError into "error: ..." and its exit code, a file-system error into
    exit 2, Ctrl-C into exit 130, SIGTERM into exit 143.

    Usable as a ``with`` block or as a command decorator (it keeps the signature typer reads).
    """
    previous = signal.signal(signal.SIGTERM, _terminate)
    interruption = Interruption()
    try:
        yield interruption
    except EmobenchError as exc:
        _say(f"error: {exc}")
        raise typer.Exit(exc.exit_code) from None
    except OSError as exc:  # an output path that is a file, a full disk, a missing folder
        _say(f"error: {exc.filename or ''}: {exc.strerror or exc}")
        raise typer.Exit(2) from None
    except KeyboardInterrupt as exc:
        how, code = ("terminated", 143) if isinstance(exc, Terminated) else ("interrupted", 130)
        hint = f"; rerun with --resume {interruption.run_dir} to continue" if interruption.run_dir else ""
        _say(f"{how}: finished work is kept{hint}")
        raise typer.Exit(code) from None
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _usage_in_one_line() -> Iterator[None]:
    try:
        yield
    except NoArgsIsHelpError:
        raise  # typer prints the help
    except MissingParameter as exc:  # click's own message for it is empty here: name what is missing
        where = exc.ctx.command_path if exc.ctx else "emobench"
        _say(f"error: {where}: missing {_missing(exc.param)}")
        raise typer.Exit(exc.exit_code) from None
    except BadParameter as exc:  # a value of the wrong type or not among the choices: name the flag
        flags = [o for o in getattr(exc.param, "opts", ()) if o.startswith("--")]
        where = flags[0] if flags else exc.ctx.command_path if exc.ctx else "emobench"
        _say(f"error: {where}: {exc.message.removeprefix('Value error, ')}")
        raise typer.Exit(exc.exit_code) from None
    except UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "emobench"
        _say(f"error: {where}: {exc.format_message()}")
        raise typer.Exit(exc.exit_code) from None


def _missing(param: Any) -> str:
    """``argument RUN_DIR`` or ``option --panel``, as the command's help spells it."""
    if isinstance(param, TyperArgument):
        return f"argument {(param.metavar or param.name or '').upper()}"
    if isinstance(param, TyperOption):
        return f"option {next((o for o in param.opts if o.startswith('--')), param.opts[0])}"
    return "a parameter"


class OneLineUsage(TyperGroup):
    """The command line's own errors (an unknown option, a flag value of the wrong type) are
    one line and exit 2 as well, instead of a usage box."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        with _usage_in_one_line():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: Any) -> Any:
        with _usage_in_one_line():  # a subcommand's arguments are parsed here
            return super().invoke(ctx)


class FlagOption(TyperOption):
    """A flag takes no value, so its help row shows no type (typer's rich help prints ``<bool>``;
    click's plain help already leaves it out)."""

    def display_type_rich(self, ctx: _click.Context) -> str | None:
        return None


def plain_flags(command: _click.Command) -> _click.Command:
    """Drop the type column of every flag of a command and of its sub-commands, --help included."""
    options = [*command.params, command.get_help_option(_click.Context(command))]
    for option in options:
        if isinstance(option, TyperOption) and option.is_flag:
            option.__class__ = FlagOption
    for sub in getattr(command, "commands", {}).values():
        plain_flags(sub)
    return command


@dataclass(frozen=True)
class Lazy:
    """A command whose module is imported only when it runs: ``module:attribute`` names a
    typer.Typer (a group) or a command function; ``help`` is its line in the parent's help."""

    target: str
    help: str

    def load(self, name: str) -> _click.Command:
        module, _, attribute = self.target.partition(":")
        obj = getattr(importlib.import_module(module), attribute)
        if isinstance(obj, typer.Typer):
            command: _click.Command = typer.main.get_group(obj)
        else:
            single = typer.Typer(add_completion=False)
            single.command(name)(obj)
            command = typer.main.get_command(single)
        command.name = name
        return plain_flags(command)


class _StandIn(TyperCommand):
    """A lazy command before its module is imported: a name and a help line, for the listing."""


class LazyGroup(OneLineUsage):
    """The top-level group: commands listed in ``order``; those in ``lazy`` import their module
    when they run (or their own help is asked for), so ``--help`` and fast commands start at once.
    Until then a lazy command is a stand-in that carries only its help line."""

    lazy: ClassVar[Mapping[str, Lazy]] = {}
    order: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        plain_flags(self)
        for name, entry in self.lazy.items():
            self.commands.setdefault(name, _StandIn(name, help=entry.help))

    def list_commands(self, ctx: _click.Context) -> list[str]:
        rank = {name: i for i, name in enumerate(self.order)}
        return sorted(self.commands, key=lambda name: rank.get(name, len(rank)))

    def format_help(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        """Typer's rich layout, drawn here: typer.rich_utils, which draws it for the other
        commands, imports markdown and traceback rendering, and importing typer, rich and it
        takes about 1.5x as long as typer and rich alone (bench/bench_cli_startup.py)."""
        from rich.console import Console
        from rich.panel import Panel
        from rich.table import Table
        from rich.text import Text

        console = Console()
        console.print(Text.assemble("\n ", ("Usage: ", "yellow"), (ctx.command_path, "bold"), " [OPTIONS] COMMAND [ARGS]...\n"))
        if self.help:
            console.print(Text(f" {self.help}\n"))
        options = [(", ".join(p.opts), getattr(p, "help", None) or "") for p in self.get_params(ctx)]
        commands = [(name, self.commands[name].get_short_help_str(limit=1_000)) for name in self.list_commands(ctx)]
        for title, rows in (("Options", options), ("Commands", commands)):
            table = Table.grid(padding=(0, 2), expand=True)
            table.add_column(style="bold cyan", no_wrap=True)
            table.add_column(ratio=1)
            for name, text in rows:
                table.add_row(name, Text(text))
            console.print(Panel(table, title=title, title_align="left", border_style="dim"))

    def load(self, name: str) -> _click.Command:
        """The real command, importing its module the first time."""
        command = self.commands[name]
        if isinstance(command, _StandIn):
            command = self.commands[name] = self.lazy[name].load(name)
        return command

    def resolve_command(
        self, ctx: _click.Context, args: list[str]
    ) -> tuple[str | None, _click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        return name, (self.load(name) if name is not None and command is not None else command), rest


@contextmanager
def against_flags(flags: Mapping[str, str]) -> Iterator[None]:
    """Report a config error in a value a command-line flag gave against that flag.

    ``flags`` maps a config field (``seeds``, ``panel.judges``) to the flag that set it; a role
    flag sets only the role's binding.
    """
    try:
        yield
    except InputError as exc:
        for key, flag in flags.items():
            head = re.match(rf"{re.escape(key)}(?=$|[.\[])", exc.field)
            is_role = key in ("subjects", "user", "panel.judges")
            if head and (not is_role or exc.field.endswith(".binding")):
                raise InputError(flag, exc.field, exc.problem) from None
        raise


def roles_kept(config: RunConfig, flags: Mapping[str, str], source: Path, *, demo: bool) -> str | None:
    """The warning for a run given some roles on the command line (``flags``: config field ->
    flag) while others keep the config's binding: a user who brings a subject rarely means to
    keep a config's placeholder simulator or judges, or the demo's embedded model."""
    given = {field for field in flags if field in ("subjects", "user", "panel.judges")}
    if not given:
        return None
    roles = {
        "subjects": ("subjects", "--subject", [r.binding for r in config.subjects]),
        "user": ("user simulator", "--user", [config.user.binding]),
        "panel.judges": ("judges", "--judge", [r.binding for r in config.judges]),
    }
    kept = [(name, flag, bindings) for field, (name, flag, bindings) in roles.items() if field not in given]
    if config.director is not None:
        kept.append(("director", "", [config.director.binding]))
    if not kept:
        return None
    listed = "; ".join(f"{name}: {', '.join(dict.fromkeys(bindings))}" for name, _, bindings in kept)
    flags_missing = " and ".join(flag for _, flag, _ in kept if flag)
    hint = f"; pass {flags_missing} to replace them" if flags_missing else ""
    if demo:
        hint += " (vllm:embedded is a local vLLM server emobench starts), or --config configs/standard.yaml"
    given_flags = " ".join(flags[field] for field in ("subjects", "user", "panel.judges") if field in given)
    return f"warning: {given_flags} given, but {source} keeps its {listed}{hint}"


# A long command's progress: (what it is doing, how many of how many are done).
Tick = Callable[[str, int, int], None]


@contextmanager
def progress_bar(enabled: bool = True) -> Iterator[Tick]:
    """`run`'s progress bar (what, bar, done/total, time elapsed) on stderr for a long command.
    Drawn on a terminal only: a log or a pipe gets the command's own lines and nothing else."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, disable=not (enabled and console.is_terminal),
                  transient=False) as bar:
        tasks: list[Any] = []  # added at the first tick: a bar with neither label nor total reads "0/?"

        def tick(what: str, done: int, total: int) -> None:
            if not tasks:
                tasks.append(bar.add_task(what, total=total))
            bar.update(tasks[0], description=what, completed=done, total=total)

        yield tick


def response_cache(enabled: bool, folder: Path | None) -> Any:
    """The on-disk response cache of `run` and `judge` (None when --no-cache)."""
    from emobench.endpoints.cache import ResponseCache
    from emobench.user_cache import cache_root

    if not enabled:
        return None
    default = Path(os.environ.get("EMOBENCH_RESPONSE_CACHE") or cache_root() / "responses.sqlite")
    return ResponseCache(folder / "responses.sqlite" if folder else default)


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """--shard I/N as (I, N)."""
    if text is None:
        return None
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit()) or not 0 <= int(index) < int(count):
        raise InputError("--shard", "shard", f"{text!r} is not I/N with 0 <= I < N")
    return int(index), int(count)


def bare_ray_flag(args: list[str]) -> list[str]:
    """`run --ray` given without an address means a local Ray ("local"); the CLI's parser has no
    options with an optional value, so the value is filled in before it parses."""
    if not args or args[0] != "run":
        return args
    out = list(args)
    for i, arg in enumerate(out):
        if arg == "--":
            break
        if arg == "--ray" and (i + 1 == len(out) or out[i + 1].startswith("-")):
            out.insert(i + 1, "local")
    return out
