"""What every command-line tool of the stack shares (ROS-free): help that shows defaults, and numbers
checked by argparse itself, so a bad value is refused before any work with the flag's name.

    from lerobot_core import cli
    p = argparse.ArgumentParser(prog=PROG, description=..., formatter_class=cli.HelpFormatter)
    p.add_argument("--fps", type=cli.number(float, minimum=0), default=0.0, help="... 0 = the dataset's")
    p.add_argument("--jobs", type=cli.positive_int, help="...")

A refused value reads ``PROG: error: argument --fps: must be >= 0, got '-5'`` (argparse adds the flag),
with exit code 2, before the tool opens a file or a node.
"""

from __future__ import annotations

import argparse
import copy
import math
from collections.abc import Callable


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """``--help`` shows each option's default (``(default: 30)``) and keeps the description's layout."""

    @staticmethod
    def _shows_default(action: argparse.Action) -> bool:
        # flags without a value, required ones and None defaults: nothing worth printing
        default = action.default
        if default is None or default is False or default is argparse.SUPPRESS or default in ("", []):
            return False
        return not action.required and bool(action.option_strings)

    def _format_action(self, action: argparse.Action) -> str:
        if not action.help and self._shows_default(action):  # argparse prints nothing for no help
            action = copy.copy(action)
            action.help = "(default: %(default)s)"
        return super()._format_action(action)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if not self._shows_default(action) or "%(default)" in text or "(default" in text:
            return text
        return super()._get_help_string(action)


def number(
    kind: type = float,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
) -> Callable[[str], float]:
    """An argparse ``type=``: a finite `kind` (int or float) within the bounds (``minimum``/``maximum``
    inclusive, ``above`` exclusive); anything else is refused naming the bound."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'an integer' if kind is int else 'a number'}, got {text!r}"
            ) from None
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if above is not None and not value > above:
            raise argparse.ArgumentTypeError(f"must be > {above:g}, got {text!r}")
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum:g}, got {text!r}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be <= {maximum:g}, got {text!r}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its own messages
    return parse


positive_int = number(int, minimum=1)
non_negative_int = number(int, minimum=0)
positive_float = number(float, above=0)
non_negative_float = number(float, minimum=0)

__all__ = [
    "HelpFormatter",
    "non_negative_float",
    "non_negative_int",
    "number",
    "positive_float",
    "positive_int",
]
