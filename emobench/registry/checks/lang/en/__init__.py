"""The English pack (pack.py)."""
