"""The kit's classes for the faults the earlier editions' checks were built for (issues 12, 22
and 29): pairs played twice, cards whose file and id differ or that no case plays, priorities
against the dominant need, words YAML reads as booleans, a person told differently across cards,
memories dated outside a life or period, needs off the persona's axis or repeating a stage,
case ids off the pattern, memories written twice, persona text naming a story's cast, unknown
names, 'They' templates and menus, test cards or text reaching dev, and cards a program cannot
read. Each variant is one edit of a copy of the small library; the rng draws which card, case,
memory and wording."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from tests.library_attack_kit import FaultClass, Language, Plant, edit_yaml

Edit = Callable[[Path], None]


@dataclass(frozen=True)
class Lib:
    """Where the small library of one language keeps its cards."""

    personas: str
    scenarios: str
    test: str
    dev: str
    demo: str
    test_prefix: str  # a test case id without its number: test4-, testzh-
    dev_prefix: str


LIBS: dict[Language, Lib] = {
    "en": Lib("personas", "scenarios", "scenarios/splits/test.yaml", "scenarios/splits/dev.yaml",
              "scenarios/splits/demo.yaml", "test4-", "dev4-"),
    "zh": Lib("personas/zh", "scenarios/zh", "scenarios/splits/test-zh.yaml", "scenarios/splits/dev-zh.yaml",
              "scenarios/splits/demo-zh.yaml", "testzh-", "devzh-"),
}
ROOTS = {"en": Path(__file__).parent / "data" / "registry" / "ed4", "zh": Path(__file__).parent / "data" / "zh_library"}


def _read(language: Language, file: str) -> Any:
    return yaml.safe_load((ROOTS[language] / file).read_text(encoding="utf-8"))


def _cards(language: Language, kind: str) -> list[str]:
    folder = getattr(LIBS[language], kind)
    return sorted(f"{folder}/{p.name}" for p in (ROOTS[language] / folder).glob("*.yaml"))


def _cases(language: Language, *splits: str) -> list[tuple[str, int, dict[str, Any]]]:
    """(split file, index, case) of the fixture's cases in the splits named (test, dev, demo)."""
    lib = LIBS[language]
    return [(getattr(lib, s), i, case) for s in splits for i, case in enumerate(_read(language, getattr(lib, s)))]


def _plant(root: Path, plant: Plant) -> None:
    edit: Edit = plant.data
    edit(root)


def _append_case(split: str, case: dict[str, Any]) -> Edit:
    return lambda root: edit_yaml(root, split, lambda cases: cases.append(case))


def _set(file: str, path: str, value: Any) -> Edit:
    """Set one field (`cases[1].iedr.A3`, `memories[0].year`, `cast[0]`) of a card or split."""
    def change(data: Any) -> None:
        node: Any = {"cases": data} if path.startswith("cases") else data
        parts = path.replace("]", "").replace("[", ".").split(".")
        for part in parts[:-1]:
            node = node[int(part)] if part.isdigit() else node[part]
        last = parts[-1]
        if value is None:
            node.pop(last, None)
        else:
            node[int(last) if last.isdigit() else last] = value
    return lambda root: edit_yaml(root, file, change)


def _both(name: str, make: Callable[[Language], Callable[[random.Random], list[Plant]]],
          batch: bool = True, languages: tuple[Language, ...] = ("en", "zh")) -> list[FaultClass]:
    return [FaultClass(name, language, make(language), _plant, batch) for language in languages]


# Edition 2 (issue 12).

def pairs_twice(language: Language) -> Callable[[random.Random], list[Plant]]:
    """A (scenario, persona) pair played again: in its own split, or a test pair in dev."""
    lib = LIBS[language]

    def variants(rng: random.Random) -> list[Plant]:
        out, added = [], {lib.test: len(_read(language, lib.test)), lib.dev: len(_read(language, lib.dev))}
        sources = _cases(language, "test", "dev")
        for split, _, case in (rng.sample(sources, len(sources)) * 3)[:6]:
            into = split if len(out) % 2 == 0 or split == lib.dev else lib.dev
            prefix = lib.test_prefix if into == lib.test else lib.dev_prefix
            copy = {**case, "id": f"{prefix}{60 + len(out):02d}"}
            out.append(Plant(f"{case['id']} again in {Path(into).stem} as {copy['id']}", into, f"cases[{added[into]}]",
                             expect=("duplicate pair", "reuses test scenario"), data=_append_case(into, copy)))
            added[into] += 1
        return out
    return variants


RENAMES: list[Callable[[str], str]] = [lambda s: f"{s}-2", lambda s: f"{s}_old", lambda s: s.title(),
                                       lambda s: f"my-{s}", lambda s: f"{s}s", lambda s: s.replace("-", "_") + "1"]


def renamed(language: Language) -> Callable[[random.Random], list[Plant]]:
    """A card whose file name is not its id."""
    def variants(rng: random.Random) -> list[Plant]:
        cards = _cards(language, "personas") + _cards(language, "scenarios")
        out = []
        for file, rename in zip(rng.sample(cards, len(cards)), rng.sample(RENAMES, len(RENAMES)), strict=False):
            path = Path(file)
            new = str(path.with_name(rename(path.stem) + ".yaml"))
            out.append(Plant(f"{file} as {new}", new, "id", expect=("differs from the file name",),
                             data=lambda root, a=file, b=new: (root / a).rename(root / b)))
        return out
    return variants


def orphans(language: Language) -> Callable[[random.Random], list[Plant]]:
    """A card no case plays: a copy under a new id, or a new persona or scenario left unused."""
    def variants(rng: random.Random) -> list[Plant]:
        out = []
        for file in rng.sample(_cards(language, "personas") + _cards(language, "scenarios"), 6):
            path = Path(file)
            new_id = f"{path.stem}-{rng.choice(['spare', 'draft', 'b', 'new', 'copy'])}"
            new = str(path.with_name(f"{new_id}.yaml"))

            def edit(root: Path, a: str = file, b: str = new, card_id: str = new_id) -> None:
                data = yaml.safe_load((root / a).read_text(encoding="utf-8"))
                data["id"] = card_id
                (root / b).write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
            out.append(Plant(f"{new} unplayed", new, "id", expect=("orphan",), data=edit))
        return out
    return variants


def priorities(language: Language) -> Callable[[random.Random], list[Plant]]:
    """The dominant need's item 3 at 0, or another axis's item 3 above it."""
    def variants(rng: random.Random) -> list[Plant]:
        out = []
        for k, (split, i, case) in enumerate(_cases(language, "test", "dev", "demo") * 2):
            axis = case["hidden_need"]["axis"]
            if (k + rng.randint(0, 1)) % 2 == 0:
                out.append(Plant(f"{case['id']} {axis}3 = 0", split, f"cases[{i}].iedr.{axis}3", expect=("needs",),
                                 data=_set(split, f"cases[{i}].iedr.{axis}3", 0)))
            else:
                other = rng.choice([a for a in "CAP" if a != axis])
                levels = {**case["iedr"], f"{other}3": case["iedr"][f"{axis}3"] + 1}
                if levels[f"{other}3"] > 3:
                    levels[f"{axis}3"], levels[f"{other}3"] = 1, 2
                out.append(Plant(f"{case['id']} {other}3 above {axis}3", split, f"cases[{i}].iedr.{axis}3",
                                 expect=("is below",), data=_set(split, f"cases[{i}].iedr", levels)))
        return rng.sample(out, 6)
    return variants


def booleans(language: Language) -> Callable[[random.Random], list[Plant]]:
    """A bare yes, no, on or off where YAML reads a boolean (professional_help: yes)."""
    def variants(rng: random.Random) -> list[Plant]:
        out = []
        words = rng.sample(["yes", "no", "on", "off", "Yes", "NO", "y", "True"], 6)
        places = [(f, key) for f in _cards(language, "personas") for key in ("professional_help", "threshold")]
        places += [(f, "valence") for f in _cards(language, "scenarios")]
        for word, (file, key) in zip(words, rng.sample(places, len(places)), strict=False):
            def edit(root: Path, f: str = file, k: str = key, w: str = word) -> None:
                text = (root / f).read_text(encoding="utf-8")
                lines = [line for line in text.splitlines() if not line.startswith(f"{k}:")]
                (root / f).write_text("\n".join([*lines, f"{k}: {w}"]) + "\n", encoding="utf-8")
            out.append(Plant(f"{key}: {word} in {file}", file, key, data=edit))
        return out
    return variants


# Edition 3 (issue 22).

def person_told_differently(language: Language) -> Callable[[random.Random], list[Plant]]:
    """A persona's relative told otherwise in a cast: alive, another relation, other years; or
    family in a cast that the persona's facts lack."""
    def variants(rng: random.Random) -> list[Plant]:
        out = []
        for file in _cards(language, "scenarios"):
            for j, member in enumerate(_read(language, file).get("cast") or []):
                where = f"cast[{j}]"
                changes = [("status", "alive" if member["status"] == "dead" else "dead", "here but"),
                           ("relation", "uncle" if language == "en" else "舅舅", "here but"),
                           ("born", (member.get("born") or 0) - rng.randint(3, 9), "here but"),
                           ("died", 2021 if member.get("died") != 2021 else 2018, "here but")]
                for key, value, expect in changes:
                    if key in ("born", "died") and key not in member:
                        continue  # a year the cast does not give is no disagreement
                    edited = {**member, key: value}
                    if key == "status" and value == "alive":
                        edited.pop("died", None)
                    out.append(Plant(f"{member['name']} {key} {value} in {file}", file, f"{where}.{key}",
                                     expect=(expect, "alive but"), data=_set(file, where, edited)))
            cast = _read(language, file).get("cast") or []
            stranger = {"name": rng.choice(["Mara", "Dov", "Ines"]) if language == "en" else rng.choice(["赵敏", "孙立"]),
                        "relation": "sister" if language == "en" else "姐姐", "status": "alive"}
            out.append(Plant(f"sister {stranger['name']} in {file}'s cast only", file, f"cast[{len(cast)}].name",
                             expect=("is family of",), data=_set(file, "cast", [*cast, stranger])))
        rng.shuffle(out)
        return out[:6]
    return variants


def memory_dates(language: Language) -> Callable[[random.Random], list[Plant]]:
    """A memory's year outside its period or the present, or the text naming another year."""
    def variants(rng: random.Random) -> list[Plant]:
        out = []
        for file in _cards(language, "scenarios"):
            for i, memory in enumerate(_read(language, file)["memories"]):
                period = memory["period"]
                if period == "current":
                    year, expect = rng.choice([2015, 2012, 2031]), ("is not 'current'", "does not fit", "after")
                elif period == "childhood":
                    year, expect = rng.choice([2018, 2020]), ("does not fit",)
                else:
                    year, expect = rng.choice([1930, 2035]), ("does not fit", "before", "after")
                edited = {**memory, "year": year}
                # the text names a year the field does not
                if "year" in memory and str(memory["year"]) in memory["text"] and rng.random() < 0.5:
                    edited = {**memory, "year": memory["year"] + 2}
                    expect = ("the text names",)
                out.append(Plant(f"{file} memories[{i}] {edited['year']}", file, f"memories[{i}].year",
                                 expect=expect, data=_set(file, f"memories[{i}]", edited)))
        rng.shuffle(out)
        return out[:6]
    return variants


def need_axis(language: Language) -> Callable[[random.Random], list[Plant]]:
    """A case's hidden need filed under another axis than its persona's dominant one."""
    def variants(rng: random.Random) -> list[Plant]:
        out = []
        for split, i, case in _cases(language, "test", "dev", "demo"):
            for other in [a for a in "CAP" if a != case["hidden_need"]["axis"]]:
                out.append(Plant(f"{case['id']} need filed under {other}", split, f"cases[{i}].hidden_need.axis",
                             expect=("dominant need",), data=_set(split, f"cases[{i}].hidden_need.axis", other)))
        return rng.sample(out, 6)
    return variants


def case_ids(language: Language) -> Callable[[random.Random], list[Plant]]:
    """A case id off its split's pattern (edition and two digits)."""
    forms = {"en": [lambda s, n: f"{s}-{n:02d}", lambda s, n: f"{s}4-{n}", lambda s, n: f"{s}3-{n:02d}",
                    lambda s, n: f"{s}04-{n:02d}", lambda s, n: f"{s}4_{n:02d}", lambda s, n: f"{s.upper()}4-{n:02d}"],
             "zh": [lambda s, n: f"{s}-{n:02d}", lambda s, n: f"{s}zh-{n}", lambda s, n: f"{s}-zh-{n:02d}",
                    lambda s, n: f"{s}zh{n:02d}", lambda s, n: f"{s}zh-0{n:02d}", lambda s, n: f"{s}4-{n:02d}"]}

    def variants(rng: random.Random) -> list[Plant]:
        out = []
        cases = _cases(language, "test", "dev", "demo") * 2
        for (split, i, case), form in zip(rng.sample(cases, len(cases)), rng.sample(forms[language], 6), strict=False):
            base = Path(split).stem.removesuffix("-zh")
            new = form(base, i + 1)
            out.append(Plant(f"{case['id']} as {new}", split, f"cases[{i}].id", expect=("does not match", "should match pattern"),
                             data=_set(split, f"cases[{i}].id", new)))
        return out
    return variants


def memory_twice(language: Language) -> Callable[[random.Random], list[Plant]]:
    """A memory's text written again in another card, in other capitals or punctuation."""
    def variants(rng: random.Random) -> list[Plant]:
        scenarios = _cards(language, "scenarios")
        texts = [(f, m["text"]) for f in scenarios for m in _read(language, f)["memories"]]
        out = []
        for source, text in rng.sample(texts, 6):
            into = rng.choice([f for f in scenarios if f != source])
            told = rng.choice([text.upper(), text.lower(), text.rstrip(".。") + "!", f"  {text}", text.replace(",", ";")])
            added = f"memories[{len(_read(language, into)['memories'])}].text"
            index = [m["text"] for m in _read(language, source)["memories"]].index(text)
            # a memory and its copy are one fault: validate reports the one in the later file
            file, field = max((into, added), (source, f"memories[{index}].text"))
            out.append(Plant(f"{source}'s {text[:20]!r} again in {into}", file, field,
                             expect=("duplicates",), data=lambda root, f=into, t=told: edit_yaml(
                                 root, f, lambda d: d["memories"].append({"period": "adulthood", "text": t}))))
        return out
    return variants


CAST_NAMES: dict[Language, list[str]] = {"en": ["Rowan", "Tobin", "Abel"], "zh": ["李秀英", "王小雨", "刘芳"]}
PERSONA_FRAMES: dict[Language, list[str]] = {
    "en": ["Since {n} went, the evenings are long.", "{n} still rings on Sundays.", "Talks about {n} a lot.",
           "Keeps a photo of {n} by the door.", "Would do anything for {n}."],
    "zh": ["{n}走后，晚上很长。", "{n}每个周日都会打电话来。", "常常说起{n}。", "门口放着{n}的照片。", "为了{n}什么都愿意做。"],
}


def persona_names_cast(language: Language) -> Callable[[random.Random], list[Plant]]:
    """Persona prose that names another story's cast: the persona is a person, not a story."""
    def variants(rng: random.Random) -> list[Plant]:
        personas = _cards(language, "personas")
        casts = {f: {m["name"] for m in _read(language, f).get("cast") or []} for f in _cards(language, "scenarios")}
        out = []
        for file in personas:
            facts = _read(language, file).get("facts") or {}
            own = {r["name"] for r in facts.get("relatives", [])}
            strangers = sorted({n for names in casts.values() for n in names} - own)
            for field in ("background", *(f"needs.{a}.why" for a in "CAP")):
                if strangers:
                    text = rng.choice(PERSONA_FRAMES[language]).format(n=rng.choice(strangers))
                    out.append(Plant(f"{file} {field}: {text}", file, field, text=text, expect=("cast of scenario",),
                                     data=_appended(file, field, text)))
        rng.shuffle(out)
        return out[:6]
    return variants


def _appended(file: str, field: str, text: str) -> Edit:
    def change(data: Any) -> None:
        node = data
        parts = field.split(".")
        for part in parts[:-1]:
            node = node[part]
        joiner = "" if text[:1] > "\u2e7f" else " "
        node[parts[-1]] = f"{node[parts[-1]]}{joiner}{text}"
    return lambda root: edit_yaml(root, file, change)


UNKNOWN: dict[Language, list[str]] = {
    "en": ["Then {n} turns up with a spare key.", "She says {n} never liked the place.", "He mentions that {n} lent him the van.",
           "After a while {n} calls back.", "She adds that {n} was there too.", "He says even {n} laughed."],
    "zh": ["后来{n}拿着备用钥匙来了。", "她说{n}从来不喜欢那里。", "他提到{n}借给他一辆车。", "过了一会儿{n}回了电话。",
           "她补充说{n}当时也在。", "他说连{n}都笑了。"],
}
NEW_NAMES: dict[Language, list[str]] = {"en": ["Marguerite", "Desmond", "Ottilie", "Caspar", "Philippa", "Lorcan"],
                                        "zh": ["张伟", "刘洋", "周杰", "赵丽", "孙强", "吴敏"]}


def unknown_names(language: Language) -> Callable[[random.Random], list[Plant]]:
    """A person the prose names who is in no cast, persona fact or other_names."""
    def variants(rng: random.Random) -> list[Plant]:
        slots = [(f, f"stages[{i}]") for f in _cards(language, "scenarios") for i in range(len(_read(language, f)["stages"]))]
        out = []
        for (file, field), name in zip(rng.sample(slots, 6), rng.sample(NEW_NAMES[language], 6), strict=True):
            text = rng.choice(UNKNOWN[language]).format(n=name)
            out.append(Plant(f"{file} {field}: {text}", file, field, text=text, expect=("names",),
                             data=_append_stage(file, field, text)))
        return out
    return variants


def _append_stage(file: str, field: str, text: str) -> Edit:
    index = int(field.split("[")[1].rstrip("]"))

    def change(data: Any) -> None:
        joiner = "" if text[:1] > "\u2e7f" else " "
        data["stages"][index] = f"{data['stages'][index]}{joiner}{text}"
    return lambda root: edit_yaml(root, file, change)


MENUS = ["no car, no money, or no one to drive", "without a key, without a phone, or without a plan",
         "no time, no help and no", "her/their brother", "his/her son", "not the job, not the flat, nor not"]
THEY = ["They ask whether it is worth it.", "They mention the rent is due.", "Their friend says to wait.",
        "They admit they are tired.", "Them again, they sigh."]


def templates(language: Language) -> Callable[[random.Random], list[Plant]]:
    """A 'They' template in a scenario one persona plays, or a stage offering a menu."""
    def variants(rng: random.Random) -> list[Plant]:
        single = [f for f in _cards(language, "scenarios") if f.endswith(("first-harvest.yaml", "the-workshop-key.yaml"))]
        out = []
        for k, file in enumerate(single):
            stages = _read(language, file)["stages"]
            for i in range(len(stages)):
                if (k + i) % 2 == 0:
                    text = rng.choice(THEY)
                    out.append(Plant(f"{file} stages[{i}] = {text}", file, f"stages[{i}]", expect=("'They' template",),
                                     data=_set(file, f"stages[{i}]", text)))
                else:
                    menu = rng.choice(MENUS)
                    out.append(Plant(f"{file} stages[{i}] menu {menu!r}", file, f"stages[{i}]", expect=("menu",),
                                     data=_append_stage(file, f"stages[{i}]", f"It is {menu}.")))
        return out
    return variants


# Edition 4 (issue 29).

def test_cards_in_dev(language: Language) -> Callable[[random.Random], list[Plant]]:
    """A test persona or scenario played by a new dev or demo case."""
    lib = LIBS[language]

    def variants(rng: random.Random) -> list[Plant]:
        test, dev = _cases(language, "test"), _cases(language, "dev")
        swaps = [("persona", c["persona"]) for _, _, c in test] + [("scenario", c["scenario"]) for _, _, c in test]
        out = []
        for kind, card_id in rng.sample(sorted(set(swaps)), len(set(swaps))) * 3:
            into = rng.choice([lib.dev, lib.demo])
            base = rng.choice(dev)[2]
            prefix = lib.dev_prefix if into == lib.dev else lib.dev_prefix.replace("dev", "demo")
            case = {**base, "id": f"{prefix}{70 + len(out)}", kind: card_id}
            folder = lib.personas if kind == "persona" else lib.scenarios
            out.append(Plant(f"{kind} {card_id} in {Path(into).stem}", f"{folder}/{card_id}.yaml", "id",
                             expect=("also played in",), data=_append_case(into, case)))
        return out[:6]
    return variants


def test_text_in_dev(language: Language) -> Callable[[random.Random], list[Plant]]:
    """A run of a test text (eight words, fifteen characters) copied into a dev card's stage."""
    lib = LIBS[language]

    def variants(rng: random.Random) -> list[Plant]:
        test_cards = {c["scenario"] for _, _, c in _cases(language, "test")}
        sources = [(f"{lib.scenarios}/{s}.yaml", field, text) for s in sorted(test_cards)
                   for field, text in _texts(_read(language, f"{lib.scenarios}/{s}.yaml"))]
        sources = [s for s in sources if len(s[2].split()) >= 9 or (language == "zh" and len(s[2]) >= 17)]
        dev_cards = sorted({c["scenario"] for _, _, c in _cases(language, "dev")})
        out = []
        for file, field, text in rng.sample(sources, min(6, len(sources))):
            if language == "en":
                words = text.rstrip(".").split()
                start = rng.randint(0, len(words) - 8)
                run = " ".join(words[start:start + 8])
                told = rng.choice([f"Later, {run.lower()}.", f"{run.upper()}!", f"She thinks: {run}…", f"({run})"])
            else:
                start = rng.randint(0, len(text) - 17)
                told = rng.choice(["后来，", "她想：", "（", "据说"]) + _chars(text[start:], 16)
            into = f"{lib.scenarios}/{rng.choice(dev_cards)}.yaml"
            out.append(Plant(f"{field} of {file} in {into}: {told!r}", file, field, expect=("in a row",),
                             data=_append_stage(into, "stages[0]", told)))
        return out
    return variants


def _texts(card: dict[str, Any]) -> list[tuple[str, str]]:
    return [("topic", card["topic"]), *((f"stages[{i}]", t) for i, t in enumerate(card["stages"])),
            *((f"memories[{i}].text", m["text"]) for i, m in enumerate(card["memories"]))]


def _chars(text: str, count: int) -> str:
    """The start of text holding `count` characters that are not punctuation."""
    seen = 0
    for end, char in enumerate(text):
        seen += char.isalnum()
        if seen == count:
            return text[:end + 1]
    return text


def unreadable(language: Language) -> Callable[[random.Random], list[Plant]]:
    """A card a program cannot read: a blank opening, bytes that are not UTF-8, a field or a file
    over the limit, a YAML alias bomb."""
    lib = LIBS[language]

    def variants(rng: random.Random) -> list[Plant]:
        persona = rng.choice(_cards(language, "personas"))
        scenario = rng.choice(_cards(language, "scenarios"))

        def raw(file: str, change: Callable[[bytes], bytes]) -> Edit:
            return lambda root: (root / file).write_bytes(change((root / file).read_bytes()))
        bomb = b"a: &a [x, x, x, x, x, x, x, x, x]\n" + b"".join(
            f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n".encode() for p, c in zip("abcdefg", "bcdefgh", strict=True))
        return [
            Plant("a scenario's opening of spaces", scenario, "opening",
                  data=_set(scenario, "opening", rng.choice(["   ", " \t "]))),
            Plant("a case's opening of a newline", lib.test, "cases[0].opening", data=_set(lib.test, "cases[0].opening", "\n")),
            Plant("Latin-1 bytes in a persona", persona, "", expect=("UTF-8",),
                  data=raw(persona, lambda b: b.replace(b"background: ", b"background: caf\xe9 ", 1))),
            Plant("a stage of 5,000 characters", scenario, "stages[0]",
                  data=_set(scenario, "stages[0]", rng.choice(["word ", "字"]) * 5000)),
            Plant("a persona file over 64 KB", persona, "",
                  data=raw(persona, lambda b: b + b"# " + b"x" * 70_000 + b"\n")),
            Plant("an alias bomb in a scenario", scenario, "", expect=("alias", "anchor"),
                  data=raw(scenario, lambda b: bomb + b)),
        ]
    return variants


CLASSES: list[FaultClass] = [
    *_both("a pair played twice", pairs_twice),
    *_both("a file name that is not the card's id", renamed),
    *_both("a card no case plays", orphans),
    *_both("a priority against the dominant need", priorities, batch=False),  # two variants may edit one case
    *_both("yes, no, on, off read as booleans", booleans, batch=False),
    *_both("a person told differently in a cast", person_told_differently, batch=False),
    *_both("a memory dated outside its period or a life", memory_dates),
    *_both("a hidden need off the persona's axis", need_axis, batch=False),
    *_both("a case id off the split's pattern", case_ids, batch=False),  # some forms stop the loader
    *_both("a memory written twice", memory_twice, batch=False),
    *_both("persona text naming a story's cast", persona_names_cast),
    *_both("a name no card knows", unknown_names),  # zh's floor is set below
    *_both("'They' templates and menus", templates, batch=False, languages=("en",)),
    *_both("a test card played in dev or demo", test_cards_in_dev, batch=False),
    *_both("test text copied into dev", test_text_in_dev),
    *_both("a card a program cannot read", unreadable, batch=False),
]
# jieba sometimes cuts a name apart (过了一会儿张伟: 一会儿张|伟), and then no rule sees it
CLASSES = [replace(c, floor=0.8) if (c.name, c.language) == ("a name no card knows", "zh") else c for c in CLASSES]
