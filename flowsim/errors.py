"""Exceptions raised for bad user input."""


class InputError(ValueError):
    """Input that flowsim cannot model; the message names the offending item."""


def read_text_file(path, what: str) -> str:
    """The UTF-8 text of ``path``; an :class:`InputError` naming the file if it cannot be read.

    ``what`` says what the file was meant to be ("the scenario", "the sweep spec", ...).
    """
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: cannot read {what}: {err}") from None
