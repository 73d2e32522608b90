"""One pack per library language: its word files, readers and prose rules (see ../pack.py)."""
