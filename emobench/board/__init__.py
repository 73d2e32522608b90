"""Leaderboard submissions: pack finished runs (`emobench submit`) and check one (`emobench verify`).

Downstream of the whole pipeline: it reads runs and recomputes their scores with scoring's own
functions; nothing in the pipeline imports it.
"""
