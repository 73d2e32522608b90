"""Which languages the trackers read. The affect, lexicon and embedding trackers are English
(VADER's lexicon, an English MiniLM); no Chinese tracker has met the bar (docs/trackers.md), so a
Chinese episode carries no tracker columns, and every place that would show them says so by name."""

from __future__ import annotations

TRACKED_LANGUAGES = frozenset({"en"})
_NAMES = {"en": "English", "zh": "Chinese"}


def tracker_absence(language: str) -> str | None:
    """None where the trackers run on this language; else the line that names their absence."""
    if language in TRACKED_LANGUAGES:
        return None
    name = _NAMES.get(language, language)
    return f"trackers: not run for {language} (no {name} tracker meets the bar; docs/trackers.md)"


def trackers_note(languages: set[str] | list[str]) -> str | None:
    """One line for a run, report or leaderboard row: the absence for each untracked language."""
    lines = [line for lang in sorted(set(languages)) if (line := tracker_absence(lang))]
    return "; ".join(lines) or None
