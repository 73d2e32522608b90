"""The one way from an ESConv record to a Case, for the judge check (judges/stand-ins/esconv.yaml)
and the replay (esconv_seeker.yaml) alike: the record's fields fill the stand-in's jinja2
templates (emobench.validation.stand_in), and the chat's own opening may replace the card's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emobench.registry import Case
from emobench.validation.esconv.data import EsconvChat
from emobench.validation.stand_in import rendered_case

# What a stand-in's templates may read: the seeker's own survey before the chat.
RECORD_FIELDS = ("situation", "emotion_type", "problem_type", "experience_type", "initial_intensity")


def record_fields(chat: EsconvChat) -> dict[str, Any]:
    """The chat's RECORD_FIELDS (initial_intensity None where the seeker did not give it)."""
    return {name: getattr(chat, name) for name in RECORD_FIELDS}


def record_case(path: Path, stand_in: dict[str, Any], chat: EsconvChat, *, case_id: str, opening: str | None = None) -> Case:
    """The Case of one chat: stand_in (read from path) rendered with the chat's fields."""
    return rendered_case(path, stand_in, record_fields(chat), case_id, "esconv", opening=opening)
