"""Simulator audit: deterministic checks of the simulated user's fidelity (docs/method.md §4).

It makes no model calls and is kept apart from the subject's score: a flagged episode is
reported, never dropped. Turn 1 is the case's authored opening, not simulator
output, so it is never audited; nor is a move a person made (`emobench play`). The rules:

- out_of_character: a user message matches a pattern in audit_patterns.yaml (the assistant's
  voice, a stage direction, a "User:"/"Assistant:"/name prefix), or echoes the subject: at
  least ECHO_MIN_WORDS words, of which at least ECHO_SHARE lie inside some run of ECHO_NGRAM
  consecutive words that also occurs in the subject's previous reply.
- hidden_need_leak: compared on content words (lower-cased, "n't" read as "not", punctuation
  and the YAML's stopwords dropped, a final plural/verb "s" dropped), a user message shares a
  run of at least LEAK_RUN consecutive content words with the scenario's hidden need, or
  contains at least LEAK_COVERAGE of the hidden need's distinct content words.
- over_cooperative: at least COOP_MIN_MOVES simulated moves, the meter_delta was positive on
  at least COOP_RISE_SHARE of them, and the episode ended at least COOP_GAIN meter points above
  the persona's start. Real people in distress test, deflect and withdraw; a meter that only
  climbs, and far, is a simulator that co-operates whatever the subject says. The flag names
  the turn where the meter first reached start + COOP_GAIN.
- premature_leave: a move with leave=True while the meter after it was above
  Limits.leave_meter (the loop ignores it), or an episode that stopped with user_left at a
  turn before Limits.min_turns.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from emobench.errors import InputError
from emobench.records import AuditFlag, Episode, Limits, UserMove
from emobench.registry import Case

PATTERNS_PATH = Path(__file__).with_name("audit_patterns.yaml")

ECHO_NGRAM = 4
ECHO_MIN_WORDS = 8
ECHO_SHARE = 0.6
LEAK_RUN = 6
LEAK_COVERAGE = 0.8
COOP_MIN_MOVES = 4
COOP_RISE_SHARE = 0.8
COOP_GAIN = 40.0

_PATTERN_KINDS = ("assistant_voice", "stage_direction", "role_prefix")
_WORD = re.compile(r"[^\W_]+")
_CONTRACTIONS = (
    (re.compile(r"\bcan['’]t\b"), "can not"),
    (re.compile(r"\bwon['’]t\b"), "will not"),
    (re.compile(r"n['’]t\b"), " not"),
)


@dataclass(frozen=True)
class AuditPatterns:
    version: str  # a short hash of the YAML file
    patterns: dict[str, tuple[str, ...]]  # kind -> regex sources; "{name}" is the persona's name
    stopwords: frozenset[str]


@lru_cache(maxsize=1)
def load_patterns() -> AuditPatterns:
    path = PATTERNS_PATH  # read at call time, so a test can point it at another file
    try:
        source = path.read_text(encoding="utf-8")
        data = yaml.safe_load(source)
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(path, "", f"cannot load audit patterns: {exc}") from None
    groups = data.get("out_of_character") if isinstance(data, dict) else None
    if not isinstance(groups, dict):
        raise InputError(path, "out_of_character", "missing mapping of pattern lists")
    patterns: dict[str, tuple[str, ...]] = {}
    for kind in _PATTERN_KINDS:
        items = groups.get(kind)
        if not isinstance(items, list) or not all(isinstance(p, str) for p in items):
            raise InputError(path, f"out_of_character.{kind}", "must be a list of regular expressions")
        for pattern in items:
            try:
                re.compile(pattern.replace("{name}", "x"))
            except re.error as exc:
                raise InputError(path, f"out_of_character.{kind}", f"bad regular expression {pattern!r}: {exc}") from None
        patterns[kind] = tuple(items)
    stopwords = data.get("stopwords")
    if not isinstance(stopwords, list) or not all(isinstance(w, str) for w in stopwords):
        raise InputError(path, "stopwords", "must be a list of words (quote no, on, off, yes)")
    return AuditPatterns(
        version=hashlib.sha256(source.encode()).hexdigest()[:10],
        patterns=patterns,
        stopwords=frozenset(str(w).lower() for w in stopwords),
    )


@lru_cache(maxsize=256)
def _compiled(name: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
    names = "|".join(re.escape(n) for n in dict.fromkeys((name, name.split()[0])))
    return tuple(
        (kind, re.compile(pattern.replace("{name}", f"(?:{names})"), re.IGNORECASE | re.MULTILINE))
        for kind, sources in load_patterns().patterns.items()
        for pattern in sources
    )


def _words(text: str) -> list[str]:
    text = text.lower()
    for pattern, expanded in _CONTRACTIONS:
        text = pattern.sub(expanded, text)
    return _WORD.findall(text)


def _content_words(text: str) -> list[str]:
    return _content(_words(text))


def _content(words: list[str]) -> list[str]:
    stop = load_patterns().stopwords
    out = []
    for word in words:
        if word in stop:
            continue
        # A crude stem, so "needs" meets "need" and "feels" meets "feel".
        out.append(word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word)
    return out


def _longest_common_run(a: list[str], b: list[str]) -> int:
    """The longest run of consecutive words in both: the classic table, kept only where words match."""
    at: dict[str, list[int]] = {}
    for j, y in enumerate(b):
        at.setdefault(y, []).append(j)
    best = 0
    previous: dict[int, int] = {}
    for x in a:
        current: dict[int, int] = {}
        for j in at.get(x, ()):
            run = current[j] = previous.get(j - 1, 0) + 1
            best = max(best, run)
        previous = current
    return best


def echo_share(message: str, reply: str, n: int = ECHO_NGRAM) -> float:
    """Share of the message's words that lie inside an n-word run also found in the reply."""
    return _echo_share(_words(message), _words(reply), n)


def _echo_share(words: list[str], source: list[str], n: int = ECHO_NGRAM) -> float:
    grams = {tuple(source[i : i + n]) for i in range(len(source) - n + 1)}
    covered = [False] * len(words)
    for i in range(len(words) - n + 1):
        if tuple(words[i : i + n]) in grams:
            covered[i : i + n] = [True] * n
    return sum(covered) / len(words) if words else 0.0


def _out_of_character(move: UserMove, words: list[str], previous_reply: str, case: Case, turn: int) -> AuditFlag | None:
    """``words``: the move's message as _words reads it (read once per move)."""
    for kind, pattern in _compiled(case.persona.name):
        found = pattern.search(move.message)
        if found:
            return AuditFlag(kind="out_of_character", turn=turn, detail=f"{kind.replace('_', ' ')}: {found.group(0).strip()!r}")
    if len(words) < ECHO_MIN_WORDS:
        return None
    share = _echo_share(words, _words(previous_reply))
    if share >= ECHO_SHARE:
        detail = f"echoes the subject's previous reply ({share:.0%} of its words)"
        return AuditFlag(kind="out_of_character", turn=turn, detail=detail)
    return None


def out_of_character(message: str, previous_reply: str, case: Case) -> AuditFlag | None:
    """The out-of-character rule for one message on its own (the ESConv fidelity replay asks it)."""
    return _out_of_character(UserMove(message=message, meter_delta=0), _words(message), previous_reply, case, 0)


def _hidden_need_leak(words: list[str], need: list[str], need_words: frozenset[str], turn: int) -> AuditFlag | None:
    """``words``: the move's content words; ``need_words``: the set of ``need``, made once per episode."""
    coverage = len(need_words.intersection(words)) / len(need_words) if need else 0.0
    # A shared run is no longer than the count of the move's words found in the need: most moves
    # have too few of them for a flag, and skip the run's search.
    if coverage < LEAK_COVERAGE and sum(word in need_words for word in words) < LEAK_RUN:
        return None
    run = _longest_common_run(need, words)
    if run >= LEAK_RUN or coverage >= LEAK_COVERAGE:
        return AuditFlag(
            kind="hidden_need_leak", turn=turn,
            detail=f"shares a run of {run} content words and {coverage:.0%} of the hidden need's content words",
        )
    return None


def _over_cooperative(moves: list[tuple[int, UserMove, float]], start: float, final: float) -> AuditFlag | None:
    if len(moves) < COOP_MIN_MOVES:
        return None
    rises = sum(move.meter_delta > 0 for _, move, _ in moves)
    if rises < COOP_RISE_SHARE * len(moves) or final - start < COOP_GAIN:
        return None
    turn = next(t for t, _, meter in moves if meter - start >= COOP_GAIN)
    return AuditFlag(
        kind="over_cooperative", turn=turn,
        detail=f"meter rose on {rises}/{len(moves)} simulated turns, {start:g} → {final:g} (+{final - start:g})",
    )


def audit_episode(episode: Episode, case: Case, limits: Limits) -> list[AuditFlag]:
    """Every flag for one episode, in turn order within each kind."""
    # (turn, move, meter after the move, the subject reply the move answered)
    moves: list[tuple[int, UserMove, float, str]] = []
    previous_reply = ""
    for t in episode.turns:
        authored = t.index == 1 and t.user.message.strip() == case.opening.strip()
        if not authored and not t.user.human:
            moves.append((t.index, t.user, t.meter, previous_reply))
        previous_reply = t.reply
    left_at = len(episode.turns) + 1
    if episode.last_user is not None and not episode.last_user.human:
        moves.append((left_at, episode.last_user, episode.final_meter, previous_reply))

    need = _content_words(case.hidden_need)
    need_words = frozenset(need)
    words = [_words(move.message) for _, move, _, _ in moves]
    flags: list[AuditFlag] = []
    for (turn, move, _, reply), said in zip(moves, words, strict=True):
        flag = _out_of_character(move, said, reply, case, turn)
        if flag:
            flags.append(flag)
    for (turn, _, _, _), said in zip(moves, words, strict=True):
        flag = _hidden_need_leak(_content(said), need, need_words, turn)
        if flag:
            flags.append(flag)
    coop = _over_cooperative([(t, m, meter) for t, m, meter, _ in moves], float(case.persona.meter_start), episode.final_meter)
    if coop:
        flags.append(coop)
    for turn, move, meter, _ in moves:
        if move.leave and meter > limits.leave_meter:
            flags.append(AuditFlag(
                kind="premature_leave", turn=turn,
                detail=f"asked to leave at meter {meter:g}, above {limits.leave_meter:g}; the loop went on",
            ))
    if episode.stop_reason == "user_left" and left_at < limits.min_turns:
        flags.append(AuditFlag(
            kind="premature_leave", turn=left_at, detail=f"left at turn {left_at}, before min_turns {limits.min_turns}",
        ))
    return flags
