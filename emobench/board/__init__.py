"""Leaderboard submissions: package a finished run (`board submit`) and check one (`board verify`).

Downstream of the whole pipeline: it reads runs and recomputes their scores with scoring's own
functions; nothing in the pipeline imports it.
"""
