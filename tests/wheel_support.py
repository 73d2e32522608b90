"""One wheel for the whole test run, built from a git clone of the checkout and kept between runs.

The clone's commit is made with a fixed author and date, so the same files always give the same
commit, which the wheel records as its git_sha. The wheel is cached under
~/.cache/emobench/wheels/<commit>/ and built again only when a file of the checkout changes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from filelock import FileLock

from emobench.user_cache import cache_root

CHECKOUT = Path(__file__).resolve().parents[1]
FIXED = {"GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@example.invalid", "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
         "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@example.invalid",
         "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z"}


def sources(dest: Path) -> Path:
    """The checkout's files as a clone has them (tracked, plus new files git does not ignore),
    so the build neither reads nor writes anything else of the working tree."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=CHECKOUT, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = CHECKOUT / name
        if source.is_file():  # a deleted, not yet committed file is still listed
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes(source.read_bytes())
            (dest / name).chmod(source.stat().st_mode)
    return dest


def commit(repo: Path, branch: str = "main") -> str:
    """Commit everything in ``repo`` as the one commit of a new repository; the same files give the same sha."""
    env = {**os.environ, **FIXED}
    for args in (["init", "-q", "-b", branch], ["add", "-A"], ["commit", "-q", "-m", "tree"]):
        subprocess.run(["git", *args], cwd=repo, check=True, env=env)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def build_wheel(work: Path) -> tuple[Path, str]:
    """The wheel of the checkout as it is now, and the commit it records."""
    sha = commit(sources(work / "emobench"))
    wheels = cache_root() / "wheels"
    kept = wheels / sha
    wheels.mkdir(parents=True, exist_ok=True)
    with FileLock(str(wheels / ".lock")):  # pytest-xdist workers: one builds, the other waits and reuses it
        if not (kept / ".complete").exists():
            shutil.rmtree(kept, ignore_errors=True)
            dist = work / "dist"
            done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(dist),
                                   str(work / "emobench")], capture_output=True, text=True)
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
            kept.mkdir(parents=True)
            for wheel in dist.glob("emobench-*.whl"):
                shutil.copy2(wheel, kept / wheel.name)
            (kept / ".complete").touch()
            for other in wheels.iterdir():  # one checkout's wheel is kept, not one per change ever made
                if other != kept and other.is_dir():
                    shutil.rmtree(other, ignore_errors=True)
    (wheel,) = kept.glob("emobench-*.whl")
    return wheel, sha
