"""Deterministic trackers that follow the simulated user's state over an episode."""
