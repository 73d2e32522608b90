"""`run --dry-run`'s cacheable share of each role's prompt tokens, before any call.

Two episodes of one case (two seeds) are rendered from the run's own templates, turn by turn, to
the turn limit: every user message and reply as many placeholder words as its role's max_tokens
(the dry run's "at most"), different in each episode. Each role's prompts go, in the order a run
sends them, to a prompt cache with OpenAI's granularity (endpoints/prompt_cache.py), and the share
is the cached tokens over all. The judge's share is that of its MDEP and holistic prompts.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

from emobench.endpoints.prompt_cache import PrefixCache, prompt_tokens
from emobench.episode.director import DirectorState, director_messages
from emobench.episode.roles import EpisodePrompts
from emobench.episode.simulator import simulator_messages
from emobench.episode.stepper import subject_messages
from emobench.judging.mdep import judge_messages
from emobench.prompts import PromptTemplate
from emobench.registry import Case

# Common words, about one token each: placeholder text of a known length that no two turns share.
_WORDS = ("the", "time", "work", "home", "feel", "said", "know", "think", "want", "never", "again", "still", "about",
          "after", "night", "friend", "mother", "money", "week", "alone", "tired", "maybe", "really", "just", "like",
          "because", "people", "house", "sleep", "long", "hard", "talk", "right", "left", "lost", "keep", "tell", "ask")


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def cacheable_shares(prompts: EpisodePrompts, holistic: PromptTemplate, case: Case, turns: int,
                     max_tokens: dict[str, int], director: bool, seeds: Sequence[int] = (0, 1)) -> dict[str, float]:
    """role ("subject", "user", "judge", "director") -> the share of its prompt tokens a cache holds.
    max_tokens: the longest reply of "subject" and "user"."""
    caches: dict[str, PrefixCache] = {}
    sent: Counter[str] = Counter()
    held: Counter[str] = Counter()

    def send(role: str, messages: list[dict[str, str]]) -> None:
        tokens = prompt_tokens(messages)
        sent[role] += len(tokens)
        held[role] += caches.setdefault(role, PrefixCache()).admit(tokens)

    meter = case.persona.meter_start
    for seed in seeds:
        rng = random.Random(seed)
        history: list[tuple[str, str]] = []
        transcript: list[dict[str, str]] = []
        said = case.opening
        for turn in range(1, turns + 1):
            send("subject", subject_messages(prompts, history, said))
            reply = _text(rng, max_tokens["subject"])
            transcript.append({"speaker": case.persona.name, "text": said})
            send("judge", judge_messages(prompts.judge, case, list(transcript), reply))
            transcript.append({"speaker": "Assistant", "text": reply})
            history.append((said, reply))
            if director and prompts.director is not None:
                state = DirectorState(turn=turn, max_turns=turns, meter=meter)
                send("director", director_messages(prompts.director, case, state, list(transcript)))
            if turn < turns:
                send("user", simulator_messages(prompts.simulator, case, history, meter, ""))
                said = _text(rng, max_tokens["user"])
        context = {"persona": case.persona, "scenario": case.scenario}
        send("judge", [{"role": "system", "content": holistic.case_system(case)},
                       {"role": "user", "content": holistic.block("user", transcript=transcript, left_with="", **context)}])
    return {role: held[role] / sent[role] for role in sent if sent[role]}
