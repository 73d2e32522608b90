"""Whether runs are comparable with EMPA's leaderboard: played as configs/empa-protocol.yaml asks.

EMPA's published scores are means over its 30 official cases of release d59757a, with one model
as user, judge and director, its sampling and its turn limit. A run on other cards (a subset,
another release, edited cards) or under other settings measures something else, and an offset
taken from it would place a model on the wrong scale without the intervals showing it (placing
EMPA's own models from 3 of its cases misplaces them by a median of 8 points). So `empa-place`
lists every way the runs leave the protocol and refuses them unless told they are exploratory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from emobench.importers import empa_release
from emobench.library_paths import library_root

PROTOCOL = Path("configs") / "empa-protocol.yaml"
RELEASE = "d59757a"  # the release EMPA's leaderboard was computed on
# Run-config keys the protocol fixes, compared as written in the protocol config.
SETTINGS = ("scoring_profile", "max_turns", "min_turns", "subject_history", "subject_system_prompt", "probe", "split")
SAMPLING = ("temperature", "top_p", "frequency_penalty", "presence_penalty", "max_tokens")


def load_protocol(root: Path | None = None) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(((root or library_root()) / PROTOCOL).read_text(encoding="utf-8"))
    return data


def protocol_references(protocol: dict[str, Any]) -> list[str]:
    """The published models the protocol plays beside yours: its subjects after the first (yours)."""
    return [str(s["label"]) for s in protocol["subjects"][1:]]


def official_case_ids() -> set[str]:
    """The emobench ids of release d59757a's official cases."""
    release = next(r for r in empa_release.known_releases() if r.commit.startswith(RELEASE))
    return {"empa-" + Path(p).stem.replace("_", "-") for p in release.blobs if p.startswith("empa/data/cases/")}


def _model(binding: str) -> str:
    """The model of a binding "provider:MODEL@endpoint", without a provider's prefix (vendor/model)."""
    return binding.split(":", 1)[-1].split("@", 1)[0].rsplit("/", 1)[-1]


def _sampling(role: dict[str, Any]) -> dict[str, Any]:
    sampling = role.get("sampling") or {}
    return {k: sampling.get(k) for k in SAMPLING}


Problem = tuple[str, str, str]  # file, field, what


def manifest_problems(manifest: dict[str, Any], where: str, protocol: dict[str, Any]) -> list[Problem]:
    """How one run's manifest leaves the protocol."""
    config = manifest.get("config") or {}
    out = [(where, f"config.{key}", f"{config.get(key)!r}, the protocol's is {protocol[key]!r}")
           for key in SETTINGS if config.get(key) != protocol[key]]
    source = (manifest.get("local_split") or {}).get("source") or {}
    if not str(source.get("release") or "").startswith(RELEASE):
        out.append((where, "local_split.source.release", f"the cards are not an import of EMPA release {RELEASE} "
                    f"(got {source.get('release')!r}; emobench import empa-cases)"))
    templates = manifest.get("templates_language") or {}
    if (templates.get("prompts"), templates.get("judges")) != ("zh", "zh"):
        out.append((where, "templates_language", f"{templates}, the protocol plays emobench's Chinese templates"))
    want = _sampling(protocol["subjects"][0])
    for subject in config.get("subjects") or []:
        if _sampling(subject) != want:
            field = f"config.subjects[{subject.get('label')}].sampling"
            out.append((where, field, f"{_sampling(subject)}, the protocol's is {want}"))
    roles = [(name, config.get(name) or {}, protocol[name]) for name in ("user", "director")]
    judges = (config.get("panel") or {}).get("judges") or []
    roles += [(f"panel.judges[{i}]", judge, protocol["panel"]["judges"][0]) for i, judge in enumerate(judges)]
    for name, role, ours in roles:
        if _sampling(role) != _sampling(ours):
            out.append((where, f"config.{name}.sampling", f"{_sampling(role)}, the protocol's is {_sampling(ours)}"))
        if _model(str(role.get("binding", ""))) != _model(ours["binding"]):
            out.append((where, f"config.{name}.binding",
                        f"model {_model(str(role.get('binding', '')))!r}, EMPA's was {_model(ours['binding'])!r}"))
    return out + binding_problems(manifest, where, protocol)


def binding_problems(manifest: dict[str, Any], where: str, protocol: dict[str, Any]) -> list[Problem]:
    """A reference is the published model it is named after, in the config's binding and in the
    model id the run recorded; the panel has the protocol's size; every recorded role is its model.
    A `gpt-4o` reference served by another model would carry the wrong offset onto EMPA's scale."""
    config = manifest.get("config") or {}
    roles = manifest.get("roles") or {}
    bound = {s.get("label"): s for s in config.get("subjects") or []}
    recorded = {r.get("label"): r.get("model") for r in roles.get("subjects") or [] if isinstance(r, dict)}
    out: list[Problem] = []
    for reference in protocol["subjects"][1:]:
        label, want = reference["label"], _model(reference["binding"])
        if label in bound and _model(str(bound[label].get("binding", ""))) != want:
            out.append((where, f"config.subjects[{label}].binding",
                        f"model {_model(str(bound[label].get('binding', '')))!r}; the reference {label!r} is {want!r}"))
        if label in recorded and _model(str(recorded[label])) != want:
            out.append((where, f"roles.subjects[{label}].model",
                        f"{recorded[label]!r} answered; the reference {label!r} is {want!r}"))
    judges, wanted = (config.get("panel") or {}).get("judges") or [], protocol["panel"]["judges"]
    if len(judges) != len(wanted):
        out.append((where, "config.panel.judges", f"{len(judges)} judge(s); EMPA's panel is {len(wanted)}"))
    played = [(name, roles.get(name), protocol[name]) for name in ("user", "director")]
    played += [(f"judges[{i}]", judge, wanted[0]) for i, judge in enumerate(roles.get("judges") or [])]
    for name, role, ours in played:
        if isinstance(role, dict) and _model(str(role.get("model", ""))) != _model(ours["binding"]):
            out.append((where, f"roles.{name}.model", f"{role.get('model')!r} answered; EMPA's was {_model(ours['binding'])!r}"))
    return out


def run_problems(cases: set[str], references: list[str], protocol: dict[str, Any], where: str) -> list[Problem]:
    """How the runs' episodes and references leave the protocol."""
    out = []
    official = official_case_ids()
    if cases != official:
        other = f", and {len(cases - official)} other" if cases - official else ""
        out.append((where, "episodes", f"{len(cases & official)} of EMPA's {len(official)} official cases played{other}; "
                    "the published scores are means over all of them"))
    wanted = protocol_references(protocol)
    if sorted(references) != sorted(wanted):
        out.append(("--reference", "", f"{', '.join(references)}; the protocol plays {', '.join(wanted)} "
                    "(one strong and one weak model on EMPA's table) and places through both"))
    return out
