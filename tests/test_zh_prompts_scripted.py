"""Scripted reference subjects on Chinese cases: their Chinese lines (prompts/scripted/zh), picked
by the conversation, recorded with a zh- version, through a whole run on a Chinese split."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from emobench.config import load_config_data, validate_config
from emobench.endpoints.scripted import LINES_DIR, ScriptedClient, conversation_language, load_lines, scripted_reply
from emobench.errors import InputError
from emobench.records import Sampling
from emobench.run.runner import run_benchmark
from emobench.rundir import RunDir
from tests.fake_openai import FakeOpenAIServer, FakeState
from tests.zh_support import ZH_SPLIT, zh_library, zh_responder

NAMES = ("echo", "platitude", "advice", "dismissive")


def test_every_reference_has_chinese_lines_of_the_same_mode() -> None:
    for name in NAMES:
        en, zh = load_lines(name), load_lines(name, LINES_DIR, "zh")
        assert zh.mode == en.mode and len(zh.lines) == len(en.lines)
        assert zh.version.startswith("zh-") and not en.version.startswith("zh-")
        assert all(any("\u4e00" <= ch <= "\u9fff" for ch in text) for text in [*zh.lines, zh.no_answer])


def test_the_persons_first_message_picks_the_language() -> None:
    zh = [{"role": "user", "content": "今年过年回不去了"}]
    en = [{"role": "user", "content": "I can't go home this year"}]
    assert conversation_language(zh) == "zh" and conversation_language(en) == "en"
    # A system prompt before the person's words does not decide it, nor a later English aside.
    assert conversation_language([{"role": "system", "content": "你是陪伴者"}, *en]) == "en"
    assert conversation_language([*zh, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "ok"}]) == "zh"
    assert conversation_language([]) == "en"
    platitude_zh = load_lines("platitude", LINES_DIR, "zh")
    client = ScriptedClient("platitude")
    done = asyncio.run(client.complete(zh, Sampling(), 5))
    assert done.text in platitude_zh.lines and done.template == platitude_zh.ref
    probe = asyncio.run(client.complete(zh, Sampling(), 5, {"type": "json_schema"}))
    assert probe.text == platitude_zh.no_answer
    assert asyncio.run(client.complete(en, Sampling(), 5)).text in load_lines("platitude").lines
    assert scripted_reply(load_lines("echo", LINES_DIR, "zh"), zh, 1) == "今年过年回不去了"


def test_a_broken_chinese_lines_file_stops_the_client_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "zh").mkdir()
    (tmp_path / "advice.yaml").write_text("mode: fixed\nlines: [a]\nno_answer: none\n")
    (tmp_path / "zh" / "advice.yaml").write_text("mode: fixed\nlines: []\nno_answer: 无\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"zh/advice.yaml: lines: mode 'fixed' needs at least one line"):
        ScriptedClient("advice", tmp_path)


def test_a_chinese_run_with_references_hears_them_in_chinese(tmp_path: Path) -> None:
    root = zh_library(tmp_path / "lib")
    with FakeOpenAIServer(FakeState(responder=zh_responder)) as server:
        binding = f"openai:fake-model@{server.base_url}"
        data = {
            "subjects": [{"binding": binding, "label": "subject-a"}],
            "references": [{"binding": f"scripted:{name}"} for name in ("platitude", "advice", "dismissive")],
            "user": {"binding": binding}, "judges": [{"binding": binding, "label": "judge-0"}],
            "split": ZH_SPLIT, "max_turns": 3, "min_turns": 2, "seeds": [0, 1],
        }
        path = tmp_path / "run.yaml"
        path.write_text(yaml.safe_dump(data))
        asyncio.run(run_benchmark(validate_config(load_config_data(path), path), tmp_path / "run", root=root,
                                  show_progress=False))
    episodes = RunDir(tmp_path / "run").read_episodes()
    assert len(episodes) == 8
    for episode in (e for e in episodes if e.subject.startswith("scripted:")):
        lines = load_lines(episode.subject.split(":")[1], LINES_DIR, "zh")
        said = [t.reply for t in episode.turns]
        assert said and all(reply in lines.lines or reply == "\n".join(lines.lines) for reply in said)
        refs = {c.template for c in episode.calls if c.role == "subject"}
        assert refs == {lines.ref}
