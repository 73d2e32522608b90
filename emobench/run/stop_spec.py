"""`--stop-when SPEC`: when an adaptive run (docs/adaptive.md) has played enough.

Parsed before anything is loaded, so a bad SPEC is one line naming the flag (exit 2). Each
rule is a typed record; a run stops after the first wave at which any given rule holds.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from emobench.errors import InputError

FLAG = "--stop-when"
FORMS = "half-width<=H, pairs-resolved, pair=A,B, calls<=N or cost<=USD"


def _number(value: float) -> str:
    """Short where that loses nothing, so the manifest's rule reads back as the same rule."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


@dataclass(frozen=True)
class HalfWidth:
    """Every subject's mean EPM-Q is known to within H points (the sequence's half-width)."""

    limit: float

    def __str__(self) -> str:
        return f"half-width<={_number(self.limit)}"


@dataclass(frozen=True)
class PairsResolved:
    """Every pair of subjects is ordered: its paired difference's sequence excludes 0."""

    def __str__(self) -> str:
        return "pairs-resolved"


@dataclass(frozen=True)
class PairResolved:
    """One pair of subjects (labels as the run names them) is ordered."""

    a: str
    b: str

    def __str__(self) -> str:
        return f"pair={self.a},{self.b}"


@dataclass(frozen=True)
class CallBudget:
    """At most N live model calls: the run stops before a wave expected to pass N."""

    limit: int

    def __str__(self) -> str:
        return f"calls<={self.limit}"


@dataclass(frozen=True)
class CostBudget:
    """At most USD dollars at the config's prices: stops before a wave expected to pass it."""

    limit: float

    def __str__(self) -> str:
        return f"cost<={_number(self.limit)}"


StopRule = HalfWidth | PairsResolved | PairResolved | CallBudget | CostBudget

_NUMBER = re.compile(r"(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", re.ASCII)


def _bad(spec: str, why: str = "") -> InputError:
    return InputError(FLAG, "", f"{spec!r}: {why or 'expected ' + FORMS}")


def _positive(spec: str, text: str, *, integer: bool = False) -> float:
    text = text.strip()
    if not _NUMBER.fullmatch(text) or (integer and not text.isdigit()):
        raise _bad(spec, f"{text!r} is not a positive {'whole ' if integer else ''}number")
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise _bad(spec, "the limit must be positive")
    return value


def parse_rule(spec: str) -> StopRule:
    text = spec.strip()
    if text == "pairs-resolved":
        return PairsResolved()
    if text.startswith("pair="):
        a, comma, b = text[len("pair="):].partition(",")
        if not comma or not a.strip() or not b.strip() or a.strip() == b.strip():
            raise _bad(spec, "expected pair=A,B with two different subject labels")
        return PairResolved(a.strip(), b.strip())
    name, op, value = text.partition("<=")
    name = name.strip()
    if op and name == "half-width":
        return HalfWidth(_positive(spec, value))
    if op and name == "calls":
        return CallBudget(int(_positive(spec, value, integer=True)))
    if op and name == "cost":
        return CostBudget(_positive(spec, value.strip().removeprefix("$")))
    raise _bad(spec)


def parse_stop_when(specs: list[str] | None) -> list[StopRule]:
    """Every --stop-when given; the same rule twice counts once."""
    return list(dict.fromkeys(parse_rule(s) for s in specs or []))
