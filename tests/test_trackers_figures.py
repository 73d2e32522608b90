"""Every figure on the affect head's model card and in docs/trackers.md is a value of
affect_head.json, the provenance that scripts/train_affect_head.py writes beside the weights."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emobench.trackers.head import WEIGHTS_PATH

ROOT = Path(__file__).resolve().parents[1]
CARD = WEIGHTS_PATH.parent / "MODEL_CARD.md"
DOCS = ROOT / "docs" / "trackers.md"
PROVENANCE: dict[str, Any] = json.loads(WEIGHTS_PATH.with_suffix(".json").read_text(encoding="utf-8"))
TEST = PROVENANCE["figures"]["test"]
EMOBANK = PROVENANCE["figures"]["emobank_test"]
# Numbers in the prose that are not figures of the head: the targets of issue 17 (0.50, 0.90,
# 0.7), the majority baseline's recall and chance AUC (1.0, 0.5), the per-message valences of
# the limits (tests/test_trackers_affect.py checks them against the tracker itself), the data's
# licence (CC BY 4.0) and the size of the development run the card owns up to (7,000 rows).
NOT_FIGURES = {"0.50", "0.90", "0.7", "1.0", "0.5", "0.17", "0.89", "0.44", "0.51", "0.46", "4.0", "7,000"}


def _tables(text: str) -> list[list[list[str]]]:
    """The markdown tables of `text`: rows of stripped cells, header included, rule left out."""
    tables: list[list[list[str]]] = []
    previous_was_row = False
    for line in text.splitlines():
        is_row = line.startswith("|")
        if is_row and not set(line) <= set("|- "):
            cells = [cell.strip().strip("*").strip() for cell in line.strip().strip("|").split("|")]
            if not previous_was_row:
                tables.append([])
            tables[-1].append(cells)
        previous_was_row = is_row
    return tables


def _table(text: str, first_header: str) -> dict[str, list[str]]:
    (table,) = [t for t in _tables(text) if t[0][0] == first_header]
    return {row[0]: row[1:] for row in table[1:]}


def _numbers(cell: str) -> list[float]:
    return [float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*\.?\d*", cell)]


def _pair(a: float, b: float) -> str:
    return f"{a} / {b}"


def test_card_figures_table_is_the_provenance() -> None:
    al, kept, auc = TEST["all"], TEST["kept_only"], TEST["polarity_auc"]
    n = al["classes"]["neutral"], kept["classes"]["neutral"]
    polarity = f"polarity AUC ({auc['n_positive']:,} positive vs {auc['n_negative']:,} negative texts)"
    expected = {
        "macro-F1, 8 kept classes, all": [al["macro_f1"], al["majority_macro_f1"], "–"],
        "macro-F1, 8 kept classes, kept only": [kept["macro_f1"], kept["majority_macro_f1"], "–"],
        "neutral precision / recall, all": [
            _pair(n[0]["precision"], n[0]["recall"]), _pair(al["majority_neutral_share"], 1.0), "–"
        ],
        "neutral precision / recall, kept only": [
            _pair(n[1]["precision"], n[1]["recall"]), _pair(kept["majority_neutral_share"], 1.0), "–"
        ],
        polarity: [auc["head"], 0.5, auc["vader"]],
        "EmoBank test valence, Pearson / Spearman": [
            _pair(EMOBANK["head"]["pearson"], EMOBANK["head"]["spearman"]), "–",
            _pair(EMOBANK["vader"]["pearson"], EMOBANK["vader"]["spearman"]),
        ],
    }
    table = _table(CARD.read_text(encoding="utf-8"), "figure")
    assert list(table) == list(expected)
    for label, cells in expected.items():
        assert table[label] == [str(c) for c in cells], label


def test_card_class_table_is_the_provenance() -> None:
    table = _table(CARD.read_text(encoding="utf-8"), "class")
    assert list(table) == list(PROVENANCE["groups"])
    for name, (labels, threshold) in table.items():
        assert sorted(labels.split(", ")) == PROVENANCE["groups"][name], name
        assert float(threshold) == PROVENANCE["thresholds"][name], name


def test_docs_figures_table_is_the_provenance() -> None:
    al, kept, auc = TEST["all"], TEST["kept_only"], TEST["polarity_auc"]
    expected = {
        "macro-F1, 8 kept classes (all texts / kept-class texts)": [
            _pair(al["macro_f1"], kept["macro_f1"]), _pair(al["majority_macro_f1"], kept["majority_macro_f1"]), "–"
        ],
        "neutral precision / recall (kept-class texts)": [
            _pair(kept["classes"]["neutral"]["precision"], kept["classes"]["neutral"]["recall"]),
            _pair(kept["majority_neutral_share"], 1.0), "–",
        ],
        "polarity AUC, positive vs negative texts": [auc["head"], 0.5, auc["vader"]],
        "EmoBank valence, Pearson r": [EMOBANK["head"]["pearson"], "–", EMOBANK["vader"]["pearson"]],
    }
    table = _table(_figures_section(DOCS.read_text(encoding="utf-8")), "figure")
    assert table == {label: [str(c) for c in cells] for label, cells in expected.items()}


def _figures_section(text: str) -> str:
    start = text.index("\n## Figures")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def _leaves(node: Any) -> Iterator[float]:
    if isinstance(node, dict):
        for value in node.values():
            yield from _leaves(value)
    elif isinstance(node, list):
        for value in node:
            yield from _leaves(value)
    elif isinstance(node, int | float) and not isinstance(node, bool):
        yield float(node)


@pytest.mark.parametrize("where", ["card", "docs"])
def test_every_number_in_the_prose_is_a_provenance_value(where: str) -> None:
    """Decimals (figures, shown to 3 places or rounded to 2) and counts with thousands commas."""
    text = CARD.read_text(encoding="utf-8") if where == "card" else _figures_section(DOCS.read_text(encoding="utf-8"))
    values = set(_leaves(PROVENANCE["figures"])) | set(PROVENANCE["thresholds"].values()) | {float(PROVENANCE["train_rows"])}
    rounded = {round(v, 2) for v in values}
    unknown = []
    for token in re.findall(r"(?<![\w.])\d[\d,]*\.\d+|(?<![\w.])\d{1,3}(?:,\d{3})+", text):
        value = float(token.replace(",", ""))
        if token in NOT_FIGURES or value in values or ("." in token and len(token.split(".")[1]) == 2 and value in rounded):
            continue
        unknown.append(token)
    assert not unknown, f"numbers in {where} that affect_head.json does not hold: {unknown}"


def test_card_names_the_chosen_l2_and_the_split_sizes() -> None:
    card = CARD.read_text(encoding="utf-8")
    found = re.search(r"(\S+) for the emotions, (\S+) for the valence", card)
    assert found and (float(found[1]), float(found[2])) == (PROVENANCE["l2"]["emotion"], PROVENANCE["l2"]["valence"])
    assert f"{PROVENANCE['train_rows']:,} train rows" in " ".join(card.split())
    figures = PROVENANCE["figures"]
    assert f"dev ({figures['dev']['n']:,})" in card and f"test ({figures['test']['n']:,})" in card
    assert f"{figures['test']['n_kept_only']:,} texts" in card and f"({EMOBANK['n']:,} sentences" in card
