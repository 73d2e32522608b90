"""Invalid structured outputs are visible: per role in report.json and the run summary, and the
simulator's stop rate beside the scores on the leaderboard."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pytest

from emobench.publish.html import SIMULATOR_INVALID_LIMIT, render_html
from emobench.publish.leaderboard import build_leaderboard
from emobench.records import Episode, EpisodeJudgement, ModelCall, Sampling
from emobench.scoring.invalid_outputs import invalid_output_rates, invalid_summary
from tests.synthetic_runs import SubjectTruth, write_run


def _call(role: str, template: str, *, error: str | None = None, form: str | None = "portable") -> ModelCall:
    return ModelCall(role=role, model="m", endpoint="e", sampling=Sampling(), seed=0, template=template,
                     error=error, structured_output=form)


def _episode(subject: str, stop: str, calls: list[ModelCall]) -> Episode:
    return Episode.model_construct(key=f"{subject}|c|0", subject=subject, case_id="c", seed=0, stop_reason=stop, calls=calls)


def test_rates_count_rejected_calls_per_role_and_simulator_stops() -> None:
    episodes = [
        _episode("a", "max_turns", [_call("user", "simulator@1"), _call("subject", "none", form=None),
                                    _call("judge", "mdep@2", error="not JSON"), _call("judge", "mdep@2")]),
        _episode("a", "simulator_invalid", [_call("user", "simulator@1", error="truncated"),
                                            _call("user", "simulator@1", error="truncated")]),
        _episode("b", "max_turns", [_call("user", "simulator@1"), _call("subject", "probe@3")]),
    ]
    judgement = EpisodeJudgement(key="a|c|0", panel="p", holistic=[], audit=[],
                                 calls=[_call("judge", "holistic@4", error="bad score")])
    rates = invalid_output_rates(episodes, [judgement])
    assert rates["rejected_calls"] == {
        "judge (holistic)": {"calls": 1, "rejected": 1, "rate": 1.0},
        "judge (mdep)": {"calls": 2, "rejected": 1, "rate": 0.5},
        "probe": {"calls": 1, "rejected": 0, "rate": 0.0},
        "user": {"calls": 4, "rejected": 2, "rate": 0.5},
    }
    sim = rates["simulator_invalid_episodes"]
    assert (sim["episodes"], sim["stopped"], sim["rate"]) == (3, 1, pytest.approx(1 / 3))
    assert sim["by_subject"] == {"a": 0.5, "b": 0.0}
    line = invalid_summary({"invalid_outputs": rates})
    assert line.startswith("simulator_invalid 1/3 episodes") and "user 2/4" in line and "judge (mdep) 1/2" in line


def test_leaderboard_carries_the_simulator_stop_rate_and_the_page_warns(tmp_path: Path) -> None:
    subjects = [SubjectTruth("steady", simulator_invalid=0.0), SubjectTruth("shaky", simulator_invalid=0.4)]
    run = write_run(tmp_path / "run", subjects, n_cases=60, seed=3)
    table = build_leaderboard([run], n_boot=50)
    overall = table.filter(pc.equal(table.column("slice_family"), "overall")).to_pylist()
    rate = {r["subject"]: r["simulator_invalid_rate"] for r in overall}
    assert rate["steady"] == 0.0
    assert 0.3 < rate["shaky"] < 0.5  # 60 cases x 1 seed at a true 40%
    # Per-slice rates are shares of that slice's episodes: they average back to the overall rate.
    cats = table.filter(pc.and_(pc.equal(table.column("slice_family"), "category"),
                                pc.equal(table.column("subject"), "shaky"))).to_pylist()
    total = sum(r["simulator_invalid_rate"] * r["n_episodes"] for r in cats) / sum(r["n_episodes"] for r in cats)
    assert total == pytest.approx(rate["shaky"])

    page = render_html(table)
    assert 'id="simulator-invalid-warning"' in page and "shaky" in page.split('id="simulator-invalid-warning"')[1][:400]
    assert "steady" not in page.split('id="simulator-invalid-warning"')[1].split("</p>")[0]
    assert SIMULATOR_INVALID_LIMIT == 0.1
    quiet = render_html(build_leaderboard([write_run(tmp_path / "ok", subjects[:1], n_cases=20, seed=4)], n_boot=50))
    assert "simulator-invalid-warning" not in quiet and "Sim. invalid %" in quiet
