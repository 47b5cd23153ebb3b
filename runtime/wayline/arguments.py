"""Command-line arguments as the ``wayline`` command and the operator both read them: a parser
whose refusals are one ``error:`` line and exit code 2, and the ``type=`` checks of whole
numbers, ranges and ports."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NoReturn

__all__ = ["UsageParser", "port_arg", "range_arg", "whole_arg"]


class UsageParser(argparse.ArgumentParser):
    """A parser whose refusals are one ``error:`` line and exit 2, as every usage error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see: {self.prog} --help)\n")


def whole_arg(text: str, least: int, why: str) -> int:
    """An option's whole number (for argparse ``type=``), at least ``least`` (else ``why``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{why}, got {value}")
    return value


def port_arg(text: str) -> int:
    """A port option (argparse ``type=``): 0 to 65535, 0 for any free one."""
    port = whole_arg(text, 0, "a port is 0 to 65535 (0: any free one)")
    if port > 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535 (0: any free one), got {port}")
    return port


def range_arg(least: int, most: int) -> Callable[[str], int]:
    """An option's whole number from ``least`` to ``most`` (argparse ``type=``)."""

    def whole_in_range(text: str) -> int:
        value = whole_arg(_integral(text), least, f"must be {least} to {most}")
        if value > most:
            raise argparse.ArgumentTypeError(f"must be {least} to {most}, got {value}")
        return value

    return whole_in_range


def _integral(text: str) -> str:
    """``60.0`` as ``60``: a whole number written as a float, as the environment takes it."""
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() else text
