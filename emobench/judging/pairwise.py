"""Pairwise comparisons (docs/method.md §5.5): a judge sees two subjects' transcripts of the same case
and seed, anonymised as "Conversation 1" and "Conversation 2", in both orders, and must name a
winner on each holistic dimension. No ties.

The verdicts feed Bradley-Terry ratings and the position-flip rate. An unparseable verdict is
retried with a new seed, then recorded with winner None and the error; it never counts as a win.

Row convention: (subject_a, subject_b) is the pair sorted by subject label, the same in both
orders; order "ab" showed subject_a as Conversation 1, order "ba" showed subject_b first.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, cast

import pyarrow as pa

from emobench.endpoints.structured import load_json_object
from emobench.episode.roles import RoleCaller, derive_seed
from emobench.prompts import PromptTemplate
from emobench.records import Episode, ModelCall, PairwiseCall, PairwiseVerdict
from emobench.registry import Case

if TYPE_CHECKING:
    import pandas as pd

Order = Literal["ab", "ba"]
Shown = Literal["1", "2"]

DIMENSIONS: Final = ("empathy", "humanlikeness", "persona_adaptation", "coherence")
ORDERS: Final[tuple[Order, ...]] = ("ab", "ba")
_SHOWN: Final[tuple[Shown, ...]] = ("1", "2")

# "reason" comes first so that a model decoding under the schema argues before it picks.
# No maxLength: it makes vLLM's grammar compile very slowly; max_tokens bounds the reply.
_DIMENSION_SCHEMA: Final = {
    "type": "object",
    "properties": {"reason": {"type": "string"}, "winner": {"type": "string", "enum": list(_SHOWN)}},
    "required": ["reason", "winner"],
    "additionalProperties": False,
}

PAIRWISE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "pairwise_verdict",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {dim: _DIMENSION_SCHEMA for dim in DIMENSIONS},
            "required": list(DIMENSIONS),
            "additionalProperties": False,
        },
    },
}

# pairwise.parquet: every verdict row, the invalid ones too (winner null, error set).
PAIRWISE_SCHEMA: Final = pa.schema(
    [
        ("case_id", pa.string()),
        ("seed", pa.int64()),
        ("judge", pa.string()),
        ("dimension", pa.string()),
        ("subject_a", pa.string()),  # the lexically first subject of the pair
        ("subject_b", pa.string()),
        ("order", pa.string()),  # "ab": subject_a was shown first; "ba": subject_b was
        ("winner", pa.string()),  # a subject label; null when the verdict stayed invalid
        ("error", pa.string()),
    ]
)


def _conversation(case: Case, episode: Episode) -> dict[str, Any]:
    """The transcript as the judge sees it: the person by name, the subject as "Assistant"."""
    lines = []
    for turn in episode.turns:
        lines.append({"speaker": case.persona.name, "text": turn.user.message})
        lines.append({"speaker": "Assistant", "text": turn.reply})
    if episode.last_user is not None:
        lines.append({"speaker": case.persona.name, "text": episode.last_user.message})
    return {"lines": lines, "left": episode.stop_reason == "user_left"}


def pairwise_messages(template: PromptTemplate, case: Case, first: Episode, second: Episode) -> list[dict[str, str]]:
    """System: rubric and hidden persona card. User: both transcripts, first as Conversation 1.

    Neither subject's label is rendered, only what was said.
    """
    context = {"persona": case.persona, "scenario": case.scenario}
    conversations = [_conversation(case, first), _conversation(case, second)]
    return [
        {"role": "system", "content": template.case_system(case)},
        {"role": "user", "content": template.block("user", conversations=conversations, **context)},
    ]


def parse_pairwise(text: str, finish_reason: str | None = None) -> dict[str, Shown]:
    """The shown position ("1" or "2") that won each dimension, or ValueError naming the fault."""
    data = load_json_object(text, finish_reason)
    winners: dict[str, Shown] = {}
    for dim in DIMENSIONS:
        item = data.get(dim)
        if not isinstance(item, dict):
            raise ValueError(f"{dim}: missing")
        winner = item.get("winner")
        if not isinstance(winner, str) or winner not in _SHOWN:
            raise ValueError(f'{dim}.winner: {winner!r} is not "1" or "2" (no ties)')
        winners[dim] = cast(Shown, winner)
    return winners


async def _one_order(
    judge: RoleCaller, template: PromptTemplate, case: Case, ep_a: Episode, ep_b: Episode, order: Order, seed: int, retries: int
) -> tuple[list[PairwiseVerdict], list[ModelCall]]:
    first, second = (ep_a, ep_b) if order == "ab" else (ep_b, ep_a)
    messages = pairwise_messages(template, case, first, second)
    shown = {"1": first.subject, "2": second.subject}
    label = judge.info.label

    def verdict(dimension: str, winner: str | None, error: str | None = None) -> PairwiseVerdict:
        return PairwiseVerdict(
            case_id=ep_a.case_id, seed=ep_a.seed, judge=label, dimension=dimension,
            subject_a=ep_a.subject, subject_b=ep_b.subject, order=order, winner=winner, error=error,
        )

    winners, calls, error = await judge.ask_valid(
        messages, lambda attempt: derive_seed(seed, "pairwise", label, ep_a.subject, ep_b.subject, order, attempt),
        template, PAIRWISE_FORMAT, lambda call: parse_pairwise(call.text, call.finish_reason), retries,
    )
    if winners is None:
        return [verdict(dim, None, error) for dim in DIMENSIONS], calls
    return [verdict(dim, shown[winners[dim]]) for dim in DIMENSIONS], calls


async def compare_pair(
    judge: RoleCaller, template: PromptTemplate, case: Case, ep_x: Episode, ep_y: Episode, seed: int, retries: int
) -> tuple[list[PairwiseVerdict], list[ModelCall]]:
    """One judge compares two subjects' episodes of one case and seed, in both orders.

    Returns 2 x len(DIMENSIONS) verdicts ("ab" rows first) and every call made, the invalid
    attempts included with their error.
    """
    if (ep_x.case_id, ep_x.seed) != (ep_y.case_id, ep_y.seed) or ep_x.case_id != case.id:
        raise ValueError(
            f"compare_pair: episodes {ep_x.key!r} and {ep_y.key!r} are not both of case {case.id!r} with one seed"
        )
    if ep_x.subject == ep_y.subject:
        raise ValueError(f"compare_pair: both episodes are of subject {ep_x.subject!r}")
    ep_a, ep_b = sorted((ep_x, ep_y), key=lambda ep: ep.subject)
    results = await asyncio.gather(*(_one_order(judge, template, case, ep_a, ep_b, o, seed, retries) for o in ORDERS))
    return [v for verdicts, _ in results for v in verdicts], [c for _, calls in results for c in calls]


def plan_pairs(episodes: Sequence[Episode], reference_subjects: Sequence[str] | None) -> list[tuple[Episode, Episode]]:
    """Pairs of episodes of the same (case_id, seed) from different subjects, each pair sorted by
    subject and the list sorted by (case_id, seed, subjects).

    With reference subjects named, only pairs with a reference on at least one side (every
    candidate against every reference, and the references among themselves); with None or an
    empty sequence, every pair.
    """
    groups: defaultdict[tuple[str, int], list[Episode]] = defaultdict(list)
    for episode in episodes:
        groups[(episode.case_id, episode.seed)].append(episode)
    references = set(reference_subjects or ())
    pairs: list[tuple[Episode, Episode]] = []
    for key in sorted(groups):
        group = sorted(groups[key], key=lambda ep: ep.subject)
        repeated = [s for s, n in Counter(ep.subject for ep in group).items() if n > 1]
        if repeated:
            raise ValueError(f"plan_pairs: more than one episode of {repeated} for case {key[0]!r}, seed {key[1]}")
        for i, x in enumerate(group):
            for y in group[i + 1 :]:
                if not references or x.subject in references or y.subject in references:
                    pairs.append((x, y))
    return pairs


async def judge_pairs(
    judges: Sequence[RoleCaller],
    template: PromptTemplate,
    cases_by_id: Mapping[str, Case],
    pairs: Sequence[tuple[Episode, Episode]],
    seed: int,
    retries: int,
    concurrency: int,
) -> tuple[list[PairwiseVerdict], list[PairwiseCall]]:
    """Every judge compares every pair. Results come in (pair, judge) order whatever the timing.

    concurrency bounds the comparisons in flight; each runs its two orders at once. A pair's
    seed is derived from the run seed, its case and its episode seed, so no two cases share
    request seeds.
    """
    if concurrency < 1:
        raise ValueError(f"judge_pairs: concurrency must be >= 1, got {concurrency}")
    missing = sorted({x.case_id for x, _ in pairs} - set(cases_by_id))
    if missing:
        raise ValueError(f"judge_pairs: no case card for {missing}")
    gate = asyncio.Semaphore(concurrency)

    async def one(judge: RoleCaller, x: Episode, y: Episode) -> tuple[list[PairwiseVerdict], list[PairwiseCall]]:
        async with gate:
            pair_seed = derive_seed(seed, "pair", x.case_id, x.seed)
            verdicts, calls = await compare_pair(judge, template, cases_by_id[x.case_id], x, y, pair_seed, retries)
        return verdicts, [PairwiseCall(**c.model_dump(), case_id=x.case_id, episode_seed=x.seed) for c in calls]

    results = await asyncio.gather(*(one(judge, x, y) for x, y in pairs for judge in judges))
    return [v for verdicts, _ in results for v in verdicts], [c for _, calls in results for c in calls]


def verdicts_frame(verdicts: Sequence[PairwiseVerdict]) -> pd.DataFrame:
    """The valid verdicts as the frame position_flip_rate and bradley_terry_ci take.

    Rows without a winner are dropped but counted: attrs["n_invalid"] is their number and
    attrs["invalid_by_judge"] maps each judge to its own (one row per dimension and order).
    """
    # Imported here: pandas and scipy (reliability's) cost a Ray worker, which only plays and
    # judges episodes, about 1.5 s of CPU to start (bench/bench_ray.py).
    import pandas as pd

    from emobench.scoring.reliability import FLIP_COLUMNS

    valid = [v.model_dump(include=set(FLIP_COLUMNS)) for v in verdicts if v.winner is not None]
    frame = pd.DataFrame(valid, columns=list(FLIP_COLUMNS))
    invalid = Counter(v.judge for v in verdicts if v.winner is None)
    frame.attrs["n_invalid"] = sum(invalid.values())
    frame.attrs["invalid_by_judge"] = dict(invalid)
    return frame


def pairwise_table(verdicts: Sequence[PairwiseVerdict]) -> pa.Table:
    """Every verdict, invalid ones included, as a pairwise.parquet table."""
    return pa.Table.from_pylist([v.model_dump() for v in verdicts], schema=PAIRWISE_SCHEMA)
