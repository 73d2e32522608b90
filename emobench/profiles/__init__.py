"""Scoring profiles (docs/method.md §5.8): the EPM engine's stop rules and EPM-Q's index rules, as data.

Each profile is a YAML file beside this module. `empa` reproduces EMPA's published numbers;
`emobench`, the default, is the same with our two fixes. This package sits below the pipeline
and imports nothing from it, so the engine (trackers), EPM-Q (scoring) and the config all read
it without an upward import.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Final, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

ProfileName = Literal["emobench", "empa"]
PROFILE_NAMES: Final[tuple[ProfileName, ...]] = ("emobench", "empa")
DEFAULT_PROFILE: Final[ProfileName] = "emobench"
_DIR: Final = Path(__file__).parent


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EngineRules(_Strict):
    """When the engine declares success or a failure, and how it rounds (docs/method.md §5.3)."""

    epsilon_fraction: float = Field(gt=0)
    collapse_run: int = Field(ge=1)
    stagnation_states: int = Field(ge=2)
    stagnation_stdev: float = Field(gt=0)
    regression_window: int = Field(ge=1)
    regression_share: float = Field(ge=0, le=1)
    regression_sum: float
    oscillation_points: int = Field(ge=2)
    oscillation_path: float = Field(gt=0)
    oscillation_span: float = Field(gt=0)
    direction_decimals: int = Field(ge=1)
    value_decimals: int = Field(ge=0)
    cosine_decimals: int = Field(ge=0)


class Weights(_Strict):
    outcome: float
    efficiency: float
    stability: float


class IndexRules(_Strict):
    """How EPM-Q turns a trajectory into nine indices (docs/method.md §5.4)."""

    zone_floor: float = Field(lt=0)
    etot_scale: float = Field(gt=0)
    snet_scale: float = Field(gt=0)
    rate_scale: float = Field(gt=0)
    weights: Weights
    cap_at_100: bool  # fix 1: every index clipped to [0, 100]
    tau_needs_progress: bool  # fix 2: Tau is 0 unless (P_T - P0).u > 0


class ScoringProfile(_Strict):
    name: ProfileName
    summary: str
    engine: EngineRules
    indices: IndexRules


@cache
def load_profile(name: str = DEFAULT_PROFILE) -> ScoringProfile:
    if name not in PROFILE_NAMES:
        raise ValueError(f"unknown scoring profile {name!r}; expected one of {', '.join(PROFILE_NAMES)}")
    data = yaml.safe_load((_DIR / f"{name}.yaml").read_text(encoding="utf-8"))
    profile = ScoringProfile.model_validate(data)
    if profile.name != name:
        raise ValueError(f"profiles/{name}.yaml names itself {profile.name!r}")
    return profile
