"""The fidelity report (`emobench validate --fidelity`): its statistics against hand-computed
values, the discriminator on inputs with known answers, and the CLI over run directories made
against the fake server, one of them relabelled as played by a person."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from emobench.cli import app
from emobench.publish.html import write_page
from emobench.publish.leaderboard import build_leaderboard
from emobench.validation.fidelity.compare import judge_levels, path_distance, per_turn, stops, turn_words
from emobench.validation.fidelity.discriminator import assign_folds, auc, discriminate
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, FakeState, default_responder

cli = CliRunner()
HUMAN_WORDS = "ugh. whatever, fine."  # the "person" of these tests, always the same three words


def _person(body: dict[str, Any]) -> str:
    """A user unlike the fake simulator: three words, a falling meter, and leaving when let."""
    if (body.get("response_format") or {}).get("json_schema", {}).get("name") == "user_move":
        return json.dumps({"message": HUMAN_WORDS, "meter_delta": -10, "inner": "", "leave": True})
    return default_responder(body)


def _run(out: Path, name: str, responder: Any = default_responder) -> Path:
    with FakeOpenAIServer(FakeState(responder=responder)) as fake:
        cfg = write_config(out / f"{name}.yaml", fake.base_url, seeds=[0, 1], max_turns=5, min_turns=2)
        args = ["run", "--config", str(cfg), "--out", str(out), "--run-id", name, "--no-progress"]
        result = cli.invoke(app, args, catch_exceptions=False, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return out / name


def _as_played_by_people(run: Path, handle: str = "test") -> Path:
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["roles"]["user"]["model"] = f"human:{handle}"
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("fidelity")
    sim = _run(out, "sim")
    same = _as_played_by_people(Path(shutil.copytree(sim, out / "same")))
    people = _as_played_by_people(_run(out, "people", _person))
    return {"sim": sim, "same": same, "people": people}


def _validate(*args: str) -> Any:
    return cli.invoke(app, ["validate", *args, "--n-boot", "200"], env={"COLUMNS": "200"})


# --- statistics against hand-computed values ---------------------------------------------------


def test_per_turn_means_and_t_intervals() -> None:
    rows = per_turn([[10.0, 20.0], [30.0]])
    # Turn 1: mean 20, sd 10*sqrt(2), half width t(0.975, 1) * sd / sqrt(2) = 12.7062 * 10.
    assert rows[0] == {"turn": 1, "n": 2, "mean": 20.0, "lo": pytest.approx(20 - 127.062, abs=1e-3),
                       "hi": pytest.approx(20 + 127.062, abs=1e-3)}
    assert rows[1] == {"turn": 2, "n": 1, "mean": 20.0, "lo": None, "hi": None}


def test_path_distance_by_hand() -> None:
    # Per-turn means: people (0, 10, 50), simulator (4, 0, -); turn 3 has one episode a side at most.
    out = path_distance([[0, 10, 50], [0, 10]], [[4, 0], [4, 0]], n_boot=50, seed=0)
    assert out["turns"] == 2
    assert out["gap"] == pytest.approx((4 + 10) / 2) and out["diff"] == pytest.approx((-4 + 10) / 2)
    # Every episode of a side has the same path over those turns, so every resample agrees.
    assert out["gap_lo"] == out["gap_hi"] == pytest.approx(7.0)
    assert path_distance([[1.0]], [[2.0]], n_boot=10, seed=0)["gap"] is None  # one episode a side


def test_turn_words_by_hand() -> None:
    out = turn_words([["a b c", "a"]], [["a b", "a b"], ["x"]])
    assert out["human"] == {"n": 2, "mean": 2.0, "median": 2.0, "q1": 1.5, "q3": 2.5}
    assert out["simulator"]["n"] == 3 and out["simulator"]["mean"] == pytest.approx(1.67)
    ks = scipy.stats.ks_2samp([3, 1], [2, 2, 1])
    assert out["ks"] == pytest.approx(ks.statistic, abs=1e-4) and out["ks_p"] == pytest.approx(ks.pvalue, abs=1e-6)
    # Episode means: people (2), simulator (2, 1): U = 1 + 0.5 (one win, one tie).
    assert out["mannwhitney_u"] == 1.5 and out["episodes"] == {"human": 1, "simulator": 2}


def _split_p(first: list[Any], second: list[Any], stat: Any) -> float:
    """Exact two-sided p by hand: the share of the ways to deal the pooled items into sides of the
    same sizes whose statistic reaches the observed one."""
    pooled, n = first + second, len(first)
    observed = stat(first, second)
    splits = [[pooled[i] for i in pick] for pick in itertools.combinations(range(len(pooled)), n)]
    rest = [[pooled[i] for i in range(len(pooled)) if i not in pick] for pick in itertools.combinations(range(len(pooled)), n)]
    return sum(stat(a, b) >= observed - 1e-9 for a, b in zip(splits, rest, strict=True)) / len(splits)


def _chi2_stat(first: list[Any], second: list[Any]) -> float:
    """Pearson's X² of the sides x kinds table, by hand (uncorrected)."""
    total, out = len(first) + len(second), 0.0
    for kind in set(first + second):
        seen = [first.count(kind), second.count(kind)]
        for side, count in zip((first, second), seen, strict=True):
            expected = len(side) * sum(seen) / total
            out += (count - expected) ** 2 / expected
    return out


def _u_gap(first: list[float], second: list[float]) -> float:
    """|U - n1 n2 / 2|, U counting the first side's wins over the second (a tie half)."""
    u = sum((a > b) + 0.5 * (a == b) for a in first for b in second)
    return abs(u - len(first) * len(second) / 2)


def test_stops_leave_rate_and_fisher_by_hand() -> None:
    human, simulator = ["user_left", "user_left", "max_turns"], ["max_turns", "max_turns", "epm_success"]
    out = stops(human, simulator)
    assert out["leave_rate"] == {"human": pytest.approx(0.6667), "simulator": 0.0}
    # Table [[2, 1], [0, 3]]: P(a) = C(3, a) C(3, 2 - a) / C(6, 2) = 3/15, 9/15, 3/15 for a = 0, 1, 2;
    # two-sided p sums the tables no likelier than the one seen: 3/15 + 3/15.
    assert out["leave_fisher_p"] == pytest.approx(0.4)
    assert out["reasons"]["user_left"] == {"human": 2, "simulator": 0}
    # Six stops: chi-square's asymptotic p (0.22) is no p at these counts; the exact one deals the
    # six stops into two sides of 3 in all C(6, 3) = 20 ways: 8 reach the observed statistic.
    assert out["reasons_chi2_p"] == pytest.approx(_split_p(human, simulator, _chi2_stat)) == pytest.approx(0.4)
    table = [[0, 1, 2], [1, 2, 0]]  # epm_success, max_turns, user_left
    assert _chi2_stat(human, simulator) == pytest.approx(scipy.stats.chi2_contingency(table, correction=False).statistic)
    assert stops(["max_turns"], ["max_turns"])["reasons_chi2_p"] is None


def test_judge_levels_count_each_item() -> None:
    turn = {f"{a} {k}": 0 for a in "CAP" for k in ("progress", "regression")}
    human = [turn | {"A progress": 2}, turn | {"A progress": 2}]
    simulator = [turn | {"A progress": 1}, turn]
    out = judge_levels(human, simulator)
    assert out["A progress"]["human"] == [0, 0, 2] and out["A progress"]["simulator"] == [1, 1, 0]
    # Levels 2, 2 against 1, 0: only that split and its mirror reach the statistic, 2 of C(4, 2) = 6.
    assert out["A progress"]["chi2_p"] == pytest.approx(_split_p([2, 2], [1, 0], _chi2_stat)) == pytest.approx(1 / 3)
    assert out["C progress"] == {"human": [2, 0, 0], "simulator": [2, 0, 0], "chi2_p": None}


def test_large_tables_keep_the_asymptotic_chi2() -> None:
    human, simulator = ["user_left"] * 20 + ["max_turns"] * 20, ["user_left"] * 10 + ["max_turns"] * 30
    expected = scipy.stats.chi2_contingency([[20, 20], [10, 30]]).pvalue  # C(80, 40) splits: not enumerated
    assert stops(human, simulator)["reasons_chi2_p"] == pytest.approx(expected, abs=1e-6)


def test_mannwhitney_p_is_exact_with_ties_at_small_n() -> None:
    human, simulator = [["a b", "a b c d"], ["a"], ["a b c"]], [["a"], ["a b"], ["a b"], ["a"]]
    out = turn_words(human, simulator)
    # Episode means 3, 1, 3 against 1, 2, 2, 1: tied, so scipy's own p is its normal approximation.
    means = ([3.0, 1.0, 3.0], [1.0, 2.0, 2.0, 1.0])
    assert _u_gap(*means) == abs(scipy.stats.mannwhitneyu(*means).statistic - 6)
    assert out["mannwhitney_p"] == pytest.approx(_split_p(*means, _u_gap), abs=1e-6)
    assert out["mannwhitney_p"] != pytest.approx(scipy.stats.mannwhitneyu(*means).pvalue, abs=1e-3)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=5), st.lists(st.integers(0, 3), min_size=1, max_size=6))
def test_small_sample_p_values_are_exact_probabilities(human: list[int], simulator: list[int]) -> None:
    reasons = ["epm_success", "max_turns", "user_left", "collapse"]
    out = stops([reasons[i] for i in human], [reasons[i] for i in simulator])
    if len(set(human + simulator)) < 2:
        assert out["reasons_chi2_p"] is None
    else:
        assert 0 < out["reasons_chi2_p"] <= 1
        assert out["reasons_chi2_p"] == pytest.approx(_split_p(human, simulator, _chi2_stat), abs=1e-6)
    words = turn_words([["a " * (i + 1)] for i in human], [["a " * (i + 1)] for i in simulator])
    assert 0 < words["mannwhitney_p"] <= 1
    expected = _split_p([i + 1.0 for i in human], [i + 1.0 for i in simulator], _u_gap)
    assert words["mannwhitney_p"] == pytest.approx(expected, abs=1e-6)


# --- the discriminator ---------------------------------------------------------------------------


def test_auc_by_hand() -> None:
    assert auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == pytest.approx(0.75)  # 0.35 beats 0.1; 0.8 beats both
    assert auc([1.0, 1.0], [0, 1]) == 0.5
    with pytest.raises(ValueError):
        auc([1.0], [1])


def _episodes(n: int, turns: int, shift: float, seed: int) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
    """n episodes a side of `turns` rows each in 8 dimensions, the simulated side shifted; each
    pair of episodes (one a side) shares a case."""
    rng = np.random.default_rng(seed)
    human = rng.normal(size=(n * turns, 8))
    simulated = rng.normal(size=(n * turns, 8)) + shift
    episode = [f"{i // turns}" for i in range(n * turns)]
    return (np.vstack([human, simulated]), np.array([0] * n * turns + [1] * n * turns),
            [f"h{e}" for e in episode] + [f"s{e}" for e in episode], [f"case{e}" for e in episode] * 2)


def test_identical_sides_give_exactly_one_half() -> None:
    x, y, episodes, groups = _episodes(10, 4, 0.0, seed=1)
    x[y == 1] = x[y == 0]  # every simulated turn is some human turn, in the same case
    out = discriminate(x, y, episodes, groups, n_boot=200)
    # A pair's two copies share a fold and so a score: the two sides' score lists are the same,
    # so the AUC is 0.5 exactly (tolerance: float rounding only).
    assert out["auc"] == pytest.approx(0.5, abs=1e-9) and out["n_folds"] == 5


def test_noise_alone_stays_near_one_half() -> None:
    x, y, episodes, groups = _episodes(30, 5, 0.0, seed=2)
    out = discriminate(x, y, episodes, groups, n_boot=300)
    # 150 turns a side: the AUC's standard error is about 0.05 with turns as units; 0.15 is 3 of them.
    assert abs(out["auc"] - 0.5) < 0.15 and out["lo"] < 0.5 < out["hi"]


def test_separable_sides_give_one() -> None:
    x, y, episodes, groups = _episodes(10, 4, 3.0, seed=3)
    out = discriminate(x, y, episodes, groups, n_boot=200)
    assert out["auc"] > 0.99 and out["lo"] > 0.95


def test_folds_keep_groups_whole_and_ignore_which_label_is_which() -> None:
    groups = ["a", "a", "b", "b", "c", "d", "e", "f"]
    labels = np.array([0, 1, 0, 1, 0, 0, 1, 1])
    folds = assign_folds(groups, labels, 2, seed=0)
    for g in set(groups):
        assert len({f for f, h in zip(folds, groups, strict=True) if h == g}) == 1
    assert {int(f) for f, lab in zip(folds, labels, strict=True) if lab == 0} == {0, 1}
    assert (assign_folds(groups, 1 - labels, 2, seed=0) == folds).all()


def test_too_few_episodes_say_so() -> None:
    out = discriminate(np.eye(2), np.array([0, 1]), ["h", "s"], ["h", "s"], n_boot=10)
    assert out["auc"] is None and "too few episodes" in out["note"]


scores = st.lists(st.floats(-5, 5), min_size=2, max_size=30)


@given(scores, st.data())
@settings(max_examples=60, deadline=None)
def test_auc_is_a_probability_and_mirrors_when_the_labels_swap(values: list[float], data: st.DataObject) -> None:
    both = st.lists(st.integers(0, 1), min_size=len(values), max_size=len(values)).filter(lambda ys: 0 < sum(ys) < len(ys))
    labels = data.draw(both)
    a = auc(values, labels)
    assert 0.0 <= a <= 1.0
    assert auc(values, [1 - v for v in labels]) == pytest.approx(1.0 - a)


@given(st.integers(0, 10_000), st.floats(0.0, 2.0))
@settings(max_examples=15, deadline=None)
def test_swapping_the_sides_leaves_the_cross_validated_auc(seed: int, shift: float) -> None:
    # Relabelled, the classifier's weights change sign, so it separates the sides exactly as well.
    x, y, episodes, groups = _episodes(4, 3, shift, seed)
    out = discriminate(x, y, episodes, groups, n_boot=20, seed=seed)
    swapped = discriminate(x, 1 - y, episodes, groups, n_boot=20, seed=seed)
    assert 0.0 <= out["auc"] <= 1.0 and swapped["auc"] == pytest.approx(out["auc"], abs=1e-3)


# --- the CLI over run directories ----------------------------------------------------------------


def test_identical_runs_look_identical(runs: dict[str, Path], tmp_path: Path) -> None:
    result = _validate("--fidelity", str(runs["same"]), str(runs["sim"]), "-o", str(tmp_path / "v.json"))
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "v.json").read_text())
    assert set(report) == {"fidelity"}
    fid = report["fidelity"]
    assert fid["matched"] | {"cases": None} == {"pairs": 2, "cases": None, "subjects": ["fake-model"], "human_episodes": 4,
                                                "simulator_episodes": 4, "unmatched_human": 0, "unmatched_simulator": 0}
    assert fid["human_users"] == ["human:test"] and fid["simulator_user"] == "fake-model"
    assert fid["discriminator"]["auc"] == 0.5 and fid["discriminator"]["grouped_by"] == "case and subject"
    assert fid["discriminator"]["n_turns"] == {"human": 16, "simulator": 16}  # 4 episodes x turns 2..5
    for block in ("meter", "valence"):
        assert fid[block]["human"] == fid[block]["simulator"] and fid[block]["distance"]["gap"] == 0.0
    assert fid["turn_words"]["ks"] == 0.0 and all(row["chi2_p"] in (None, 1.0) for row in fid["judge_levels"].values())
    assert "discriminator AUC 0.500" in result.output


def test_people_who_write_differently_are_told_apart(runs: dict[str, Path], tmp_path: Path) -> None:
    result = _validate("--fidelity", str(runs["people"]), str(runs["sim"]), "-o", str(tmp_path / "v.json"))
    assert result.exit_code == 0, result.output
    fid = json.loads((tmp_path / "v.json").read_text())["fidelity"]
    assert fid["discriminator"]["auc"] == 1.0  # every "person" turn is the same three words
    assert fid["turn_words"]["human"]["median"] == len(HUMAN_WORDS.split())
    assert fid["discriminator"]["n_turns"] == {"human": 8, "simulator": 16}
    # The person's meter falls 10 a turn from the persona's start (40 for Zoe on demo4-01, 35 for
    # Mei-Lin on demo4-02) and they leave once it is at or below 20, both at turn 3: paths 40, 30, 20
    # and 35, 25, 15 (the meter they left with ends the path). The fake simulator's rises 2 a turn.
    assert fid["stops"]["leave_rate"] == {"human": 1.0, "simulator": 0.0}
    meter = fid["meter"]
    assert [(t["n"], t["mean"]) for t in meter["human"]] == [(4, 37.5), (4, 27.5), (4, 17.5)]
    assert [t["mean"] for t in meter["simulator"]] == [37.5, 39.5, 41.5, 43.5, 45.5]
    # Differences per turn 0, -12, -24 over the 3 turns both sides reach twice.
    assert meter["distance"] | {"gap_lo": 0, "gap_hi": 0, "diff_lo": 0, "diff_hi": 0} == {
        "turns": 3, "gap": 12.0, "diff": -12.0, "gap_lo": 0, "gap_hi": 0, "diff_lo": 0, "diff_hi": 0}
    assert meter["distance"]["diff_hi"] < 0


def test_the_page_shows_fidelity(runs: dict[str, Path], tmp_path: Path) -> None:
    people = Path(shutil.copytree(runs["people"], tmp_path / "people"))
    assert _validate("--fidelity", str(people), str(runs["sim"])).exit_code == 0  # writes people/validity.json
    (tmp_path / "page").mkdir()
    write_page(build_leaderboard([people], n_boot=50), tmp_path / "page")
    html = (tmp_path / "page" / "index.html").read_text()
    section = html[html.index('id="validity"'):]
    assert "Simulator fidelity" in section and "<code>human:test</code>" in section
    assert "Discriminator AUC" in section and "1.000" in section


@pytest.mark.parametrize("case", ["missing", "no match", "not people", "simulator is people"])
def test_bad_input_is_one_line_and_exit_2(runs: dict[str, Path], tmp_path: Path, case: str) -> None:
    human, sim = runs["people"], runs["sim"]
    if case == "missing":
        human, expected = tmp_path / "nowhere", "nowhere: run directory not found"
    elif case == "no match":
        sim = Path(shutil.copytree(sim, tmp_path / "other"))
        lines = (sim / "episodes.jsonl").read_text().splitlines()
        (sim / "episodes.jsonl").write_text("".join(json.dumps(json.loads(x) | {"case_id": "elsewhere"}) + "\n" for x in lines))
        expected = "no episode shares a case and subject with"
    elif case == "not people":
        human, expected = sim, "manifest.json: roles.user.model: 'fake-model': HUMAN_RUN must be a run people played"
    else:
        sim, expected = human, "roles.user.model: 'human:test': SIM_RUN must be a run the simulator played"
    result = _validate("--fidelity", str(human), str(sim), "-o", str(tmp_path / "v.json"))
    assert result.exit_code == 2
    assert expected in result.output and len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output and not (tmp_path / "v.json").exists()
