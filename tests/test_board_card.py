"""The dataset card `leaderboard build` writes as the board's README.md (emobench/board/templates/card.md.j2)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from emobench.board.hub import stage, write_card

ROOT = Path(__file__).resolve().parents[1]
TABLES = ("leaderboard.parquet", "cases.parquet", "pairs.parquet", "index.html")


def _board(tmp: Path, *, external: bool = True) -> Path:
    board = tmp / "board"
    shutil.rmtree(board, ignore_errors=True)
    board.mkdir(parents=True)
    for name in TABLES:
        shutil.copyfile(ROOT / "leaderboard" / name, board / name)
    if external:
        (board / "external" / "other-bundle").mkdir(parents=True)
    return board


def _edit_leaderboard(board: Path, subjects: dict[str, str] | None = None, split: str | None = None) -> None:
    path = board / "leaderboard.parquet"
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    if split is not None:
        runs = json.loads(meta[b"emobench.source_runs"])
        meta[b"emobench.source_runs"] = json.dumps([{**r, "split": split} for r in runs]).encode()
    if subjects:
        column = pa.array([subjects.get(s, s) for s in table.column("subject").to_pylist()])
        table = table.set_column(table.schema.get_field_index("subject"), "subject", column)
    pq.write_table(table.replace_schema_metadata(meta), path)


def test_the_card_describes_the_tables_and_marks_a_demo_board(tmp_path: Path) -> None:
    board = _board(tmp_path)
    write_card(board)
    card = (board / "README.md").read_text()
    assert "config_name: pairs" in card and "`epmq_empa`" in card and "`index.html`" in card
    assert "These are the demo's numbers" in card and "- `demo` (split `demo`" in card
    assert "`external/other-bundle/`" in card
    # Staged for the Hub: the external bundles are not uploaded, so the card names none.
    staged = tmp_path / "stage"
    stage(board, staged)
    assert "external/" not in (staged / "README.md").read_text()
    _edit_leaderboard(board, split="test")
    write_card(board)
    assert "demo's numbers" not in (board / "README.md").read_text()


@settings(max_examples=25, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab|\n:-` *"), min_size=1, max_size=12))
def test_a_subject_label_stays_in_its_table_cell(tmp_path_factory, label: str) -> None:  # type: ignore[no-untyped-def]
    board = _board(tmp_path_factory.mktemp("card"), external=False)
    _edit_leaderboard(board, subjects={"vllm:embedded": label})
    write_card(board)
    card = (board / "README.md").read_text()
    table = card.split("| subject | EPM-Q (overall) |\n|---|---|\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(table) == 2
    # Each row keeps its three cell borders: a label's pipes are escaped, its line breaks folded.
    assert all(len(re.findall(r"(?<!\\)\|", row)) == 3 for row in table)
