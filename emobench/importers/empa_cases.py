"""`emobench import empa-cases EMPA_DIR --out DIR`: EMPA's official cases as a local zh split.

The split is a folder on the user's side, never inside the package: EMPA's cards are CC BY-NC,
so emobench reads them from the user's checkout and ships none of their text. The folder holds
cases.jsonl (one emobench case record per EMPA case, split `empa-zh`), split.json (where each
field came from, the EMPA commit and a sha256 of every file read, what had to be filled in) and
NOTICE (EMPA's licence and citation). `emobench run --local-split DIR` (config key
`local_split`) plays it with emobench's own Chinese templates; the run copies cases.jsonl into
its directory, so rescoring and reports read the same cards later.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

import emobench
from emobench.errors import InputError
from emobench.importers.empa import EMPA_REPOSITORY
from emobench.importers.empa_cases_format import METADATA, OFFICIAL, PRECOMPUTED, STORIES, EmpaCard, read_checkout
from emobench.importers.empa_priorities import lead
from emobench.importers.empa_release import identify, known_releases
from emobench.library_paths import checkout_sha
from emobench.profiles import load_profile
from emobench.registry import Case
from emobench.registry.hashing import card_hash, case_hash, registry_version
from emobench.registry.local import CASES_FILE, SPLIT_FILE
from emobench.registry.models import HiddenNeed, IEDRLevels, Persona, PersonaCard, Scenario, ScenarioCard

SPLIT = "empa-zh"
LANGUAGE = "zh"
# EMPA's six categories, as its metadata names them.
CATEGORIES = {"生活状况": "life", "身心健康": "health", "休闲娱乐": "leisure", "观念认同": "values",
              "人际关系": "relations", "生涯发展": "career"}
# The actor's tactics in EMPA's cards -> emobench's resistance moves.
TACTICS = {"委婉暗示": "hinting", "话题跳跃": "deflecting", "灵魂反问": "testing", "直接反驳": "pushing_back"}
# Fields EMPA's cards do not hold, and what the import puts there (also in split.json).
FILLED = {
    "persona.big_five": "left empty, and the card shows no Big Five line: EMPA's actor is given none, only the two "
                        "traits in prose (社交性格, 内核性格), carried as the style's register and habit",
    "persona.meter_start": "emobench's default 40: EMPA has no meter",
    "persona.style.length": "'short': EMPA's cards ask for 20-100 characters a message",
    "scenario.opening": "the card's 聊天话题 line, verbatim: EMPA's actor writes its own first message",
    "scenario.valence": "not set: EMPA does not label it (slices read it as negative)",
    "persona.needs.lead": "the need that leads where the card puts two at its top level (or none above 中): EMPA's "
                          "dominant_axis where it is one of them, else the stronger wording, then the card's order",
    "case.stratum": "case_metadata.json's dominant_axis, EMPA's sampling stratum: the slice family dominant_axis, "
                    "never a need (EMPA's actor does not see it)",
}
ATTRIBUTION = files("emobench.external").joinpath("empa_source.yaml")
# CC BY-NC 4.0 §3(a)(1)(B): say that the material was modified, and how.
MODIFIED = ("Modified: yes. emobench re-structured each case into its own case format: the card's fields were "
            "split into emobench's persona and scenario fields, the priority levels (高/中/低) written as high/medium/low "
            "and their tags taken off the reasons, the story's stages joined to their titles, and fields EMPA's cards do "
            "not have were filled in (split.json, filled_in). The Chinese text is otherwise EMPA's, not translated. "
            "The source's authors do not endorse this use.")


def _slug(script_id: str) -> str:
    return "empa-" + script_id.lower().replace("_", "-")


def build_case(card: EmpaCard, where: Path) -> Case:
    """The emobench case of one EMPA card: its own Chinese text in emobench's fields."""
    slug = _slug(card.script_id)
    # Each need as the card's own priority lines give it; the stratum only breaks a tie.
    needs: dict[str, Any] = {axis: {"level": p.level, "why": p.why} for axis, p in card.priorities.items()}
    top = lead(card.priorities, card.dominant_axis)  # type: ignore[arg-type]
    if [p.level for p in card.priorities.values()].count("high") != 1:
        needs["lead"] = top
    tactics = [move for word, move in TACTICS.items() if word in card.strategy] or ["hinting"]
    persona_card = PersonaCard.model_validate({
        "id": slug, "version": 1, "language": LANGUAGE, "name": card.name, "age": card.age,
        "identity": f"{card.gender}，{card.age}岁。{card.present}",
        "background": " ".join(t for t in (card.goal, card.wants_to_say, card.sensitivity) if t),
        "big_five": {},
        "style": {"length": "short", "register": card.social, "habits": [card.core]},
        "threshold": card.threshold, "needs": needs, "resistance": tactics,
    })
    category = CATEGORIES.get(card.category)
    if category is None:
        raise InputError(where, f"sampled_cases[{card.script_id}].category", f"unknown EMPA category {card.category!r}")
    memories = [{"period": p, "text": t} for p, t in card.past.items()] + [{"period": "current", "text": card.present}]
    if card.interlude.strip():
        memories.append({"period": "current", "text": card.interlude})
    scenario_card = ScenarioCard.model_validate({
        "id": slug, "version": 1, "language": LANGUAGE, "category": category, "topic": card.topic,
        "stages": [card.cause, *card.stages][:6], "memories": memories[:5], "opening": card.topic,
    })
    persona = Persona(**persona_card.model_dump(), content_hash=card_hash(persona_card))
    scenario = Scenario(**scenario_card.model_dump(), content_hash=card_hash(scenario_card))
    iedr = IEDRLevels.model_validate({item.replace(".", ""): level for item, level in card.iedr.items()})
    if card.p0 is not None and tuple(card.p0) != iedr.p0:
        raise InputError(card.iedr_source, card.script_id, f"EMPA's P0 {tuple(card.p0)} differs from its levels' {iedr.p0}")
    need = HiddenNeed(axis=top, text=card.hidden_need)
    return Case(
        id=slug, split=SPLIT, scenario=scenario, persona=persona, iedr=iedr, case_need=need,
        stratum=card.dominant_axis,  # type: ignore[arg-type]
        content_hash=case_hash(slug, scenario.content_hash, persona.content_hash, iedr.model_dump(),
                               hidden_need=need.model_dump(), stratum=card.dominant_axis),
    )


def _thresholds_agree(card: EmpaCard, case: Case) -> bool | None:
    """Whether EMPA's precomputed EPM thresholds are the ones the `empa` profile derives from P0."""
    if card.thresholds is None:
        return None
    rules = load_profile("empa").engine
    r0 = case.p0_norm
    ours = {"epsilon_distance": round(rules.epsilon_fraction * r0, rules.value_decimals),
            "epsilon_direction": round(rules.epsilon_fraction * r0, rules.value_decimals),
            "epsilon_energy": round(r0, rules.value_decimals)}
    return all(abs(ours[k] - v) < 0.01 for k, v in card.thresholds.items())


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def import_empa_cases(checkout: Path, out: Path, *, commit: str | None = None) -> dict[str, Any]:
    """Read and check everything, then write the split folder in one step; returns split.json."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(out, "", "already exists and is not empty; import into a new folder")
    cards = read_checkout(checkout)
    cases = [build_case(card, checkout / METADATA) for card in cards]
    read = sorted({OFFICIAL, STORIES, METADATA} | {Path("empa/data/cases") / f"{c.script_id}.md" for c in cards}
                  | {c.iedr_source.relative_to(checkout) for c in cards})
    agree = [a for a in (_thresholds_agree(card, case) for card, case in zip(cards, cases, strict=True)) if a is not None]
    release = identify(checkout, read)
    git = checkout_sha(checkout)
    if commit is None and git is None and release is None:
        raise InputError(checkout, "--commit", "not a git checkout, and its files match no known EMPA release "
                         f"({', '.join(r.commit[:7] for r in known_releases())}); say which commit it is with --commit")
    info = {
        "split": SPLIT,
        "language": LANGUAGE,
        "registry_version": registry_version((c.id, c.content_hash) for c in cases),
        "cases": [{"id": case.id, "script_id": card.script_id, "iedr_from": str(card.iedr_source.relative_to(checkout))}
                  for card, case in zip(cards, cases, strict=True)],
        "source": {"repository": EMPA_REPOSITORY,
                   "commit": commit or git or (release.commit if release else None),
                   "identified_by": "--commit" if commit else "git" if git else "file hashes",
                   # The known release these files are, byte for byte (None: a commit we hold no hashes of,
                   # or files changed): what `external empa-place` asks of a run's cards.
                   "release": release.commit if release else None,
                   "files": {str(p): _sha256(checkout / p) for p in read}},
        "precomputed_levels": sum(c.iedr_source == checkout / PRECOMPUTED for c in cards),
        "precomputed_thresholds": {"cases": len(agree), "equal_to_empa_profile": sum(agree)},
        "filled_in": FILLED,
        "licence": "CC BY-NC 4.0: EMPA's text, read from your checkout; keep this folder to yourself",
        "emobench_version": emobench.__version__,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    # Written beside the target and renamed into place: a failure leaves no half-written split.
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (staging / CASES_FILE).write_bytes(b"".join(c.model_dump_json().encode() + b"\n" for c in cases))
        (staging / SPLIT_FILE).write_text(json.dumps(info, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        (staging / "NOTICE").write_text(_notice(info), encoding="utf-8")
        if out.exists():
            out.rmdir()
        os.replace(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return info


def _notice(info: dict[str, Any]) -> str:
    a = yaml.safe_load(ATTRIBUTION.read_text(encoding="utf-8"))
    source = info["source"]
    release = (f"release {source['release'][:7]}, its files unchanged" if source["release"]
               else "its files are not those of a known release")
    return (f"The case texts in this folder are EMPA's ({source['repository']} at {source['commit']}; {release}; "
            f"{source['identified_by']}), read from a local copy by emobench {info['emobench_version']}.\n"
            f"{a['copyright']}\nLicence: {a['licence']}, {a['licence_name']} ({a['licence_url']}). Non-commercial use only; "
            f"do not redistribute without this notice.\n{a['no_warranty']}\n\n{MODIFIED}\n\nCite:\n{a['citation']}\n")
