"""Card text as the checks read it: NFKC, invisible characters removed, confusable letters
folded to the ASCII letters they imitate (Unicode's confusables table, as the
confusable-homoglyphs package ships it), so a rule cannot be passed by a Cyrillic `о`, a
zero-width space or a full-width `＜system＞`.

`plain` also takes accents off letters of the alphabets, for the injection rules, which read
intent rather than spelling. Both are for matching only; cards are stored, hashed and shown to
the models as written.
`unseen` names what a card may not hold at all: control characters, and the invisible ones
(zero-width spaces and joiners, bidirectional overrides) that make a text read as something
other than what it says.
"""

from __future__ import annotations

import json
import re
import unicodedata
from functools import cache
from importlib.resources import files

# Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt) and the controls
# other than tab and newline: invisible when rendered, so they hide text from a pattern.
_IGNORABLE = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
_CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f"
_HIDDEN = re.compile(f"[{_IGNORABLE}{_CONTROL}]")
# An emoji's joiner and presentation selectors are ordinary text; they are still removed by fold.
_EMOJI_PARTS = {"\u200d", "\ufe0e", "\ufe0f"}
# Scripts whose letters are never folded: the confusables table maps a few Han characters
# (一, 〇) to Latin or kana lookalikes, which would rewrite ordinary Chinese.
_NATIVE = ("CJK", "IDEOGRAPHIC", "HIRAGANA", "KATAKANA", "HANGUL", "BOPOMOFO", "KANGXI")


@cache
def _folds() -> dict[int, str]:
    """Each non-ASCII character the confusables table says imitates printable ASCII."""
    table = json.loads((files("confusable_homoglyphs") / "confusables.json").read_text(encoding="utf-8"))
    folds: dict[int, str] = {}
    for char, homoglyphs in table.items():
        if (len(char) != 1 or char.isascii() or unicodedata.name(char, "").startswith(_NATIVE)
                or unicodedata.normalize("NFKC", char).isascii()):
            continue  # NFKC already says what a full-width ［ is: [, where the skeleton says (
        target = next((h["c"] for h in homoglyphs if h["c"].isascii() and h["c"].strip()
                       and h["c"].isprintable()), None)
        if target is not None:
            folds[ord(char)] = target
    # The table's skeletons merge I, l and 1 (Cyrillic І becomes l); a capital takes the fold
    # of its small letter instead (і is i), so "Іgnore" reads "Ignore".
    for code in [c for c, target in folds.items() if target in "l1|I"]:
        small = chr(code).lower()
        if small != chr(code) and len(small) == 1 and folds.get(ord(small), "").isalpha():
            folds[code] = folds[ord(small)].upper()
    return folds


def fold(text: str) -> str:
    """The text a pattern should match: NFKC, invisible characters removed, confusables folded."""
    text = _HIDDEN.sub("", text)
    if text.isascii():
        return text
    # folded before NFKC too, which turns some look-alikes (lunate Ϲ) into letters that are not
    return unicodedata.normalize("NFKC", text.translate(_folds())).translate(_folds())


def _native(char: str) -> bool:
    return unicodedata.name(char, "").startswith(_NATIVE)


def plain(text: str) -> str:
    """The folded text with the accents taken off letters of the alphabets (Ìgnörè reads
    Ignore), for rules that read intent, not spelling. A mark on a native script's letter stays:
    NFKD splits が into か and its voicing mark, and Hangul into jamo, which NFC joins back."""
    text = fold(text)
    if text.isascii():
        return text
    out: list[str] = []
    for char in unicodedata.normalize("NFKD", text):
        if unicodedata.combining(char) and out and not _native(out[-1]):
            continue
        out.append(char)
    return unicodedata.normalize("NFC", "".join(out))


def unseen(text: str) -> str | None:
    """The first control or invisible character of a text (as U+XXXX and its name), or None."""
    for match in _HIDDEN.finditer(text):
        char = match.group()
        if char not in _EMOJI_PARTS:
            return f"U+{ord(char):04X} {unicodedata.name(char, 'control character')}"
    return None
