"""An episode as the play server holds it while people play (emobench.play.session), and the
one-line words it shows them when something fails."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from emobench.episode.stepper import EpisodeState
from emobench.errors import EndpointError, InputError
from emobench.play.journal import JournalHead
from emobench.records import Episode

MODEL_FAULTS = (EndpointError, InputError)  # see model_fault: of InputErrors, only a refused key
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
    expired: bool = False  # ended by the server after play.idle_expire_s without a turn


def short_fault(problem: str) -> str:
    """The kind of fault, never an address: the first words before any URL or colon."""
    words = []
    for word in problem.split():
        if "://" in word or word.endswith(":") or "/" in word:
            break
        words.append(word)
    return " ".join(words[:8]) or "no answer"


def model_fault(exc: BaseException) -> str | None:
    """A failed model call in a few words for the page (never an address); None when exc is no such
    failure. A key the endpoint refuses (HTTP 401) is the operator's to fix: their terminal gets the
    whole line, without a traceback."""
    if isinstance(exc, EndpointError):
        return short_fault(exc.problem)
    if isinstance(exc, InputError) and exc.field == "api_key_env":
        logging.getLogger("emobench.play").warning("emobench play: %s", str(exc).splitlines()[0])
        return "its endpoint refused the server's key"
    return None


def expired_note(idle_s: float, evict_s: float) -> str:
    """What the person is told of an episode the server ended for them: idle past play.idle_expire_s, or
    past play.evict_idle_s while the server was full and their network held the most."""
    return (f"This episode ended without a turn: after {idle_s / 60:g} minutes (play.idle_expire_s), or after "
            f"{evict_s:g} s while the server was full (play.evict_idle_s). It is kept as left; start a new one to "
            "play on.")
