"""The Chinese pack (pack.py)."""
