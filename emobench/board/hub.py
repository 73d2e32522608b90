"""`leaderboard publish`: a leaderboard folder as a Hugging Face dataset: its tables, page and
verified submissions staged beside a dataset card (huggingface_hub's DatasetCard) whose configs
let `datasets.load_dataset` read each table; then uploaded, with the token read from HF_TOKEN.

Nothing is uploaded under --dry-run, and the token is never written anywhere.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from emobench.board.package import SUBMISSIONS, file_leaks, leaks
from emobench.errors import EndpointError, InputError

TABLES = {"leaderboard": "leaderboard.parquet", "cases": "cases.parquet", "pairs": "pairs.parquet"}
PAGE = "index.html"
TOKEN_ENV = "HF_TOKEN"


def _metadata(path: Path) -> dict[str, Any]:
    from emobench.publish.provenance import read_metadata

    return read_metadata(pq.read_schema(path))


def dataset_card(board: Path) -> Any:
    """The card: one config per table (the leaderboard the default), and what the tables rest on."""
    from huggingface_hub import DatasetCard, DatasetCardData

    meta = _metadata(board / TABLES["leaderboard"])
    table = pq.read_table(board / TABLES["leaderboard"], columns=["subject", "slice_family", "epmq"]).to_pandas()
    overall = table[table["slice_family"] == "overall"].sort_values("epmq", ascending=False)
    kept = sorted(p.name for p in (board / SUBMISSIONS).iterdir()) if (board / SUBMISSIONS).is_dir() else []
    # datasets cannot load a table without rows ("corresponds to no data"): an empty pairs table
    # (one subject, or no comparisons) is still written and staged, but named by no config.
    pairs = board / TABLES["pairs"]
    compared = pairs.is_file() and pq.ParquetFile(pairs).metadata.num_rows > 0
    configs = {name: file for name, file in TABLES.items() if name != "pairs" or compared}
    data = DatasetCardData(
        license="apache-2.0", pretty_name="emobench leaderboard", language=["en", "zh"],
        tags=["emotional-intelligence", "leaderboard", "llm-evaluation", "multi-turn"],
        configs=[{"config_name": name, "data_files": file, **({"default": True} if name == "leaderboard" else {})}
                 for name, file in configs.items()],
    )
    rows = "\n".join(f"| {r.subject} | {r.epmq:.1f} |" for r in overall.itertuples())
    verified = "\n".join(f"- `{run}`: root `{v['root']}`, protocol v{v['protocol_version']}, verified by emobench "
                         f"{v['verifier_version']} on {v['verified_at']}"
                         for run, v in sorted(meta.get("verifications", {}).items()))
    body = f"""
# emobench leaderboard

Scores of chat models on emobench, a dynamic emotional-intelligence benchmark: a simulated user
with a hidden need talks with the model under test over many turns, a judge panel rates every
reply, and EPM-Q (0 to 100) scores how far and how directly the user's needs moved.

- `leaderboard` (default): one row per subject per slice, every score with its 95% interval.
- `cases`: one row per subject per case, the mean over seeds.
- `pairs`: one row per pair of subjects per pairwise dimension (and `all` pooled): the judges'
  verdicts for each side, subject_a's win rate with its 95% interval, the position-flip rate, the
  invalid verdicts, and the Bradley-Terry probability of subject_a winning.{"" if compared else '''
  This board's runs compared no two subjects: pairs.parquet has no rows, and no config names it.'''}

The provenance (registry {str(meta.get('registry_version', ''))[:12]}, prompt versions, every role's model
and sampling) is in each parquet file's schema metadata under `emobench.*` keys.

| subject | EPM-Q (overall) |
|---|---|
{rows}

{f"It rests on {len(kept)} submission(s), each verified by `emobench verify` before it was added "
 f"(`emobench leaderboard add`), kept under `{SUBMISSIONS}/`." if kept else
 "Built with `emobench leaderboard build` from the runs its metadata names."}
{verified}
"""
    return DatasetCard(f"---\n{data.to_yaml()}\n---\n{body}")


def write_card(board: Path) -> None:
    """README.md beside the tables, so `datasets.load_dataset(board, CONFIG)` reads the folder as built."""
    dataset_card(board).save(board / "README.md")


def stage(board: Path, out: Path) -> list[str]:
    """Copy what is published into out with the card as README.md; the relative paths, sorted.
    A key, a token or a local path in any of it refuses the whole, naming the file and field."""
    for name in TABLES.values():
        if not (board / name).is_file():
            raise InputError(board / name, "", "missing: build the leaderboard first (leaderboard build or add)")
        leak = next(leaks(_metadata(board / name)), None)
        if leak is not None:
            raise InputError(board / name, f"schema metadata {leak[0]}", f"holds {leak[1]}; not published")
    if out.exists() and any(out.iterdir()):
        raise InputError(out, "", "exists and is not empty")
    out.mkdir(parents=True, exist_ok=True)
    names = [*TABLES.values(), *([PAGE] if (board / PAGE).is_file() else [])]
    for name in names:
        shutil.copyfile(board / name, out / name)
    if (board / SUBMISSIONS).is_dir():
        for sub in sorted(p for p in (board / SUBMISSIONS).iterdir() if not p.name.startswith(".")):
            for path in sorted(sub.iterdir()):
                leak = next(file_leaks(path), None) if path.suffix in (".json", ".jsonl", ".parquet") else None
                if leak is not None:
                    raise InputError(path, leak[0], f"holds {leak[1]}; not published")
            shutil.copytree(sub, out / SUBMISSIONS / sub.name)
    dataset_card(board).save(out / "README.md")
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())


def upload(staged: Path, repo: str) -> str:
    """Upload the staged folder to the dataset repo; the commit's URL. The Hub is HF_ENDPOINT's
    (read now, not at import), the token HF_TOKEN's; a refusal is one line naming the Hub."""
    token = os.environ.get(TOKEN_ENV)
    if not token:
        raise InputError(TOKEN_ENV, "", "not set: the Hub token is read from the environment only")
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    endpoint = os.environ.get("HF_ENDPOINT") or constants.ENDPOINT
    if constants.HF_HUB_OFFLINE:
        raise EndpointError(endpoint, "HF_HUB_OFFLINE is set: nothing is uploaded (--dry-run stages and lists)")
    api = HfApi(endpoint=endpoint, token=token)
    try:
        api.create_repo(repo, repo_type="dataset", exist_ok=True)
        info = api.upload_folder(folder_path=staged, repo_id=repo, repo_type="dataset",
                                 commit_message="emobench leaderboard publish")
    except (HfHubHTTPError, OfflineModeIsEnabled) as exc:
        raise EndpointError(endpoint, str(exc).splitlines()[0]) from None
    return str(info)
