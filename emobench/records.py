"""Typed records that flow through a run: model calls, turns, episodes.

Every record carries enough provenance (model, endpoint, sampling, seed, template version)
to reproduce any number derived from it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Axis = Literal["C", "A", "P"]


@dataclass(frozen=True)
class Limits:
    """An episode's bounds and retry counts, read from the config by every stage."""
    max_turns: int = 30
    min_turns: int = 12
    judge_retries: int = 2
    simulator_retries: int = 2
    director_retries: int = 2
    reveal_every: int = 3
    leave_meter: float = 20.0  # the leave flag is honoured only at or below this meter value
    resolved_meter: float = 100.0
    gave_up_meter: float = 10.0


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Sampling(Record):
    temperature: float = Field(default=0.7, ge=0, allow_inf_nan=False)
    top_p: float = Field(default=1.0, gt=0, le=1)
    max_tokens: int = Field(default=256, ge=1, lt=2**31)
    # Sent only when set (EMPA's protocol sets both to 0.7): None keeps older configs' hashes.
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2, allow_inf_nan=False)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2, allow_inf_nan=False)


class ModelCall(Record):
    """One chat completion as it happened."""

    role: str
    label: str = ""  # the role's label, e.g. one judge of a panel
    model: str
    endpoint: str
    sampling: Sampling
    seed: int
    template: str  # "name@version"
    prompt_tokens: int = 0  # every prompt token, the cached and written ones among them
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # read from the provider's prompt cache, as its usage reports them
    cache_write_tokens: int = 0  # written to it, where the provider bills that (Anthropic)
    batched: bool = False  # sent in a Batch API batch, billed at its batch price (endpoints/batch.py)
    latency_s: float = 0.0
    attempts: int = 1
    cached: bool = False
    finish_reason: str | None = None
    text: str = ""
    error: str | None = None  # set when the output failed validation
    structured_output: str | None = None  # "portable" or "bounded" when a schema was sent


class PairwiseCall(ModelCall):
    """A pairwise judge's call with the (case, seed) whose episodes it compared, so that budgets
    count it with that cell's episodes. None in runs written before it was recorded."""

    case_id: str | None = None
    episode_seed: int | None = None


class UserMove(Record):
    """The user's move for one turn: the simulator's structured output, or a person's (`emobench play`)."""

    message: str
    meter_delta: int = Field(ge=-100, le=100)
    inner: str = ""
    leave: bool = False
    human: bool = False  # a person wrote it and set the meter freely; no inner note, no audit

    @model_validator(mode="after")
    def _simulator_step(self) -> UserMove:
        # The ±10 step is the simulator's rule (docs/method.md), not a person's.
        if not self.human and abs(self.meter_delta) > 10:
            raise ValueError("meter_delta: a simulated move moves the meter by at most 10")
        return self


class AxisLevel(Record):
    progress: int = Field(ge=0, le=2)
    regression: int = Field(ge=0, le=2)
    evidence: str = ""
    reason: str = ""


class JudgeVerdict(Record):
    """One judge's MDEP rating of one subject reply; axes is None when invalid."""

    judge: str
    valid: bool
    axes: dict[Axis, AxisLevel] | None = None
    error: str | None = None


class TurnJudgement(Record):
    """The panel's MDEP result for one turn: per-judge verdicts and the median levels."""

    verdicts: list[JudgeVerdict]
    valid: bool
    progress: dict[Axis, int] = Field(default_factory=dict)
    regression: dict[Axis, int] = Field(default_factory=dict)
    vector: tuple[float, float, float] | None = None
    regression_points: float = 0.0


class DirectorAction(Record):
    action: Literal[
        "reveal_stage", "reveal_memory", "raise_resistance", "lower_resistance", "wait", "end"
    ]
    guidance: str = ""
    target: int | None = None  # index of the stage or memory revealed


class EPMPoint(Record):
    p: tuple[float, float, float]
    delta_e: float
    cos: float
    energy: float


class Turn(Record):
    index: int  # 1-based
    user: UserMove
    reply: str
    judgement: TurnJudgement
    epm: EPMPoint | None  # None when no judge produced a valid verdict
    meter: float
    director: DirectorAction | None = None


class ParallelLayout(Record):
    """How a vllm: server spreads its model over devices and nodes (vLLM's own parallelism)."""

    tensor: int = 1
    pipeline: int = 1
    data: int = 1
    executor: Literal["mp", "ray"] | None = None  # None: vLLM chooses (mp on one node)


class RoleInfo(Record):
    label: str
    model: str
    endpoint: str
    sampling: Sampling
    structured_output: str = "portable"  # which form structured requests take (endpoints/structured.py)
    served_dtype: str | None = None  # a vllm: server's weights dtype, where emobench chose or was told it
    parallel: ParallelLayout | None = None  # a vllm: server's layout, where the config set one


class HumanSeat(Record):
    """A person took a seat in the episode (`emobench play`): who, which seat, how fast, on which page."""

    player: str  # "human:<handle>"
    seat: Literal["user", "subject"]
    page_version: str  # "play-page@<hash of the page's templates and scripts>"
    # Per turn: seconds from the page showing the prompt to the person's send (the user seat's
    # turn 1 is the card's opening: 0), and seconds the server spent on that turn's model calls.
    turn_seconds: list[float]
    model_seconds: list[float]
    consented_at: str
    resumed: int = 0  # times the episode was rebuilt from its journal after the server stopped


class Episode(Record):
    """One conversation of one case with one subject under one seed."""

    key: str  # "{subject}|{case_id}|{seed}", and "|{player}" when a person played (HumanSeat.player)
    subject: str
    case_id: str
    scenario_id: str
    persona_id: str
    seed: int
    split: str
    p0: tuple[float, float, float]
    turns: list[Turn]
    language: str = "en"  # the case's (en|zh); records written before languages are English
    last_user: UserMove | None = None  # a message the user left with, which got no reply
    probe: ProbeAnswer | None = None
    final_meter: float
    stop_reason: str
    status: str | None  # EPM status at the stop: success, collapse, stagnation_regression, oscillation
    success_turn: int | None
    roles: dict[str, RoleInfo | list[RoleInfo]]
    templates: dict[str, str]
    calls: list[ModelCall]
    registry_version: str
    config_hash: str
    emobench_version: str
    started_at: str
    finished_at: str
    human: HumanSeat | None = None  # None: every seat was a model


class DimScore(Record):
    score: int = Field(ge=1, le=10)
    evidence: str
    reason: str = ""


# The holistic rubric's dimensions: what a HolisticVerdict scores (judges/holistic.j2).
HOLISTIC_DIMENSIONS = ("empathy", "humanlikeness", "persona_adaptation", "coherence")


class HolisticVerdict(Record):
    """One judge's holistic rubric of a whole episode; scores is None when invalid."""

    judge: str
    valid: bool
    scores: dict[str, DimScore] | None = None  # one per HOLISTIC_DIMENSIONS
    error: str | None = None


def mean_scores(verdicts: list[HolisticVerdict]) -> dict[str, float | None]:
    """Mean score per dimension over the valid judges; None when no judge was valid."""
    valid = [v.scores for v in verdicts if v.valid and v.scores]
    return {dim: statistics.fmean(s[dim].score for s in valid) if valid else None for dim in HOLISTIC_DIMENSIONS}


class ProbeAnswer(Record):
    """The subject's out-of-character inference about the user (docs/method.md §5.6)."""

    dominant_need: Axis
    threshold: Literal["low", "medium", "high"]
    big_five: dict[str, Literal["high", "low"]]  # exactly two traits
    rationale: str = ""


class PairwiseVerdict(Record):
    """One anonymised comparison of two subjects' transcripts of the same case and seed."""

    case_id: str
    seed: int
    judge: str
    dimension: str
    subject_a: str  # the two subjects sorted by label, the same in both orders
    subject_b: str
    order: Literal["ab", "ba"]  # "ab": subject_a was shown first; "ba": subject_b was
    winner: str | None  # a subject label; None when the verdict stayed invalid
    error: str | None = None


class AuditFlag(Record):
    kind: Literal["out_of_character", "hidden_need_leak", "over_cooperative", "premature_leave"]
    turn: int | None
    detail: str


class EpisodeJudgement(Record):
    """Post-episode judging of one episode by one panel: kept apart from the episode itself
    so that a rescore writes new judgements beside the old ones."""

    key: str
    panel: str
    holistic: list[HolisticVerdict]
    audit: list[AuditFlag]
    calls: list[ModelCall]
    mdep: list[TurnJudgement] | None = None  # a rescore's per-turn verdicts; None: the episode's own


Episode.model_rebuild()
