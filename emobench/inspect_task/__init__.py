"""emobench as an inspect_ai task (docs/inspect.md): inspect's models in the role seats of emobench's own loop."""
