"""The EMPA protocol's parts: the placement's arithmetic on run directories written here, the flat
subject history, and the config that asks for it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from emobench.config import validate_config
from emobench.episode.stepper import subject_conversation, subject_messages
from emobench.errors import InputError
from emobench.external.placement import place
from emobench.prompts import load_language_template, load_template
from emobench.run.runner import ROOT, load_prompts

CASES = ("c1", "c2", "c3")
score = st.floats(min_value=0, max_value=120, allow_nan=False)
Scores = tuple[float, float, float]
runs = st.lists(st.tuples(score, score, score), min_size=2, max_size=6)


def _run(folder: Path, per_subject: dict[str, list[tuple[float, float, float]]], version: str = "v1") -> Path:
    folder.mkdir(parents=True)
    rows = [{"subject": s, "case_id": c, "seed": seed, "epmq_empa": v}
            for s, seeds in per_subject.items() for seed, values in enumerate(seeds) for c, v in zip(CASES, values, strict=True)]
    pd.DataFrame(rows).to_parquet(folder / "scores.parquet")
    (folder / "manifest.json").write_text(json.dumps({"split": "empa-zh", "registry_version": version}), encoding="utf-8")
    return folder


def _published(folder: Path, reference: float) -> Path:
    path = folder / "epmq_summary.csv"
    path.write_text(f"\ufeffModel,EPM-Q Score\nRef,{reference}\nHigh,110.5\nLow,3.25\n", encoding="utf-8")
    return path


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ref=runs, mine=runs, published=score)
def test_placement_is_the_shifted_mean_with_a_t_interval(
    tmp_path_factory: pytest.TempPathFactory, ref: list[Scores], mine: list[Scores], published: float
) -> None:
    folder = tmp_path_factory.mktemp("p")
    result = place([_run(folder / "run", {"ref": ref, "mine": mine})], "ref", _published(folder, published), "Ref")
    r = [sum(x) / 3 for x in ref]
    u = [sum(x) / 3 for x in mine]
    s_r, s_u = pd.Series(r).std(), pd.Series(u).std()
    offset = sum(r) / len(r) - published
    assert result["reference"]["offset"] == pytest.approx(offset, abs=1e-9)
    row = result["placed"][0]
    assert row["placed"] == pytest.approx(sum(u) / len(u) - offset, abs=1e-9)
    t = stats.t.ppf(0.975, min(len(r), len(u)) - 1)
    half = t * math.sqrt(s_u**2 / len(u) + s_r**2 * (1 + 1 / len(r)))
    lo, hi = row["placed_ci"]
    assert lo == pytest.approx(row["placed"] - half, abs=1e-9) and hi == pytest.approx(row["placed"] + half, abs=1e-9)
    best, worst = row["rank_range"]
    assert best <= row["rank"] <= worst and set(row["within_interval"]) <= {"Ref", "High", "Low"}


def test_runs_of_different_cards_or_one_run_are_refused(tmp_path: Path) -> None:
    published = _published(tmp_path, 50.0)
    one = _run(tmp_path / "a", {"ref": [(1, 2, 3)], "mine": [(1, 2, 3)]})
    with pytest.raises(InputError, match="needs at least 2"):
        place([one], "ref", published, "Ref")
    other = _run(tmp_path / "b", {"ref": [(1, 2, 3), (2, 3, 4)]}, version="v2")
    with pytest.raises(InputError, match="registry_version"):
        place([one, other], "ref", published, "Ref")
    with pytest.raises(InputError, match="no model 'Nobody'"):
        place([one], "ref", published, "Nobody")


def test_flat_history_sends_one_user_message_and_the_probe_sees_the_last_exchange() -> None:
    from emobench.episode.roles import EpisodePrompts

    template = load_language_template(ROOT, "prompts", "companion_flat.j2", "zh")
    base = load_template(ROOT / "prompts" / "simulator.j2")
    prompts = EpisodePrompts(simulator=base, judge=base, subject_system=template, flat_history=True)
    history = [("第一句", "回复一"), ("第二句", "回复二")]
    messages = subject_messages(prompts, history, "第三句")
    assert [m["role"] for m in messages] == ["system", "user"]
    flat = messages[1]["content"]
    assert flat.index("对方：第一句") < flat.index("你：回复一") < flat.index("对方：第二句") < flat.index("对方刚刚说：第三句")
    probe_view = subject_conversation(prompts, history)
    assert [m["role"] for m in probe_view] == ["system", "user", "assistant"] and probe_view[2]["content"] == "回复二"
    assert "对方刚刚说：第二句" in probe_view[1]["content"] and "回复二" not in probe_view[1]["content"]
    # Turns mode is unchanged: the history as chat turns.
    turns = EpisodePrompts(simulator=base, judge=base, subject_system=template)
    roles = [m["role"] for m in subject_messages(turns, history, "第三句")]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]


def test_flat_history_needs_a_template_with_a_user_block() -> None:
    data = {"subjects": [{"binding": "scripted:echo"}], "user": {"binding": "scripted:echo"},
            "panel": {"judges": [{"binding": "scripted:echo"}]}, "subject_history": "flat"}
    with pytest.raises(InputError, match="subject_history: flat needs a subject_system_prompt"):
        load_prompts(ROOT, validate_config(data, "config"), "zh")
    with_template = validate_config({**data, "subject_system_prompt": "companion_flat"}, "config")
    assert load_prompts(ROOT, with_template, "zh").flat_history


def test_the_published_scores_may_come_from_an_external_bundle(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    pd.DataFrame({"slice_family": ["overall", "overall", "category"], "subject": ["ref", "other", "ref"],
                  "epmq_empa_published": [40.0, 70.0, 99.0]}).to_parquet(bundle / "leaderboard.parquet")
    run = _run(tmp_path / "run", {"ref": [(40, 50, 60), (50, 50, 50)], "mine": [(60, 60, 60), (70, 70, 70)]})
    result = place([run], "ref", bundle)
    assert result["published"] == {"other": 70.0, "ref": 40.0}
    assert result["reference"]["offset"] == pytest.approx(10.0) and result["placed"][0]["placed"] == pytest.approx(55.0)
