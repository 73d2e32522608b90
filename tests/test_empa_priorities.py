"""The card's own priorities (当下共情需求优先级), read in every form EMPA's cards write them:
generated variants of each form, with the level and reason the card meant, must read back exactly."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from emobench.importers.empa_priorities import AXIS_NAMES, Priority, lead, level_tag, parse_priorities

ZH = {"high": "高", "medium": "中", "low": "低"}
NAMES: dict[str, str] = {str(a): n for a, n in AXIS_NAMES.items()}
# Reasons: the cards' own prose, which may hold a level character anywhere but at its start.
_CHARS = "希望对方能理解她的委屈高冷中间低落喜悦和动机认知情感，、“”…"
reasons = st.text(alphabet=_CHARS, min_size=1, max_size=24).filter(lambda r: r[0] not in "高中低，、…" and r.strip())
levels = st.sampled_from(("high", "medium", "low"))
colon = st.sampled_from(("：", ":", "——", " - ", "： ", " ："))
space = st.sampled_from(("", " ", "  "))


@st.composite
def tagged(draw: st.DrawFn, level: str, why: str) -> str:
    """One axis's text after its name, with the level tagged ahead of the reason."""
    z, s = ZH[level], draw(space)
    forms = [f"{z}优先级{s}+{s}{why}", f"[{z}优先级{s}+{s}{why}]", f"[优先级：{z}]{s}{why}", f"[优先级:{z}]{s}{why}",
             f"[优先级{z}]{s}{why}", f"【{z}】{s}{why}", f"【{z}优先级】{s}{why}", f"{z}{s}|{s}{why}", f"{z}——{why}",
             f"[{z}优先级{s}|{s}{why}]", f"{z}。{why}"]
    forms += {"high": [f"最高优先级。{why}", f"[最高优先级]{s}{why}", f"[优先级极高]{s}{why}"],
              "medium": [f"其次。{why}", f"[中等优先级{s}|{s}{why}]"], "low": [f"最低。{why}"]}[level]
    return draw(st.sampled_from(forms))


@st.composite
def per_axis_block(draw: st.DrawFn) -> tuple[str, dict[str, tuple[str, str]]]:
    truth = {axis: (draw(levels), draw(reasons)) for axis in "CAP"}
    order = draw(st.permutations("CAP"))
    numbered = draw(st.booleans())
    lines = []
    for i, axis in enumerate(order, start=1):
        level, why = truth[axis]
        head = f"{i}. " if numbered else ""
        lines.append(f"{draw(space)}    {head}{NAMES[axis]}{draw(colon)}{draw(tagged(level, why))}{draw(space)}")
    return "\n" + "\n".join(lines) + "\n", truth


@st.composite
def ranking_line(draw: st.DrawFn) -> tuple[str, dict[str, tuple[str, str]]]:
    """"认知共情 > 情感共情 > 动机共情。先…（认知）；再…（情感）；最后…（动机）。" (script_059's form)."""
    order = draw(st.permutations("CAP"))
    arrow = draw(st.sampled_from((" > ", ">", " ＞ ", "＞")))
    whys = {axis: draw(reasons) for axis in order}
    tag = {"C": "（认知）", "A": "（情感）", "P": "（动机）"}
    semi = draw(st.sampled_from(("；", ";")))
    clauses = semi.join(whys[a] + tag[a] for a in order)
    line = arrow.join(NAMES[a] for a in order) + draw(st.sampled_from(("。", "：", "，"))) + clauses + "。"
    truth = {a: (lvl, whys[a] + tag[a]) for a, lvl in zip(order, ("high", "medium", "low"), strict=True)}
    return line, truth


@st.composite
def numbered_line(draw: st.DrawFn) -> tuple[str, dict[str, tuple[str, str]]]:
    """"1.情感共情（最优先，…）；2.认知共情（其次，…）；3.动机共情（优先级最低，…）" (script_042's form)."""
    order = draw(st.permutations("CAP"))
    words = (("最优先", "high"), ("其次", "medium"), ("优先级最低", "low"))
    whys = {axis: draw(reasons) for axis in order}
    parts = [f"{i}.{NAMES[a]}（{w}，{whys[a]}）" for i, (a, (w, _)) in enumerate(zip(order, words, strict=True), start=1)]
    truth = {a: (lvl, whys[a]) for a, (_, lvl) in zip(order, words, strict=True)}
    return "；".join(parts) + "。", truth


def _read(block: str) -> dict[str, tuple[str, str]] | None:
    got = parse_priorities(block)
    return None if got is None else {a: (p.level, p.why) for a, p in got.items()}


@settings(max_examples=150, deadline=None)
@given(per_axis_block())
def test_per_axis_lines_read_back_the_cards_level_and_reason(case: tuple[str, dict[str, tuple[str, str]]]) -> None:
    block, truth = case
    assert _read(block) == truth


@settings(max_examples=60, deadline=None)
@given(st.one_of(ranking_line(), numbered_line()))
def test_one_line_rankings_give_each_axis_its_rank_and_its_own_clause(case: tuple[str, dict[str, tuple[str, str]]]) -> None:
    line, truth = case
    assert _read(line) == truth


@settings(max_examples=60, deadline=None)
@given(per_axis_block(), st.sampled_from("CAP"))
def test_a_block_missing_an_axis_reads_as_nothing(case: tuple[str, dict[str, tuple[str, str]]], gone: str) -> None:
    block, _ = case
    kept = "\n".join(line for line in block.splitlines() if NAMES[gone] not in line)
    assert parse_priorities(kept) is None


def test_a_rank_said_in_a_sentence_keeps_the_sentence() -> None:
    # The cards' 1./2./3. lists say the rank inside the reason: the reason is the whole sentence.
    assert level_tag("最希望获得的是直接的情绪共鸣") == ("high", 2, "最希望获得的是直接的情绪共鸣")
    assert level_tag("其次是希望对方能认可自己的努力") == ("medium", 1, "其次是希望对方能认可自己的努力")
    assert level_tag("没有说优先级") is None


@given(st.dictionaries(st.sampled_from("CAP"), st.tuples(levels, st.integers(1, 2)), min_size=3, max_size=3),
       st.sampled_from("CAP"), st.permutations("CAP"))
def test_the_lead_is_at_the_cards_top_level_and_the_stratum_only_breaks_ties(
        spec: dict[str, tuple[str, int]], stratum: str, order: list[str]) -> None:
    priorities = {a: Priority(level=spec[a][0], why="x", strength=spec[a][1]) for a in order}  # type: ignore[arg-type]
    top = min((p.level for p in priorities.values()), key=("high", "medium", "low").index)
    tied = [a for a in order if priorities[a].level == top]
    chosen = lead(priorities, stratum)  # type: ignore[arg-type]
    assert chosen in tied
    if stratum in tied:
        assert chosen == stratum
    else:
        strongest = max(priorities[a].strength for a in tied)
        assert chosen == next(a for a in tied if priorities[a].strength == strongest)
