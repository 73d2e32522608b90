"""A library is read once per process while its files stay the same, and read again after any
edit, even one that keeps the file's size and modification time."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from emobench.errors import InputError
from emobench.registry import load_registry

TINY = Path(__file__).parent / "data" / "registry" / "tiny"


def _same_size_edit(path: Path, old: str, new: str) -> None:
    """Replace text by text of the same byte length and put the timestamps back."""
    assert len(old.encode()) == len(new.encode())
    st = path.stat()
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_an_unchanged_library_is_not_read_again_and_any_edit_is_seen(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    shutil.copytree(TINY, root)
    first = load_registry(root)
    assert load_registry(root) is first

    persona = root / "personas" / "ada.yaml"
    _same_size_edit(persona, "Fixture persona", "Fixture anosrep")
    second = load_registry(root)
    assert second is not first
    assert {c.content_hash for c in second.all_cases()} != {c.content_hash for c in first.all_cases()}

    # A broken edit is reported on every load, never answered from the memo.
    _same_size_edit(persona, "age: 40", "age: xx")
    for _ in range(2):
        with pytest.raises(InputError, match="age"):
            load_registry(root)
