"""Errors raised by the dataset writer and reader."""


class DatasetError(RuntimeError):
    """A dataset could not be written or read; the message says what, where and what to do."""
