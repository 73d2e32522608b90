"""Scoring: EPM-Q, MDEP turn vectors, pairwise ratings and judge reliability."""
