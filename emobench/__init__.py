"""emobench: a dynamic emotional-intelligence benchmark for chat models."""

__version__ = "0.1.0"
