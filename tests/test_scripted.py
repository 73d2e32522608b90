"""Reference subjects: binding, deterministic replies, provenance, and a probe that does not crash."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from emobench.endpoints.binding import parse_binding
from emobench.endpoints.scripted import ENDPOINT, ScriptedClient, load_lines, scripted_reply
from emobench.episode.loop import run_episode
from emobench.episode.roles import EpisodeRoles
from emobench.errors import InputError
from emobench.judging.mdep import judge_turn
from emobench.records import Limits, RoleInfo, Sampling
from emobench.run.runner import _caller
from tests.conftest import PROVENANCE, fake_caller
from tests.fake_openai import FakeOpenAIServer


def test_binding_parses_the_four_references_and_names_an_unknown_one() -> None:
    for name in ("echo", "platitude", "advice", "dismissive"):
        assert parse_binding(f"scripted:{name}").spec == f"scripted:{name}"
    with pytest.raises(InputError, match="scripted subjects are echo, platitude, advice, dismissive"):
        parse_binding("scripted:cheerful", source="run.yaml", field="subjects[1].binding")


def test_replies_follow_each_mode_and_are_seeded() -> None:
    said = [{"role": "user", "content": "I lost my job."}]
    assert scripted_reply(load_lines("echo"), said, 1) == "I lost my job."
    advice = load_lines("advice")
    assert scripted_reply(advice, said, 1) == scripted_reply(advice, said, 2) == "\n".join(advice.lines)
    platitude = load_lines("platitude")
    picks = {scripted_reply(platitude, said, seed) for seed in range(40)}
    assert picks <= set(platitude.lines) and len(picks) > 3
    assert scripted_reply(platitude, said, 7) == scripted_reply(platitude, said, 7)
    # Never the same line twice in a row.
    first = scripted_reply(platitude, said, 7)
    again = [*said, {"role": "assistant", "content": first}, {"role": "user", "content": "ok"}]
    assert scripted_reply(platitude, again, 7) != first


def test_a_bad_lines_file_is_one_line_naming_the_field(tmp_path: Path) -> None:
    (tmp_path / "echo.yaml").write_text("mode: rotate\nlines: []\nno_answer: none given\n")
    with pytest.raises(InputError, match=r"echo.yaml: lines: mode 'rotate' needs at least one line"):
        load_lines("echo", tmp_path)


def test_an_episode_with_a_scripted_subject_records_provenance_and_an_invalid_probe(
    fake: FakeOpenAIServer, registry, prompts
) -> None:
    client = ScriptedClient("dismissive")
    info = RoleInfo(label="scripted:dismissive", model=client.model, endpoint=ENDPOINT, sampling=Sampling())
    roles = EpisodeRoles(
        subject=_caller("subject", client, info),
        user=fake_caller(fake.base_url, "user", "sim"),
        judges=(fake_caller(fake.base_url, "judge", "judge-0"),),
        judge_turn=judge_turn,
    )
    case = registry.cases("demo")[0]
    episode = asyncio.run(run_episode(case, roles, prompts, 3, Limits(max_turns=3, min_turns=2), PROVENANCE))
    lines = load_lines("dismissive")
    assert [t.reply for t in episode.turns] and all(t.reply in lines.lines for t in episode.turns)
    subject_calls = [c for c in episode.calls if c.role == "subject"]
    assert {(c.model, c.endpoint, c.template) for c in subject_calls} == {("scripted:dismissive", "in-process", lines.ref)}
    assert lines.version in lines.ref
    # The probe got the honest no-answer: recorded invalid, every attempt kept, the run goes on.
    assert episode.probe is None
    probes = [c for c in subject_calls if c.error]
    assert probes and all(c.text == lines.no_answer for c in probes)
    # No HTTP request ever went out for the subject.
    assert not [r for r in fake.state.requests if r["body"]["messages"][-1]["content"] in lines.lines]
    assert client.stats.calls == len(subject_calls)
