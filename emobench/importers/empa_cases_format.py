"""Reading the case cards of a user's EMPA checkout (CC BY-NC: read from their copy, never shipped).

One case is spread over four files under empa/data/: cases/<id>.md (the actor's card: name, age,
traits, threshold, needs and their priorities, past, present), scenarios/character_stories.json
(the story's stages and interlude), case_metadata.json (category and dominant axis of the
official cases) and the IEDR levels, from precomputed/iedr_batch_results.json where present,
else from a recorded result file of the case under results/. The cards' markdown varies in
headings, list markers, colons and how a priority is written; the reader accepts those variants
and names the file and field when something it needs is absent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emobench.errors import InputError
from emobench.importers.empa_priorities import AXIS_NAMES, Priority, parse_priorities

IEDR_ITEMS = tuple(f"{axis}.{i}" for axis in ("C", "A", "P") for i in (1, 2, 3))
DATA = Path("empa") / "data"
OFFICIAL = DATA / "official_cases.txt"
STORIES = DATA / "scenarios" / "character_stories.json"
METADATA = DATA / "case_metadata.json"
PRECOMPUTED = DATA / "precomputed" / "iedr_batch_results.json"
RESULTS = Path("results")
_THRESHOLD = re.compile(r"共情阈值\s*【\s*(高|中|低)\s*】")
_PRIORITIES = re.compile(r"当下共情需求优先级\s*[:：]?(.*)", re.DOTALL)
_GOAL = ("隐形成长主线脉络", "现在的人生主线目标", "现在的人生愿景与动力")


@dataclass(frozen=True)
class EmpaCard:
    """What emobench takes from one EMPA case; free text stays as the user's checkout wrote it."""

    script_id: str
    name: str
    gender: str
    age: int
    social: str  # 社交性格
    core: str  # 内核性格
    strategy: str  # 角色聊天策略, the tactics the actor may use
    threshold: str  # high | medium | low
    topic: str  # 聊天话题
    wants_to_say: str  # 想要找人倾诉的想法与内容
    hidden_need: str  # 倾诉中想要获得的共情点
    priorities: dict[str, Priority]  # axis -> the card's own level and reason, in the card's order
    sensitivity: str  # 人物共情阈值: what this person is touchy about, where written
    past: dict[str, str]  # childhood / adolescence / adulthood -> text
    present: str  # 现在的情况
    goal: str  # 隐形成长主线脉络, 现在的人生主线目标 and 现在的人生愿景与动力, where written
    cause: str  # 故事的起因
    stages: list[str]  # 故事的经过, in order, each as "标题：内容" (EMPA's director reveals both)
    interlude: str  # 故事的插曲
    category: str  # EMPA's Chinese category name
    dominant_axis: str
    iedr: dict[str, int]  # "C.1".."P.3"
    p0: tuple[int, int, int] | None  # as EMPA recorded it, to check against the levels
    thresholds: dict[str, float] | None  # EMPA's precomputed EPM thresholds, where present
    iedr_source: Path


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise InputError(path, "", "missing: is this an EMPA checkout (EMPA_DIR/empa/data/...)?") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(path, "", f"not readable JSON: {exc}") from None


def official_cases(checkout: Path) -> list[str]:
    path = checkout / OFFICIAL
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(path, "", "missing: EMPA lists its official cases there") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, "", f"not readable: {exc}") from None
    ids = [line.strip() for line in text.splitlines() if line.strip()]
    bad = next((i for i in ids if not re.fullmatch(r"script_\d+", i)), None)
    if bad is not None:
        raise InputError(path, "", f"{bad!r} is not a case id like script_003")
    if not ids:
        raise InputError(path, "", "lists no case")
    if len(set(ids)) != len(ids):
        raise InputError(path, "", "lists a case twice")
    return ids


def _section(text: str, tag: str, path: Path) -> str:
    found = re.search(rf"<{tag}>(.*?)</{tag}>", text, re.DOTALL)
    if found is None:
        raise InputError(path, f"<{tag}>", "missing section")
    return found.group(1)


def _field(section: str, label: str, path: Path, where: str) -> str:
    found = re.search(rf"^[\s\-*\d.、]*{label}\s*(?:[（(][^）)\n]*[）)])?[ \t]*[:：][ \t]*(.+?)[ \t]*$", section, re.MULTILINE)
    if found is None:
        raise InputError(path, f"<{where}>.{label}", "missing field")
    return found.group(1)


def _optional(section: str, label: str) -> str:
    found = re.search(rf"^[\s\-*\d.、]*{label}\s*(?:[（(][^）)\n]*[）)])?[ \t]*[:：][ \t]*(.+?)[ \t]*$", section, re.MULTILINE)
    return found.group(1) if found else ""


def _under_heading(section: str, title: str, path: Path, where: str) -> str:
    found = re.search(rf"^#+\s*{title}\s*$\n(.*?)(?=^#|\Z)", section, re.MULTILINE | re.DOTALL)
    text = " ".join(line.strip(" -*\t") for line in (found.group(1).splitlines() if found else []) if line.strip())
    if not text:
        raise InputError(path, f"<{where}>.{title}", "missing heading or empty")
    return text


def read_card_file(path: Path) -> dict[str, Any]:
    """The fields of one cases/<id>.md."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(path, "", "missing: the case is listed in official_cases.txt but has no card") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, "", f"not readable: {exc}") from None
    info = _section(text, "character_info", path)
    profile = _section(text, "psychological_profile", path)
    experience = _section(text, "experience", path)
    threshold = _THRESHOLD.search(_section(text, "empathy_threshold", path))
    if threshold is None:
        raise InputError(path, "<empathy_threshold>.共情阈值", "missing or not one of 【高】【中】【低】")
    age = _field(info, "年龄", path, "character_info").removesuffix("岁").strip()
    if not age.isdigit():
        raise InputError(path, "<character_info>.年龄", f"not a whole number, got {age!r}")
    block = _PRIORITIES.search(profile)
    if block is None:
        raise InputError(path, "<psychological_profile>.当下共情需求优先级", "missing field")
    priorities = parse_priorities(block.group(1))
    if priorities is None:
        raise InputError(path, "<psychological_profile>.当下共情需求优先级",
                         f"no level (高/中/低 or a ranking) for each of {'、'.join(AXIS_NAMES.values())}")
    strategy = re.search(r"你善于用(.+?)来回复", info)
    return {
        "name": _field(info, "姓名", path, "character_info"),
        "gender": _field(info, "性别", path, "character_info"),
        "age": int(age),
        "social": _field(info, "社交性格", path, "character_info"),
        "core": _field(info, "内核性格", path, "character_info"),
        "strategy": strategy.group(1) if strategy else "",
        "threshold": {"高": "high", "中": "medium", "低": "low"}[threshold.group(1)],
        "topic": _under_heading(profile, "聊天话题", path, "psychological_profile"),
        "wants_to_say": _field(profile, "想要找人倾诉的想法与内容", path, "psychological_profile"),
        "hidden_need": _field(profile, "倾诉中想要获得的共情点", path, "psychological_profile"),
        "priorities": priorities,
        "sensitivity": _optional(profile, "人物共情阈值"),
        "past": {
            period: _field(experience, label, path, "experience")
            for period, label in (("childhood", "童年经历"), ("adolescence", "少年经历"), ("adulthood", "青年经历"))
        },
        "present": _field(experience, "现在的情况", path, "experience"),
        "goal": " ".join(t for t in (_optional(experience, label) for label in _GOAL) if t),
        "cause": _field(_section(text, "scenario", path), "故事的起因", path, "scenario"),
    }


def read_story(stories: list[Any], script_id: str, path: Path) -> dict[str, Any]:
    story = next((s for s in stories if isinstance(s, dict) and s.get("剧本编号") == script_id), None)
    if story is None:
        raise InputError(path, f"[剧本编号={script_id}]", "no story for this official case")
    phases = story.get("故事的经过")
    if not isinstance(phases, dict) or not phases:
        raise InputError(path, f"[{script_id}].故事的经过", "missing or empty")
    stages = []
    for key in sorted(phases, key=lambda k: int(re.sub(r"\D", "", k) or 0)):
        content = phases[key].get("内容") if isinstance(phases[key], dict) else None
        if not isinstance(content, str) or not content.strip():
            raise InputError(path, f"[{script_id}].故事的经过.{key}.内容", "missing or empty")
        title = str(phases[key].get("标题") or "").strip()
        stages.append(f"{title}：{content.strip()}" if title else content.strip())
    return {"stages": stages, "interlude": str(story.get("故事的插曲", ""))}


def read_levels(checkout: Path, script_id: str, precomputed: dict[str, Any] | None) -> tuple[dict[str, Any], Path]:
    """The nine IEDR levels, EMPA's P0 and thresholds: precomputed where present, else a recorded run's."""
    entry = (precomputed or {}).get(script_id)
    if isinstance(entry, dict) and entry.get("status", "success") == "success":
        where = checkout / PRECOMPUTED
        levels = _levels(entry.get("iedr"), where, f"{script_id}.iedr")
        p0 = entry.get("P_0")
        recorded = tuple(p0[a] for a in ("C", "A", "P")) if isinstance(p0, dict) and set(p0) >= {"C", "A", "P"} else None
        epm = entry.get("epm") if isinstance(entry.get("epm"), dict) else None
        keys = ("epsilon_distance", "epsilon_direction", "epsilon_energy")
        thresholds = {k: float(epm[k]) for k in keys if k in epm} if epm else None
        return {"iedr": levels, "p0": recorded, "thresholds": thresholds or None}, where
    for result in sorted((checkout / RESULTS).glob(f"**/{script_id}_result.json")):
        data = read_json(result)
        epj = data.get("epj") if isinstance(data, dict) else None
        details = epj.get("iedr_details") if isinstance(epj, dict) else None
        filled = details.get("filled_iedr") if isinstance(details, dict) else None
        if filled is None or not isinstance(epj, dict):
            continue
        recorded = epj.get("P_0_initial_deficit")
        return {"iedr": _levels(filled, result, "epj.iedr_details.filled_iedr"),
                "p0": tuple(int(x) for x in recorded) if isinstance(recorded, list) else None, "thresholds": None}, result
    raise InputError(checkout / PRECOMPUTED, script_id, "no IEDR levels for this case, and no recorded result "
                     f"file ({RESULTS}/**/{script_id}_result.json) holds them")


def _levels(data: Any, path: Path, where: str) -> dict[str, int]:
    if not isinstance(data, dict):
        raise InputError(path, where, "missing or not a mapping of the nine IEDR items")
    levels = {}
    for item in IEDR_ITEMS:
        value = data.get(item)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 3:
            raise InputError(path, f"{where}.{item}", f"missing or not a level 0-3, got {value!r}")
        levels[item] = value
    return levels


def read_checkout(checkout: Path) -> list[EmpaCard]:
    """Every official case of an EMPA checkout, read and checked; nothing is written."""
    if not checkout.is_dir():
        raise InputError(checkout, "", "not a directory")
    ids = official_cases(checkout)
    stories = read_json(checkout / STORIES)
    if not isinstance(stories, list):
        raise InputError(checkout / STORIES, "", "expected a list of stories")
    meta = read_json(checkout / METADATA)
    sampled = meta.get("sampled_cases") if isinstance(meta, dict) else None
    if not isinstance(sampled, list):
        raise InputError(checkout / METADATA, "sampled_cases", "missing or not a list")
    by_id = {m.get("script_id"): m for m in sampled if isinstance(m, dict)}
    precomputed = read_json(checkout / PRECOMPUTED) if (checkout / PRECOMPUTED).exists() else None
    if isinstance(precomputed, list):  # EMPA's loader accepts a list of entries as well
        precomputed = {e.get("script_id"): e for e in precomputed if isinstance(e, dict)}
    cards = []
    for script_id in ids:
        fields = read_card_file(checkout / DATA / "cases" / f"{script_id}.md")
        story = read_story(stories, script_id, checkout / STORIES)
        row = by_id.get(script_id)
        for key in ("category", "dominant_axis"):
            if not isinstance(row, dict) or not isinstance(row.get(key), str):
                raise InputError(checkout / METADATA, f"sampled_cases[{script_id}].{key}", "missing")
        assert isinstance(row, dict)
        if row["dominant_axis"] not in AXIS_NAMES:
            raise InputError(checkout / METADATA, f"sampled_cases[{script_id}].dominant_axis", "not C, A or P")
        levels, source = read_levels(checkout, script_id, precomputed)
        cards.append(EmpaCard(script_id=script_id, **fields, **story, category=row["category"],
                              dominant_axis=row["dominant_axis"], **levels, iedr_source=source))
    return cards
