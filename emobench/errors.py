"""User-facing errors: each renders as one line and maps to an exit code."""

from __future__ import annotations

from pathlib import Path


class EmobenchError(Exception):
    """An error the CLI reports as one line, without a traceback."""

    exit_code = 2


class InputError(EmobenchError):
    """Bad input: a card, config, role string or run directory. Names the file and field."""

    def __init__(self, source: str | Path, field: str, problem: str) -> None:
        self.source = str(source)
        self.field = field
        self.problem = problem
        where = f"{self.source}: {field}" if field else self.source
        super().__init__(f"{where}: {problem}")

    def __reduce__(self) -> tuple[type[InputError], tuple[str, str, str]]:
        return type(self), (self.source, self.field, self.problem)  # pickled from a Ray worker to the driver


class EndpointError(EmobenchError):
    """A model endpoint failed in a way retries could not fix. Names the endpoint."""

    exit_code = 3

    def __init__(self, endpoint: str, problem: str) -> None:
        self.endpoint = endpoint
        self.problem = problem
        super().__init__(f"endpoint {endpoint}: {problem}")

    def __reduce__(self) -> tuple[type[EndpointError], tuple[str, str]]:
        return type(self), (self.endpoint, self.problem)
