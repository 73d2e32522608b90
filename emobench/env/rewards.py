"""The training reward (docs/train.md): per-turn and terminal components, their weights, the guards.

Every component is reported, weighted or not. A component that cannot be computed (the panel
gave no valid verdict, the panel rates no holistic dimension) is None and is left out of the
sum; a step whose weighted components are all None has no reward (None), never a zero.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from emobench.records import Turn

TURN_COMPONENTS = ("dense", "meter")
TERMINAL_COMPONENTS = ("success", "epmq", "empathy", "humanlikeness")


class RewardConfig(BaseModel):
    """The `reward:` section of a training config."""

    model_config = ConfigDict(extra="forbid")

    dense: float = 1.0  # per turn: ΔE / ‖P0‖ from the panel's MDEP verdict
    meter: float = 0.0  # per turn: the user's meter change that answers the reply, / 100
    success: float = 1.0  # terminal: 1 when the EPM engine declared success, else 0
    epmq: float = 1.0  # terminal: EPM-Q of the finished episode / 100
    empathy: float = 0.0  # terminal: the panel's holistic Empathy, (score − 1) / 9
    humanlikeness: float = 0.0  # terminal: the panel's holistic Humanlikeness, (score − 1) / 9
    # Positive per-turn reward is scaled by min(1, cap / visible characters): no credit for padding.
    length_cap_chars: int | None = Field(default=None, ge=1)

    def weights(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in (*TURN_COMPONENTS, *TERMINAL_COMPONENTS)}


def turn_components(turn: Turn, p0_norm: float, meter_after: float | None) -> dict[str, float | None]:
    """The per-turn components of one judged turn; meter_after is the meter once the user has
    answered this reply (None when the episode ended before the user spoke again)."""
    return {
        "dense": turn.epm.delta_e / p0_norm if turn.epm is not None else None,
        "meter": (meter_after - turn.meter) / 100.0 if meter_after is not None else None,
    }


def terminal_components(success: bool, epmq: float | None, holistic: dict[str, float | None]) -> dict[str, float | None]:
    def unit(score: float | None) -> float | None:
        return (score - 1.0) / 9.0 if score is not None else None

    return {
        "success": 1.0 if success else 0.0,
        "epmq": epmq / 100.0 if epmq is not None else None,
        "empathy": unit(holistic.get("empathy")),
        "humanlikeness": unit(holistic.get("humanlikeness")),
    }


def combine(components: dict[str, float | None], config: RewardConfig, reply_chars: int) -> float | None:
    """The weighted sum of the available components, length-normalised on the per-turn part."""
    weights = config.weights()
    used = {k: v for k, v in components.items() if v is not None and weights.get(k, 0.0) != 0.0}
    if not used:
        return None
    per_turn = sum(weights[k] * v for k, v in used.items() if k in TURN_COMPONENTS)
    if config.length_cap_chars is not None and per_turn > 0 and reply_chars > config.length_cap_chars:
        per_turn *= config.length_cap_chars / reply_chars
    return per_turn + sum(weights[k] * v for k, v in used.items() if k not in TURN_COMPONENTS)


def as_info(components: dict[str, Any]) -> dict[str, Any]:
    """Components for a log line: every name present, None where not computed."""
    return {name: components.get(name) for name in (*TURN_COMPONENTS, *TERMINAL_COMPONENTS)}
