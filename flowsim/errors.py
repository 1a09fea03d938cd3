"""Exceptions raised for bad user input."""


class InputError(ValueError):
    """Input that flowsim cannot model; the message names the offending item."""
