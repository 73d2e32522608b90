"""What inspect imports through the `inspect_ai` entry point: registering the task by name (emobench/emobench)."""

from emobench.inspect_task.task import emobench

__all__ = ["emobench"]
