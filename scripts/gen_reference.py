"""Write docs/reference.md: every run-config field and every command and flag, read from the code.

The config tables come from the pydantic models in emobench/config.py (types, defaults, bounds)
with the one-line meanings kept below; a field without a meaning, or a meaning for a field the
models no longer have, stops the script. The command tables come from the command line itself.
tests/test_cli_reference.py regenerates the page and compares it with the committed one.

    python scripts/gen_reference.py          # rewrite docs/reference.md
    python scripts/gen_reference.py --check  # exit 1 when docs/reference.md is out of date
"""

from __future__ import annotations

import argparse
import sys
import types
import typing
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from emobench import cli  # noqa: E402
from emobench.cli_support import EXIT_CODES, LazyGroup  # noqa: E402
from emobench.config import FILE_KEYS, PanelConfig, ParallelConfig, PlayConfig, Price, RoleConfig, RunConfig  # noqa: E402
from emobench.records import Sampling  # noqa: E402
from emobench.run import flags as run_flags  # noqa: E402

TARGET = ROOT / "docs" / "reference.md"
MODELS: tuple[tuple[str, type[BaseModel]], ...] = (
    ("Top level", RunConfig), ("Role", RoleConfig), ("Sampling", Sampling), ("Price", Price), ("Parallel", ParallelConfig),
    ("Panel", PanelConfig), ("Play", PlayConfig),
)
# Top-level keys a config file may hold that the loaded config folds into its fields (type, default,
# bounds, meaning); emobench.config.FILE_KEYS lists them, "judges" under `panel`.
FILE_ONLY = {
    "references": ("list[[role](#role)]", "`[]`", "`scripted:` bindings only",
                   "Reference subjects (docs/validity.md), played beside the subjects: `run --subject` replaces "
                   "the subjects and keeps these. The run records them among its subjects."),
}
MEANINGS: dict[type[BaseModel], dict[str, str]] = {
    RunConfig: {
        "subjects": "The models under test, each a [role](#role); every one plays every case and seed.",
        "user": "The simulated user, a [role](#role).",
        "panel": "The judge [panel](#panel): inline, or a file such as `judges/panels/embedded.yaml`. "
                 "A top-level `judges:` list is shorthand for an inline panel.",
        "director": "An LLM director, a [role](#role); unset, the rule director reveals the story.",
        "probe": "After each episode, ask the subject out of character to infer the persona.",
        "subject_system_prompt": "A system prompt for the subject: a template name under `prompts/` "
                                 "(`prompts/zh/` on Chinese cases).",
        "subject_history": "`turns`: the subject gets the dialogue as chat turns; `flat`: as one user message, "
                           "rendered by the subject_system_prompt template's `user` block (EMPA's protocol, "
                           "docs/empa.md).",
        "local_split": "A local split folder to play instead of a library split (`emobench import empa-cases`; "
                       "docs/empa.md); not part of the config hash, its cards are in the registry version.",
        "split": "The split whose cases run.",
        "cases": "Only these case ids of the split.",
        "limit_cases": "Only the first N cases of the split.",
        "seeds": "Seeds; every (subject, case, seed) is one episode.",
        "max_turns": "Turn limit per episode.",
        "min_turns": "First turn at which the EPM and meter stop rules apply.",
        "judge_retries": "Retries of a judge output that fails validation (MDEP, holistic, pairwise).",
        "simulator_retries": "Retries of a simulator turn (and of the subject's probe answer) that fails validation.",
        "director_retries": "Retries of an LLM director action that fails validation.",
        "reveal_every": "The rule director reveals the next hidden stage every N turns (0: never).",
        "concurrency": "Episodes in flight at once.",
        "scoring_profile": "How EPM-Q is scored: `emobench` or `empa` (docs/method.md §5.8).",
        "judge_language": "The judges' instruction language: `case` (the case's), or `en` / `zh` pinned (docs/method.md §4).",
        "play": "`emobench play`'s limits and allowed origins, a [play](#play) section (docs/play.md); "
                "not part of the config hash.",
    },
    RoleConfig: {
        "binding": "Who plays the role: `vllm:MODEL`, `vllm:embedded`, `openai:MODEL@URL[,URL...]`, "
                   "`litellm:PROVIDER/MODEL` or `scripted:echo|platitude|advice|dismissive`.",
        "label": "The role's name in results (default: the binding).",
        "sampling": "The role's [sampling](#sampling).",
        "max_concurrency": "Requests in flight to this endpoint at once.",
        "timeout_s": "Seconds before a request is abandoned and retried.",
        "retries": "Retries of transient failures (429, 5xx, timeouts).",
        "api_key_env": "The variable whose value is sent as the role's key, to the role's own endpoints; "
                       "unset, `OPENAI_API_KEY` goes to `api.openai.com` only and any other host gets no key "
                       "([keys and hosts](#keys-and-hosts)). Its value is never stored.",
        "price": "The role's [price](#price), for the cost in the run report and `run --dry-run`; "
                 "unset, the dry run reads litellm's price map.",
        "server_args": "`vllm:` bindings only: arguments appended to the vLLM server command emobench starts, "
                       "e.g. `[\"--max-model-len\", \"16384\"]`; a `--dtype` here also names the served dtype.",
        "parallel": "`vllm:` bindings only: the server's [parallel](#parallel) layout across GPUs and nodes "
                    "(docs/scale.md); recorded in the role's info, not part of the config hash.",
    },
    ParallelConfig: {
        "tensor": "`--tensor-parallel-size`: each layer split over this many GPUs.",
        "pipeline": "`--pipeline-parallel-size`: the layers cut into this many stages (across nodes with `ray`).",
        "data": "`--data-parallel-size`: this many copies of the model.",
        "executor": "`--distributed-executor-backend` (and `--data-parallel-backend` when `data` > 1): `mp` on "
                    "this node, `ray` across a running Ray cluster; unset, vLLM chooses.",
    },
    Sampling: {
        "temperature": "Sampling temperature.",
        "top_p": "Nucleus sampling mass.",
        "max_tokens": "Most tokens per completion.",
        "frequency_penalty": "Sent only when set (EMPA's protocol: 0.7).",
        "presence_penalty": "Sent only when set (EMPA's protocol: 0.7).",
    },
    Price: {
        "input_per_mtok": "US dollars per million prompt tokens.",
        "cached_prompt_per_mtok": "US dollars per million prompt tokens read from the provider's prompt cache "
                                  "(reported per call as cached tokens); unset, the input price.",
        "cache_write_per_mtok": "US dollars per million prompt tokens written to the provider's prompt cache, "
                                "where it charges for that (Anthropic); unset, the input price.",
        "output_per_mtok": "US dollars per million completion tokens.",
    },
    PanelConfig: {
        "name": "The panel's name in results.",
        "judges": "The judges, each a [role](#role).",
        "rubrics": "Rubric template per task, files under `judges/`.",
        "aggregation": "How the judges' MDEP items combine per turn.",
        "holistic": "Rate each whole episode on the holistic rubric.",
        "pairwise": "Compare subjects' episodes of the same case and seed in pairs.",
        "reference_subjects": "Pairwise: compare every subject with these labels only (default: every pair).",
    },
    PlayConfig: {
        "open_per_player": "Unfinished episodes one person may hold. Flag: `play --open-per-player`.",
        "open_total": "Unfinished episodes on the server. Flag: `play --open-total`.",
        "player_per_minute": "API requests per minute one person may make. Flag: `play --player-per-minute`.",
        "server_per_minute": "Starts, turns and leaves that reach a model, per minute, of all people together, shared "
                             "max-min fairly among players (reads never count). Flag: `play --server-per-minute`.",
        "anonymous_per_minute": "Requests per minute from one client address that carry no player's link (pages, "
                                "static files, joins, unknown links). Flag: `play --anonymous-per-minute`.",
        "handles_per_address": "Handles one client address may hold; raise it for a lab behind one NAT or a reverse "
                               "proxy (docs/play.md). Flag: `play --handles-per-address`.",
        "open_per_address": "Unfinished episodes started from one client address; raise it for a lab behind "
                            "one NAT. Flag: `play --open-per-address`.",
        "connections_per_address": "Open connections of one client address. Flag: `play --connections-per-address`.",
        "max_connections": "Open connections in all, and never within 256 of the open-file limit (`ulimit -n`; the soft "
                           "limit is raised as far as the hard one allows). Flag: `play --max-connections`.",
        "header_timeout_s": "Seconds a connection has to send a request's headers, from its opening or its previous "
                            "request; an idle connection is closed as late.",
        "body_timeout_s": "Seconds a request has to send its body (408 after).",
        "allowed_origins": "Origins (`scheme://host[:port]`) the page may be used from besides its own, "
                           "e.g. behind a reverse proxy. Flag: `play --allow-origin`.",
        "anonymous_total_per_minute": "Requests per minute without a player's link from all addresses, shared max-min "
                                      "fairly among networks (/24, /64); a network's first 8 a minute always pass. "
                                      "Flag: `play --anonymous-total-per-minute`.",
        "idle_expire_s": "Seconds without a turn after which an unfinished episode ends as left (marked expired); "
                         "checked from start-up on. Flag: `play --idle-expire-s`.",
        "write_timeout_s": "Seconds a response may wait for its client to read it; a client that reads nothing is "
                           "reset after it, what it had queued dropped. Flag: `play --write-timeout`.",
        "evict_idle_s": "When the server is full, a start from a network holding fewer unfinished episodes ends "
                        "the longest-idle one, idle this long, of the network holding the most (as left, marked "
                        "expired): open episodes are shared max-min fairly. Flag: `play --evict-idle-s`.",
    },
}
BOUNDS = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}


def _type(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type(a) for a in args)
    if origin is typing.Annotated:
        return _type(args[0])
    if origin in (list, dict):
        return f"{origin.__name__}[{', '.join(_type(a) for a in args)}]"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        title = next(t for t, m in MODELS if m is annotation)
        return f"[{title.lower()}](#{title.lower().replace(' ', '-')})"
    return "null" if annotation is type(None) else getattr(annotation, "__name__", str(annotation))


def _bounds(metadata: list[Any]) -> str:
    out = []
    for item in metadata:
        for attribute, sign in BOUNDS.items():
            value = getattr(item, attribute, None)
            if value is not None:
                out.append(f"{sign} 2^63" if value == 2**63 else f"{sign} {value}")
        if isinstance(item, annotated_types.MinLen):
            out.append(f"at least {item.min_length}")
        if getattr(item, "pattern", None):
            out.append(f"matches `{item.pattern}`")
    return ", ".join(out)


def _default(info: Any) -> str:
    if info.default_factory is not None:
        value = info.default_factory()
        return f"`{value}`" if not isinstance(value, BaseModel) else "(its defaults)"
    if info.default is PydanticUndefined:
        return "required"
    return "`null`" if info.default is None else f"`{info.default}`"


def config_section() -> list[str]:
    flags = {field: flag for key, flag in run_flags.FLAGS.items() for field in [run_flags.FLAG_FIELDS[key]]}
    lines = ["## Run config", "",
             "A run config is a YAML mapping (`emobench run --config FILE`; `configs/` holds examples). "
             "Unknown keys are refused.", ""]
    for title, model in MODELS:
        meanings = MEANINGS[model]
        missing, stale = set(model.model_fields) - set(meanings), set(meanings) - set(model.model_fields)
        if missing or stale:
            raise SystemExit(f"scripts/gen_reference.py: {model.__name__}: no meaning for {sorted(missing)}, "
                             f"meaning of no field {sorted(stale)}")
        lines += [f"### {title}", "", "| field | type | default | bounds | meaning |", "|---|---|---|---|---|"]
        for name, info in model.model_fields.items():
            flag = flags.get("panel.judges" if name == "judges" and model is PanelConfig else name)
            meaning = meanings[name] + (f" Flag: `run {flag}`." if flag and model in (RunConfig, PanelConfig) else "")
            row = [f"`{name}`", _type(info.annotation), _default(info), _bounds(info.metadata), meaning.replace("|", "\\|")]
            lines.append(f"| {' | '.join(row)} |")
        if model is RunConfig:
            if set(FILE_ONLY) != set(FILE_KEYS) - {"judges"}:
                raise SystemExit(f"scripts/gen_reference.py: FILE_ONLY {sorted(FILE_ONLY)} is not FILE_KEYS {FILE_KEYS}")
            lines += [f"| `{name}` | {' | '.join(cells)} |" for name, cells in FILE_ONLY.items()]
        lines.append("")
    return lines


def _param_row(param: Any, ctx: Any) -> str:
    names = ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts])
    if param.param_type_name == "argument":
        names = f"`{param.display_name_raw.upper()}`" + ("…" if param.nargs != 1 else "")
    kind = "flag" if getattr(param, "is_flag", False) else param.display_type(ctx).strip("<>")
    if kind.endswith(" range"):  # an int with bounds: say which
        bounds = [f"{sign} {value}" for sign, value in (("≥", param.min), ("≤", param.max)) if value is not None]
        kind = f"{kind.removesuffix(' range')}, {' and '.join(bounds)}"
    default = param.default
    if param.required:
        shown = "required"
    elif isinstance(default, Path) and default.is_absolute():
        shown = "the bundled library"  # a path on this machine: the library's root
    elif default in (None, [], ()) or (getattr(param, "is_flag", False) and default is False and not param.secondary_opts):
        shown = ""
    elif isinstance(default, bool):
        shown = f"`{(param.opts if default else param.secondary_opts)[0]}`"
    else:
        shown = f"`{default}`"
    help_text = " ".join((getattr(param, "help", None) or "").split()).replace("|", "\\|")
    takes = kind.replace("|", " \\| ")
    return f"| {names} | {takes} | {shown} | {help_text} |"


def _command(lines: list[str], path: str, command: Any, parent: Any) -> None:
    from typer import _click

    ctx = _click.Context(command, info_name=path.split()[-1], parent=parent)
    lines += [f"### `{path}`", "", " ".join((command.help or "").split("\n\n")[0].split()), ""]
    params = [p for p in command.params if not getattr(p, "hidden", False)]
    if params:
        lines += ["| argument or flag | takes | default | meaning |", "|---|---|---|---|"]
        lines += [_param_row(p, ctx) for p in params]
        lines.append("")
    for name in getattr(command, "list_commands", lambda _: [])(ctx):
        sub = command.load(name) if isinstance(command, LazyGroup) else command.commands[name]
        _command(lines, f"{path} {name}", sub, ctx)


def commands_section() -> list[str]:
    import typer

    root = typer.main.get_command(cli.app)
    lines = ["## Commands", "", "Every command answers `--help`; bad input is one line on stderr and exit 2 "
             "([exit codes](#exit-codes)).", ""]
    _command(lines, "emobench", root, None)
    return lines


KEYS_SECTION = """\
## Keys and hosts

A key is sent only where it belongs: a role's `api_key_env` names the variable whose value goes to
that role's endpoints, and nowhere else; without it, `OPENAI_API_KEY` goes to OpenAI's own API host
(`api.openai.com`) and to no other.

- `openai:MODEL@URL`: with `api_key_env`, its value as `Authorization: Bearer …`. Without it,
  `OPENAI_API_KEY` if the URL's host is `api.openai.com`; any other host (a local server, a
  colleague's, Azure, OpenRouter, DeepSeek, Gemini's OpenAI endpoint) gets no `Authorization` header.
- `openai:MODEL@URL1,URL2` (replicas, through the litellm Router): the same, replica by replica,
  except that a replica that gets no key is sent the placeholder key `no-key` (litellm always sends
  one).
- `litellm:PROVIDER/MODEL`: with `api_key_env`, its value as litellm's `api_key`. Without it,
  litellm reads the provider's own variable (`ANTHROPIC_API_KEY`, `DEEPSEEK_API_KEY`, …), and an
  OpenAI-family provider whose base URL is not OpenAI's (one redirected by `OPENAI_BASE_URL` or
  `OPENAI_API_BASE`) is sent the placeholder key `no-key`, never `OPENAI_API_KEY`; so
  `OPENAI_API_KEY` is not required there either.
- `vllm:…`, `scripted:…`: no key; emobench starts the server, or answers in-process.

- A named variable that is not set, or `OPENAI_API_KEY` unset for a role bound to `api.openai.com`, stops
  `run` and `run --dry-run` before any request, naming the role's field.
- A host that answers 401 to a role that sent no key stops the run in one line naming the endpoint and
  `api_key_env`; set `api_key_env` to the variable holding that host's key. A 401 to a key that was sent
  names the variable it came from.
- Earlier versions sent `OPENAI_API_KEY` to every `openai:` base URL. When it is set and a role reaches
  a remote host other than `api.openai.com` without `api_key_env`, preflight prints one line:
  ``note: OPENAI_API_KEY is no longer sent to HOST; add `api_key_env: OPENAI_API_KEY` to the role if
  that host expects it``. Loopback hosts (`127.0.0.1`, `::1`, `localhost`) get no note.
- `--subject`, `--user` and `--judge` replace a config role's binding and keep its other settings,
  `api_key_env` included, when the config has as many roles; to send a key to a host named on the
  command line, set `api_key_env` on that role in the config.
- Keys are read from the environment at each request and are never written: not in the run folder,
  the manifest, the logs or the response cache.

### Base URLs

A base URL is any `http://` or `https://` URL: `http://127.0.0.1:8000/v1`, `https://api.deepseek.com`,
`https://generativelanguage.googleapis.com/v1beta/openai/`. emobench appends `/chat/completions` and
`/models` to it as given (a trailing slash is dropped). A URL with a space, no host, a port outside
1-65535, a query string or a fragment is refused when the config is read.

### Preflight: the endpoints reached before the first call

`run`, `run --dry-run`, `judge` and `play` reach every endpoint they can for free before the first
model call and before writing anything, with `GET <base_url>/models` and the key a chat call would carry:

- every base URL of an `openai:` role, each replica included;
- the base URL a `litellm:` role on an OpenAI-compatible provider resolves to (OpenAI's, DeepSeek's, or
  one set by `OPENAI_BASE_URL` / `OPENAI_API_BASE`);
- a `vllm:` server once the run has started it (a dry run starts no server).

`litellm:` roles on other providers (Anthropic, Gemini's own API, Bedrock, …) have no free request
through litellm: preflight checks their key variable and names them in one `note:` line as not reached.
An endpoint that cannot be reached, answers other than 200, or answers without a model list is one
`error:` line naming the role's field and the URL, exit 2. A model id missing from the list an endpoint
returns is one `warning:` line and the run goes on: proxies and hosted APIs serve names (aliases,
deployments) they do not list. An endpoint that lists no model is not checked for the id.
"""


def exit_codes_section() -> list[str]:
    lines = ["## Exit codes", "", "Every command exits with one of these; an error is one line on stderr.", "",
             "| code | meaning |", "|---|---|"]
    return [*lines, *(f"| {code} | {meaning} |" for code, meaning in sorted(EXIT_CODES.items())), ""]


def render() -> str:
    head = ["# Reference: run config and command line", "",
            "Generated from the code by `python scripts/gen_reference.py`; a test fails when this page and "
            "the code disagree. Do not edit by hand.", ""]
    return "\n".join([*head, *config_section(), KEYS_SECTION, *commands_section(), *exit_codes_section()]).rstrip() + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with docs/reference.md instead of writing it")
    args = parser.parse_args()
    text = render()
    if args.check:
        if not TARGET.exists() or TARGET.read_text(encoding="utf-8") != text:
            raise SystemExit("docs/reference.md is out of date: run python scripts/gen_reference.py")
        return
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
