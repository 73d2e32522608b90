"""The submission protocol (configs/board.yaml): which split, cases, seeds, turn limits, scoring
profile and panel a submitted run must have used."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from emobench.errors import InputError
from emobench.library_paths import library_file
from emobench.yaml_io import read_yaml

DEFAULT_PROTOCOL = Path("configs") / "board.yaml"


class BoardProtocol(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=1)
    split: str
    cases: list[str] | None = None
    registry_version: str | None = None  # the split's version the board holds runs to; None: the library's
    seeds: list[int] = Field(min_length=1)
    max_turns: int = Field(ge=1)
    min_turns: int = Field(ge=1)
    scoring_profile: str
    min_judges: int = Field(default=1, ge=1)  # when the panel is not pinned by `judges`
    # The board's roles, by binding (kind and model id; an openai: binding's URL is the submitter's):
    # None lets any simulator, or any panel of min_judges or more, play.
    simulator: str | None = None
    judges: list[str] | None = None  # in panel order
    judge_not_subject: bool = True
    probe: bool = True
    holistic: bool = True
    tolerance: float = Field(default=1e-6, gt=0)
    spot_check_agreement: float = Field(default=0.7, ge=0, le=1)
    spot_check_max_lift: float = Field(default=0.5, ge=0)
    spot_check_alpha: float = Field(default=0.01, gt=0, lt=1)  # the subject replay's false-alarm rate

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, seeds: list[int]) -> list[int]:
        if len(set(seeds)) != len(seeds):
            raise ValueError("a seed is listed twice")
        return seeds

    @field_validator("simulator", "judges")
    @classmethod
    def _bindings(cls, value: str | list[str] | None) -> str | list[str] | None:
        from emobench.endpoints.binding import parse_binding
        from emobench.errors import InputError

        for spec in [value] if isinstance(value, str) else value or []:
            try:
                parse_binding(spec)
            except InputError as exc:
                raise ValueError(exc.problem) from None  # pydantic then names the field
        return value


def load_protocol(path: Path) -> BoardProtocol:
    """The protocol at path, or a one-line error naming the file and the field."""
    path = library_file(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError(path, "", "not a mapping of protocol fields")
    try:
        return BoardProtocol.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(path, ".".join(str(p) for p in err["loc"]), err["msg"]) from None
