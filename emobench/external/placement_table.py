"""The placement (emobench.external.placement) as a rich table: the references' offsets, their
difference where there are two, then each model."""

from __future__ import annotations

from typing import Any

from rich.table import Table


def _ci(pair: list[float]) -> str:
    return f"[{pair[0]:.1f}, {pair[1]:.1f}]"


def placement_table(result: dict[str, Any]) -> Table:
    how = {"line": "the line through both references", "offset": "the references' mean offset"}[result["method"]]
    if len(result["references"]) == 1:
        how = "the reference's offset"
    table = Table(title=f"EMPA leaderboard placement: {result['metric']}, {result['n_cases']} cases of {result['split']}"
                        + ("" if result["comparable"] else " (EXPLORATORY, not comparable)"),
                  caption=f"{result['ci']:.0%} intervals, t with k-1 degrees of freedom; placed by {how}; rank among the "
                          "published models, the range counting their run-to-run spread; conditional on EMPA's cases")
    for column in ("model", "k", "ours", "published", "placed", "interval", "rank"):
        table.add_column(column, overflow="fold")
    n = len(result["published"])
    for ref in result["references"]:
        table.add_row(f"{ref['subject']} (reference: {ref['published_name']})", str(ref["k"]), f"{ref['mean']:.1f}",
                      f"{ref['published']:.1f}", f"offset {ref['offset']:+.1f}", _ci(ref["offset_ci"]), "")
    test = result.get("offset_test")
    if test:
        table.add_row(f"offset difference ({test['strong']} - {test['weak']})", "", "", "", f"{test['difference']:+.1f}",
                      _ci(test["difference_ci"]), "")
    for row in result["placed"]:
        best, worst = row["rank_range"]
        table.add_row(row["subject"], str(row["k"]), f"{row['mean']:.1f}", "", f"{row['placed']:.1f}",
                      _ci(row["placed_ci"]), f"{row['rank']} of {n + 1} ({best}-{worst})")
    return table
