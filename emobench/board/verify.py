"""`emobench verify`: a submission's integrity (hashes), hygiene (no keys or local paths), protocol
(configs/board.yaml), coverage (every case × seed × subject once, every planned comparison once)
and recomputation (every score from the recorded calls, emobench/board/recompute.py; the pairwise
verdicts and what is derived from them, emobench/board/pairwise_check.py)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from emobench.board.adaptive import replay_stop
from emobench.board.hashing import file_sha256, record_hashes, record_sha256, root_hash
from emobench.board.package import FILES, FORMAT, OPTIONAL, RECORD, file_leaks
from emobench.board.pairwise_check import check_pairwise
from emobench.board.protocol import BoardProtocol
from emobench.board.recompute import check_calls, check_holistic, check_path, check_row
from emobench.config import RunConfig, resolve_panel
from emobench.endpoints.binding import parse_binding
from emobench.errors import InputError
from emobench.records import Episode, EpisodeJudgement, Limits
from emobench.registry import Registry
from emobench.run.binding import load_prompts
from emobench.run.runner import ROOT, prompt_versions, select_cases
from emobench.rundir import read_records
from emobench.scoring.schema import SCORES_SCHEMA

Check = Literal["integrity", "hygiene", "protocol", "coverage", "recomputation", "spot-check"]


@dataclass(frozen=True)
class Problem:
    check: Check
    file: str
    field: str
    message: str

    def line(self) -> str:
        return f"[{self.check}] {self.file}: {self.field}: {self.message}" if self.field else \
            f"[{self.check}] {self.file}: {self.message}"


@dataclass
class Verdict:
    protocol_version: int
    episodes: int = 0
    subjects: dict[str, str] = field(default_factory=dict)  # label -> model
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(folder: Path, protocol: BoardProtocol, registry: Registry, *, integrity_only: bool = False) -> Verdict:
    """Every check in order; with integrity_only, all but the protocol's."""
    verdict = Verdict(protocol.version)
    problems = verdict.problems
    record = _integrity(folder, problems)
    if problems:  # the files are not the ones submitted: nothing in them is worth reading
        return verdict
    assert record is not None
    read = _read(folder, problems)
    if read is None:
        return verdict
    manifest, episodes, judgements, table, config = read
    for name in record["files"]:
        try:
            problems += [Problem("hygiene", name, f, f"holds {what}") for f, what in file_leaks(folder / name)]
        except orjson.JSONDecodeError as exc:
            problems.append(Problem("integrity", name, "", f"unreadable: {exc}"))
    verdict.episodes = len(episodes)
    verdict.subjects = {s["label"]: s["model"] for s in manifest.get("roles", {}).get("subjects", [])}
    if not integrity_only:
        problems += _protocol(manifest, config, protocol, registry, episodes)
    rows = {f"{r['subject']}|{r['case_id']}|{r['seed']}": r for r in table.to_pylist()}
    problems += _coverage(folder, manifest, config, registry, episodes, judgements, table.num_rows, rows)
    by_key = {j.key: j for j in judgements}
    limits = config.limits()
    for episode in episodes:
        problems += _recompute(episode, registry, by_key.get(episode.key), rows.get(episode.key), manifest,
                               config.scoring_profile, limits, protocol.tolerance)
    judges = {j["model"] for j in manifest.get("roles", {}).get("judges", [])}
    problems += [Problem(cast(Check, check), file, where, message) for check, file, where, message in
                 check_pairwise(folder, config, episodes, judges, protocol.tolerance)
                 if not integrity_only or check != "protocol"]
    return verdict


def _read(folder: Path, problems: list[Problem]) -> tuple[dict[str, Any], list[Episode], list[EpisodeJudgement],
                                                          pa.Table, RunConfig] | None:
    """The submission's records, or None with a problem naming the file that cannot be read."""
    name = "manifest.json"
    try:
        manifest = orjson.loads((folder / name).read_bytes())
        roles = manifest.get("roles") if isinstance(manifest, dict) else None
        if not isinstance(roles, dict) or not all(
                isinstance(r, dict) and isinstance(r.get("label"), str) and isinstance(r.get("model"), str)
                for group in ("subjects", "judges") for r in roles.get(group) or [None]):
            problems.append(Problem("integrity", name, "roles", "not the roles record of a run (subjects and judges)"))
            return None
        config = RunConfig.model_validate(resolve_panel(manifest["config"], "manifest", ROOT))
        name = "scores.parquet"
        table = pq.read_table(folder / name)
        episodes = read_records(folder / "episodes.jsonl", Episode)
        judgements = read_records(folder / "judgements.jsonl", EpisodeJudgement)
    except InputError as exc:
        problems.append(Problem("integrity", Path(exc.source).name, exc.field, exc.problem))
        return None
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError, ValidationError, pa.ArrowException) as exc:
        problems.append(Problem("integrity", name, "", f"unreadable: {str(exc).splitlines()[0] if str(exc) else exc!r}"))
        return None
    if table.schema.remove_metadata() != SCORES_SCHEMA.remove_metadata():
        problems.append(Problem("integrity", "scores.parquet", "schema", "is not the scores schema of this emobench"))
        return None
    return manifest, episodes, judgements, table, config


def _integrity(folder: Path, problems: list[Problem]) -> dict[str, Any] | None:
    try:
        record = orjson.loads((folder / RECORD).read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        problems.append(Problem("integrity", RECORD, "", f"missing or unreadable: {exc}"))
        return None
    if not isinstance(record, dict) or record.get("format") != FORMAT or not isinstance(record.get("files"), dict):
        problems.append(Problem("integrity", RECORD, "format", f"not an {FORMAT} record"))
        return None
    claimed = {k: v for k, v in record.items() if k != "digest"}
    if record.get("digest") != record_sha256(claimed):
        problems.append(Problem("integrity", RECORD, "digest", "does not match the record's content"))
    names = tuple(record["files"])
    for name in FILES:
        if name not in names:
            problems.append(Problem("integrity", RECORD, f"files.{name}", "missing"))
    present = {p.name for p in folder.iterdir()} - {RECORD}
    for name in sorted(present - set(names)):
        problems.append(Problem("integrity", name, "", f"in the folder but not in {RECORD}"))
    listed: dict[str, list[str]] = {}
    for name in names:
        entry = record["files"][name]
        if name not in FILES + OPTIONAL or not (folder / name).is_file():
            problems.append(Problem("integrity", name, "", "listed but not a submission file here"))
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("records"), list):
            problems.append(Problem("integrity", RECORD, f"files.{name}.records", "missing: a hash per record"))
            continue
        listed[name] = entry["records"]
        if file_sha256(folder / name) != entry.get("sha256"):
            problems.append(Problem("integrity", name, "sha256", "the file's content is not the one submitted"))
        try:
            problems += record_changes(name, entry["records"], record_hashes(folder / name))
        except (OSError, pa.ArrowException) as exc:
            problems.append(Problem("integrity", name, "", f"unreadable: {exc}"))
    if len(listed) == len(names) and record.get("root") != root_hash(listed):
        problems.append(Problem("integrity", RECORD, "root", "is not the root over the listed records' hashes"))
    return record


def record_changes(name: str, submitted: list[str], found: list[str]) -> list[Problem]:
    """Each record missing, added, duplicated or moved, against the hashes submitted in order."""
    if submitted == found:
        return []
    unit = "row" if name.endswith(".parquet") else "line"
    have, want = Counter(found), Counter(submitted)
    out: list[Problem] = []
    seen: Counter[str] = Counter()
    for n, h in enumerate(found, start=1):
        seen[h] += 1
        if seen[h] > want[h]:
            what = "a duplicate of a submitted record" if want[h] else "added: not a submitted record"
            out.append(Problem("integrity", name, f"{unit} {n}", what))
    out += [Problem("integrity", name, f"{unit} {n}", "missing: the submitted record is not in the file")
            for n, h in enumerate(submitted, start=1) if have[h] < want[h] and submitted.index(h) == n - 1]
    if not out:  # the same records, in another order
        n = next(i for i, (a, b) in enumerate(zip(submitted, found, strict=True), start=1) if a != b)
        out.append(Problem("integrity", name, f"{unit} {n}", "reordered: not the submitted record at this place"))
    return out


def _protocol(manifest: dict[str, Any], config: RunConfig, protocol: BoardProtocol, registry: Registry,
              episodes: list[Episode]) -> list[Problem]:
    found: list[Problem] = []

    def refuse(where: str, message: str, file: str = "manifest.json") -> None:
        found.append(Problem("protocol", file, where, message))

    wanted = {"split": protocol.split, "max_turns": protocol.max_turns, "min_turns": protocol.min_turns,
              "scoring_profile": protocol.scoring_profile, "probe": protocol.probe}
    have = {"split": config.split, "max_turns": config.max_turns, "min_turns": config.min_turns,
            "scoring_profile": config.scoring_profile, "probe": config.probe}
    for name, value in wanted.items():
        if have[name] != value:
            refuse(f"config.{name}", f"{have[name]!r}; the protocol (v{protocol.version}) asks for {value!r}")
    if protocol.holistic and not config.panel.holistic:
        refuse("config.panel.holistic", "off; the protocol asks for the holistic rubric")
    if manifest.get("config_hash") != config.config_hash():
        refuse("config_hash", "is not the hash of the recorded config")
    judges = {j["model"] for j in manifest.get("roles", {}).get("judges", [])}
    if config.seeds != protocol.seeds:
        refuse("config.seeds", f"the run declared {config.seeds}; the protocol's are {protocol.seeds}")
    try:
        declared = [c.id for c in select_cases(registry, config)]
    except InputError:  # coverage names it
        declared = []
    wanted_cases = protocol.cases if protocol.cases is not None else [c.id for c in registry.cases(protocol.split)]
    if sorted(declared) != sorted(wanted_cases):
        refuse("config.cases", f"the run declared {len(declared)} case(s); the protocol's are {len(wanted_cases)}, "
                               f"{len(set(wanted_cases) - set(declared))} of them not played")
    found += _roles(config, protocol)
    if protocol.judges is None and len(config.panel.judges) < protocol.min_judges:
        refuse("config.panel.judges", f"{len(config.panel.judges)} judge(s); the protocol asks for {protocol.min_judges}")
    subjects = {s["label"]: s["model"] for s in manifest.get("roles", {}).get("subjects", [])}
    if protocol.judge_not_subject and judges & set(subjects.values()):
        refuse("roles.judges", f"{sorted(judges & set(subjects.values()))} judge(s) their own replies")
    for group, bound in (("subjects", config.subjects), ("judges", config.panel.judges), ("user", [config.user])):
        recorded = manifest.get("roles", {}).get(group, [])
        recorded = [recorded] if isinstance(recorded, dict) else recorded
        if len(recorded) != len(bound):
            refuse(f"roles.{group}", f"{len(recorded)} recorded for {len(bound)} in the config")
            continue
        for role, info in zip(bound, recorded, strict=True):
            binding = parse_binding(role.binding)
            # An openai: binding sends its model id as written, so the recorded id must be it.
            if binding.kind == "openai" and info["model"] != binding.model:
                refuse(f"roles.{group}[{info['label']}].model", f"{info['model']!r}, but the config binds {binding.model!r}")
    language = manifest.get("language") or "en"
    current = prompt_versions(load_prompts(ROOT, config, language))
    if manifest.get("prompt_versions") != current:
        refuse("prompt_versions", f"{manifest.get('prompt_versions')} are not this library's {current}")
    version = registry.version(protocol.split)
    if protocol.registry_version is not None and manifest.get("registry_version") != protocol.registry_version:
        refuse("registry_version", f"is not the protocol's {protocol.registry_version[:12]}")
    elif manifest.get("registry_version") != version:
        refuse("registry_version", f"is not the {protocol.split} split's {version[:12]}")
    user = manifest.get("roles", {}).get("user") or {}
    for n, ep in enumerate(episodes, start=1):
        where = f"line {n}"
        if (ep.config_hash, ep.registry_version) != (manifest.get("config_hash"), manifest.get("registry_version")):
            refuse(f"{where}: config_hash", "the episode was not played under the manifest's config", "episodes.jsonl")
        if ep.human is not None:
            refuse(f"{where}: human", "a person played a seat; submissions are models' runs", "episodes.jsonl")
        info = ep.roles.get("subject")
        model = None if info is None or isinstance(info, list) else info.model
        if subjects.get(ep.subject) != model or any(c.model != model for c in ep.calls if c.role == "subject"):
            refuse(f"{where}: roles.subject", f"{model!r} is not the manifest's model for {ep.subject!r}",
                   "episodes.jsonl")
        if any(c.model != user.get("model") for c in ep.calls if c.role == "user"):
            refuse(f"{where}: calls", "a user call from a model other than the manifest's simulator", "episodes.jsonl")
        if any(c.model not in judges for c in ep.calls if c.role == "judge"):
            refuse(f"{where}: calls", "a judge call from a model not on the manifest's panel", "episodes.jsonl")
    return found


def _roles(config: RunConfig, protocol: BoardProtocol) -> list[Problem]:
    """The simulator and the panel are the protocol's by binding kind and model id, never by label;
    the panel by its size and order too."""
    found: list[Problem] = []

    def same(spec: str, want: str) -> bool:
        a, b = parse_binding(spec), parse_binding(want)
        return (a.kind, a.model) == (b.kind, b.model)

    if protocol.simulator is not None and not same(config.user.binding, protocol.simulator):
        found.append(Problem("protocol", "manifest.json", "config.user.binding",
                             f"{config.user.binding!r}; the protocol's simulator is {protocol.simulator!r}"))
    if protocol.judges is None:
        return found
    panel = config.panel.judges
    if len(panel) != len(protocol.judges):
        found.append(Problem("protocol", "manifest.json", "config.panel.judges",
                             f"{len(panel)} judge(s); the protocol's panel is {len(protocol.judges)}"))
        return found
    for i, (role, want) in enumerate(zip(panel, protocol.judges, strict=True)):
        if not same(role.binding, want):
            found.append(Problem("protocol", "manifest.json", f"config.panel.judges[{i}].binding",
                                 f"{role.binding!r}; the protocol's judge {i + 1} is {want!r}"))
    return found


def _coverage(folder: Path, manifest: dict[str, Any], config: RunConfig, registry: Registry,
              episodes: list[Episode], judgements: list[EpisodeJudgement], n_rows: int,
              rows: dict[str, Any]) -> list[Problem]:
    """Every (case, seed) of the grid the run declared, once per subject (that the declared grid
    is the protocol's is the protocol check's); of an adaptive run, the cells its stopping rules
    played, replayed."""
    found: list[Problem] = []
    try:
        cases = [c.id for c in select_cases(registry, config)]
    except InputError as exc:
        return [Problem("coverage", "manifest.json", f"config.{exc.field}", exc.problem)]
    cells = {(c, k) for c in cases for k in config.seeds}
    if "adaptive" in manifest:
        cells, wrong = replay_stop(folder, manifest["adaptive"], config, registry, cases)
        found += [Problem("coverage", "manifest.json", where, message) for where, message in wrong]
    labels = [s["label"] for s in manifest.get("roles", {}).get("subjects", [])]
    expected = {f"{s}|{c}|{k}" for s in labels for c, k in cells}
    keys = Counter(e.key for e in episodes)
    for key, n in sorted(keys.items()):
        if n > 1:
            found.append(Problem("coverage", "episodes.jsonl", key, f"{n} episodes under one key"))
    for key in sorted(expected - set(keys)):
        found.append(Problem("coverage", "episodes.jsonl", key, "missing: the run declared this case and seed"))
    for key in sorted(set(keys) - expected):
        found.append(Problem("coverage", "episodes.jsonl", key, "not a case, seed and subject the run declared"))
    for ep in episodes:
        if ep.key != f"{ep.subject}|{ep.case_id}|{ep.seed}":
            found.append(Problem("coverage", "episodes.jsonl", ep.key, "the key does not name its subject, case and seed"))
    if n_rows != len(rows) or set(rows) != set(keys):
        found.append(Problem("coverage", "scores.parquet", "", f"{n_rows} rows for {len(keys)} episodes: one row each"))
    judged = Counter(j.key for j in judgements)
    if config.panel.holistic and (set(judged) != set(keys) or any(n > 1 for n in judged.values())):
        found.append(Problem("coverage", "judgements.jsonl", "", "not one judgement per episode"))
    return found


def _recompute(episode: Episode, registry: Registry, judgement: EpisodeJudgement | None, row: dict[str, Any] | None,
               manifest: dict[str, Any], profile: str, limits: Limits, tol: float) -> list[Problem]:
    try:
        case = registry.case(episode.case_id)
    except (KeyError, InputError):
        return [Problem("recomputation", "episodes.jsonl", episode.key, f"{episode.case_id} is no case of the library")]
    found = [Problem("recomputation", "episodes.jsonl", f"{episode.key}: {f.field}", f.message)
             for f in check_calls(episode, limits)]
    if judgement is not None:
        found += [Problem("recomputation", "judgements.jsonl", f"{episode.key}: {f.field}", f.message)
                  for f in check_holistic(episode, judgement, limits)]
    replayed, path = check_path(episode, case, limits, profile, tol)
    found += [Problem("recomputation", "episodes.jsonl", f"{episode.key}: {f.field}", f.message) for f in path]
    if row is not None:
        found += [Problem("recomputation", "scores.parquet", f"{episode.key}: {f.field}", f.message)
                  for f in check_row(replayed, case, str(manifest.get("run_id")), judgement, profile, row, tol)]
    return found
