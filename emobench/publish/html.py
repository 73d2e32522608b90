"""Render leaderboard/index.html: one self-contained page (inline SVG, CSS and JS, no network).

Everything on the page comes from the leaderboard table and its schema metadata, so the page
can be re-rendered from a published leaderboard.parquet alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from markupsafe import Markup

from emobench.publish import plots
from emobench.publish.columns import (
    DISPLAY_COLUMNS,
    EXTERNAL_BUNDLE_KEY,
    EXTERNAL_DIR,
    FAMILIES,
    FAMILY_TITLES,
    PROFILES_NOTE,
    atomic_write,
    page_environment,
    short_version,
)
from emobench.publish.provenance import read_metadata
from emobench.scoring.anchoring import DIMENSIONS as ANCHORED_DIMENSIONS

# Above this share of episodes ended by an invalid simulated user, the page warns.
SIMULATOR_INVALID_LIMIT = 0.1

_env = page_environment()


def _fmt(x: Any, digits: int = 2, scale: float = 1.0) -> str:
    return "–" if x is None else f"{float(x) * scale:.{digits}f}"


_env.filters["fmt"] = _fmt
_env.filters["short"] = short_version  # headings; the provenance block keeps them whole
_env.filters["compact_json"] = lambda v: json.dumps(v, sort_keys=True, separators=(", ", ": "))


def render_html(
    table: pa.Table, report_links: dict[str, str] | None = None, external: list[dict[str, Any]] | None = None
) -> str:
    meta = read_metadata(table.schema)
    rows = table.to_pylist()
    subjects = sorted({r["subject"] for r in rows})
    overall = [r for r in rows if r["slice_family"] == "overall"]
    colors = plots.subject_colors(
        [r["subject"] for r in overall] + [s for s in subjects if s not in
                                            {r["subject"] for r in overall}]
    )
    families: list[dict[str, Any]] = [
        {
            "name": fam,
            "title": FAMILY_TITLES[fam],
            "rows": [r for r in rows if r["slice_family"] == fam],
            "columns": [c for c in DISPLAY_COLUMNS if fam == "overall" or c[0] != "bt_rating"],
        }
        for fam in FAMILIES
        # one language is no slice: the family shows once a board pools languages
        if fam != "language" or len({r["slice"] for r in rows if r["slice_family"] == fam}) > 1
    ]
    radars = [
        Markup(plots.radar(f["rows"], f["name"], colors))
        for f in families
        if f["name"] != "overall" and f["rows"]
    ]
    examples = meta.get("examples", {})
    role_rows = {run_id: _role_rows(roles) for run_id, roles in meta.get("roles", {}).items()}
    return _env.get_template("index.html.j2").render(
        meta=meta,
        families=families,
        n_subjects=len(subjects),
        ci_plot=Markup(plots.ci_bars(overall, colors)) if overall else None,
        radars=radars,
        trajectory_plot=Markup(plots.trajectories(examples, colors)) if examples else None,
        reliability=meta.get("reliability", {}),
        fidelity=meta.get("fidelity", {}),
        role_rows=role_rows,
        colors=colors,
        sim_invalid_limit=SIMULATOR_INVALID_LIMIT,
        sim_invalid_subjects=[r["subject"] for r in overall if r["simulator_invalid_rate"] > SIMULATOR_INVALID_LIMIT],
        report_links=report_links or {},
        profiles_note=PROFILES_NOTE,
        external_bundles=external or [],
        anchored=[r for r in overall if r.get("anchored_n") is not None],
        anchored_dims=ANCHORED_DIMENSIONS,
    )


def _role_rows(roles: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per bound role; plain values (director "rule", the panel's name) as labels."""
    rows = []
    for role, spec in sorted(roles.items()):
        for item in spec if isinstance(spec, list) else [spec]:
            if isinstance(item, dict):
                rows.append({"role": role, "label": item.get("label", ""),
                             "model": item.get("model", ""), "sampling": item.get("sampling")})
            else:
                rows.append({"role": role, "label": str(item), "model": "", "sampling": None})
    return rows


def report_links(run_dirs: Sequence[Path], out_dir: Path) -> dict[str, str]:
    """run_id -> the relative link from out_dir to the run's report.html, where one was written."""
    links = {}
    for run_dir in run_dirs:
        page = Path(run_dir) / "report.html"
        if page.exists():
            run_id = json.loads((Path(run_dir) / "manifest.json").read_text()).get("run_id", Path(run_dir).name)
            links[str(run_id)] = Path(os.path.relpath(page.resolve(), Path(out_dir).resolve())).as_posix()
    return links


def external_bundles(out_dir: Path) -> list[dict[str, Any]]:
    """The external bundles published beside the page (out_dir/external/NAME/), each with its
    link and its summary, read from its leaderboard.parquet's schema metadata."""
    found = []
    for file in sorted((Path(out_dir) / EXTERNAL_DIR).glob("*/leaderboard.parquet")):
        raw = (pq.read_schema(file).metadata or {}).get(EXTERNAL_BUNDLE_KEY)
        if raw is None:
            continue
        found.append({**json.loads(raw), "href": f"{EXTERNAL_DIR}/{file.parent.name}/index.html"})
    return found


def write_page(table: pa.Table, out_dir: Path, run_dirs: Sequence[Path] = ()) -> None:
    """Write index.html for a leaderboard table into out_dir, atomically; it links each source
    run's report.html (`emobench report`) found in run_dirs and each external bundle beside it."""
    page = render_html(table, report_links(run_dirs, out_dir), external_bundles(out_dir))
    atomic_write(Path(out_dir) / "index.html", lambda p: p.write_text(page, encoding="utf-8"))
