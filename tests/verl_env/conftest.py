"""The tests in this folder run inside .venv-verl (tests/test_verl.py builds it and runs them there)."""

import importlib.util

if importlib.util.find_spec("verl") is None:
    collect_ignore_glob = ["test_*.py"]
