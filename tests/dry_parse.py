"""Run a command's own argument parser on a command line and stop there: exit 0 if the parser takes
it, else argparse's own error (exit 2). Used by test_doc_commands.py, so the docs' command lines are
checked against the real CLIs without doing the work.

    python tests/dry_parse.py lerobot-bag-import bags/run1 --output data/pick --fps 30 ...
    python tests/dry_parse.py scripts/closed_loop.py --demos 20
"""

import argparse
import os
import runpy
import sys
from importlib.metadata import entry_points

_parse_known_args = argparse.ArgumentParser.parse_known_args
_parse_args = argparse.ArgumentParser.parse_args
_parse_intermixed_args = argparse.ArgumentParser.parse_intermixed_args
_inside_parse_args = False


class Parsed(SystemExit):
    pass


def parse_args(self, args=None, namespace=None):
    global _inside_parse_args
    _inside_parse_args = True
    try:
        _parse_args(self, args, namespace)  # argparse exits 2 on an error, naming the flag
    finally:
        _inside_parse_args = False
    raise Parsed(0)


def parse_intermixed_args(self, args=None, namespace=None):
    """lerobot-launch's: flags and name:=value pairs in any order (it calls parse_known_args inside)."""
    global _inside_parse_args
    _inside_parse_args = True
    try:
        _parse_intermixed_args(self, args, namespace)
    finally:
        _inside_parse_args = False
    raise Parsed(0)


def parse_known_args(self, args=None, namespace=None):
    result = _parse_known_args(self, args, namespace)
    if _inside_parse_args:
        return result
    raise Parsed(0)  # a CLI that passes the rest on (ROS arguments): what it knows parsed


def main() -> int:
    target, argv = sys.argv[1], sys.argv[2:]
    argparse.ArgumentParser.parse_args = parse_args
    argparse.ArgumentParser.parse_known_args = parse_known_args
    argparse.ArgumentParser.parse_intermixed_args = parse_intermixed_args
    sys.argv = [target, *argv]
    try:
        if target.endswith(".py"):
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))  # as `python SCRIPT` does
            runpy.run_path(target, run_name="__main__")
        else:
            (ep,) = [e for e in entry_points(group="console_scripts") if e.name == target]
            ep.load()(argv)
    except Parsed:
        return 0
    print(f"dry_parse: {target} did not parse its arguments", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
