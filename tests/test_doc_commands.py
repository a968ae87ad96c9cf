"""Every command line in README.md and docs/*.md (code blocks, and inline code that is a whole command) that runs one of this stack's CLIs (or scripts/*.py)
parses with that CLI as written, so the docs and the CLIs cannot drift apart: each is run through
tests/dry_parse.py, which runs the command's real argparse parser on the documented arguments and stops
before any work. LeRobot's own commands (lerobot-record, lerobot-train, ...) are tested verbatim, with
the plugins, by tests/test_lerobot_plugins.py; they are listed here as skipped, not parsed."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# LeRobot 0.4.4 / 0.6.1's console scripts (their bin/ folders): not ours, see tests/test_lerobot_plugins.py
LEROBOT_COMMANDS = {
    "lerobot-annotate", "lerobot-calibrate", "lerobot-dataset-viz", "lerobot-edit-dataset", "lerobot-eval",
    "lerobot-find-cameras", "lerobot-find-joint-limits", "lerobot-find-port", "lerobot-imgtransform-viz",
    "lerobot-info", "lerobot-record", "lerobot-replay", "lerobot-rollout", "lerobot-setup-can",
    "lerobot-setup-motors", "lerobot-teleoperate", "lerobot-train", "lerobot-train-tokenizer",
}  # fmt: skip


def our_commands() -> set[str]:
    out = set()
    for setup in (ROOT / "src").glob("*/setup.py"):
        out.update(re.findall(r'"(lerobot-[a-z0-9-]+) = ', setup.read_text()))
    return out


def command_lines(path: Path):
    """(line number, command words) of each command in the file's fenced code blocks."""
    lines = path.read_text().splitlines()
    inside, buf, start = False, "", 0
    for n, line in enumerate(lines, 1):
        if line.strip().startswith("```"):
            inside, buf = not inside, ""
            continue
        if not inside:
            continue
        text = line.strip()
        if buf == "":
            start = n
        if text.endswith("\\"):
            buf += text[:-1] + " "
            continue
        buf += text
        full, buf = buf, ""
        full = re.sub(r"^\$\s+", "", full)
        if "[--" in full:
            continue  # a synopsis (``CMD ARG... [--flag N]``), not a command line
        try:
            words = shlex.split(full, comments=True)
        except ValueError:
            continue
        # one command per shell step: a && b, a ; b, a | b
        cmd: list[str] = []
        for w in [*words, "&&"]:
            if w in ("&&", ";", "|", "||", "&"):
                while cmd and re.match(r"^[A-Z_][A-Z0-9_]*=", cmd[0]):  # VAR=value cmd
                    cmd.pop(0)
                if cmd and cmd[0] in ("time", "sudo", "exec"):
                    cmd.pop(0)
                if cmd:
                    yield start, cmd
                cmd = []
            else:
                cmd.append(w)


def inline_commands(path: Path):
    """(line number, command words) of inline code spans in the prose that are whole command lines:
    a command and at least three words after it, one a flag, no synopsis brackets; a placeholder
    (``--episodes N``, ``--policy <checkpoint>``) stands for a value and is given one."""
    text = path.read_text()
    prose = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    for m in re.finditer(r"`((?:lerobot-[a-z0-9-]+|python3? scripts/\S+\.py) [^`]*--[^`]*)`", prose):
        span = re.sub(r"<[a-z_ -]+>", "X", " ".join(m.group(1).split()))  # `--policy <checkpoint>`
        if any(c in span for c in "<[|(") or "..." in span:
            continue
        words = ["1" if re.fullmatch(r"[A-Z][A-Z0-9_]*", w) else w for w in shlex.split(span)]
        if len(words) < 4:
            continue  # `lerobot-sim-eval --policy`, `lerobot-dataset-info DIR --check`: a flag named in prose
        yield prose.count("\n", 0, m.start()) + 1, words


def documented():
    ours = our_commands()
    found = []
    for doc in DOCS:
        for n, cmd in [*command_lines(doc), *inline_commands(doc)]:
            where = f"{doc.relative_to(ROOT)}:{n}"
            if (
                cmd[0] in ("python", "python3")
                and len(cmd) > 1
                and re.match(r"(\./)?scripts/.*\.py$", cmd[1])
            ):
                found.append(pytest.param(where, [cmd[1], *cmd[2:]], id=where))
            elif cmd[0] in ours:
                found.append(pytest.param(where, cmd, id=where))
            elif cmd[0] in LEROBOT_COMMANDS:
                reason = "LeRobot's own command: tested verbatim in tests/test_lerobot_plugins.py"
                found.append(pytest.param(where, cmd, id=where, marks=pytest.mark.skip(reason=reason)))
            elif cmd[0].startswith("lerobot-"):
                found.append(pytest.param(where, cmd, id=where))  # neither ours nor LeRobot's: fails below
    return found


DOCUMENTED = documented()


def test_the_docs_have_commands_to_check():
    assert len(DOCUMENTED) > 40


@pytest.mark.parametrize("where,cmd", DOCUMENTED)
def test_documented_command_parses_as_written(where, cmd):
    name = cmd[0]
    assert name in our_commands() or name.endswith(".py"), f"{where}: {name} is no command of this stack"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    res = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "dry_parse.py"), *cmd],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    assert res.returncode == 0, f"{where}: {shlex.join(cmd)}\n{res.stderr[-2000:]}"
