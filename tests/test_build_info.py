"""Provenance of an installed emobench: the commit its wheel was built from (git_sha in every
run manifest), and the ``latest`` link a run leaves beside itself for the next command."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from emobench.library_paths import BUILD_INFO, git_sha
from emobench.rundir import LATEST, RunDir
from tests.wheel_support import commit, sources


def _build_info(wheel: Path) -> dict[str, object]:
    with zipfile.ZipFile(wheel) as zf:
        return dict(json.loads(zf.read(f"emobench/library/{BUILD_INFO}")))


def _built_info(source: Path, dist: Path) -> dict[str, object]:
    """Build the wheel with this interpreter's setuptools (no network) and read its build info."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--wheel-dir", str(dist), str(source)],
        capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = dist.glob("emobench-*.whl")
    return _build_info(wheel)


def test_a_wheel_records_the_commit_it_was_built_from(tmp_path: Path, emobench_wheel: tuple[Path, str]) -> None:
    wheel, sha = emobench_wheel  # the run's wheel, built from a git clone of the checkout
    assert _build_info(wheel) == {"git_sha": sha} and len(sha) == 40
    # The same sources outside a git checkout (an sdist, a copy): no commit is claimed.
    copy = sources(tmp_path / "copy")
    assert _built_info(copy, tmp_path / "dist-copy") == {"git_sha": None}


def test_git_sha_reads_the_build_info_or_the_checkout(tmp_path: Path) -> None:
    library = tmp_path / "site-packages" / "emobench" / "library"
    library.mkdir(parents=True)
    assert git_sha(library) is None  # a wheel built before build info existed
    (library / BUILD_INFO).write_text(json.dumps({"git_sha": "ab" * 20}))
    assert git_sha(library) == "ab" * 20
    (library / BUILD_INFO).write_text(json.dumps({"git_sha": None}))
    assert git_sha(library) is None
    # An installed library inside another project's repository never reports that repository's commit.
    project = tmp_path / "site-packages"
    (project / "f").write_text("x")
    commit(project)
    (library / BUILD_INFO).unlink()
    assert git_sha(library) is None
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "library.yaml").write_text("edition: 3\n")
    sha = commit(checkout)
    assert git_sha(checkout) == sha


def test_latest_follows_the_newest_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    first, second = RunDir(runs / "20260101-000000"), RunDir(runs / "20260101-000100")
    for rd in (first, second):
        rd.create()
        rd.mark_latest()
        (rd.path / "manifest.json").write_text(json.dumps({"run_id": rd.path.name}))
        assert json.loads((runs / LATEST / "manifest.json").read_text())["run_id"] == rd.path.name
    assert (runs / LATEST).readlink() == Path(second.path.name)  # relative: the folder of runs can move
    # A run resumed through the link leaves it as it is.
    RunDir(runs / LATEST).mark_latest()
    assert (runs / LATEST).readlink() == Path(second.path.name)
    assert sorted(p.name for p in runs.iterdir()) == sorted([first.path.name, second.path.name, LATEST])


@pytest.mark.parametrize("kind", ["folder", "file"])
def test_latest_never_replaces_what_the_user_named_so(tmp_path: Path, kind: str) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    mine = runs / LATEST
    if kind == "folder":
        mine.mkdir()
        (mine / "notes.txt").write_text("mine")
    else:
        mine.write_text("mine")
    rd = RunDir(runs / "r")
    rd.create()
    rd.mark_latest()
    assert not mine.is_symlink()
    assert (mine / "notes.txt" if kind == "folder" else mine).read_text() == "mine"
    assert sorted(p.name for p in runs.iterdir()) == [LATEST, "r"]
