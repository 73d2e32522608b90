"""The run viewer: a run read into typed view rows, `emobench show` in the terminal and `emobench report` as one page.

It reads run directories and borrows the leaderboard's page helpers (publish/); publish never imports it.
"""
