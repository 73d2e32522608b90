"""A person's rating of the episode they just played, on the judges' holistic rubric (docs/play.md).

Only the user's seat rates: the person who played the one in need rates the supporter, as the
holistic judges do. One rating per episode, once it has ended; it goes to the run's ratings.jsonl,
which `emobench anchor` reads (docs/anchor.md), and goes with the episode when it is deleted.
"""

from __future__ import annotations

from typing import Any

from emobench.play.session import PlayHub
from emobench.play.store import PlayError
from emobench.scoring.anchoring import DIMENSIONS, SCALE


def parse_rating(data: dict[str, Any]) -> dict[str, int]:
    """`{"empathy": 7, "overall": 6, ...}` (the page's bodies are flat): known dimensions, whole numbers on
    the rubric's scale, at least one."""
    if not data:
        raise PlayError(f"a rating scores one or more of {', '.join(DIMENSIONS)}")
    scores = {}
    for name, value in data.items():
        if name not in DIMENSIONS:
            raise PlayError(f"{name[:40]!r}: unknown dimension; one of {', '.join(DIMENSIONS)}")
        if isinstance(value, bool) or not isinstance(value, int) or not SCALE[0] <= value <= SCALE[1]:
            raise PlayError(f"{name}: a whole number from {SCALE[0]} to {SCALE[1]}")
        scores[name] = value
    return scores


async def rate(hub: PlayHub, token: str, episode_id: str, scores: dict[str, int]) -> None:
    if hub.seat != "user":
        raise PlayError("only the person in the user's seat rates an episode", status=409)
    live = await hub.get(token, episode_id)  # the player's own, rebuilt after a restart; 410 once deleted
    async with hub.owned_lock(hub.player(token), episode_id):
        if live.episode is None:
            raise PlayError("an episode is rated once it has ended and its record is written", status=409)
        await hub.store.rate(live.head, scores)
