"""What a YAML alias bomb costs: PyYAML's safe loader expanding it, against the library loader
refusing it (anchors read from the event stream) and the config loader capping it (aliases
counted on the composed node graph, before anything is built).

A level-L bomb is L lines, each a list of nine aliases of the line above: under 512 bytes at
nine levels, 9**L strings once expanded. The unguarded loader is run up to --max-level (each
level costs about nine times the one before); the guarded ones at every level.

    python bench/bench_alias_bomb.py
    python bench/bench_alias_bomb.py --max-level 6

Measured on a 2-core AMD EPYC (AVX2, no AVX-512), shared with other work, one run:
unguarded yaml.load and a walk of the result 0.098 s at 5 levels, 0.46 s at 6, 3.6 s at 7
(8x a level, so minutes at 9); read_yaml refuses every level in 0.1 to 0.6 ms (9,146x faster
than the unguarded loader at 7 levels); load_capped refuses from 5 levels (59,049 values over
the 20,000 cap) in 1.4 to 10 ms.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from emobench.errors import InputError
from emobench.yaml_io import load_capped, read_yaml


def bomb(levels: int) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def _expand(value: object) -> int:
    """Walk the loaded document as a consumer would (the aliases share lists until walked)."""
    if isinstance(value, dict):
        return sum(_expand(v) for v in value.values())
    if isinstance(value, list):
        return sum(_expand(v) for v in value)
    return 1


def timed(call: Callable[[], object], repeat: int) -> tuple[float, str]:
    times, outcome = [], ""
    for _ in range(repeat):
        started = time.perf_counter()
        try:
            call()
            outcome = "loaded"
        except InputError:
            outcome = "refused"
        times.append(time.perf_counter() - started)
    return statistics.median(times), outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-level", type=int, default=7, help="largest bomb for the unguarded loader")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"CPU: {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as folder:
        for level in range(5, 10):
            text = bomb(level)
            path = Path(folder) / f"bomb{level}.yaml"
            path.write_text(text)
            row = [f"{level} levels ({len(text.encode())} bytes)"]
            plain = None
            if level <= args.max_level:
                plain, _ = timed(lambda t=text: _expand(yaml.load(t, Loader=yaml.SafeLoader)), args.repeat)
                row.append(f"yaml.load + walk {plain:.4f} s")
            library, what = timed(lambda p=path: read_yaml(p), args.repeat)
            config, how = timed(lambda t=text: load_capped(t, "bomb"), args.repeat)
            row.append(f"read_yaml {library * 1000:.2f} ms ({what})")
            row.append(f"load_capped {config * 1000:.2f} ms ({how})")
            if plain is not None:
                row.append(f"ratio unguarded/read_yaml {plain / library:,.0f}x")
            print("; ".join(row))


if __name__ == "__main__":
    main()
