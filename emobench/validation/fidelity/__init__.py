"""Simulator fidelity: runs people played as the user against the simulator's runs of the same
cases (`emobench validate --fidelity`, docs/validity.md)."""
