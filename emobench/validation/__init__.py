"""Checks of emobench's instruments against people: judges against human ratings, the simulator against human players."""
