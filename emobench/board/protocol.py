"""The submission protocol (configs/board.yaml): which split, cases, seeds, turn limits, scoring
profile and panel a submitted run must have used."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from emobench.errors import InputError
from emobench.library_paths import library_file
from emobench.yaml_io import read_yaml

DEFAULT_PROTOCOL = Path("configs") / "board.yaml"


class BoardProtocol(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=1)
    split: str
    cases: list[str] | None = None
    seeds: list[int] = Field(min_length=1)
    max_turns: int = Field(ge=1)
    min_turns: int = Field(ge=1)
    scoring_profile: str
    min_judges: int = Field(ge=1)
    judge_not_subject: bool = True
    probe: bool = True
    holistic: bool = True
    tolerance: float = Field(default=1e-6, gt=0)
    spot_check_agreement: float = Field(default=0.7, ge=0, le=1)
    spot_check_max_lift: float = Field(default=0.5, ge=0)


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
