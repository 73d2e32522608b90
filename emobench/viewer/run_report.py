"""`emobench report RUN`: one self-contained page per run (inline CSS, JS and SVG; no network).

The episode table is rendered here; every transcript travels as compact JSON in the page and is
drawn by the browser only when opened, with its meter and EPM plots as small JS-drawn SVGs, so a
run of a thousand episodes stays one quick page. The run-level plot is matplotlib, as on the
leaderboard. Every transcript string reaches the DOM as a text node, never as markup.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from markupsafe import Markup

from emobench.publish.columns import atomic_write, page_environment, short_version
from emobench.publish.plots import subject_colors
from emobench.registry.card_files import split_language
from emobench.run.accounting import summary_line
from emobench.run.adaptive import stop_line
from emobench.viewer.episodes import EpisodeRow, EpisodeView, RunView, flag_summary
from emobench.viewer.run_plots import summary_plot

_env = page_environment("emobench.viewer")
_env.filters["fmt"] = lambda x, digits=1: "–" if x is None else f"{float(x):.{digits}f}"
_env.filters["short"] = short_version
_env.filters["flags"] = flag_summary
_env.filters["compact_json"] = lambda v: json.dumps(v, sort_keys=True, separators=(", ", ": "))
# What a published role shows: endpoints are left out, they are often private hosts.
_ROLE_FIELDS = ("label", "model", "sampling")


def _r(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(float(x), digits)


def episode_json(ep: EpisodeView) -> dict[str, Any]:
    """One episode in the page's compact form; the template's script reads these short keys."""
    r = ep.row
    return {
        "k": r.key, "c": r.case_id, "s": r.subject, "seed": r.seed, "stop": r.stop_reason, "status": r.status,
        "q": _r(r.epmq, 2), "ok": r.success, "m": _r(r.final_meter, 1), "sc": ep.scenario_id, "pe": ep.persona_id,
        "p0": list(ep.p0), "st": ep.success_turn, "lu": ep.last_user,
        "t": [
            [t.user, t.inner, t.meter_delta, t.reply, t.director, _r(t.meter, 1), list(t.progress), list(t.regression),
             [[j.judge, j.valid, j.progress, j.regression, j.evidence, j.error] for j in t.judges],
             _r(t.delta_e), _r(t.energy), None if t.p is None else [_r(x) for x in t.p]]
            for t in ep.turns
        ],
        "h": [[v.judge, v.valid, None if v.scores is None else
               {d: [s.score, s.evidence, s.reason] for d, s in v.scores.items()}, v.error] for v in ep.holistic],
        "pr": [[p.item, p.answer, p.truth, p.correct] for p in ep.probe], "prr": ep.probe_rationale,
        "a": [[f.kind, f.turn, f.detail] for f in ep.audit],
    }


def script_json(data: Any) -> Markup:
    """JSON safe inside <script>: no "</script>", "<!--" or "&" can end or bend the element."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _subject_summary(rows: list[EpisodeRow]) -> list[dict[str, Any]]:
    by: dict[str, list[EpisodeRow]] = defaultdict(list)
    for r in rows:
        by[r.subject].append(r)

    def mean(values: list[float | None]) -> float | None:
        kept = [v for v in values if v is not None]
        return float(np.mean(kept)) if kept else None

    out = [{
        "subject": s, "episodes": len(rs), "epmq": mean([r.epmq for r in rs]),
        "success": mean([None if r.success is None else 100.0 * r.success for r in rs]),
        "meter": mean([r.final_meter for r in rs]), "turns": mean([float(r.n_turns) for r in rs]),
        "flagged": sum(bool(r.audit) for r in rs),
    } for s, rs in by.items()]
    return sorted(out, key=lambda x: (x["epmq"] is None, -(x["epmq"] or 0.0), x["subject"]))


def _roles(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for role, spec in sorted((manifest.get("roles") or {}).items()):
        for item in spec if isinstance(spec, list) else [spec]:
            if isinstance(item, dict):
                rows.append({"role": role, **{k: item.get(k) for k in _ROLE_FIELDS}})
            else:
                rows.append({"role": role, "label": str(item), "model": None, "sampling": None})
    return rows


def render_run_report(run: RunView) -> str:
    rows = sorted(run.rows, key=lambda r: (r.case_id, r.seed, r.subject))
    episodes = [episode_json(run.episode(r.key)) for r in rows]
    colors = subject_colors(run.subjects)
    report = run.report or {}
    manifest = run.manifest
    language = split_language(str(manifest.get("split") or ""))  # a split is one language: test-zh is Chinese
    return _env.get_template("run_report.html.j2").render(
        run=run,
        rows=rows,
        summary=_subject_summary(rows),
        colors=colors,
        stops=sorted({r.stop_reason for r in rows}),
        plot=Markup(summary_plot(episodes, colors)) if episodes else None,
        data=script_json({"episodes": episodes, "colors": colors, "lang": language}),
        language=language,
        reliability=report.get("reliability") or {},
        invalid=report.get("invalid_judgements") or {},
        rejected=(report.get("invalid_outputs") or {}).get("rejected_calls") or {},
        audit=report.get("audit") or {},
        faults=report.get("faults") or {},
        stop_counts=report.get("stop_reasons") or {},
        provenance={
            "run": run.run_id, "panel": run.panel or "the run's own", "split": manifest.get("split"), "language": language,
            "created": manifest.get("created_at"), "config hash": manifest.get("config_hash"),
            "registry": manifest.get("registry_version"), "emobench": manifest.get("emobench_version"),
            "git": manifest.get("git_sha"), "scoring profile": (manifest.get("config") or {}).get("scoring_profile", "emobench"),
            **({"adaptive": stop_line(manifest["adaptive"])} if manifest.get("adaptive", {}).get("mode") == "run" else {}),
            **({"model calls": summary_line(report)} if report.get("accounting") else {}),
        },
        roles=_roles(manifest),
    )


def write_run_report(run: RunView, target: Path) -> None:
    """Write the run's page to target, atomically."""
    page = render_run_report(run)
    atomic_write(Path(target), lambda p: p.write_text(page, encoding="utf-8"))
