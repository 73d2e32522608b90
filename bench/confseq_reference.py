"""Write tests/data/confseq_reference.json: confseq's own betting intervals, the known values
tests/test_confseq.py checks emobench.scoring.confseq against.

confseq (Waudby-Smith, Howard, Ramdas) ships only a source build whose C++ part needs Boost, and
its 0.0.11 release predates numpy 2; its betting module is pure Python, so this script imports
that module straight from the unpacked sdist, with the two plotting/parallel imports it does not
use stubbed and numpy's removed `float_` alias restored:

    pip download --no-deps --no-binary :all: confseq==0.0.11 -d /tmp/cs && tar xzf /tmp/cs/confseq-0.0.11.tar.gz -C /tmp/cs
    python bench/confseq_reference.py /tmp/cs/confseq-0.0.11/src > tests/data/confseq_reference.json
"""

from __future__ import annotations

import json
import sys
import types

import numpy as np

# (seed, population N, observations n, Beta shape): a skewed, a U-shaped and a flat population.
CASES = ((1, 30, 30, (2.0, 5.0)), (2, 50, 20, (0.4, 0.4)), (3, 200, 60, (1.0, 1.0)))
BREAKS = 2048  # emobench's grid (emobench.scoring.confseq._GRID), so both round to the same candidates


def main(src: str) -> None:
    sys.path.insert(0, src)
    for name in ("matplotlib", "matplotlib.pyplot", "multiprocess"):
        sys.modules.setdefault(name, types.ModuleType(name))
    np.float_ = np.float64  # type: ignore[attr-defined]
    from confseq.betting import betting_cs

    out = []
    for seed, population, n, (a, b) in CASES:
        rng = np.random.default_rng(seed)
        x = rng.permutation(rng.beta(a, b, population))[:n]
        lower, upper = betting_cs(x, N=population, alpha=0.05, breaks=BREAKS, running_intersection=True)
        out.append({"population": population, "alpha": 0.05, "values": x.tolist(),
                    "lower": lower.tolist(), "upper": upper.tolist()})
    doc = {"source": "confseq 0.0.11 confseq.betting.betting_cs(x, N=population, alpha=0.05, "
                     f"breaks={BREAKS}, running_intersection=True), by bench/confseq_reference.py",
           "cases": out}
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
