"""The errors of the landing layer: a file that cannot be read, a root that cannot be used."""

from __future__ import annotations


class LandingFileError(ValueError):
    """A landing file cannot be read at all; the message names the file and the problem."""

    def __init__(self, relpath: str, problem: str) -> None:
        super().__init__(f"{relpath}: {problem}")
        self.relpath = relpath
        self.problem = problem


class LandingRootError(ValueError):
    """The landing root cannot be used (missing, unreachable, denied); nothing was read.

    The message names the location and the setting to fix, never a credential.
    """

    def __init__(self, location: str, problem: str) -> None:
        super().__init__(f"landing root {location}: {problem}")
        self.location = location
        self.problem = problem
