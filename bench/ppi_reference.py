"""Write tests/data/ppi_reference.json: ppi_py's `ppi_mean_ci` and `ppi_mean_pointestimate` on seeded
fixtures, so that tests hold emobench.scoring.ppi to the reference implementation without installing
it (ppi-python pulls numba, statsmodels, scikit-learn and gdown: 650 MB, and its numba is not the one
vLLM's CPU build pins). Run with ppi_py importable after the project's own packages:

    PPI_SITE=/path/to/ppi-site python bench/ppi_reference.py
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.append(os.environ.get("PPI_SITE", ""))  # after the venv: its numpy stays the project's
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "ppi_reference.json"


def fixture(rng: np.random.Generator, n: int, big_n: int, kind: str) -> dict[str, list[float]]:
    truth = rng.integers(1, 11, n + big_n).astype(float)
    if kind == "good":
        pred = truth + rng.normal(0.5, 1.0, n + big_n)
    elif kind == "biased":
        pred = 0.5 * truth + 3 + rng.normal(0, 2.0, n + big_n)
    elif kind == "adversarial":
        pred = 11 - truth + rng.normal(0, 0.5, n + big_n)
    else:  # unrelated
        pred = rng.uniform(1, 10, n + big_n)
    pred = np.round(pred, 4)  # stored as written: the test feeds the same numbers
    return {"y": truth[:n].tolist(), "f_labelled": pred[:n].tolist(), "f_unlabelled": pred[n:].tolist()}


def main() -> None:
    rng = np.random.default_rng(20261206)
    cases = []
    for kind in ("good", "biased", "adversarial", "unrelated"):
        for n, big_n in ((10, 50), (25, 300), (60, 200), (200, 37)):
            data = fixture(rng, n, big_n, kind)
            y, fl, fu = (np.array(data[k]) for k in ("y", "f_labelled", "f_unlabelled"))
            figures = []
            for alpha in (0.05, 0.1):
                for lam in (None, 0.0, 1.0):
                    low, high = ppi_mean_ci(y, fl, fu, alpha=alpha, lam=lam)
                    point = ppi_mean_pointestimate(y, fl, fu, lam=lam)
                    figures.append({"alpha": alpha, "lam": lam, "low": float(np.ravel(low)[0]),
                                    "high": float(np.ravel(high)[0]), "point": float(np.ravel(point)[0])})
            cases.append({**data, "kind": kind, "figures": figures})
    OUT.write_text(json.dumps({"source": "ppi_py 0.2.3, ppi_mean_ci and ppi_mean_pointestimate", "cases": cases}) + "\n")
    print(f"{len(cases)} cases written to {OUT}")


if __name__ == "__main__":
    main()
