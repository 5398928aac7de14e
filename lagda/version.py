"""The version of lagda, in one place below every module that writes it into a file."""

__version__ = "0.1.0"
