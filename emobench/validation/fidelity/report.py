"""The fidelity block of validity.json, printed: one line per comparison (docs/validity.md)."""

from __future__ import annotations

from typing import Any

from rich.console import Console


def _fmt(x: Any, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _distance(name: str, block: dict[str, Any], digits: int) -> str:
    d = block["distance"]
    if not d["turns"]:
        return f"{name}: no turn reached by two episodes on each side"
    return (f"{name} paths over {d['turns']} turn(s): mean |gap| {_fmt(d['gap'], digits)} "
            f"[{_fmt(d['gap_lo'], digits)}, {_fmt(d['gap_hi'], digits)}], human − simulator "
            f"{_fmt(d['diff'], digits)} [{_fmt(d['diff_lo'], digits)}, {_fmt(d['diff_hi'], digits)}]")


def fidelity_lines(report: dict[str, Any]) -> list[str]:
    m = report["matched"]
    lines = [f"fidelity: {m['human_episodes']} human and {m['simulator_episodes']} simulator episode(s) on "
             f"{m['pairs']} matched case–subject pair(s) ({m['unmatched_human']} human, "
             f"{m['unmatched_simulator']} simulator episode(s) unmatched)"]
    disc = report["discriminator"]
    n = disc["n_turns"]
    if disc["auc"] is None:
        lines.append(f"  discriminator: {disc.get('note', 'not run')}")
    else:
        lines.append(f"  discriminator AUC {_fmt(disc['auc'])} [{_fmt(disc['lo'])}, {_fmt(disc['hi'])}] "
                     f"(0.5 = indistinguishable; {n['human']} human, {n['simulator']} simulated turns, "
                     f"{disc['n_folds']} folds by {disc['grouped_by']})")
    lines.append("  " + _distance("meter", report["meter"], 1))
    lines.append("  " + _distance("valence", report["valence"], 3))
    w = report["turn_words"]
    lines.append(f"  words per turn: human median {_fmt(w['human']['median'], 1)}, simulator median "
                 f"{_fmt(w['simulator']['median'], 1)}; KS {_fmt(w['ks'])} (p = {_fmt(w['ks_p'], 4)}), "
                 f"Mann–Whitney on episode means p = {_fmt(w['mannwhitney_p'], 4)}")
    s = report["stops"]
    lines.append(f"  leave rate: human {_fmt(s['leave_rate']['human'], 2)}, simulator "
                 f"{_fmt(s['leave_rate']['simulator'], 2)} (Fisher p = {_fmt(s['leave_fisher_p'], 4)}); "
                 f"stop reasons χ² p = {_fmt(s['reasons_chi2_p'], 4)}")
    differ = [item for item, row in report["judge_levels"].items() if row["chi2_p"] is not None and row["chi2_p"] < 0.05]
    lines.append(f"  judge levels differ (χ² p < 0.05) on: {', '.join(differ) if differ else 'no MDEP item'}")
    return lines


def print_fidelity(report: dict[str, Any], console: Console) -> None:
    for line in fidelity_lines(report):
        console.print(line, soft_wrap=True, markup=False)
