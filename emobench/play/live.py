"""An episode as the play server holds it while people play (emobench.play.session), and the
one-line words it shows them when something fails."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from emobench.episode.stepper import EpisodeState
from emobench.play.journal import JournalHead
from emobench.records import Episode

MAX_MESSAGE = 4000  # characters of one message a person may send
RETRY = "Your conversation is kept; send again to retry."


@dataclass
class Live:
    """One episode in progress (or finished) on this server; `state` holds only complete turns."""

    head: JournalHead
    state: EpisodeState
    human_s: list[float] = field(default_factory=list)
    model_s: list[float] = field(default_factory=list)
    shown_at: float = field(default_factory=time.monotonic)
    error: str | None = None
    resumed: int = 0
    requests: set[str] = field(default_factory=set)
    episode: Episode | None = None  # the record, once written


def short_fault(problem: str) -> str:
    """The kind of fault, never an address: the first words before any URL or colon."""
    words = []
    for word in problem.split():
        if "://" in word or word.endswith(":") or "/" in word:
            break
        words.append(word)
    return " ".join(words[:8]) or "no answer"
