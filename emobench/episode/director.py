"""The rule director: reveals the next hidden story stage every N turns.

Its guidance reaches only the simulator.
"""

from __future__ import annotations

from emobench.records import DirectorAction
from emobench.registry import Case


def rule_director(case: Case, turn: int, reveal_every: int) -> DirectorAction:
    """Stage k (0-based) becomes sayable after turn k * reveal_every."""
    stages = case.scenario.stages
    if reveal_every > 0 and turn % reveal_every == 0:
        index = turn // reveal_every - 1
        if index < len(stages):
            return DirectorAction(
                action="reveal_stage",
                guidance=f"If you feel heard enough, you may now let this part of your story come out: {stages[index]}",
            )
    return DirectorAction(action="wait")
