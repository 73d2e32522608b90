"""The kit's classes for faults of meaning (issue 39): a hidden need that restates the case's
opening or the persona's why in other words, or copies a phrase of the why with one word
changed; sibling needs that mean the same; a test story retold by a new dev card; a dev persona
whose why texts paraphrase a test persona's. Each generator draws five of its paraphrases
(written by hand, in other words than the text they restate) from the seeded rng."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import yaml

from tests.library_attack_kit import TARGET, FaultClass, Language, Plant, append_text, edit_yaml

PICK = 5  # variants drawn per class
# English fixture (tests/data/registry/ed4): test4-01 (locked-out, iris), test4-02 (locked-out,
# otto: a counterfactual set), test4-03 (the-workshop-key, iris); dev4-01 (first-harvest, sefa).
TEST, DEV = "scenarios/splits/test.yaml", "scenarios/splits/dev.yaml"
IRIS, SEFA, LOCKED = "personas/iris.yaml", "personas/sefa.yaml", "scenarios/locked-out.yaml"
# Chinese fixture (tests/data/zh_library): testzh-01 (becoming-a-father, chen-hao); devzh-01
# (qingming-first-year, wang-jianguo), devzh-02 (kaoyan-second-try, lin-xiaoyu).
TEST_ZH, DEV_ZH = "scenarios/splits/test-zh.yaml", "scenarios/splits/dev-zh.yaml"
CHEN, WANG, FATHER = "personas/zh/chen-hao.yaml", "personas/zh/wang-jianguo.yaml", "scenarios/zh/becoming-a-father.yaml"

# test4-01's opening is "How do I find a locksmith at night?" (the case's own: "Where does one
# find a locksmith at night, and what should it cost?").
NEED_AS_OPENING = [
    "She needs to learn where a night-time locksmith can be found and what a fair price for one is.",
    "What she needs is the name of someone who opens doors after dark and an idea of the fee.",
    "She needs to find out how to reach an emergency locksmith at this hour and what it will cost.",
    "She needs practical directions to a locksmith working late tonight, with a sense of the charge.",
    "She needs someone to tell her where she can get a lock opened at night and how much to expect to pay.",
    "Underneath, she needs help tracking down a locksmith who works nights and knowing the going rate.",
    "She needs a way to get a locksmith out tonight and a figure for what it ought to cost her.",
]
# Iris's C why: "She trusts what she can follow step by step."
NEED_AS_WHY = [
    "She needs to be able to follow it one step at a time before she can trust it.",
    "Iris needs things laid out in steps she can follow, because that is what she trusts.",
    "She needs to trace it stage by stage; only what she can follow does she believe.",
    "She needs each step shown so she can follow along and come to trust it.",
    "What she needs is to follow the whole thing step by step, since that is how trust comes to her.",
    "She needs to be walked through it a step at a time, as she only trusts what she can follow.",
]
# test4-01's need (iris): "To understand why small losses keep piling up, so the chaos has a shape
# she can follow." Written into test4-02 (otto), its sibling.
SIBLING_EN = [
    "To grasp why the little losses keep stacking up, so the mess takes a shape he can follow.",
    "He needs to understand why small setbacks keep piling on, so the disorder has a pattern he can trace.",
    "To make sense of why minor losses keep accumulating, so the chaos gets a form he can follow.",
    "He needs to see why one small loss keeps landing on another, so the muddle has a shape to it.",
    "To work out why the small losses keep building up, giving the chaos a shape he can follow.",
    "He needs the reason the little losses keep heaping up, so that the chaos becomes something he can follow.",
]
# locked-out, retold by a new dev card.
RETOLD_EN = [
    ["Asks how to get hold of a locksmith who comes out late.",
     "Notes this is the third lockout in a month and makes a joke of it.",
     "Falls silent, then admits that lately everything seems to be slipping away."],
    ["Wants to find an all-night locksmith to get back into the flat.",
     "Says it has happened three times this month and shrugs it off with a laugh.",
     "Goes quiet and says that recently it all feels like it is sliding out of reach."],
    ["Looks for a locksmith open at this hour of the night.",
     "Laughs that this is lockout number three in a month.",
     "After a silence, says life lately feels like it is slipping through the fingers."],
    ["Needs a night locksmith after getting shut out of the flat again.",
     "Jokes that it is the third time in the same month.",
     "Stops joking and says everything has been slipping lately."],
    ["Tries to work out where to get a locksmith late at night.",
     "Mentions, laughing, that it is the third lockout this month.",
     "Then goes quiet and says things lately feel as if they are slipping."],
    ["Asks where a locksmith can be found this late at night.",
     "Says this is the third time this month and brushes it off.",
     "Goes silent, then says it feels as if everything is slipping lately."],
]
RETOLD_TOPIC_EN = "Shut out of the flat late at night, the third lockout this month."
# Iris's whys (C, A, P), paraphrased into Sefa's (a dev persona).
TWIN_EN = [
    ("He trusts what he can follow one step at a time.", "Warmth helps him once he feels understood.",
     "He already knows how to act."),
    ("He believes what he can trace step by step.", "Warmth is welcome once he feels he has been understood.",
     "He knows already what to do."),
    ("He relies on what he can follow in steps.", "Kindness helps after he feels understood.",
     "He already knows how he will act."),
    ("Step-by-step reasoning he can follow is what he trusts.", "Once understood, he finds warmth helpful.",
     "Knowing how to act is not his problem."),
    ("He only trusts what he can follow step by step.", "Warmth does him good once he feels understood.",
     "He knows how to act already."),
    ("Whatever he can follow stage by stage, he trusts.", "Warmth helps, but only after he feels understood.",
     "He is already sure how to act."),
]
# A phrase of Iris's C why ("She trusts what she can follow step by step.") with one word changed.
PHRASE_EN = [
    "Iris needs to trust what she can follow step by step in the repair, so the key stops feeling like a test.",
    "She needs to believe what she can follow step by step about the job, and nothing she cannot.",
    "She wants to trust only what she can now follow step by step, so that the new key is not a riddle.",
    "To trust what she can clearly follow step by step, so the keys mean a job she understands.",
    "She needs to trust what she could follow step by step, so the workshop is not a mystery.",
    "To trust what she can follow, step by careful step, so that the new role has a shape.",
]

# testzh-01's opening: "我要当爸爸了！！！刚从医院出来！！"
NEED_AS_OPENING_ZH = [
    "陈浩需要把自己要当爸爸、刚从医院出来的消息说出来。",
    "他需要告诉别人：他马上要当爸爸了，刚刚从医院走出来。",
    "陈浩需要有人听他说他要做爸爸了，他刚从医院出来。",
    "他需要分享自己就要当爸爸的事，人刚从医院出来。",
    "陈浩需要让人知道，他要当爸爸了，才从医院里出来。",
    "他需要说一声：我要当爸爸了，刚出医院。",
]
# Chen Hao's P why: "他怕自己当不好父亲，想听到有人相信他做得到。"
NEED_AS_WHY_ZH = [
    "陈浩担心自己当不好父亲，需要听到有人相信他做得到。",
    "他需要听见有人说相信他能当好父亲，因为他怕自己做不到。",
    "他害怕当不好这个父亲，需要有人相信他能做到。",
    "陈浩需要有人相信他做得到，他心里怕自己当不好父亲。",
    "他需要听到别人相信他做得到，他一直怕自己当不好父亲。",
    "他怕当不好父亲，需要听到一句相信他能做到的话。",
]
# devzh-01's need (wang-jianguo): "王建国需要有人接住他一个人扫墓回来的空落，不必讲道理。"
# Written into a new sibling case (lin-xiaoyu) of the same scenario.
SIBLING_ZH = [
    "林晓雨需要有人接住她一个人扫墓回来的空落，不用讲道理。",
    "她需要有人接住她独自扫墓回来后的空落落，不必跟她讲道理。",
    "林晓雨需要一个人接住她扫墓归来的空落，而不是讲道理。",
    "她需要有人陪着她一个人扫完墓回来的空落，不需要讲道理。",
    "林晓雨需要有人接住她独自扫墓回家的那份空落，别讲道理。",
    "她需要有人接住她一个人上坟回来的空落，不必说道理。",
]
# becoming-a-father, retold by a new dev card.
RETOLD_ZH = [
    ["他一进门就说老婆怀孕了，今天刚去做了检查。", "他说已经在网上看婴儿车，看了整整一晚上。",
     "他说自己连绿萝都养不活，不知道能不能当好爸爸。"],
    ["他一口气说妻子怀上了，今天刚检查完。", "他说开始挑婴儿车，挑了一晚上。",
     "他说自己连盆花都养不活，怕当不好爸爸。"],
    ["他说老婆有了，今天刚做完检查回来。", "他说这一晚上都在看婴儿车。",
     "他说自己绿植都养不活，担心能不能当好爸爸。"],
    ["他兴奋地说老婆怀孕了，刚做完检查。", "他说一晚上都在比较婴儿车。",
     "他说连一盆绿植都养不活的人，不知道能不能当个好爸爸。"],
    ["他说今天刚陪老婆做完检查，她怀孕了。", "他说看了一晚上的婴儿车。",
     "他说自己连植物都养不活，不知道当不当得好爸爸。"],
    ["他张口就说老婆怀孕了，今天刚检查过。", "他说已经开始看婴儿车了，看到半夜。",
     "他说自己养绿植都养死了，不知道能不能当好爸爸。"],
]
RETOLD_TOPIC_ZH = "妻子怀孕了，他又高兴又紧张。"
# Chen Hao's whys (C, A, P), paraphrased into Wang Jianguo's (a dev persona).
TWIN_ZH = [
    ("他想把这件事讲清楚，但更想先分享。", "他情绪来得快也去得快，不用别人陪着慢慢消化。",
     "他怕自己当不好父亲，想听人说相信他能做到。"),
    ("他想说清楚这件事，可更想先跟人分享。", "他的情绪来得快去得快，不需要人陪他慢慢消化。",
     "他担心当不好父亲，想听到有人相信他做得到。"),
    ("他想把事情说明白，但更想先分享出来。", "他情绪来去都快，用不着别人陪他慢慢消化。",
     "他怕当不好父亲，想有人相信他能做到。"),
    ("他想把这件事说清楚，不过更想先分享。", "他情绪来得快去得快，不需要有人陪着慢慢消化。",
     "他怕自己做不好父亲，希望听到有人相信他做得到。"),
    ("这件事他想说清楚，但他更想先分享。", "他的情绪来得快，去得也快，不用人陪着慢慢消化。",
     "他怕当不好父亲，想听见有人说相信他做得到。"),
    ("他想先分享，其次才是把这件事说清楚。", "他情绪来得快去得也快，不需要别人陪他慢慢消化。",
     "他害怕自己当不好父亲，想听到别人相信他能做到。"),
]
# A phrase of Lin Xiaoyu's C why ("她希望有人把她这几年的处境一件件看明白") with one character changed.
PHRASE_ZH = [
    "林晓雨需要有人把她这两年的处境一件件看明白，再谈下一步。",
    "她需要有人把她这几年的境况一件件看明白，而不是先给建议。",
    "林晓雨需要对方把她这几年的处境一件件弄明白，再说调剂的事。",
    "她需要有人把她这些年的处境一件件看明白，再谈要不要去。",
    "林晓雨需要有人把她这几年的处境一桩桩看明白，再谈下一步。",
    "她需要别人把她这几年的处境一件件看清楚，然后再谈学校。",
]


def _draw(rng: random.Random, pool: list[Any]) -> list[Any]:
    return rng.sample(pool, PICK)


def _set(root: Path, file: str, path: list[str | int], value: Any) -> None:
    def change(data: Any) -> None:
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    edit_yaml(root, file, change)


def _need_plant(root: Path, plant: Plant) -> None:
    _set(root, plant.file, [plant.data["case"], "hidden_need", "text"], plant.text)


def _needs(language: Language, name: str, pool: list[str], file: str, case: int, expect: tuple[str, ...],
           floor: float = TARGET) -> FaultClass:
    def variants(rng: random.Random) -> list[Plant]:
        return [Plant(f"{name}: {t!r}", file, f"cases[{case}].hidden_need.text", t, expect, data={"case": case})
                for t in _draw(rng, pool)]
    return FaultClass(name, language, variants, _need_plant, floor=floor)


def _twin_plant(root: Path, plant: Plant) -> None:
    def change(data: Any) -> None:
        for axis, why in zip(("C", "A", "P"), plant.data["whys"], strict=True):
            data["needs"][axis]["why"] = why
    edit_yaml(root, plant.data["in"], change)


def _twins(language: Language, pool: list[tuple[str, str, str]], test_file: str, dev_file: str,
           floor: float = TARGET) -> FaultClass:
    def variants(rng: random.Random) -> list[Plant]:
        return [Plant(f"twin: {w[0]!r} …", test_file, "needs", "", ("paraphrase", "appears nowhere else"),
                      data={"whys": w, "in": dev_file})
                for w in _draw(rng, pool)]
    return FaultClass("twin persona across the split", language, variants, _twin_plant, floor=floor)


def _retold_plant(root: Path, plant: Plant) -> None:
    """A new dev scenario that tells the test story again, played by a dev persona."""
    extra = plant.data
    folder = "scenarios/zh" if extra["language"] == "zh" else "scenarios"
    card = dict(extra["card"], stages=plant.data["stages"])
    (root / folder / f"{card['id']}.yaml").write_text(yaml.safe_dump(card, allow_unicode=True, sort_keys=False),
                                                     encoding="utf-8")
    path = root / extra["split"]
    cases = yaml.safe_load(path.read_text(encoding="utf-8"))
    cases.append(dict(extra["case"], scenario=card["id"]))
    path.write_text(yaml.safe_dump(cases, allow_unicode=True, sort_keys=False), encoding="utf-8")


_RETOLD_CARD_EN = {
    "id": "night-lockout", "version": 1, "category": "life", "valence": "negative", "topic": RETOLD_TOPIC_EN,
    "memories": [{"period": "childhood", "text": "Lost a house key down a drain on the way home from school."},
                 {"period": "adulthood", "text": "Once slept in the car rather than wake the landlord."},
                 {"period": "current", "text": "Waited on the doorstep in a cold wind two nights ago."}],
    "opening": "locked out. again. who opens doors at this time",
}
_RETOLD_CASE_EN = {"id": "dev4-02", "persona": "sefa",
                   "iedr": {"C1": 0, "C2": 1, "C3": 0, "A1": 1, "A2": 1, "A3": 1, "P1": 2, "P2": 2, "P3": 2},
                   "opening": "locked out. again. who opens doors at this time",
                   "hidden_need": {"axis": "P", "text": "A small job to get on with tonight, so the evening is not wasted."}}
_RETOLD_CARD_ZH = {
    "id": "dang-baba-le", "version": 1, "language": "zh", "category": "life", "valence": "positive",
    "topic": RETOLD_TOPIC_ZH,
    "memories": [{"period": "childhood", "text": "小时候他在院子里养过一只兔子，没养几天就跑了。"},
                 {"period": "adulthood", "text": "刚工作那年他第一次给家里寄钱，在邮局排了一下午。"},
                 {"period": "current", "text": "前天晚上他翻出小时候的相册，看到半夜。"}],
    "opening": "老婆怀上了！！我要当爹了！",
}
_RETOLD_CASE_ZH = {"id": "devzh-03", "persona": "wang-jianguo",
                   "iedr": {"C1": 1, "C2": 1, "C3": 1, "A1": 2, "A2": 2, "A3": 3, "P1": 1, "P2": 1, "P3": 1},
                   "opening": "老婆怀上了！！我要当爹了！",
                   "hidden_need": {"axis": "A", "text": "他需要有人陪他把这份又惊又喜的心情待一会儿。"}}


def _retold(language: Language, pool: list[list[str]], test_file: str) -> FaultClass:
    card, case = (_RETOLD_CARD_EN, _RETOLD_CASE_EN) if language == "en" else (_RETOLD_CARD_ZH, _RETOLD_CASE_ZH)
    split = DEV if language == "en" else DEV_ZH

    def variants(rng: random.Random) -> list[Plant]:
        return [Plant(f"retold: {s[0]!r} …", test_file, "stages", "", ("retold", "story"),
                      data={"stages": s, "card": card, "case": case, "split": split, "language": language})
                for s in _draw(rng, pool)]
    return FaultClass("test story retold in dev", language, variants, _retold_plant)


def _sibling_zh_plant(root: Path, plant: Plant) -> None:
    """A second dev case of qingming-first-year (lin-xiaoyu: another dominant need), whose need
    says what devzh-01's says."""
    path = root / DEV_ZH
    cases = yaml.safe_load(path.read_text(encoding="utf-8"))
    cases.append({"id": "devzh-03", "scenario": "qingming-first-year", "persona": "lin-xiaoyu",
                  "iedr": {"C1": 2, "C2": 2, "C3": 3, "A1": 1, "A2": 2, "A3": 1, "P1": 1, "P2": 1, "P3": 1},
                  "opening": "清明回来了。说不上什么感觉。", "hidden_need": {"axis": "C", "text": plant.text}})
    path.write_text(yaml.safe_dump(cases, allow_unicode=True, sort_keys=False), encoding="utf-8")


def _sibling_zh() -> FaultClass:
    def variants(rng: random.Random) -> list[Plant]:
        return [Plant(f"sibling: {t!r}", DEV_ZH, "cases[2].hidden_need.text", t, ("need", "concepts"))
                for t in _draw(rng, SIBLING_ZH)]
    return FaultClass("sibling needs alike", "zh", variants, _sibling_zh_plant)


CLASSES = [
    # A stated floor below 90%: one of the 7 openings ("the name of someone who opens doors after
    # dark and an idea of the fee") shares no concept with the opening and scores 0.49 by cosine,
    # inside the library's own pairs, so a draw of five that holds it catches four.
    _needs("en", "need restates the opening", NEED_AS_OPENING, TEST, 0, ("opening",), floor=0.8),
    _needs("zh", "need restates the opening", NEED_AS_OPENING_ZH, TEST_ZH, 0, ("opening",)),
    _needs("en", "need restates the why", NEED_AS_WHY, TEST, 0, ("why",)),
    _needs("zh", "need restates the why", NEED_AS_WHY_ZH, TEST_ZH, 0, ("why",)),
    _needs("en", "need copies a why phrase, one word changed", PHRASE_EN, TEST, 2, ("why",)),
    _needs("zh", "need copies a why phrase, one word changed", PHRASE_ZH, DEV_ZH, 1, ("why",)),
    _needs("en", "sibling needs alike", SIBLING_EN, TEST, 1, ("need", "concepts")),
    _sibling_zh(),
    _retold("en", RETOLD_EN, LOCKED),
    _retold("zh", RETOLD_ZH, FATHER),
    _twins("en", TWIN_EN, IRIS, SEFA),
    _twins("zh", TWIN_ZH, CHEN, WANG),
]


# Facts said in other words (English fixture: Iris, born 1986, of Brindle, a ferry mechanic;
# her mother Rowan dead in 2020, her brother Tobin alive; the-workshop-key is hers alone).
WORKSHOP = "scenarios/the-workshop-key.yaml"
FACTS_EN: dict[str, tuple[str, str, tuple[str, ...], list[str]]] = {
    # name: (file, field the text goes into, words the catch says, variants)
    "death words for the living": (WORKSHOP, "stages[1]", ("alive",), [
        "She mentions her late brother would have laughed at the toolbox.",
        "She says that since Tobin passed away nobody fixes anything.",
        "She says Tobin loved the slipway, so they scattered his ashes there.",
        "She says Tobin's funeral was the last time the family met.",
        "She says she has been mourning her brother all winter.",
        "She says her brother has been gone three years now.",
        "She talks about her late older brother and the boat."]),
    "widowed without a dead spouse": (WORKSHOP, "stages[1]", ("widow",), [
        "She says that since she became a widow she keeps busy.",
        "She says widowhood has made her careful with money.",
        "She says she was left a widow with a half-built boat.",
        "She says ever since being widowed the evenings are long.",
        "She says becoming a widow at forty was not the plan."]),
    "contact with the dead": (WORKSHOP, "stages[1]", ("is dead",), [
        "She says she talked to her mother on the phone yesterday about the keys.",
        "She says she rang Rowan this morning to tell her the news.",
        "She says yesterday she spoke with her mother about the slipway.",
        "She says she was on the phone with her mother for an hour.",
        "She says she saw her mother yesterday at the harbour.",
        "She says her mother keeps asking about the workshop."]),
    "present memory of the dead": (WORKSHOP, "memories[2].text", ("is dead",), [
        "Rowan rings every Sunday to ask about the boats.",
        "Her mother keeps asking when the workshop opens.",
        "Rowan is coming to the opening next week.",
        "Her mother texted this morning to say well done.",
        "Rowan calls most evenings to check on the accounts."]),
    "age against facts.born": (TEST, "cases[2].opening", ("facts.born",), [
        "honestly I hit thirty-five and nobody told me how to run a workshop.",
        "I just reached fifty and they give me keys, ha.",
        "I'm 33 years old and still learning the paperwork.",
        "At 29, I never thought I'd run the place.",
        "I hit 52 last month, so maybe it is time."]),
    "home against facts.home": (TEST, "cases[2].opening", ("facts.home",), [
        "ive lived in Carrow since the ferry started.",
        "I'm based in Dunmere these days, so it's a commute.",
        "We've always lived near Harwick, so the drive is fine.",
        "I have lived in Tarrow for ten years now.",
        "we're settled in Oldcastle now, for what it's worth."]),
    "job said another way": (TEST, "cases[2].opening", ("facts.job",), [
        "ok so as a nurse i know how to sign for things.",
        "Being a teacher, I plan every first day.",
        "and as an electrician i should know this.",
        "So yeah, as a plumber I have never run a team.",
        "Thing is, being an accountant, I read the small print."]),
}
# Whole stages that replace stages[2] (the pronoun and the outcome are read at the stage's start).
STAGES_EN: dict[str, tuple[tuple[str, ...], list[str]]] = {
    "pronoun not at the start": (("persona",), [
        "Later that evening, he asks who holds the spare key.",
        "At the workshop door he hesitates.",
        "Then, quietly, he admits the keys feel heavy.",
        "On the first morning he signs for the tools.",
        "After a pause he says the place smells of oil."]),
    "scripted outcome in other words": (("scripts the outcome",), [
        "By the end she has booked a meeting with the manager.",
        "She ends up ringing Tobin to say yes.",
        "By the time the conversation ends she has signed for everything.",
        "She finally accepts the keys for good.",
        "She goes ahead and signs the lease."]),
}
STAGES_ZH: dict[str, tuple[tuple[str, ...], list[str]]] = {
    "scripted outcome in other words": (("scripts the outcome",), [
        "到最后他还是去了墓地，给秀英磕了头。", "结果他还是给女儿打了电话。", "末了，他把照片收进了抽屉。",
        "他终于答应了女儿，搬去上海。", "到了最后，他还是一个人去了西湖边。"]),
}


# Chinese fixture: Wang Jianguo's wife 李秀英 (秀英, 老伴) died in 2024, his daughter 王小雨 lives.
QINGMING = "scenarios/zh/qingming-first-year.yaml"
FACTS_ZH: dict[str, tuple[str, str, tuple[str, ...], list[str]]] = {
    "death words for the living": (QINGMING, "stages[1]", ("alive",), [
        "他说去年给女儿烧过纸。", "他说小雨走了快两年了。", "他说女儿已经离开我们了。",
        "他说把女儿的骨灰放在了家里。", "他说每年都给小雨上香。", "他说他一直怀念已经去世的女儿。"]),
    "contact with the dead": (QINGMING, "stages[1]", ("is dead",), [
        "他说昨天跟老伴打了电话。", "他说今天和秀英视频了一会儿。", "他说刚刚给老伴发了微信。",
        "他说秀英昨天打电话来问他吃了没。", "他说早上和老伴吃了饭才出门。"]),
    "present memory of the dead": (QINGMING, "memories[2].text", ("is dead",), [
        "秀英每天打电话问他冷不冷。", "老伴总是催他早点睡。", "他昨天跟秀英通了电话。",
        "秀英天天念叨他少抽烟。", "今天早上和老伴吃了饭。"]),
}


def _append_class(name: str, spec: tuple[str, str, tuple[str, ...], list[str]],
                  language: Language = "en") -> FaultClass:
    file, field, expect, pool = spec

    def variants(rng: random.Random) -> list[Plant]:
        return [Plant(f"{name}: {t!r}", file, field, t, expect) for t in _draw(rng, pool)]
    return FaultClass(name, language, variants, append_text)


def _stage_plant(root: Path, plant: Plant) -> None:
    _set(root, plant.file, ["stages", 2], plant.text)


def _stage_class(name: str, language: Language, file: str, spec: tuple[tuple[str, ...], list[str]]) -> FaultClass:
    expect, pool = spec

    def variants(rng: random.Random) -> list[Plant]:
        return [Plant(f"{name}: {t!r}", file, "stages[2]", t, expect) for t in _draw(rng, pool)]
    return FaultClass(name, language, variants, _stage_plant)


def _mixed_plant(root: Path, plant: Plant) -> None:
    """A dead half-brother beside Iris's living brother Tobin: "her brother" is still Tobin."""
    edit_yaml(root, IRIS, lambda d: d["facts"]["relatives"].append(
        {"name": "Ash", "relation": "half-brother", "status": "dead", "born": 1980, "died": 2015}))
    append_text(root, plant)


def _mixed() -> FaultClass:
    pool = ["She says her brother's funeral was small.", "She says she buried her brother last spring.",
            "She mentions her late brother and his boat.", "She says her brother died young.",
            "She says she still visits her brother's grave.", "She says her brother has been gone a year."]

    def variants(rng: random.Random) -> list[Plant]:
        return [Plant(f"mixed status: {t!r}", WORKSHOP, "stages[1]", t, ("alive",)) for t in _draw(rng, pool)]
    return FaultClass("mixed-status relation", "en", variants, _mixed_plant)


CLASSES += [
    *(_append_class(name, spec) for name, spec in FACTS_EN.items()),
    *(_append_class(name, spec, "zh") for name, spec in FACTS_ZH.items()),
    *(_stage_class(name, "en", WORKSHOP, spec) for name, spec in STAGES_EN.items()),
    *(_stage_class(name, "zh", "scenarios/zh/qingming-first-year.yaml", spec) for name, spec in STAGES_ZH.items()),
    _mixed(),
]
