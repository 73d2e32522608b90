"""The judge panel: render rubrics, call, validate against schema, aggregate."""
