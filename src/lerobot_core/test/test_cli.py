"""lerobot_core.cli: --help shows every default worth showing, also for an option without help text."""

import argparse

from lerobot_core import cli


def _help(*options: tuple[tuple, dict]) -> str:
    ap = argparse.ArgumentParser(prog="tool", formatter_class=cli.HelpFormatter)
    for args, kwargs in options:
        ap.add_argument(*args, **kwargs)
    return " ".join(ap.format_help().split())


def test_an_option_without_help_text_still_shows_its_default():
    # argparse prints nothing after an option that has no help, so its default was invisible
    text = _help((("--batch-size",), {"type": int, "default": 8}), (("--out",), {"default": "outputs/x"}))
    assert "--batch-size BATCH_SIZE (default: 8)" in text
    assert "--out OUT (default: outputs/x)" in text


def test_defaults_are_added_once_and_only_where_they_say_something():
    text = _help(
        (("--fps",), {"type": float, "default": 30.0, "help": "frames per second"}),
        (("--rate",), {"default": 5, "help": "Hz (default: %(default)s, the bus's)"}),
        (("--policy",), {"help": "a checkpoint"}),  # None: nothing to show
        (("--keep",), {"action": "store_true", "help": "reuse"}),  # a flag
        (("--v0",), {"required": True, "default": "x", "help": "policy v0"}),
        (("--plain",), {}),  # neither help nor default
    )
    assert "--fps FPS frames per second (default: 30.0)" in text
    assert text.count("(default: 5") == 1
    assert "--policy POLICY a checkpoint --keep reuse" in text
    assert "--v0 V0 policy v0 --plain PLAIN" in text
