"""Scores anchored to people (emobench.scoring.ppi, .anchoring; `emobench anchor`): the estimator against
the reference implementation's stored outputs, its properties, and the command on a fake-server run."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emobench.scoring.ppi import anchored_mean, difference, people_mean, tuned_weight
from tests.conftest import write_config

REFERENCE = json.loads((Path(__file__).parent / "data" / "ppi_reference.json").read_text())


@pytest.mark.parametrize("case", REFERENCE["cases"], ids=lambda c: f"{c['kind']}-{len(c['y'])}-{len(c['f_unlabelled'])}")
def test_the_estimator_is_ppi_py_s_to_1e_9(case: dict) -> None:
    for fig in case["figures"]:
        weight = "ppi_py" if fig["lam"] is None else fig["lam"]
        got = anchored_mean(case["y"], case["f_labelled"], case["f_unlabelled"], alpha=fig["alpha"], weight=weight,
                            quantile="normal")
        assert got.mean == pytest.approx(fig["point"], abs=1e-9)
        assert (got.low, got.high) == pytest.approx((fig["low"], fig["high"]), abs=1e-9)


floats = st.floats(min_value=1, max_value=10, allow_nan=False)


@st.composite
def samples(draw: st.DrawFn) -> tuple[list[float], list[float], list[float]]:
    n = draw(st.integers(2, 30))
    big_n = draw(st.integers(1, 60))
    y = draw(st.lists(floats, min_size=n, max_size=n))
    fl = draw(st.lists(floats, min_size=n, max_size=n))
    fu = draw(st.lists(floats, min_size=big_n, max_size=big_n))
    return y, fl, fu


@settings(max_examples=60, deadline=None)
@given(samples(), st.floats(-5, 5))
def test_weight_is_in_0_1_and_the_estimate_moves_with_a_shift_of_everything(data: tuple, shift: float) -> None:
    y, fl, fu = data
    base = anchored_mean(y, fl, fu)
    moved = anchored_mean([v + shift for v in y], [v + shift for v in fl], [v + shift for v in fu])
    assert 0 <= base.weight <= 1 and 0 <= tuned_weight(np.array(y), np.array(fl), np.array(fu)) <= 1
    # never wider than the rated episodes alone, whatever the panel
    assert base.se <= people_mean(y).se + 1e-12
    assert moved.mean == pytest.approx(base.mean + shift, abs=1e-9)
    assert moved.se == pytest.approx(base.se, rel=1e-6, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(samples())
def test_weight_zero_is_the_people_only_interval_and_singleton_clusters_change_nothing(data: tuple) -> None:
    y, fl, fu = data
    people = people_mean(y)
    zero = anchored_mean(y, fl, fu, weight=0.0)
    assert people.df == zero.df == len(y) - 1
    assert (zero.mean, zero.low, zero.high) == pytest.approx((people.mean, people.low, people.high), abs=1e-9)
    named = anchored_mean(y, fl, fu, [f"l{i}" for i in range(len(y))], [f"u{j}" for j in range(len(fu))])
    assert (named.low, named.high) == pytest.approx((anchored_mean(y, fl, fu).low, anchored_mean(y, fl, fu).high))
    itself = difference(named, named)
    assert itself.mean == 0 and itself.se == 0


def test_clustered_coverage_holds_where_seeds_share_a_case() -> None:
    """Episodes of one case share its difficulty; a panel that reads the case and is biased by +1.5. Over
    400 draws, the clustered anchored interval covers the true mean about 95% of the time, the naive
    panel-only interval almost never, and the anchored interval is narrower than the people-only one."""
    rng = np.random.default_rng(7)
    cases, seeds, n_rated, draws = 60, 3, 40, 400
    covered = panel_covered = 0
    widths = []
    for _ in range(draws):
        case_effect = np.repeat(rng.normal(0, 1.5, cases), seeds)
        y = 6 + case_effect + rng.normal(0, 1, cases * seeds)
        f = y + 1.5 + rng.normal(0, 0.7, cases * seeds)
        truth = 6.0  # the population mean people give
        clusters = np.repeat(np.arange(cases), seeds)
        rated = rng.choice(cases * seeds, n_rated, replace=False)
        rest = np.setdiff1d(np.arange(cases * seeds), rated)
        est = anchored_mean(y[rated], f[rated], f[rest], clusters[rated].tolist(), clusters[rest].tolist())
        covered += est.low <= truth <= est.high
        panel = people_mean(f, clusters.tolist())
        panel_covered += panel.low <= truth <= panel.high
        widths.append((est.high - est.low) / (people_mean(y[rated], clusters[rated].tolist()).high
                                               - people_mean(y[rated], clusters[rated].tolist()).low))
    assert covered / draws >= 0.92, covered / draws
    assert panel_covered / draws <= 0.05
    assert float(np.median(widths)) < 0.9


# --- the command, on a fake-server run -----------------------------------------------------------

@pytest.fixture(scope="module")
def rated_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, dict[str, float]]]]:
    """Two subjects (one answers dismissively, and the judges see it) × 16 test cases × 2 seeds, and what
    'people' would say of every episode: the panel's holistic scores plus 2, with a rater's noise,
    rounded. Returns the run and every episode's people's scores."""
    from tests.fake_openai import DISMISSIVE, WORSE_MODEL, FakeOpenAIServer, FakeState, scripted_responder
    from tests.gate_support import emobench

    def responder(body: dict) -> str:  # a holistic judge whose scores differ from episode to episode
        fmt = (body.get("response_format") or {}).get("json_schema", {}).get("name")
        text = body["messages"][-1]["content"]
        if fmt != "holistic_verdict" or DISMISSIVE in text:
            return scripted_responder(body)
        dim = {"score": 1 + zlib.crc32(text.encode()) % 7, "evidence": "that sounds hard", "reason": "specific"}
        return json.dumps(dict.fromkeys(HOLISTIC, dim))

    root = tmp_path_factory.mktemp("anchor")
    with FakeOpenAIServer(FakeState(responder=responder)) as fake:
        config = write_config(root / "c.yaml", fake.base_url, split="test", cases=[f"test4-{i:02d}" for i in range(1, 17)],
                              seeds=[0, 1], max_turns=2, subjects=[
            {"binding": f"openai:fake-model@{fake.base_url}", "label": "kind"},
            {"binding": f"openai:{WORSE_MODEL}@{fake.base_url}", "label": "dismissive"}])
        code, _, err = emobench("run", "--config", str(config), "--out", str(root), "--run-id", "r", "--no-progress")
        assert code == 0, err
    scores = pd.read_parquet(root / "r" / "scores.parquet")
    people = {}
    for row in scores.itertuples():  # in the order episodes finished: each key draws its own noise
        key = f"{row.subject}|{row.case_id}|{row.seed}"
        rng = np.random.default_rng(zlib.crc32(key.encode()))
        people[key] = {d: float(np.clip(round(getattr(row, d) + 2 + rng.normal(0, 1)), 1, 10)) for d in HOLISTIC}
    yield root / "r", people


HOLISTIC = ("empathy", "humanlikeness", "persona_adaptation", "coherence")


def _write_ratings(path: Path, people: dict[str, dict[str, float]], keys: list[str]) -> Path:
    path.write_text("".join(json.dumps({"episode": k, "ratings": {"ann": {d: int(v) for d, v in people[k].items()}}}) + "\n"
                            for k in keys))
    return path


def test_half_rated_the_anchored_interval_covers_people_and_the_panel_alone_misses(
        rated_run: tuple[Path, dict[str, dict[str, float]]], tmp_path: Path) -> None:
    from tests.gate_support import emobench

    run, people = rated_run
    code, plan_text, err = emobench("anchor", str(run), "--plan", str(len(people) // 2), "--seed", "5")
    assert code == 0, err
    plan = [json.loads(line)["episode"] for line in plan_text.splitlines()]
    assert len(plan) == len(set(plan)) == len(people) // 2
    assert sum(k.startswith("kind|") for k in plan) == sum(k.startswith("dismissive|") for k in plan)  # even per subject
    (tmp_path / "plan.jsonl").write_text(plan_text)
    ratings = _write_ratings(tmp_path / "r.jsonl", people, plan)
    code, out, err = emobench("anchor", str(run), "--ratings", str(ratings), "--planned", str(tmp_path / "plan.jsonl"),
                              "--json", str(tmp_path / "a.json"), "--alpha", "0.01")
    assert code == 0, err
    assert "people only" in out and "anchored" in out and "dismissive − kind (overall)" in out
    found = json.loads((tmp_path / "a.json").read_text())
    for est in found["estimates"]:
        theirs = [v for k, v in people.items() if k.startswith(est["subject"] + "|")]
        truth = np.mean([np.mean(list(v.values())) if est["dimension"] == "overall" else v[est["dimension"]]
                         for v in theirs])
        assert est["n_rated"] == len(plan) // 2 and est["n_episodes"] == len(theirs)
        a, p = est["anchored"], est["panel"]
        assert a["low"] <= truth <= a["high"], (est["subject"], est["dimension"], truth, a)
        assert not p["low"] <= truth <= p["high"]  # the panel reads 2 points low
        assert abs(a["mean"] - truth) < abs(p["mean"] - truth)
        if est["subject"] == "kind":  # the panel follows people there (it reads every dismissive reply as 1)
            assert 0 < a["weight"] <= 1 and a["high"] - a["low"] < est["people"]["high"] - est["people"]["low"]
    assert {(d["subject_a"], d["subject_b"]) for d in found["differences"]} == {("dismissive", "kind")}


@pytest.mark.parametrize(("line", "says"), [
    ({"episode": "nobody|test4-01|0", "ratings": {"a": {"empathy": 5}}}, "line 1: episode: 'nobody|test4-01|0' is no episode"),
    ({"episode": "kind|test4-01|0", "ratings": {"a": {"empathy": 11}}}, "line 1: ratings.a.empathy: 11 is outside 1–10"),
    ({"episode": "kind|test4-01|0", "ratings": {"a": {"warmth": 5}}}, "line 1: ratings.a.warmth: unknown dimension"),
    ({"episode": "kind|test4-01|0", "ratings": {}}, "line 1: ratings"),
    ({"episode": "kind|test4-01|0"}, "line 1: ratings"),
])
def test_bad_ratings_are_one_line_naming_the_line_and_field(rated_run: tuple[Path, dict], tmp_path: Path,
                                                           line: dict, says: str) -> None:
    from tests.gate_support import emobench

    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(line) + "\n")
    code, _, err = emobench("anchor", str(rated_run[0]), "--ratings", str(path))
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_ratings_outside_the_plan_or_too_few_are_refused(rated_run: tuple[Path, dict], tmp_path: Path) -> None:
    from tests.gate_support import emobench

    run, people = rated_run
    keys = sorted(people)
    (tmp_path / "plan.jsonl").write_text(json.dumps({"episode": keys[0]}) + "\n")
    ratings = _write_ratings(tmp_path / "r.jsonl", people, keys[:3])
    code, _, err = emobench("anchor", str(run), "--ratings", str(ratings), "--planned", str(tmp_path / "plan.jsonl"))
    assert code == 2 and "2 rated episode(s) are not in the plan" in err, err
    one = _write_ratings(tmp_path / "one.jsonl", people, keys[:1])
    code, _, err = emobench("anchor", str(run), "--ratings", str(one))
    assert code == 2 and "no subject has rated episodes from two cases" in err, err
    code, _, err = emobench("anchor", str(run))
    assert code == 2 and "give one" in err, err


def test_the_board_carries_anchored_columns_beside_epmq_never_in_it(rated_run: tuple[Path, dict], tmp_path: Path) -> None:
    import duckdb

    from tests.gate_support import emobench

    run, people = rated_run
    ratings = _write_ratings(tmp_path / "r.jsonl", people, sorted(people)[::2])
    code, _, err = emobench("leaderboard", "build", str(run), "-o", str(tmp_path / "plain"), "--n-boot", "50", "--no-html")
    assert code == 0, err
    code, _, err = emobench("leaderboard", "build", str(run), "-o", str(tmp_path / "board"), "--n-boot", "50",
                            "--ratings", str(ratings))
    assert code == 0, err
    plain, board = (pd.read_parquet(tmp_path / d / "leaderboard.parquet") for d in ("plain", "board"))
    pd.testing.assert_frame_equal(board[plain.columns], plain)  # nothing else moved
    top = board[board.slice_family == "overall"].set_index("subject")
    assert top.anchored_n.tolist() == [len(people) // 4, len(people) // 4]
    assert (top.anchored_overall_lo < top.anchored_overall).all() and (top.anchored_overall < top.anchored_overall_hi).all()
    # the kind subject's people say about 2 more than its panel's holistic empathy; the column says so, EPM-Q does not move
    assert top.loc["kind", "anchored_empathy"] > top.loc["kind", "empathy"] + 1
    others = duckdb.sql(f"select count(*) from '{tmp_path / 'board' / 'leaderboard.parquet'}' "
                        "where slice_family <> 'overall' and anchored_overall is not null").fetchall()
    assert others == [(0,)]
    page = (tmp_path / "board" / "index.html").read_text()
    assert "Anchored to people" in page and "not mixed into it" in page
    code, _, err = emobench("leaderboard", "build", str(run), "-o", str(tmp_path / "bad"), "--ratings",
                            str(tmp_path / "missing.jsonl"))
    assert code == 2 and "missing.jsonl" in err and len(err.strip().splitlines()) == 1, err
