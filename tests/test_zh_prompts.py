"""Chinese templates (prompts/zh, judges/zh): schema parity with the English ones, rendering with
a Chinese case, selection by the case's language, the judge_language pin and its provenance."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
import pytest
import yaml

from emobench.config import PanelConfig, RoleConfig, RunConfig, load_config_data, validate_config
from emobench.episode.director import DirectorState, director_messages, simulator_guidance
from emobench.episode.guidance import guidance_words
from emobench.errors import InputError
from emobench.judging.iedr import iedr_messages
from emobench.judging.stage import bind_panel
from emobench.prompts import cases_language, load_language_template, template_file
from emobench.records import DirectorAction
from emobench.registry import Registry, load_registry
from emobench.run.runner import ROOT, load_prompts, run_benchmark
from emobench.rundir import RunDir
from tests.fake_openai import FakeOpenAIServer, FakeState
from tests.zh_support import ZH_SPLIT, zh_library, zh_responder

PAIRS = [("prompts", n) for n in ("simulator.j2", "director.j2", "probe.j2", "companion.j2")] + [
    ("judges", n) for n in ("mdep.j2", "holistic.j2", "pairwise.j2", "iedr.j2")
]
HAN = re.compile(r"[\u4e00-\u9fff]")
CODE = re.compile(r'"([A-Za-z_0-9]+)"')  # a JSON key or a code value, e.g. "meter_delta", "high"
TAGS = re.compile(r"\{%.*?%\}|\{#.*?#\}|\{\{.*?\}\}", re.DOTALL)  # jinja2 itself: the model reads what is around it


def _json_keys(path: Path) -> set[str]:
    return set(CODE.findall(TAGS.sub("", path.read_text(encoding="utf-8"))))


@pytest.fixture(scope="module")
def zh_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return zh_library(tmp_path_factory.mktemp("zhlib"))


@pytest.fixture(scope="module")
def zh_registry(zh_root: Path) -> Registry:
    return load_registry(zh_root)


def _parsed(path: Path) -> jinja2.nodes.Template:
    return jinja2.Environment().parse(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize(("folder", "name"), PAIRS)
def test_a_chinese_template_has_the_english_ones_blocks_variables_and_json_keys(folder: str, name: str) -> None:
    en, zh = ROOT / folder / name, template_file(ROOT, folder, name, "zh")
    assert zh == ROOT / folder / "zh" / name
    en_ast, zh_ast = _parsed(en), _parsed(zh)
    assert {b.name for b in zh_ast.find_all(jinja2.nodes.Block)} == {b.name for b in en_ast.find_all(jinja2.nodes.Block)}
    # The same inputs: what the template reads from its caller (its own {% set %} words aside).
    assert jinja2.meta.find_undeclared_variables(zh_ast) == jinja2.meta.find_undeclared_variables(en_ast)
    # The same output schema: every JSON key and code the English one names, in English, and no other.
    assert _json_keys(zh) == _json_keys(en)
    assert HAN.search(zh.read_text(encoding="utf-8"))


def test_chinese_versions_name_their_language_and_english_ones_stay_bare(zh_root: Path) -> None:
    en = load_language_template(zh_root, "prompts", "simulator.j2", "en")
    zh = load_language_template(zh_root, "prompts", "simulator.j2", "zh")
    assert re.fullmatch(r"[0-9a-f]{10}", en.version) and re.fullmatch(r"zh-[0-9a-f]{10}", zh.version)
    assert zh.ref.startswith("simulator@zh-")  # the role before "@" is what invalid-output counts group by
    with pytest.raises(InputError, match="'fr' is not one of en, zh"):
        template_file(zh_root, "prompts", "simulator.j2", "fr")


def test_every_chinese_template_renders_a_chinese_case_without_english_codes(zh_registry: Registry, zh_root: Path) -> None:
    case = zh_registry.cases(ZH_SPLIT)[0]
    role = RoleConfig(binding="vllm:x")
    config = RunConfig(subjects=[role], user=role, panel=PanelConfig(judges=[role]), director=role,
                       subject_system_prompt="companion")
    prompts = load_prompts(zh_root, config, "zh")
    transcript = [{"speaker": case.persona.name, "text": case.opening}, {"speaker": "Assistant", "text": "嗯，我在听。"}]
    director = director_messages(prompts.director, case, DirectorState(turn=1, max_turns=12, meter=40), transcript)  # type: ignore[arg-type]
    iedr = iedr_messages(load_language_template(zh_root, "judges", "iedr.j2", "zh"), case)
    texts = {
        "simulator": prompts.simulator.case_system(case)
        + prompts.simulator.block("turn", persona=case.persona, meter=40, guidance=""),
        "director": director[0]["content"] + director[1]["content"],
        "probe": prompts.probe.block("user"),  # type: ignore[union-attr]
        "companion": prompts.subject_system.block("system"),  # type: ignore[union-attr]
        "mdep": prompts.judge.case_system(case) + prompts.judge.block(
            "user", transcript=transcript, reply="嗯，我在听。", persona=case.persona, scenario=case.scenario),
        "iedr": iedr[0]["content"] + iedr[1]["content"],
    }
    for name, text in texts.items():
        assert HAN.search(text), name
        if name == "probe":
            continue  # it names the trait codes its answer must use, each with its Chinese name
        # Card codes are put in words: no "high threshold", "neuroticism" or "pushing_back" leaks.
        prose = re.sub(r"\{.*\}", "", text)  # the JSON format line keeps its English keys and codes
        for code in ("threshold: high", " high ", "neuroticism", "pushing_back", "deflecting", "Assistant:"):
            assert code not in prose, (name, code)
    assert case.persona.name in texts["simulator"] and case.hidden_need in texts["mdep"]
    assert "助手：嗯，我在听。" in texts["mdep"] and "神经质高" in texts["simulator"]
    assert "neuroticism（神经质）" in texts["probe"]


def test_the_directors_guidance_reaches_a_chinese_simulator_in_chinese(zh_registry: Registry) -> None:
    case, english = zh_registry.cases(ZH_SPLIT)[0], zh_registry.cases("demo")[0]
    state = DirectorState(turn=3, max_turns=12, meter=40, revealed_stages=(0,),
                          revealed_memories=(1,), resistance=1)
    wait = DirectorAction(action="wait", target=None, guidance="")
    said = simulator_guidance(case, state, wait)
    memory = case.scenario.memories[1]
    assert said == (f"如果你觉得自己被听进去了，现在可以把故事的这些部分说出来：{case.scenario.stages[0]}"
                    f"如果时机合适，这些记忆可能会浮上心头：（少年）{memory.text}再试探对方一下，然后再敞开。")
    assert simulator_guidance(english, state, wait).startswith("If you feel heard enough")
    assert guidance_words("zh").resistance.keys() == guidance_words("en").resistance.keys()


def test_a_runs_case_language_picks_its_templates(zh_registry: Registry, zh_root: Path) -> None:
    assert cases_language(zh_registry.cases(ZH_SPLIT)) == "zh"
    assert cases_language(zh_registry.cases("demo")) == "en"
    with pytest.raises(InputError, match="several languages"):
        cases_language([*zh_registry.cases("demo"), *zh_registry.cases(ZH_SPLIT)])
    role = RoleConfig(binding="vllm:x")
    config = RunConfig(subjects=[role], user=role, panel=PanelConfig(judges=[role]))
    zh, en = load_prompts(zh_root, config, "zh"), load_prompts(zh_root, config, "en")
    assert all(t.version.startswith("zh-") for t in (zh.simulator, zh.judge, zh.probe) if t)
    assert not any(t.version.startswith("zh-") for t in (en.simulator, en.judge, en.probe) if t)


def test_judge_language_pins_the_judges_and_leaves_the_hash_of_older_configs(zh_root: Path) -> None:
    role = RoleConfig(binding="vllm:x")
    base: dict[str, Any] = {"subjects": [role], "user": role, "panel": PanelConfig(judges=[role])}
    pinned = RunConfig(**base, judge_language="en")
    prompts = load_prompts(zh_root, pinned, "zh")
    assert prompts.simulator.version.startswith("zh-") and not prompts.judge.version.startswith("zh-")
    panel = bind_panel(pinned.panel, (), zh_root, pinned.judges_language("zh"))
    assert not any(v.startswith("zh-") for v in panel.versions.values())
    to_zh = RunConfig(**base, judge_language="zh")
    assert to_zh.judges_language("en") == "zh" and load_prompts(zh_root, to_zh, "en").judge.version.startswith("zh-")
    default = RunConfig(**base)
    assert default.judges_language("zh") == "zh" and default.judges_language("en") == "en"
    # The default is left out of the hash: configs written before the key keep theirs.
    dump = default.model_dump(mode="json")
    del dump["judge_language"]
    assert default.config_hash() != pinned.config_hash() != to_zh.config_hash()
    assert RunConfig.model_validate(dump).config_hash() == default.config_hash()
    pinned_dump = pinned.model_dump(mode="json")
    assert pinned_dump["judge_language"] == "en"
    with pytest.raises(InputError, match="judge_language"):
        validate_config({**pinned_dump, "judge_language": "fr"}, "run.yaml")


def _config(path: Path, url: str, **extra: Any) -> RunConfig:
    binding = f"openai:fake-model@{url}"
    data = {
        "subjects": [{"binding": binding, "label": "subject-a"}, {"binding": binding, "label": "subject-b"}],
        "user": {"binding": binding}, "director": {"binding": binding},
        "judges": [{"binding": binding, "label": "judge-0"}],
        "split": ZH_SPLIT, "max_turns": 3, "min_turns": 2, **extra,
    }
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return validate_config(load_config_data(path), path)


def _system_of(requests: list[dict[str, Any]], schema: str) -> list[str]:
    sent = [r["body"]["messages"][0]["content"] for r in requests
            if ((r["body"].get("response_format") or {}).get("json_schema") or {}).get("name") == schema]
    assert sent, f"no {schema} request"
    return sent


@pytest.mark.parametrize("judge_language", ["case", "en"])
def test_a_chinese_run_plays_and_judges_in_the_language_it_is_given(zh_root: Path, tmp_path: Path, judge_language: str) -> None:
    with FakeOpenAIServer(FakeState(responder=zh_responder)) as server:
        config = _config(tmp_path / "run.yaml", server.base_url, judge_language=judge_language)
        asyncio.run(run_benchmark(config, tmp_path / "run", root=zh_root, show_progress=False))
        requests = list(server.state.requests)
    judges_zh = judge_language == "case"
    # What each role was sent: the simulator and the director in Chinese; the judges as pinned.
    assert all("你在和一个 AI 助手私下聊天" in s for s in _system_of(requests, "user_move"))
    assert all("你在导演一场角色扮演" in s for s in _system_of(requests, "director_action"))
    for schema in ("mdep_verdict", "holistic_verdict", "pairwise_verdict"):
        sent = _system_of(requests, schema)
        assert all(bool(HAN.search(s.split("<<<CARD")[0])) is judges_zh for s in sent), schema
    probes = [r["body"]["messages"][-1]["content"] for r in requests
              if ((r["body"].get("response_format") or {}).get("json_schema") or {}).get("name") == "persona_probe"]
    assert probes and all("请在这里暂停对话" in p for p in probes)
    rd = RunDir(tmp_path / "run")
    manifest = rd.read_manifest()
    assert manifest["templates_language"] == {
        "prompts": "zh", "judges": "zh" if judges_zh else "en", "judge_language": judge_language}
    versions = manifest["prompt_versions"]
    assert versions["simulator"].startswith("zh-") and versions["director"].startswith("zh-")
    assert versions["judge"].startswith("zh-") is judges_zh
    episodes = rd.read_episodes()
    assert len(episodes) == 2
    for episode in episodes:  # every record names the templates it was made with
        assert episode.templates["simulator"].startswith("simulator@zh-")
        judge = episode.templates["judge"]
        assert judge.startswith("mdep@") and judge.startswith("mdep@zh-") is judges_zh
        assert {c.template.split("@")[1].startswith("zh-") for c in episode.calls if c.role == "user"} == {True}


def test_a_rubric_without_a_chinese_version_stops_a_chinese_run_before_it_writes(zh_root: Path, tmp_path: Path) -> None:
    (zh_root / "judges" / "strict-mdep.j2").write_text((zh_root / "judges" / "mdep.j2").read_text())
    with FakeOpenAIServer(FakeState(responder=zh_responder)) as server:
        config = _config(tmp_path / "run.yaml", server.base_url)
        panel = config.panel.model_copy(update={"rubrics": {**config.panel.rubrics, "holistic": "strict-mdep.j2"}})
        with pytest.raises(InputError, match=r"judges/zh/strict-mdep.j2: template: cannot read"):
            asyncio.run(run_benchmark(config.model_copy(update={"panel": panel}), tmp_path / "run", root=zh_root,
                                      show_progress=False))
        assert not server.state.requests  # no model call was made
    assert not (tmp_path / "run").exists()
