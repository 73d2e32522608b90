"""RunConfig: roles, split, seeds and limits, loaded from YAML; with a stable config hash."""

from __future__ import annotations

import difflib
import hashlib
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from emobench.endpoints.binding import parse_binding
from emobench.endpoints.vllm_server import parallel_clash
from emobench.errors import InputError
from emobench.library_paths import library_file, library_root
from emobench.profiles import DEFAULT_PROFILE, ProfileName
from emobench.records import Limits, ParallelLayout, Sampling
from emobench.yaml_io import load_capped

# Counts are bounded so that the config hash (orjson: 64-bit integers) and the clients take them.
INT64 = 2**63
Seed = Annotated[int, Field(ge=0, lt=INT64)]

# Fields that change how fast a run goes but not what it produces; kept out of the hash.
# local_split is a folder's path: its cards count through the registry version instead. A vllm:
# server's parallel layout is one: the same model on more devices (recorded in the role's info).
OPERATIONAL = {"local_split", "max_concurrency", "timeout_s", "retries", "concurrency", "api_key_env", "price", "play",
               "parallel"}


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")


# OpenAI's Batch API bills half the price of a call (its pricing page; Anthropic's batches too).
BATCH_PRICE_SHARE = 0.5


class Price(_Config):
    """US dollars per million tokens. Prompt tokens read from the provider's prompt cache cost
    cached_prompt_per_mtok and those written to it cache_write_per_mtok; either unset: the input price."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cached_prompt_per_mtok: float | None = Field(default=None, ge=0)
    cache_write_per_mtok: float | None = Field(default=None, ge=0)

    def cost_usd(self, prompt: int, completion: int, cached: int = 0, written: int = 0, batched: bool = False) -> float:
        """One call's dollars; ``prompt`` counts every prompt token, the cached and written ones among them.
        A call sent in a batch costs BATCH_PRICE_SHARE of that."""
        read = self.input_per_mtok if self.cached_prompt_per_mtok is None else self.cached_prompt_per_mtok
        write = self.input_per_mtok if self.cache_write_per_mtok is None else self.cache_write_per_mtok
        fresh = max(0, prompt - cached - written)
        dollars = (fresh * self.input_per_mtok + cached * read + written * write + completion * self.output_per_mtok) / 1e6
        return dollars * BATCH_PRICE_SHARE if batched else dollars


class ParallelConfig(_Config):
    """A vllm: binding's layout (docs/scale.md): vLLM's tensor, pipeline and data parallel sizes,
    and the executor that places the workers (ray: across the nodes of a running Ray cluster)."""

    tensor: int = Field(default=1, ge=1, le=4096)
    pipeline: int = Field(default=1, ge=1, le=4096)
    data: int = Field(default=1, ge=1, le=4096)
    executor: Literal["mp", "ray"] | None = None

    def layout(self) -> ParallelLayout:
        return ParallelLayout.model_validate(self.model_dump())


class RoleConfig(_Config):
    binding: str
    label: str | None = None
    sampling: Sampling = Field(default_factory=Sampling)
    max_concurrency: int = Field(default=16, ge=1, lt=INT64)
    timeout_s: float = Field(default=300.0, gt=0, le=86400)
    retries: int = Field(default=5, ge=0, le=100)  # retries of transient failures (429, 5xx, timeouts)
    # The variable's name; its value is never stored. Unset: OPENAI_API_KEY to api.openai.com only
    # (emobench/endpoints/keys.py).
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    price: Price | None = None  # for the cost line of the accounting
    # Appended to the vLLM server command of a ``vllm:`` binding, e.g. ["--max-model-len", "16384"].
    server_args: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    parallel: ParallelConfig | None = None  # vllm: bindings only; becomes vLLM's own flags

    @property
    def name(self) -> str:
        return self.label or parse_binding(self.binding).spec


class PanelConfig(_Config):
    """The judge panel (docs/method.md §5.2-5.5): which judges, which rubrics, which aggregation."""

    name: str = "inline"
    judges: list[RoleConfig] = Field(min_length=1)
    rubrics: dict[str, str] = Field(
        default_factory=lambda: {"mdep": "mdep.j2", "holistic": "holistic.j2", "pairwise": "pairwise.j2"}
    )
    aggregation: Literal["median"] = "median"  # per MDEP item across judges; holistic scores are averaged
    holistic: bool = True
    pairwise: bool = True
    reference_subjects: list[str] | None = None  # pairwise: compare every subject with these only


class PlayConfig(_Config):
    """`emobench play`'s limits and the origins its page may be used from (docs/play.md)."""

    open_per_player: int = Field(default=3, ge=1, lt=INT64)  # unfinished episodes one person may hold
    open_total: int = Field(default=50, ge=1, lt=INT64)  # unfinished episodes on the server
    player_per_minute: int = Field(default=60, ge=1, lt=INT64)  # API requests one person may make
    server_per_minute: int = Field(default=600, ge=1, lt=INT64)  # API requests of everyone together
    # One client address (a lab behind one NAT, or a reverse proxy, is one address: raise these there)
    anonymous_per_minute: int = Field(default=30, ge=1, lt=INT64)  # joins and unknown links, per address
    handles_per_address: int = Field(default=5, ge=1, lt=INT64)  # handles joined from one address
    open_per_address: int = Field(default=10, ge=1, lt=INT64)  # unfinished episodes started from one address
    connections_per_address: int = Field(default=64, ge=1, lt=INT64)  # open connections of one address
    max_connections: int = Field(default=1000, ge=1, lt=INT64)  # open connections in all (also below the fd limit)
    header_timeout_s: float = Field(default=10.0, gt=0, le=3600)  # to send a request's headers
    body_timeout_s: float = Field(default=10.0, gt=0, le=3600)  # to send a request's body
    allowed_origins: list[Annotated[str, Field(pattern=r"^https?://[^/\s]+$")]] = Field(default_factory=list)
    # Requests without a player's link (pages, joins, unknown links) of every address together, shared fairly per network
    anonymous_total_per_minute: int = Field(default=600, ge=1, lt=INT64)
    idle_expire_s: float = Field(default=900.0, gt=0, le=31_536_000)  # an unfinished episode nobody plays ends (as left)
    # When the server is full, a start ends the longest-idle episode (idle this long) of the network holding the most
    evict_idle_s: float = Field(default=120.0, gt=0, le=31_536_000)
    # for a response to leave the server's buffers: a client that reads nothing is closed after it
    write_timeout_s: float = Field(default=10.0, gt=0, le=3600)


class RunConfig(_Config):
    subjects: list[RoleConfig] = Field(min_length=1)
    user: RoleConfig
    panel: PanelConfig
    director: RoleConfig | None = None  # an LLM director; None uses the rule director
    probe: bool = True  # ask the subject, out of character, to infer the persona (docs/method.md §5.6)
    # A template name under prompts/, e.g. "companion".
    subject_system_prompt: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]+$")
    # "flat": the subject gets the dialogue so far as one user message, rendered by the
    # subject_system_prompt template's "user" block (EMPA's protocol, docs/empa.md).
    subject_history: Literal["turns", "flat"] = "turns"
    local_split: str | None = None  # a folder of imported cases (emobench.registry.local) played instead
    split: str = "test"
    cases: list[str] | None = None
    limit_cases: int | None = Field(default=None, ge=1, lt=INT64)
    seeds: list[Seed] = Field(default_factory=lambda: [0], min_length=1)
    max_turns: int = Field(default=30, ge=1, lt=INT64)
    min_turns: int = Field(default=12, ge=1, lt=INT64)
    judge_retries: int = Field(default=2, ge=0, le=100)
    simulator_retries: int = Field(default=2, ge=0, le=100)
    director_retries: int = Field(default=2, ge=0, le=100)
    reveal_every: int = Field(default=3, ge=0, lt=INT64)
    concurrency: int = Field(default=64, ge=1, lt=INT64)
    scoring_profile: ProfileName = DEFAULT_PROFILE  # docs/method.md §5.8: "emobench" or "empa"
    # The judges' instruction language: the case's (its templates under judges/ or judges/zh/), or pinned.
    judge_language: Literal["case", "en", "zh"] = "case"
    play: PlayConfig = Field(default_factory=PlayConfig)  # read by `emobench play` only

    def limits(self) -> Limits:
        return Limits(
            max_turns=self.max_turns,
            min_turns=self.min_turns,
            judge_retries=self.judge_retries,
            simulator_retries=self.simulator_retries,
            director_retries=self.director_retries,
            reveal_every=self.reveal_every,
        )

    def judges_language(self, case_language: str) -> str:
        """The language of the judges' templates for a case of ``case_language``."""
        return case_language if self.judge_language == "case" else self.judge_language

    @property
    def judges(self) -> list[RoleConfig]:
        return self.panel.judges

    def prices(self) -> dict[str, Price]:
        """Price per role label, for the roles that configure one."""
        return {role.name: role.price for _, role in self.bindings() if role.price is not None}

    def bindings(self) -> list[tuple[str, RoleConfig]]:
        roles = [(f"subjects[{i}]", r) for i, r in enumerate(self.subjects)] + [("user", self.user)]
        roles += [(f"panel.judges[{i}]", r) for i, r in enumerate(self.judges)]
        return roles + ([("director", self.director)] if self.director else [])

    def config_hash(self) -> str:
        def strip(value: Any) -> Any:
            if isinstance(value, dict):
                return {k: strip(v) for k, v in value.items() if k not in OPERATIONAL}
            if isinstance(value, list):
                return [strip(v) for v in value]
            return value

        data = strip(self.model_dump(mode="json"))
        if data["judge_language"] == "case":  # the default: configs from before the key keep their hash
            del data["judge_language"]
        if data["subject_history"] == "turns":  # likewise the default subject history...
            del data["subject_history"]
        for role in [*data["subjects"], data["user"], *data["panel"]["judges"], data["director"] or {}]:
            for penalty in ("frequency_penalty", "presence_penalty"):  # ...and penalties left unset
                if role.get("sampling", {}).get(penalty, 0) is None:
                    del role["sampling"][penalty]
        canonical = orjson.dumps(data, option=orjson.OPT_SORT_KEYS)
        return hashlib.sha256(canonical).hexdigest()[:16]


# Keys a config file may hold besides RunConfig's fields: read while loading, not stored.
FILE_KEYS = ("judges", "references")


def _first_error(exc: ValidationError, known: tuple[str, ...] = ()) -> tuple[str, str]:
    """The error to report: an unknown key first (a misspelt key also makes its field
    "required", and the misspelling is what the user must fix), with the closest of the
    ``known`` top-level keys."""
    errors = exc.errors()
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    field = ".".join(str(p) for p in err["loc"])
    if err["type"] != "extra_forbidden":
        return field, err["msg"]
    close = difflib.get_close_matches(str(err["loc"][-1]), known if len(err["loc"]) == 1 else (), n=1)
    return field, "unknown key" + (f"; did you mean {close[0]}?" if close else "")


def with_references(data: dict[str, Any], source: str | Path) -> dict[str, Any]:
    """Play a config's ``references:`` (scripted reference subjects, docs/validity.md) beside its
    subjects. They are kept apart in the file so that ``--subject`` replaces only the subjects;
    the validated config lists them among the subjects, as a run records them."""
    if "references" not in data:
        return data
    data = dict(data)
    references = data.pop("references")
    if not isinstance(references, list):
        raise InputError(source, "references", "must be a list of roles, e.g. [{binding: scripted:platitude}]")
    subjects = data.get("subjects")
    names = {r.get("label") or r.get("binding") for r in subjects if isinstance(r, dict)} if isinstance(subjects, list) else set()
    kept = []
    for i, reference in enumerate(references):
        try:
            role = RoleConfig.model_validate(reference)
        except ValidationError as exc:
            field, msg = _first_error(exc)
            raise InputError(source, f"references[{i}]{'.' + field if field else ''}", msg) from None
        if not role.binding.startswith("scripted:"):
            raise InputError(source, f"references[{i}].binding", f"{role.binding!r} is not a scripted:NAME reference")
        if (role.label or role.binding) not in names:  # already among the subjects (e.g. given with --subject)
            kept.append(reference)
    if isinstance(subjects, list):
        data["subjects"] = [*subjects, *kept]
    return data


def resolve_panel(data: dict[str, Any], source: str | Path, root: Path) -> dict[str, Any]:
    """Accept ``judges: [...]`` (an inline panel) or ``panel: judges/panels/NAME.yaml``."""
    data = dict(data)
    if "judges" in data:
        if "panel" in data:
            raise InputError(source, "judges", "give either judges or panel, not both")
        data["panel"] = {"name": "inline", "judges": data.pop("judges")}
    elif isinstance(data.get("panel"), str):
        path = Path(data["panel"])
        if "\x00" in data["panel"]:
            raise InputError(source, "panel", "a path with a NUL character")
        path = path if path.is_absolute() or path.exists() else root / path
        data["panel"] = load_config_data(path)
    return data


def validate_config(data: dict[str, Any], source: str | Path, root: Path | None = None) -> RunConfig:
    data = with_references(resolve_panel(data, source, root or library_root()), source)
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        field, msg = _first_error(exc, (*RunConfig.model_fields, *FILE_KEYS))
        raise InputError(source, field, msg) from None
    for field, role in config.bindings():
        binding = parse_binding(role.binding, source=str(source), field=f"{field}.binding")
        if role.parallel is not None and binding.kind != "vllm":
            raise InputError(source, f"{field}.parallel", f"applies to vllm: bindings, which emobench starts; "
                             f"{binding.kind}: servers keep the layout they were started with")
        clash = parallel_clash(role.server_args) if role.parallel is not None else None
        if clash is not None:
            raise InputError(source, f"{field}.server_args", f"{clash} is set by parallel; give the layout there only")
    for field, roles in (("subjects", config.subjects), ("panel.judges", config.judges)):
        labels = [r.name for r in roles]
        if len(set(labels)) != len(labels):
            raise InputError(source, field, "two roles share a label; give each a distinct label")
    if config.min_turns > config.max_turns:
        raise InputError(source, "min_turns", f"{config.min_turns} exceeds max_turns {config.max_turns}; lower it with "
                         "--min-turns or raise max_turns with --max-turns")
    return config


def load_config_data(path: Path) -> dict[str, Any]:
    """A config or panel YAML; a relative path missing from the current folder is looked up in
    the library (library_file), so ``--config configs/standard.yaml`` works from any folder."""
    path = library_file(path)
    try:
        data = load_capped(path.read_text(encoding="utf-8"), path)
    except OSError as exc:
        raise InputError(path, "", f"cannot read config: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise InputError(path, f"byte {exc.start}", "not UTF-8 text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "yaml"
        raise InputError(path, where, f"YAML syntax error: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict):
        raise InputError(path, "", "config must be a YAML mapping")
    return data
