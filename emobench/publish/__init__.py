"""Publishing: the leaderboard (parquet + HTML), terminal table, and the CI regression gate."""
