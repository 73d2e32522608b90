"""A prompt layout change leaves a fixed-answer run's records as they were, but for the prompt versions.

Plays configs/standard.yaml (1 case: 6 episodes, judged and compared) against the fake server of
tests/, whose answers depend only on the request's seed and schema, twice: with this checkout's
prompts/ and judges/, and with those of git revision REV (the rest of the checkout as it is).
Then compares every record (episodes, judgements, pairwise verdicts and calls) with the volatile
fields masked (latencies, timestamps, the server's port and the config hash that holds it) and
the prompt versions replaced by their template's name.

    python bench/fixed_answer_records.py --before main
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ("episodes.jsonl", "judgements.jsonl", "pairwise.jsonl", "pairwise_calls.jsonl")
VERSION = re.compile(r"\b(simulator|mdep|holistic|pairwise|probe|director)@[0-9a-f]{10}\b")


def play(out: Path) -> None:
    """In this process (run with the checkout to test on sys.path): one run, its masked records to out."""
    import yaml
    from typer.testing import CliRunner

    from emobench.cli import app
    from emobench.library_paths import library_root
    from tests.fake_openai import FakeOpenAIServer, FakeState

    config = yaml.safe_load((library_root() / "configs" / "standard.yaml").read_text())
    roles = (config["subjects"][0], config["user"], *config["judges"])
    with FakeOpenAIServer(FakeState()) as server, tempfile.TemporaryDirectory() as tmp:
        for name, role in zip(("subject", "user", "judge"), roles, strict=True):  # labels seed the calls: no port in them
            role |= {"binding": f"openai:fake-model@{server.base_url}", "label": name}
        path = Path(tmp) / "standard.yaml"
        path.write_text(yaml.safe_dump(config))
        res = CliRunner().invoke(app, ["run", "--config", str(path), "--out", tmp, "--run-id", "r", "--no-progress",
                                       "--no-cache", "--limit", "1"])
        if res.exit_code != 0:
            raise SystemExit(res.output)
        lines = []
        for name in RECORDS:
            for line in (Path(tmp) / "r" / name).read_text().splitlines():
                record = json.loads(line)
                if "calls" in record:  # written in the order the calls ended
                    record["calls"].sort(key=lambda c: (c["role"], c["seed"], c["template"]))
                text = json.dumps(record, sort_keys=True).replace(server.base_url, "URL")
                text = re.sub(r'"(latency_s|started_at|finished_at|config_hash)": [^,}]+', r'"\1": 0', text)
                lines.append(VERSION.sub(r"\1@VERSION", text))
    out.write_text("\n".join(sorted(lines)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="main", help="the git revision whose prompts/ and judges/ to compare with")
    parser.add_argument("--play", type=Path, help=argparse.SUPPRESS)  # the child's side
    args = parser.parse_args()
    if args.play:
        play(args.play)
        return
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before"
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                               capture_output=True, text=True).stdout.split()
        for name in files:
            if (ROOT / name).is_file():
                (before / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, before / name)
        for folder in ("prompts", "judges"):
            shutil.rmtree(before / folder)
            archive = subprocess.run(["git", "archive", args.before, folder], cwd=ROOT, check=True, capture_output=True)
            subprocess.run(["tar", "-x", "-C", str(before)], input=archive.stdout, check=True)
        outs = {}
        for name, tree in (("before", before), ("after", ROOT)):
            outs[name] = Path(tmp) / f"{name}.txt"
            env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}
            subprocess.run([sys.executable, str(tree / "bench" / "fixed_answer_records.py"), "--play", str(outs[name])],
                           cwd=tree, env=env, check=True)
        a, b = outs["before"].read_text().splitlines(), outs["after"].read_text().splitlines()
        same = sum(x == y for x, y in zip(a, b, strict=False))
        verdict = "identical but for the prompt versions" if a == b else "DIFFERENT"
        print(f"{len(a)} records with {args.before}'s prompts, {len(b)} with this checkout's: {same} equal; {verdict}")


if __name__ == "__main__":
    main()
