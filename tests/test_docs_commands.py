"""Every shell command in README.md and docs/*.md, run as written by a user who follows them.

The command blocks are the fenced blocks tagged bash, sh, shell or console (in a console block,
the lines after a ``$ `` prompt), and untagged blocks whose first command is a program a user
runs (PROGRAMS). A block that cannot run here carries, on the line right before its fence,
``<!-- docs-test: skip: REASON -->``; every other block runs, each command checked in turn,
in a fresh non-editable install: the wheel built from a git clone of this checkout (a copy
outside it), installed into the clone's ``.venv`` (where the demo's setup puts it), with that
venv first on PATH and the clone as the current folder. The blocks of one page share its
exported variables, as in one terminal.

Model roles reach the stdlib fake OpenAI server (tests/fake_openai.py) without a changed command
line: it listens on 127.0.0.1:8000, where the docs' placeholder endpoints point, and
OPENAI_BASE_URL and OPENAI_API_BASE, which litellm reads for ``litellm:openai/...`` roles, point
at it too. docs/testing.md says so for contributors. The pipelines
in docs/ci/*.yml are run by tests/test_ci_examples.py.

Slow by design (13.5 min in one run on a 2-core AMD EPYC shared with other work; docs/testing.md).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fake_openai import FakeOpenAIServer, FakeState
from tests.test_wheel_install import _pip, _user_env
from tests.wheel_support import commit, sources

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
PORT = 8000
ENDPOINT = f"http://127.0.0.1:{PORT}/v1"
SHELLS = frozenset({"bash", "sh", "shell", "console"})
# An untagged block is a command block when its first command is one of these.
PROGRAMS = frozenset({"emobench", ".venv/bin/emobench", "pip", "python", "python3", "git", "nox", "export", "cd", "ls",
                      "duckdb", "vllm", "curl"})
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)")
MARK = re.compile(r"<!--\s*docs-test:(.*?)-->")
SKIP = re.compile(r"\s*skip:\s*(\S.*?)\s*$")
COMMAND_TIMEOUT_S = 1200


class DocError(ValueError):
    """A docs-test mark that is malformed or not right before a command block."""


@dataclass(frozen=True)
class Block:
    doc: str  # relative to the repository root
    line: int  # the opening fence, 1-based
    lang: str
    body: tuple[str, ...]
    skip: str | None

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    def commands(self) -> list[str]:
        """The block's commands, a backslash-continued command as one; comments and, in a
        console block, output lines dropped."""
        lines = list(self.body)
        if self.lang == "console":
            lines, keep = [], False
            for line in self.body:
                if line.startswith("$ "):
                    lines.append(line[2:])
                    keep = line.rstrip().endswith("\\")
                elif keep:
                    lines.append(line)
                    keep = line.rstrip().endswith("\\")
        commands: list[str] = []
        current = ""
        for line in lines:
            if not current and (not line.strip() or line.lstrip().startswith("#")):
                continue
            current = f"{current}\n{line}" if current else line
            if not line.rstrip().endswith("\\"):
                commands.append(current)
                current = ""
        if current:
            commands.append(current)
        return commands


def _is_command_block(lang: str, body: list[str]) -> bool:
    if lang in SHELLS:
        return True
    if lang:
        return False
    first = next((line.split()[0] for line in body if line.strip() and not line.lstrip().startswith("#")), None)
    return first in PROGRAMS


def doc_blocks(path: Path, text: str | None = None) -> list[Block]:
    """The command blocks of a markdown file, with their skip reasons."""
    name = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    lines = (path.read_text(encoding="utf-8") if text is None else text).splitlines()
    blocks: list[Block] = []
    mark: tuple[int, str] | None = None  # (line, reason) waiting for its block
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            found = MARK.search(lines[i])
            if found:
                if mark is not None:
                    raise DocError(f"{name}:{mark[0]}: docs-test mark not right before a command block")
                reason = SKIP.fullmatch(found.group(1))
                if reason is None:
                    raise DocError(f"{name}:{i + 1}: a docs-test mark reads <!-- docs-test: skip: REASON -->")
                mark = (i + 1, reason.group(1))
            elif lines[i].strip() and mark is not None:
                raise DocError(f"{name}:{mark[0]}: docs-test mark not right before a command block")
            i += 1
            continue
        close = re.compile(rf"^ {{0,3}}{fence.group(1)[0]}{{{len(fence.group(1))},}}\s*$")
        end = next((j for j in range(i + 1, len(lines)) if close.match(lines[j])), len(lines))
        lang, body = fence.group(2).lower(), lines[i + 1 : end]
        if _is_command_block(lang, body):
            blocks.append(Block(name, i + 1, lang, tuple(body), mark[1] if mark else None))
        elif mark is not None:
            raise DocError(f"{name}:{mark[0]}: docs-test mark not right before a command block")
        mark = None
        i = end + 1
    if mark is not None:
        raise DocError(f"{name}:{mark[0]}: docs-test mark not right before a command block")
    return blocks


def all_blocks() -> list[Block]:
    return [block for doc in DOCS for block in doc_blocks(doc)]


# Quick checks of the extraction (no install).

def test_every_doc_parses_and_every_skip_has_a_reason() -> None:
    blocks = all_blocks()
    assert blocks, "no command block found"
    assert all(block.commands() for block in blocks), [b.where for b in blocks if not b.commands()]
    # The README's folder layout is an untagged block, and not a command.
    assert "\nemobench/registry/ " in (ROOT / "README.md").read_text(encoding="utf-8")
    assert not any("emobench/registry/ " in "\n".join(b.body) for b in blocks)


def test_extraction_of_each_kind_of_block() -> None:
    text = "\n".join([
        "# T", "", "```bash", "# a comment", "export KEY=…", "emobench run --config c.yaml \\", "  --subject x", "```",
        "", "```", "emobench/registry/   cards", "```",
        "", "```", "emobench show runs/latest", "```",
        "", "<!-- docs-test: skip: needs a GPU -->", "```sh", "vllm serve m", "```",
        "", "```console", "$ emobench --version", "emobench 0.1.0", "$ ls \\", "  runs", "runs", "```",
        "", "```yaml", "a: 1", "```", "", "```python", "print(1)", "```",
    ])
    blocks = doc_blocks(Path("t.md"), text)
    assert [(b.line, b.lang, b.skip) for b in blocks] == [
        (3, "bash", None), (14, "", None), (19, "sh", "needs a GPU"), (23, "console", None),
    ]
    assert blocks[0].commands() == ["export KEY=…", "emobench run --config c.yaml \\\n  --subject x"]
    assert blocks[3].commands() == ["emobench --version", "ls \\\n  runs"]


@pytest.mark.parametrize("text", [
    "<!-- docs-test: skip: needs a GPU -->\nSome prose.\n```bash\nls\n```",  # prose in between
    "<!-- docs-test: skip: x -->\n```yaml\na: 1\n```",  # not a command block
    "```bash\nls\n```\n<!-- docs-test: skip: x -->",  # nothing after it
    "<!-- docs-test: skip: -->\n```bash\nls\n```",  # no reason
    "<!-- docs-test: ignore -->\n```bash\nls\n```",  # not a skip
])
def test_a_stray_or_malformed_mark_is_an_error(text: str) -> None:
    with pytest.raises(DocError, match=r"t\.md:\d+: "):
        doc_blocks(Path("t.md"), text)


_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-./=…", min_size=1, max_size=8)
_COMMAND = st.lists(st.lists(_WORD, min_size=1, max_size=4).map(" ".join), min_size=1, max_size=3).map(" \\\n  ".join)


@given(st.lists(st.tuples(st.sampled_from(["bash", "sh", "shell"]), st.lists(_COMMAND, min_size=1, max_size=4),
                          st.none() | _WORD), max_size=5))
def test_blocks_come_back_as_written(specs: list[tuple[str, list[str], str | None]]) -> None:
    parts = ["# Doc", ""]
    for lang, commands, skip in specs:
        if skip is not None:
            parts.append(f"<!-- docs-test: skip: {skip} -->")
        parts += [f"```{lang}", "# what it does", *commands, "```", "", "Prose.", ""]
    blocks = doc_blocks(Path("t.md"), "\n".join(parts))
    assert [(b.lang, b.commands(), b.skip) for b in blocks] == specs


# The commands themselves, in a fresh install.

@dataclass(frozen=True)
class Workspace:
    clone: Path
    env: dict[str, str]
    exports: Path  # a folder for each page's exported variables


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory, emobench_wheel: tuple[Path, str]) -> Iterator[Workspace]:
    """A git clone of this checkout outside it, its .venv holding the wheel built from it (the
    run's one wheel: the same files make the same commit)."""
    work = tmp_path_factory.mktemp("docs")
    wheel, sha = emobench_wheel
    clone = sources(work / "emobench")
    assert commit(clone) == sha
    venv = clone / ".venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    _pip(venv, "install", str(wheel))
    env = _user_env(work / "responses.sqlite")
    env.pop("OPENAI_API_KEY", None)  # the docs export their own
    env.update(PATH=f"{venv / 'bin'}:{env['PATH']}", VIRTUAL_ENV=str(venv), OPENAI_BASE_URL=ENDPOINT,
               OPENAI_API_BASE=ENDPOINT)
    (work / "exports").mkdir()
    yield Workspace(clone, env, work / "exports")


def _script(commands: list[str], exports: Path) -> str:
    """The commands as written, in one shell, each echoed and stopped on its own exit status
    (``set -e`` would let the first command of an ``a && b`` fail unseen). The variables the
    page's earlier blocks exported are read from, and this block's written to, ``exports``."""
    parts = [f"if [ -f {shlex.quote(str(exports))} ]; then . {shlex.quote(str(exports))}; fi"]
    for command in commands:
        parts += [f"printf '%s\\n' {shlex.quote('$ ' + command)} >&2", command,
                  'rc=$?; if [ "$rc" -ne 0 ]; then echo "docs-test: exit $rc" >&2; exit "$rc"; fi']
    parts.append(f"export -p > {shlex.quote(str(exports))}")
    return "\n".join(parts) + "\n"


def test_each_command_is_checked_and_exports_carry_to_the_next_block(tmp_path: Path) -> None:
    exports = tmp_path / "exports"

    def run(*commands: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", _script(list(commands), exports)], capture_output=True, text=True)

    first = run("export OPENAI_API_KEY=sk-...", "echo one")
    assert first.returncode == 0 and first.stdout == "one\n"
    second = run('echo "key=$OPENAI_API_KEY"', "false && echo never", "echo after")
    assert second.stdout == "key=sk-...\n" and second.returncode == 1  # `set -e` would have gone on to "after"
    assert second.stderr.splitlines()[-2:] == ["$ false && echo never", "docs-test: exit 1"]


@pytest.mark.install
@pytest.mark.timeout(3600)
def test_every_doc_command_runs_as_written(workspace: Workspace, record_property: Callable[[str, object], None]) -> None:
    blocks = all_blocks()
    try:
        server = FakeOpenAIServer(FakeState(), port=PORT)
    except OSError as exc:
        pytest.fail(f"127.0.0.1:{PORT}, where the docs' placeholder endpoints point, is taken ({exc.strerror}); free it")
    ran: list[tuple[Block, float]] = []
    failed: list[str] = []
    with server:
        for block in blocks:
            if block.skip:
                continue
            start = time.monotonic()
            try:
                script = _script(block.commands(), workspace.exports / block.doc.replace("/", "_"))
                done = subprocess.run(["bash", "-c", script], cwd=workspace.clone, env=workspace.env,
                                      capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                failed.append(f"{block.where}: over {COMMAND_TIMEOUT_S} s")
                continue
            ran.append((block, time.monotonic() - start))
            if done.returncode != 0:
                failed.append(f"{block.where}: exit {done.returncode}\n{done.stdout[-1500:]}\n{done.stderr[-3000:]}")
    skipped = [block for block in blocks if block.skip]
    reasons = Counter(block.skip for block in skipped)
    lines = [f"docs commands: {len(ran)} blocks ran ({sum(len(b.commands()) for b, _ in ran)} commands, "
             f"{sum(s for _, s in ran):.0f} s), {len(failed)} failed, {len(skipped)} skipped"]
    lines += [f"  ran {block.where} in {seconds:.0f} s" for block, seconds in ran]
    lines += [f"  skipped {block.where}: {block.skip}" for block in skipped]
    # Printed at the end of the run (tests/tiers.py), also from an xdist worker.
    record_property("summary", "\n".join(lines) + f"\n  ({len(reasons)} distinct reasons)")
    if not server.state.requests:
        failed.append("no doc command reached the loopback server")
    # The wheel built in the clone records the clone's commit in every run's manifest.
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=workspace.clone, capture_output=True, text=True,
                          check=True).stdout.strip()
    shas = {m.parent.name: json.loads(m.read_text())["git_sha"] for m in (workspace.clone / "runs").glob("*/manifest.json")}
    if not shas or set(shas.values()) != {head}:
        failed.append(f"git_sha of the runs {shas}, not the clone's commit {head}")
    assert not failed, "\n\n".join(failed)
