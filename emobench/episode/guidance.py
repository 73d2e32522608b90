"""The words of the guidance the simulator gets from the director: data, per language.

prompts/guidance.yaml holds the English lines and prompts/zh/guidance.yaml the Chinese ones
(the case's language picks), so a Chinese simulator prompt is not handed English asides. The
LLM director's own guidance line is written by that model, in its template's language.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from emobench.errors import InputError
from emobench.library_paths import library_root
from emobench.prompts import template_file

Period = Literal["childhood", "adolescence", "adulthood", "current"]


class GuidanceWords(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    stages: str  # "{stages}": the revealed stages, joined by separator
    memories: str  # "{memories}": the revealed memories, each as memory, joined by separator
    memory: str  # "{period}", "{text}"
    periods: dict[Period, str]
    resistance: dict[Literal[2, 1, -1, -2], str]  # what the simulator hears of its guard (0: nothing)
    separator: str
    join: str  # between the parts of one guidance


@lru_cache(maxsize=4)
def guidance_words(language: str, root: Path | None = None) -> GuidanceWords:
    path = template_file(root or library_root(), "prompts", "guidance.yaml", language)
    try:
        return GuidanceWords.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except OSError as exc:
        raise InputError(path, "", f"cannot read the director's guidance words: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise InputError(path, "", f"YAML syntax error: {exc}") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(path, ".".join(str(p) for p in err["loc"]), err["msg"]) from None
