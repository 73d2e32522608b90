"""`emobench anchor`: a run's scores put on people's scale from a few human ratings (docs/anchor.md)."""
