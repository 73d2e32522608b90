"""Every number docs/results.md states about EMPA's recorded runs is a value of the committed
bundle (leaderboard/external/empa-d59757a/: leaderboard.parquet, pairs.parquet, cases.parquet and
their metadata). Each claim below renders its sentence from the data and finds it in the page;
the table must equal the leaderboard's overall rows; and every number left in the page must lie
inside a checked sentence or be one of the few that are not data (NOT_DATA, with the reason)."""

from __future__ import annotations

import itertools
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from scipy import stats

from emobench.external.bundle import bounds_are_min_max
from emobench.external.pairs import sign_flip_pvalue
from emobench.scoring.stats import cases_needed, expanded_tail

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "results.md"
BUNDLE = ROOT / "leaderboard" / "external" / "empa-d59757a"
NAMES = {
    "claude-4.6-opus": "Claude 4.6 Opus", "gemini-3-pro-preview": "Gemini 3 Pro", "gpt-5.2-pro": "GPT-5.2 Pro",
    "gemini-2.5-pro": "Gemini 2.5 Pro", "qwen3-235b-a22b-2507": "Qwen3 235B", "seed-2.0": "Seed 2.0",
    "kimi-k2-0905": "Kimi K2", "claude-3.5-sonnet": "Claude 3.5 Sonnet", "deepseek-chat-v3-0324": "DeepSeek V3",
    "seed-1.6": "Seed 1.6", "llama-3.3-70b-instruct": "Llama 3.3 70B", "gpt-4o": "GPT-4o",
    "doubao-1.5-character": "Doubao 1.5", "qwen3-32b": "Qwen3 32B", "llama-3.1-8b-instruct": "Llama 3.1 8B",
    "qwen3-8b": "Qwen3 8B",
}
GROUP_SIZES = (3, 6, 4, 3)  # the page's four groups, in rank order
SKEWED_AHEAD = 17  # the page's line between "ahead" and "within either way" on the three skewed pairs
# Numbers in the page that are not figures of the bundle: model names, the citation, licence and
# method section, the tests' settings (alpha, power, CI level) and the build's measured cost.
NOT_DATA = (*NAMES.values(), "CC BY-NC 4.0", "creativecommons.org/licenses/by-nc/4.0/", "each index capped at 100",
            "95% CI", "z_{1−α/2}", "1 / difference²", "arXiv:2603.00552", "Copyright 2026", "Zhang et al. 2026",
            "docs/method.md §5.8", "95% CIs", "alpha 0.05, power 0.8", "(family-wise error 5%)",
            "1.5 times the CPU time", "14.8–15.1 s against 9.8–10.1 s", "AMD EPYC, 2 cores", "at load 8",
            "302 MB peak memory against 267 MB")
# Its numbers are checked by the soak test below (a million sign flips a pair).
SOAK_SENTENCE = re.compile(r"With 1,000,000 patterns \(seed 0\) their permutation p are [\d.]+–[\d.]+, below 0\.05 "
                           r"even after Bonferroni's × \d+ \([\d.]+–[\d.]+\)")
NUMBER = re.compile(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?(?:e-\d+)?(?!\w)")


@cache
def _page() -> str:
    """The page's prose on one line per paragraph (sentences wrap), tables and code left out."""
    text = PAGE.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return " ".join(" ".join(line for line in text.splitlines() if not line.startswith("|")).split())


@cache
def _data() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    board = pd.read_parquet(BUNDLE / "leaderboard.parquet")
    pairs = pd.read_parquet(BUNDLE / "pairs.parquet")
    cases = pd.read_parquet(BUNDLE / "cases.parquet")
    meta = json.loads(pq.read_schema(BUNDLE / "pairs.parquet").metadata[b"emobench.external_bundle"])
    return board, pairs, cases, meta


def _overall() -> pd.DataFrame:
    board = _data()[0]
    return board[board["slice_family"] == "overall"].set_index("subject").sort_values("epmq_empa", ascending=False)


def _pairs(metric: str = "epmq_empa") -> pd.DataFrame:
    pairs = _data()[1]
    return pairs[pairs["metric"] == metric]


@cache
def _pair_rows() -> dict[frozenset[str], pd.Series]:
    return {frozenset((r["subject_a"], r["subject_b"])): r for _, r in _pairs().iterrows()}


def _pair(a: str, b: str) -> pd.Series:
    return _pair_rows()[frozenset((a, b))]


def _groups() -> list[list[str]]:
    ranked = list(_overall().index)
    bounds = np.cumsum((0, *GROUP_SIZES))
    return [ranked[lo:hi] for lo, hi in itertools.pairwise(bounds)]


def _within(group: list[str]) -> list[pd.Series]:
    return [_pair(a, b) for i, a in enumerate(group) for b in group[i + 1:]]


def _sci(x: float, digits: int) -> str:
    """1.4e-14, 4.2e-4, 1e-6: as the page writes them."""
    mantissa, exponent = f"{x:.{digits}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _span(lo: float, hi: float, digits: int = 0) -> str:
    return f"{lo:.{digits}f}–{hi:.{digits}f}"


def _diffs(a: str, b: str) -> np.ndarray:
    piv = _data()[2].pivot(index="case_id", columns="subject", values="epmq_empa")
    return (piv[a] - piv[b]).to_numpy()


def _claims_intro_and_table() -> list[str]:
    board, _, cases, meta = _data()
    overall = _overall()
    boot = meta["bootstrap"]
    sizes = board[board["slice_family"] != "overall"].groupby(["slice_family", "slice"])["n_cases"].first()
    smallest = sizes.idxmin()
    assert meta["n_cases"] == overall["n_cases"].iloc[0] == 30 and meta["episodes_per_case"] == 1
    assert (board["ci_is_min_max"] == board["n_cases"].map(bounds_are_min_max)).all()
    assert (sizes[sizes.index.get_level_values(0) == "category"] == 5).all() and not bounds_are_min_max(5)
    relabelled = cases.loc[cases["difficulty"] != cases["difficulty_empa"], ["case_id", "difficulty", "difficulty_empa"]]
    (moved,) = relabelled.drop_duplicates().itertuples(index=False)
    return [
        f"release {meta['commit'][:7]}",
        f"the smallest difference those {meta['n_cases']} cases can detect",
        f"## What {meta['n_cases']} cases can tell apart Every pair of models is compared on the same {meta['n_cases']} cases",
        f"The full build ({meta['n_subjects']} models × {meta['n_cases']} cases:",
        f"{meta['n_subjects']} models × {meta['n_cases']} cases, one episode per model and case",
        f"to within {_sci((overall['epmq_empa'] - overall['epmq_empa_published']).abs().max(), 1)}",
        f"if any case differs by more than {_sci(meta['published_check']['tolerance'], 0)}",
        f"a case's EPM-Q reaches {cases['epmq_empa'].max():.1f} here",
        f"Claude 4.6 Opus's mean is {overall.loc['claude-4.6-opus', 'epmq_empa']:.2f}",
        f"bootstrap by case, {boot['n']:,} resamples, seed {boot['seed']}, {boot['method']}",
        f"Wilson interval over the {meta['n_cases']} cases",
        f"With {meta['n_cases']} cases a slice holds {sizes.min()} to {sizes.max()} of them",
        f'The {sizes.min()}-case slice (difficulty "{smallest[1]}")',
        f"with {sizes.min()} cases the bootstrap puts 1/{sizes.min() ** sizes.min()} of its mass on each extreme",
        f"expanded interval's tail ({_sci(float(expanded_tail(int(sizes.min()), 0.95)), 1)})",
        f"At 5 cases (each category) the tail, {_sci(float(expanded_tail(5, 0.95)), 1)}, exceeds 5⁻⁵",
        f'differs on one case of {meta["n_cases"]} (emobench "{moved.difficulty.replace("_", " ")}", '
        f'EMPA "{moved.difficulty_empa}")',
        f"({meta['quirks']['lost_judgements']} of them were lost and scored as v = 0",
        f"{2 * len(_pairs())} pairs each with a bootstrap CI and a permutation test at {meta['permutation']['n']:,} "
        f"resamples, {meta['n_subjects']} × {len(board) // meta['n_subjects']} slice rows",
    ]


def _claims_tests() -> list[str]:
    meta = _data()[3]
    ours, emobench = _pairs(), _pairs("epmq")
    n = len(ours)
    perm_only = ours[(ours["p_perm_holm"] < 0.05) & ~ours["separated"]]
    assert sorted(zip(perm_only["subject_a"], perm_only["subject_b"], strict=True)) == [
        ("doubao-1.5-character", "qwen3-32b"), ("gemini-2.5-pro", "deepseek-chat-v3-0324"),
        ("qwen3-235b-a22b-2507", "deepseek-chat-v3-0324")]
    assert set(ours.index[ours["separated"]]) <= set(ours.index[ours["p_perm_holm"] < 0.05])
    skewed = [_diffs(a, b) for a, b in zip(perm_only["subject_a"], perm_only["subject_b"], strict=True)]
    ahead = [d[d > SKEWED_AHEAD] for d in skewed]
    assert all(np.abs(d[d <= SKEWED_AHEAD]).max() <= SKEWED_AHEAD for d in skewed)
    skew = [stats.skew(d) for d in skewed]
    return [
        f"Holm's correction for the {n} comparisons",
        f"**{ours['separated'].sum()} of the {n} pairs are separated** by the paired t-test after Holm's correction "
        f"({(ours['p'] < 0.05).sum()} by the same t-test at p < 0.05 without the correction). Under the emobench "
        f"profile: {emobench['separated'].sum()} of {n} ({(emobench['p'] < 0.05).sum()}).",
        f"Holm's strictest step (0.05/{n} = {_sci(0.05 / n, 1)})",
        f"one model is ahead by {_span(min(map(min, ahead)), max(map(max, ahead)))} points on "
        f"{min(map(len, ahead))} to {max(map(len, ahead))} cases and within {SKEWED_AHEAD} points either way on the rest "
        f"(skewness {_span(min(skew), max(skew), 1)})",
        f"random; {meta['permutation']['n']:,} seeded patterns;",
        f"separates **{(ours['p_perm_holm'] < 0.05).sum()} of {n}** after Holm ({(emobench['p_perm_holm'] < 0.05).sum()} "
        f"under the emobench profile): the t-test's {ours['separated'].sum()} and three more, Gemini 2.5 Pro and "
        "Qwen3 235B over DeepSeek V3 and Doubao 1.5 over Qwen3 32B.",
        f"below 0.05 even after Bonferroni's × {n}",
    ]


def _claims_groups() -> list[str]:
    ours, overall, n_cases = _pairs(), _overall(), _data()[3]["n_cases"]
    groups = _groups()
    mdd_low = ours.loc[ours["mdd"].idxmin()]
    assert overall.loc[[mdd_low["subject_a"], mdd_low["subject_b"]], "success_rate"].eq(0).all()

    def scores(group: list[str]) -> str:
        return _span(overall.loc[group[-1], "epmq_empa"], overall.loc[group[0], "epmq_empa"])

    def names(group: list[str]) -> str:
        return ", ".join(NAMES[s] for s in group)

    # Every pair of models from different groups is separated but one.
    across = [_pair(a, b) for i, g in enumerate(groups) for h in groups[i + 1:] for a in g for b in h]
    (left,) = [r for r in across if not r["separated"]]
    assert left["diff"] == ours.loc[~ours["separated"], "diff"].max() and left["p_perm_holm"] < 0.05
    assert (overall.loc[groups[0], "success_rate"] == 1).all()
    top = [_pair(groups[0][0], s) for s in groups[0][1:]]
    assert max(r["p_holm"] for r in top) <= 1e-4
    smallest = ours.loc[ours.loc[ours["separated"], "diff"].idxmin()]
    second = _within(groups[1])
    steps = [_pair(a, b) for a, b in itertools.pairwise(groups[1])]
    *close, last = steps
    assert not any(r["separated"] for r in second)
    assert sorted(r["subject_b"] for r in second if r["p_perm_holm"] < 0.05) == ["deepseek-chat-v3-0324"] * 2
    third, fourth = _within(groups[2]), _within(groups[3])
    assert not any(r["separated"] for r in third + fourth)
    unsure = _pair("gemini-3-pro-preview", "gpt-5.2-pro")
    return [
        f"**The median minimum detectable difference is {ours['mdd'].median():.1f} EPM-Q points**",
        f"{stats.norm.ppf(0.975) + stats.norm.ppf(0.8):.2f} × the SD of the per-case differences / √{n_cases}",
        f"from {ours['mdd'].min():.1f} (two models that fail the same way on every case) to {ours['mdd'].max():.1f}",
        f"Among all {len(ours)} pairs at once (alpha 0.05/{len(ours)}) the median is {ours['mdd_family'].median():.1f}",
        f"the top three ({names(groups[0])}, {scores(groups[0])}: each succeeds on all {n_cases} cases)",
        f"the next six ({NAMES[groups[1][0]]} down to {NAMES[groups[1][-1]]}, {scores(groups[1])})",
        f"four more ({names(groups[2])}, {scores(groups[2])}) and the last three ({names(groups[3])}, {scores(groups[3])})",
        f"Every pair of models from different groups is separated but one ({NAMES[left['subject_a']]} over "
        f"{NAMES[left['subject_b']]}: {left['diff']:.1f} points, Holm p {left['p_holm']:.3f}",
        f"({top[0]['diff']:.1f} and {top[1]['diff']:.1f} points, Holm p ≤ 0.0001)",
        f"The smallest separated difference is {smallest['diff']:.1f} points ({NAMES[smallest['subject_a']]} over "
        f"{NAMES[smallest['subject_b']]})",
        f"(SD of their per-case differences {smallest['sd']:.1f}, so an MDD of {smallest['mdd']:.1f})",
        f"not resolved at these {n_cases} cases ({unsure['diff']:.1f} points, Holm p {unsure['p_holm']:.2f})",
        f"neighbours differ by {_span(min(r['diff'] for r in close), max(r['diff'] for r in close))} points against "
        f"MDDs of {_span(min(r['mdd'] for r in close), max(r['mdd'] for r in close))}, except the last, "
        f"{NAMES[last['subject_a']]} over {NAMES[last['subject_b']]}: {last['diff']:.1f} points against an MDD of "
        f"{last['mdd']:.1f}",
        f"no pair is separated either ({_span(min(r['diff'] for r in third), max(r['diff'] for r in third))} points "
        f"against MDDs of {_span(min(r['mdd'] for r in third), max(r['mdd'] for r in third))}: these models' per-case "
        f"differences are large and erratic, SD {_span(min(r['sd'] for r in third), max(r['sd'] for r in third))})",
        f"nor inside the last ({_span(min(r['diff'] for r in fourth), max(r['diff'] for r in fourth), 1)} points)",
    ]


def _claims_cases_needed() -> list[str]:
    ours = _pairs()
    n = len(ours)
    open_ = ours[~ours["separated"]]
    needed = open_["cases_needed"]
    close = [_pair(a, b) for a, b in itertools.pairwise(_groups()[1])]
    assert all(r["cases_needed"] >= 1000 for r in close if r["diff"] < 2)
    most = open_.loc[needed.idxmax()]
    assert all(r["diff_hi"] - r["diff_lo"] > 2 * r["diff"] for _, r in open_[open_["diff"] < 2].iterrows())
    alone = [cases_needed(r["diff"], r["sd"], alpha=0.05) for _, r in open_.iterrows()]
    return [
        f"For each of the {len(open_)} pairs the t-test leaves unresolved",
        f"with α = 0.05/{n} (the strictest Holm step), power 0.8",
        f"a median of {needed.median():.0f} cases; {(needed <= 100).sum()} pairs would need 100 or fewer "
        f"(e.g. Gemini 3 Pro vs GPT-5.2 Pro: {_pair('gemini-3-pro-preview', 'gpt-5.2-pro')['cases_needed']}; "
        f"Doubao 1.5 vs Qwen3 32B: {_pair('doubao-1.5-character', 'qwen3-32b')['cases_needed']})",
        f"({NAMES[most['subject_a']]} vs {NAMES[most['subject_b']]}: {most['cases_needed']:,})",
        f"Tested alone (α = 0.05) the median would be {np.median(alone):.0f} cases",
        f"new cases drawn like these {_data()[3]['n_cases']} (normal approximation)",
    ]


CLAIMS = {"intro and table": _claims_intro_and_table, "tests": _claims_tests, "groups": _claims_groups,
          "cases needed": _claims_cases_needed}


@cache
def _all_claims() -> tuple[str, ...]:
    return tuple(c for make in CLAIMS.values() for c in make())


@pytest.mark.parametrize("part", CLAIMS)
def test_each_sentence_says_what_the_bundle_holds(part: str) -> None:
    missing = [claim for claim in CLAIMS[part]() if claim not in _page()]
    assert not missing, "sentences the data renders that docs/results.md does not say:\n" + "\n".join(missing)


def test_the_table_is_the_leaderboard() -> None:
    rows = [line for line in PAGE.read_text(encoding="utf-8").splitlines() if line.startswith("| ")]
    header, *body = [[cell.strip() for cell in row.strip().strip("|").split("|")] for row in rows]
    assert header[0] == "model (EMPA's folder name)"
    expected = [
        [s, f"{r.epmq_empa:.2f}", _span(r.epmq_empa_lo, r.epmq_empa_hi, 1), f"{r.epmq:.2f}", _span(r.epmq_lo, r.epmq_hi, 1),
         f"{100 * r.success_rate:.1f} ({_span(100 * r.success_rate_lo, 100 * r.success_rate_hi, 1)})"]
        for s, r in _overall().iterrows()
    ]
    assert body == expected


def test_every_number_in_the_page_is_checked() -> None:
    page = _page()
    covered = np.zeros(len(page), dtype=bool)
    for claim in (*_all_claims(), *NOT_DATA):
        for hit in re.finditer(re.escape(claim), page):
            covered[hit.start():hit.end()] = True
    for hit in SOAK_SENTENCE.finditer(page):
        covered[hit.start():hit.end()] = True
    unchecked = [page[max(0, m.start() - 30):m.end() + 10] for m in NUMBER.finditer(page) if not covered[m.start()]]
    assert not unchecked, f"numbers in docs/results.md that no check renders: {unchecked}"


@pytest.mark.soak
def test_the_three_skewed_pairs_hold_at_a_million_sign_flips() -> None:
    """The page's 1,000,000-pattern p of the three pairs only the permutation test separates
    (seed 0): seconds a pair."""
    ours = _pairs()
    perm_only = ours[(ours["p_perm_holm"] < 0.05) & ~ours["separated"]]
    p = [sign_flip_pvalue(_diffs(a, b), n_resamples=1_000_000, seed=0)
         for a, b in zip(perm_only["subject_a"], perm_only["subject_b"], strict=True)]
    claim = (f"With 1,000,000 patterns (seed 0) their permutation p are {_span(min(p), max(p), 5)}, below 0.05 even "
             f"after Bonferroni's × {len(ours)} ({_span(len(ours) * min(p), len(ours) * max(p), 3)})")
    assert claim in _page()
