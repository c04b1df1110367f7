"""The one exception type that reaches the user as a plain message, never a traceback."""


class SsdbenchError(Exception):
    """An error whose text is meant for the person at the console."""
