"""The simulated user's card for an imported EMPA case, field by field against what EMPA's actor is
given for the same card.

EMPA's prompt assembly (empa/data/loader.py load_actor_prompt, empa/orchestrator/chat_loop.py)
makes the case's whole card file the actor's system prompt; its director later hands the actor
each story stage as title and content, and the memories from <experience>. So every labelled line
of the card must reach emobench's simulator card as written (or the director's, for the story),
the needs with the card's own level and reason, and nothing the card does not say (no Big Five).
The three cards are the fixture's, our own writing in EMPA's format.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from emobench.importers.empa_cases import import_empa_cases
from emobench.prompts import load_language_template
from emobench.registry import Case
from emobench.registry.local import read_local_cases
from emobench.run.runner import ROOT

FIXTURE = Path(__file__).parent / "fixtures" / "empa_checkout"
DATA = FIXTURE / "empa" / "data"
# The needs as each card states them (level word, reason), in emobench's three lines.
NEED_LINE = {"C": "被理解（你的处境、你的想法）", "A": "被共情（你的感受被看见）", "P": "被肯定或鼓励（你的主动性、你的价值观）"}
NEEDS = {
    "script_901": {"C": ("低", "方案本身她心里有数。"), "A": ("高", "希望对方体会到被自己人当众拆台的委屈。"),
                   "P": ("高", "想确认自己坚持原方案不是固执，是对组里的人负责。")},
    "script_902": {"C": ("低", "车位的事他其实明白。"), "A": ("中", "想有人听他说说舍不得。"),
                   "P": ("高", "想让人懂他为什么非要守着这块地。")},
    "script_903": {"C": ("高", "先帮他弄清转专业的条件和风险（认知）"), "A": ("中", "再接住他对爸妈的愧疚（情感）"),
                   "P": ("低", "至于想做什么，他自己知道（动机）")},
}
# Card lines the simulator's card carries word for word, and those the director's carries.
SIMULATOR_FIELDS = ("姓名", "性别", "年龄", "社交性格", "内核性格", "想要找人倾诉的想法与内容", "倾诉中想要获得的共情点",
                    "人物共情阈值", "隐形成长主线脉络", "现在的人生主线目标", "现在的人生愿景与动力", "现在的情况")
DIRECTOR_FIELDS = ("童年经历", "少年经历", "青年经历", "故事的起因")


def _card_field(card: str, label: str) -> str | None:
    found = re.search(rf"^[\s\-*]*{label}[：:][ \t]*(.+?)[ \t]*$", card, re.MULTILINE)
    return found.group(1) if found else None


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    out = tmp_path_factory.mktemp("render") / "empa-zh"
    import_empa_cases(FIXTURE, out, commit="abc1234")
    return {c.id.removeprefix("empa-").replace("-", "_"): c for c in read_local_cases(out)}


@pytest.mark.parametrize("script", sorted(NEEDS))
def test_the_simulators_card_holds_every_field_of_empas_card(cases: dict[str, Case], script: str) -> None:
    case = cases[script]
    card = (DATA / "cases" / f"{script}.md").read_text(encoding="utf-8")  # what EMPA's actor is given
    story = next(s for s in json.loads((DATA / "scenarios" / "character_stories.json").read_text(encoding="utf-8"))
                 if s["剧本编号"] == script)
    simulator = load_language_template(ROOT, "prompts", "simulator.j2", "zh").case_system(case)
    director = load_language_template(ROOT, "prompts", "director.j2", "zh").case_system(case)

    for label in SIMULATOR_FIELDS:
        value = _card_field(card, label)
        assert value is None or value in simulator, f"{script}: {label} {value!r} not in the simulator's card"
    for label in DIRECTOR_FIELDS:
        value = _card_field(card, label)
        assert value is not None and value in director, f"{script}: {label} {value!r} not in the director's card"
    name, age = _card_field(card, "姓名"), _card_field(card, "年龄")
    assert f"你是谁\n{name}，{age}岁。{_card_field(card, '性别')}，" in simulator
    assert f"说话方式：消息简短，{_card_field(card, '社交性格')}。习惯：{_card_field(card, '内核性格')}。" in simulator
    threshold = re.search(r"共情阈值【(.)】", card)
    assert threshold is not None and f"打开心扉的门槛：{threshold.group(1)}。" in simulator
    topic = re.search(r"#+\s*聊天话题\s*\n\s*(.+)", card)
    assert topic is not None and f"表面上你想聊的是：{topic.group(1).strip()}" in simulator
    hidden = _card_field(card, "倾诉中想要获得的共情点")
    assert f"从不直说的东西（只有对方赢得了你的信任，它才可能慢慢显露）：{hidden}" in simulator
    # The needs: the card's level beside the card's reason, nothing else.
    got = re.findall(r"^- (被理解|被共情|被肯定或鼓励)(（[^）]*）)：(.)——(.*)$", simulator, re.MULTILINE)
    assert {head + paren: (level, why) for head, paren, level, why in got} == {
        NEED_LINE[axis]: NEEDS[script][axis] for axis in "CAP"}
    assert "性格：" not in simulator and "神经质" not in simulator  # EMPA's actor is given no Big Five
    # The story reaches the director as EMPA's director gives it: each stage's title and content.
    for i, stage in enumerate(sorted(story["故事的经过"], key=lambda k: int(k.removeprefix("阶段"))), start=1):
        part = story["故事的经过"][stage]
        assert f"[{i}] {part['标题']}：{part['内容']}" in director
    assert story["故事的插曲"] in director
