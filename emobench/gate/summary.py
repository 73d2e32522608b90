"""The regression gate's markdown report, short enough for a CI job summary."""

from __future__ import annotations

from emobench.gate.compare import ALPHA, POWER, GateReport, GateResult


def public_label(label: str) -> str:
    """A subject label without the host of an `openai:MODEL@URL` binding: CI endpoints are secrets."""
    kind, _, rest = label.partition(":")
    return f"{kind}:{rest.rpartition('@')[0]}" if kind == "openai" and "@" in rest else label


def _verdict(r: GateResult) -> str:
    d = r.diff
    if r.regression:
        return f"**FAIL**: significant regression of {-d.mean:.3g}, larger than the tolerance {r.tolerance:g}"
    if d.hi < 0:
        return f"PASS: significant regression of {-d.mean:.3g}, within the tolerance {r.tolerance:g}"
    if d.lo > 0:
        return "PASS: significant improvement"
    return "PASS: no significant difference"


def _needed(r: GateResult) -> str:
    if r.detect is None or r.needed_cases is None:
        return "—"
    more = max(0, r.needed_cases - r.diff.n)
    return f"{r.needed_cases} to detect {r.detect:g} ({more} more)"


def summary_markdown(report: GateReport) -> str:
    results = report.results
    failed = [r for r in results if r.regression]
    first = results[0]
    verdict = "FAIL" if failed else "PASS"
    checks = f"{len(failed)} of {len(results)} check(s) regressed" if failed else (
        f"{len(results)} check(s)")
    metrics = ", ".join(f"`{m}`" for m in dict.fromkeys(r.metric for r in results))
    lines = [
        f"## emobench gate: **{verdict}** ({checks}; {metrics})",
        "",
        f"- Baseline: `{public_label(first.baseline.subject)}` from `{first.baseline.source}`.",
        f"- Candidate: `{public_label(first.candidate.subject)}` from `{first.candidate.source}`.",
        "",
        "| slice | metric | baseline | candidate | difference [95% CI] | MDD | paired cases "
        "| cases needed | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        d = r.diff
        lines.append(
            f"| {r.slice} | `{r.metric}` | {r.baseline.mean:.3f} | {r.candidate.mean:.3f} "
            f"| {d.mean:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}] | {d.mdd:.3g} | {d.n} | {_needed(r)} "
            f"| {_verdict(r)} |"
        )
    lines += [
        "",
        f"- Difference is candidate - baseline, the mean over paired cases of the per-case mean "
        f"over seeds; CI: bootstrap by case, {report.n_boot} resamples, seed {report.seed}.",
        f"- MDD: the minimum detectable difference at alpha {ALPHA} and power {POWER} for the "
        "paired cases given. Cases needed: for the `--detect` difference, else the tolerance.",
        f"- Episodes ({first.slice}, `{first.metric}`): baseline {first.baseline.n_episodes}, "
        f"candidate {first.candidate.n_episodes}, about {first.seeds_per_case:.3g} seeds per case.",
    ]
    if all(r.detect is None for r in results):
        lines.append("- Pass `--tolerance` or `--detect` to size the study for a difference.")
    for r in results:
        if r.tolerance > 0 and r.diff.mdd > r.tolerance:
            lines.append(
                f"- Underpowered on {r.slice} `{r.metric}`: the MDD {r.diff.mdd:.3g} exceeds the "
                f"tolerance {r.tolerance:g}, so a regression of that size may go unnoticed."
            )
    lines += [f"- Note: {note}." for note in report.notes]
    return "\n".join(lines) + "\n"
