"""The EMPA protocol's parts: the placement's arithmetic on run directories written here, the flat
subject history, and the config that asks for it."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from emobench.config import validate_config
from emobench.episode.stepper import subject_conversation, subject_messages
from emobench.errors import InputError
from emobench.external.placement import Runs, place, placement, resolve_reference
from emobench.prompts import load_language_template, load_template
from emobench.run.runner import ROOT, load_prompts

CASES = ("c1", "c2", "c3")
score = st.floats(min_value=0, max_value=120, allow_nan=False)
Scores = tuple[float, float, float]
runs = st.lists(st.tuples(score, score, score), min_size=2, max_size=6)
# Runs that vary little about a centre, so that two references' offsets can differ for sure.
tight = st.builds(lambda centre, jitter: [(centre + j, centre, centre - j) for j in jitter] + [(centre + 1, centre, centre)],
                  st.floats(0, 110), st.lists(st.floats(0, 2), min_size=1, max_size=5))


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


def _place(per_subject: dict[str, list[Scores]], references: list[str], published: dict[str, float]) -> dict[str, Any]:
    """The placement's arithmetic on run scores (a run score: the mean over its cases), without files."""
    runs = {s: Runs(s, [sum(x) / len(x) for x in seeds]) for s, seeds in per_subject.items()}
    refs = [resolve_reference(spec, runs, published, Path("runs"), Path("published.csv")) for spec in references]
    return placement(runs, refs, published, Path("runs"))


def _t(dof: int) -> float:
    return float(stats.t.ppf(0.975, dof))


def _ranks(placed: float, se: float, dof: int, published: list[float], noise: float) -> list[int]:
    """Best and worst rank, by brute force: the published models surely above, and not surely below."""
    half = _t(dof) * np.hypot(se, noise)
    diff = placed - np.asarray(published)
    return [1 + int(np.sum(diff + half < 0)), 1 + int(np.sum(diff - half <= 0))]


@settings(max_examples=60, deadline=None)
@given(ref=runs, mine=runs, published=score)
def test_placement_is_the_shifted_mean_with_a_t_interval(ref: list[Scores], mine: list[Scores], published: float) -> None:
    result = _place({"ref": ref, "mine": mine}, ["ref=Ref"], {"Ref": published, "High": 110.5, "Low": 3.25})
    r = [sum(x) / 3 for x in ref]
    u = [sum(x) / 3 for x in mine]
    s_r, s_u = pd.Series(r).std(), pd.Series(u).std()
    offset = sum(r) / len(r) - published
    assert result["reference"]["offset"] == pytest.approx(offset, abs=1e-9)
    row = result["placed"][0]
    assert row["placed"] == pytest.approx(sum(u) / len(u) - offset, abs=1e-9)
    dof = min(len(r), len(u)) - 1
    se = math.sqrt(s_u**2 / len(u) + s_r**2 * (1 + 1 / len(r)))
    lo, hi = row["placed_ci"]
    assert [lo, hi] == pytest.approx([row["placed"] - _t(dof) * se, row["placed"] + _t(dof) * se], abs=1e-9)
    # The published models' own run-to-run spread (the reference's s) widens the rank range, never narrows it.
    table = [published, 110.5, 3.25]
    assert row["rank_range"] == _ranks(row["placed"], se, dof, table, s_r)
    assert row["rank_range_if_published_exact"] == _ranks(row["placed"], se, dof, table, 0.0)
    best, worst = row["rank_range"]
    exact_best, exact_worst = row["rank_range_if_published_exact"]
    assert best <= exact_best <= row["rank"] <= exact_worst <= worst
    assert result["method"] == "offset"


@settings(max_examples=100, deadline=None)
@given(strong=runs | tight, weak=runs | tight, mine=runs | tight, p_strong=st.floats(60, 120), p_weak=st.floats(0, 40))
def test_two_references_test_the_offset_and_place_by_it_or_by_the_line_through_them(
    strong: list[Scores], weak: list[Scores], mine: list[Scores], p_strong: float, p_weak: float,
) -> None:
    subjects = {"s": strong, "w": weak, "mine": mine}
    table = {"Ref": p_strong, "High": 110.5, "Low": 3.25, "Weak": p_weak}
    m = {name: np.array([sum(x) / 3 for x in xs]) for name, xs in (("s", strong), ("w", weak), ("u", mine))}
    mean = {k: float(v.mean()) for k, v in m.items()}
    sd = {key: statistics.stdev(v.tolist()) for key, v in m.items()}
    k = {key: len(v) for key, v in m.items()}
    o_s, o_w = mean["s"] - p_strong, mean["w"] - p_weak
    se_s, se_w = sd["s"] * math.sqrt(1 + 1 / k["s"]), sd["w"] * math.sqrt(1 + 1 / k["w"])
    d, se_d, dof_d = o_s - o_w, math.hypot(se_s, se_w), min(k["s"], k["w"]) - 1
    differ = abs(d) > _t(dof_d) * se_d
    gap = mean["s"] - mean["w"]
    separated = (abs(gap) > _t(dof_d) * math.hypot(sd["s"] / math.sqrt(k["s"]), sd["w"] / math.sqrt(k["w"]))
                 and abs(gap) > 1e-9 * max(1.0, abs(mean["s"]), abs(mean["w"])))
    if differ and not separated:
        with pytest.raises(InputError, match="not separated in these runs"):
            _place(subjects, ["s=Ref", "w=Weak"], table)
        return
    result = _place(subjects, ["s=Ref", "w=Weak"], table)
    test = result["offset_test"]
    assert test["difference"] == pytest.approx(d, abs=1e-9)
    assert test["difference_ci"] == pytest.approx([d - _t(dof_d) * se_d, d + _t(dof_d) * se_d], abs=1e-9)
    row = result["placed"][0]
    if not differ:
        assert result["method"] == "offset"
        placed = mean["u"] - (o_s + o_w) / 2
        se = math.sqrt(sd["u"] ** 2 / k["u"] + (se_s**2 + se_w**2) / 4)
        dof = min(k.values()) - 1
    else:
        assert result["method"] == "line"
        # The line through (m_w, P_w) and (m_s, P_s); its variance by the delta method, gradient
        # over (m_u, m_s, m_w, P_s, P_w) with the published runs' spread taken as each reference's s.
        def f(x: np.ndarray) -> float:
            return float(x[4] + (x[0] - x[2]) * (x[3] - x[4]) / (x[1] - x[2]))
        x = np.array([mean["u"], mean["s"], mean["w"], p_strong, p_weak])
        h = 1e-6 * max(1.0, float(np.abs(x).max()))
        grad = np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(5)])
        var = np.array([sd["u"] ** 2 / k["u"], sd["s"] ** 2 / k["s"], sd["w"] ** 2 / k["w"], sd["s"] ** 2, sd["w"] ** 2])
        placed, se, dof = f(x), math.sqrt(float(grad**2 @ var)), min(k.values()) - 1
    assert row["placed"] == pytest.approx(placed, rel=1e-6, abs=1e-6)
    assert row["placed_se"] == pytest.approx(se, rel=1e-3, abs=1e-5)
    noise = math.sqrt((sd["s"] ** 2 + sd["w"] ** 2) / 2)
    assert result["published_run_sd"] == pytest.approx(noise, abs=1e-9)
    assert row["rank_range"] == _ranks(row["placed"], row["placed_se"], dof, [p_strong, 110.5, 3.25, p_weak], noise)


def test_runs_of_different_cards_or_one_run_are_refused(tmp_path: Path) -> None:
    published = _published(tmp_path, 50.0)
    one = _run(tmp_path / "a", {"ref": [(1, 2, 3)], "mine": [(1, 2, 3)]})
    with pytest.raises(InputError, match="needs at least 2"):
        place([one], ["ref=Ref"], published, exploratory=True)
    other = _run(tmp_path / "b", {"ref": [(1, 2, 3), (2, 3, 4)]}, version="v2")
    with pytest.raises(InputError, match="registry_version"):
        place([one, other], ["ref=Ref"], published, exploratory=True)
    with pytest.raises(InputError, match="no model 'Nobody'"):
        place([one], ["ref=Nobody"], published, exploratory=True)


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
    result = place([run], ["ref"], bundle, exploratory=True)
    assert result["published"] == {"other": 70.0, "ref": 40.0}
    assert result["reference"]["offset"] == pytest.approx(10.0) and result["placed"][0]["placed"] == pytest.approx(55.0)
