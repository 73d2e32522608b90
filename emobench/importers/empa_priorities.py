"""A card's own needs: the level and reason of each axis from its 当下共情需求优先级 lines.

EMPA's cards write the priorities in several forms (read from the 30 official cards of release
d59757a): one line per axis with the level tagged in front ("情感共情：[优先级：高] …",
"…：高优先级 + …", "…：【低】…", "…：中 | …", "…：其次。…", "…：中——…"), or with the rank in
the sentence ("1. 情感共情：最希望获得的是…"), or all three on one line, ranked with ">" and
explained clause by clause (script_059), or numbered with the reasons in brackets (script_042).
The level is the card's; the reason is the card's text without the level tag, so nothing
rendered beside it can contradict it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from emobench.registry.models import AXES, Axis, Level

AXIS_NAMES: dict[Axis, str] = {"C": "认知共情", "A": "情感共情", "P": "动机共情"}
_BY_NAME = {name: axis for axis, name in AXIS_NAMES.items()}
_NAME = "(认知共情|情感共情|动机共情)"
# A level word and how strongly it says it: 最高 outranks 高 when two needs are high.
_WORDS: dict[str, tuple[Level, int]] = {
    "最高": ("high", 2), "极高": ("high", 2), "最优先": ("high", 2), "最希望": ("high", 2), "最需要": ("high", 2),
    "高": ("high", 1), "中等": ("medium", 1), "中": ("medium", 1), "其次": ("medium", 1),
    "最低": ("low", 1), "最后": ("low", 1), "低": ("low", 1),
}
_WORD = "|".join(sorted(_WORDS, key=len, reverse=True))
# Where the level is a tag ahead of the reason: bracketed, before 优先级, or before a separator.
_AFTER = r"(?=\s*(?:优先级|[\]】)）|+｜：:。.，,、—\-–;；]|\s|$))"
_TAG = re.compile(rf"^\s*([\[【(（]?)\s*(?:优先级\s*[：:]?\s*)?({_WORD})(优先级)?{_AFTER}")
_RANK = re.compile(rf"^\s*([\[【(（]?)\s*(?:优先级\s*)?({_WORD})")
_SEP = " \t：:|｜+。.，,、—-–;；"
_CLOSE = {"[": "]", "【": "】", "(": ")", "（": "）"}
_LINE = re.compile(rf"^[\s\-*]*(\d+)?[.、)）]?\s*{_NAME}\s*[：:—\-–]+\s*(.*?)\s*$")
_INLINE = re.compile(rf"(\d+)\s*[.、)）]\s*{_NAME}\s*[（(](.*?)[）)]\s*(?=[；;。]?\s*(?:\d+\s*[.、)）]|$))")
_CHAIN = re.compile(rf"^\s*{_NAME}(?:\s*(?:[>＞≥]|[=＝、])\s*{_NAME})+")
_TAGGED_CLAUSE = re.compile(r"[（(](认知|情感|动机)[）)]")


@dataclass(frozen=True)
class Priority:
    level: Level
    why: str
    strength: int  # 2 for 最高/极高/最优先…, else 1: breaks a tie between two high needs


def level_tag(text: str) -> tuple[Level, int, str] | None:
    """(level, strength, the reason after it) when `text` opens with a level, else None.
    A rank said in a sentence (最希望获得…, 其次是…) keeps the sentence as the reason."""
    tag = _TAG.match(text)
    if tag is not None:
        level, strength = _WORDS[tag.group(2)]
        rest = text[tag.end():].lstrip(_SEP).removeprefix("优先级").lstrip(_SEP)
        close = _CLOSE.get(tag.group(1))
        if close and rest.endswith(close) and close not in rest[:-1]:
            rest = rest[:-1].rstrip()
        elif close and rest.startswith(close):
            rest = rest[1:].lstrip(_SEP)
        return level, strength, rest.strip() or text.strip()
    rank = _RANK.match(text)
    if rank is None:
        return None
    level, strength = _WORDS[rank.group(2)]
    return level, strength, text.strip()


def _chain(line: str) -> dict[Axis, Priority] | None:
    """"认知共情 > 情感共情 > 动机共情。首先…（认知）；然后…（情感）；最后…（动机）。"""
    chain = _CHAIN.match(line)
    if chain is None:
        return None
    groups = [[_BY_NAME[n] for n in re.findall(_NAME, g)] for g in re.split(r"[>＞≥]", chain.group(0))]
    order = [a for g in groups for a in g]
    if sorted(order) != sorted(AXES):
        return None
    levels: tuple[Level, ...] = ("high", "medium", "low")
    rank = {axis: levels[min(i, 2)] for i, group in enumerate(groups) for axis in group}
    rest = line[chain.end():].lstrip(_SEP)
    clauses = [c.strip() for c in re.split(r"[；;]", rest) if c.strip()]
    why: dict[Axis, str] = {}
    for clause in clauses:
        tagged = _TAGGED_CLAUSE.search(clause)
        if tagged is not None:
            why[_BY_NAME[tagged.group(1) + "共情"]] = clause.rstrip("。.")
    if len(why) != 3:
        why = dict(zip(order, (c.rstrip("。.") for c in clauses), strict=True)) if len(clauses) == 3 else {}
    return {a: Priority(rank[a], why.get(a) or line.strip(), 1) for a in order}


def _inline(line: str) -> dict[Axis, Priority] | None:
    """"1.情感共情（最优先，…）；2.认知共情（其次，…）；3.动机共情（优先级最低，…）"."""
    found = _INLINE.findall(line)
    if sorted(_BY_NAME[n] for _, n, _ in found) != sorted(AXES):
        return None
    levels: tuple[Level, ...] = ("high", "medium", "low")
    out: dict[Axis, Priority] = {}
    for number, name, inner in found:
        tag = level_tag(inner)
        level, strength, why = tag if tag else (levels[min(int(number), 3) - 1], 1, inner.strip())
        out[_BY_NAME[name]] = Priority(level=level, why=why, strength=strength)
    return out


def parse_priorities(block: str) -> dict[Axis, Priority] | None:
    """The three axes' priorities from the text after 当下共情需求优先级 (its own line and the
    lines under it); None when some axis has no readable level."""
    first = block.strip().splitlines()[0] if block.strip() else ""
    one_line = _chain(first) or _inline(first)
    if one_line is not None:
        return one_line
    lines: dict[Axis, tuple[str | None, str]] = {}
    for raw in block.splitlines():
        found = _LINE.match(raw)
        if found is not None and _BY_NAME[found.group(2)] not in lines:
            lines[_BY_NAME[found.group(2)]] = (found.group(1), found.group(3))
    if set(lines) != set(AXES):
        return None
    out: dict[Axis, Priority] = {}
    numbered = sorted(int(n) for n, _ in lines.values() if n) == [1, 2, 3]
    levels: tuple[Level, ...] = ("high", "medium", "low")
    for axis, (number, text) in lines.items():
        tag = level_tag(text)
        if tag is None and numbered and number:
            tag = (levels[int(number) - 1], 1, text.strip())  # a numbered list with no level word: its order
        if tag is None:
            return None
        out[axis] = Priority(level=tag[0], strength=tag[1], why=tag[2])
    return out


def lead(priorities: dict[Axis, Priority], stratum: Axis) -> Axis:
    """The need that leads, among those at the card's top level (two cards tie two needs at 高,
    one puts none above 中): EMPA's stratum where it is one of them, else the strongest
    wording (最高 over 高), then the order the card lists them in."""
    top = min((p.level for p in priorities.values()), key=("high", "medium", "low").index)
    tied = [a for a in priorities if priorities[a].level == top]
    if stratum in tied:
        return stratum
    return max(tied, key=lambda a: (priorities[a].strength, -list(priorities).index(a)))
