"""Domain errors. The CLI and the Lambda handlers map them to user messages, once, at the edge."""


class TrainsweepError(Exception):
    """Base class: the message is written for the user and says what to do."""


class SpecError(TrainsweepError):
    """A sweep spec is invalid; ``errors`` lists (field path, message) pairs."""

    def __init__(self, message: str, errors: list[tuple[str, str]] | None = None):
        super().__init__(message)
        self.errors = errors or []


class BudgetExceededError(TrainsweepError):
    """The worst-case cost of a sweep exceeds its ``budget_usd``."""


class LocalModeError(TrainsweepError):
    """The embedded AWS could not run the sweep (e.g. ``local_gpu`` without a GPU)."""
