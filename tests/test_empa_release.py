"""Where an import's cards come from: a git checkout's commit, --commit, or the known release whose
files the copy equals (git blob ids kept as data); else one line, and nothing is written. The
NOTICE says the material was modified (CC BY-NC 4.0 §3(a)(1)(B))."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from emobench.cli import app
from emobench.importers import empa_release
from emobench.importers.empa_release import Release, blob_id, known_releases, release_of

cli = CliRunner()
FIXTURE = Path(__file__).parent / "fixtures" / "empa_checkout"
FAKE_COMMIT = "f" * 40


def _import(checkout: Path, out: Path, *extra: str) -> Any:
    return cli.invoke(app, ["import", "empa-cases", str(checkout), "--out", str(out), *extra])


@pytest.fixture
def fixture_is_a_release(monkeypatch: pytest.MonkeyPatch) -> Release:
    """The fixture's own files standing in for a known release (the real one's hashes are EMPA's)."""
    files = [p.relative_to(FIXTURE) for p in FIXTURE.rglob("*") if p.is_file() and p.name != "README.md"]
    release = Release(commit=FAKE_COMMIT, official_cases=3, blobs={str(p): blob_id(FIXTURE / p) for p in files})
    monkeypatch.setattr(empa_release, "known_releases", lambda: (release,))
    return release


def test_the_known_release_is_d59757a_with_its_30_cards_and_git_blob_ids() -> None:
    (release,) = known_releases()
    assert release.commit.startswith("d59757a") and release.official_cases == 30
    assert sum(p.startswith("empa/data/cases/") for p in release.blobs) == 30
    assert release_of("d59757a") == release and release_of("d5975") is None
    # blob_id is git's own id of a file's content, so the data compares with any copy.
    readme = FIXTURE / "README.md"
    assert blob_id(readme) == subprocess.run(["git", "hash-object", str(readme)], capture_output=True, text=True).stdout.strip()


def test_a_copy_of_no_known_release_without_commit_is_refused_in_one_line(tmp_path: Path) -> None:
    done = _import(FIXTURE, tmp_path / "out" / "empa-zh")
    lines = done.stderr.strip().splitlines()
    assert done.exit_code == 2 and len(lines) == 1, done.output
    assert "--commit: not a git checkout, and its files match no known EMPA release (d59757a)" in lines[0]
    assert not (tmp_path / "out").exists()


def test_a_copy_is_identified_by_its_files_and_one_changed_byte_is_not(tmp_path: Path, fixture_is_a_release: Release) -> None:
    done = _import(FIXTURE, tmp_path / "a")
    assert done.exit_code == 0, done.output
    source = json.loads((tmp_path / "a" / "split.json").read_text(encoding="utf-8"))["source"]
    assert (source["commit"], source["release"], source["identified_by"]) == (FAKE_COMMIT, FAKE_COMMIT, "file hashes")
    assert f"at {FAKE_COMMIT}; release fffffff, its files unchanged" in (tmp_path / "a" / "NOTICE").read_text(encoding="utf-8")

    copy = tmp_path / "copy"
    shutil.copytree(FIXTURE, copy)
    card = copy / "empa" / "data" / "cases" / "script_902.md"
    card.write_text(card.read_text(encoding="utf-8").replace("舍不得。", "舍不得！", 1), encoding="utf-8")
    assert _import(copy, tmp_path / "b").exit_code == 2
    done = _import(copy, tmp_path / "c", "--commit", "abc1234")
    assert done.exit_code == 0, done.output
    source = json.loads((tmp_path / "c" / "split.json").read_text(encoding="utf-8"))["source"]
    assert (source["commit"], source["release"], source["identified_by"]) == ("abc1234", None, "--commit")


def test_the_notice_says_the_cards_were_modified(tmp_path: Path) -> None:
    assert _import(FIXTURE, tmp_path / "n", "--commit", "abc1234").exit_code == 0
    notice = (tmp_path / "n" / "NOTICE").read_text(encoding="utf-8")
    assert "\nModified: yes. emobench re-structured each case" in notice and "not translated" in notice
    assert "at abc1234; its files are not those of a known release; --commit" in notice
    assert "CC BY-NC 4.0" in notice and "@article{zhang2026empa" in notice
