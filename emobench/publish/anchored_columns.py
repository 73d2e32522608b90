"""The leaderboard's anchored columns (`leaderboard build --ratings FILE`, docs/anchor.md).

Each subject's overall row gains, per holistic dimension and `overall`, the anchored estimate of what
people would say of all its episodes and its interval (`anchored_<dim>`, `_lo`, `_hi`), and the number
of human-rated episodes it rests on (`anchored_n`). They stand beside EPM-Q and the panel's own
holistic means, never in them; other slices' rows hold null. The schema metadata records the ratings
file's hash, the confidence level and the method (emobench.anchored).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from emobench.publish.runs import Run
from emobench.scoring.anchoring import DIMENSIONS, anchor, panel_scores, read_ratings

ALPHA = 0.05


def add_anchored(table: pa.Table, runs: Sequence[Run], ratings_path: Path) -> pa.Table:
    scores = panel_scores([run.path for run in runs])
    results = {(r.subject, r.dimension): r for r in anchor(scores, read_ratings(ratings_path, set(scores.key)), ALPHA,
                                                         ratings_path)}
    rows = table.select(["slice_family", "subject"]).to_pylist()
    overall = [r["slice_family"] == "overall" for r in rows]
    for dim in DIMENSIONS:
        found = [results.get((r["subject"], dim)) if top else None for r, top in zip(rows, overall, strict=True)]
        for suffix, part in (("", "mean"), ("_lo", "low"), ("_hi", "high")):
            values = [getattr(f.anchored, part) if f else None for f in found]
            table = table.append_column(pa.field(f"anchored_{dim}{suffix}", pa.float64()), pa.array(values, pa.float64()))
    rated = [max((results[r["subject"], d].n_rated for d in DIMENSIONS if (r["subject"], d) in results), default=None)
             if top else None for r, top in zip(rows, overall, strict=True)]
    table = table.append_column(pa.field("anchored_n", pa.int64()), pa.array(rated, pa.int64()))
    note = {"ratings_sha256": hashlib.sha256(ratings_path.read_bytes()).hexdigest(), "ci": 1 - ALPHA,
            "method": "PPI++ mean, weight of least variance, clustered by case",
            "dimensions": list(DIMENSIONS)}
    meta = dict(table.schema.metadata or {})
    meta[b"emobench.anchored"] = json.dumps(note, sort_keys=True).encode()
    return table.replace_schema_metadata(meta)
