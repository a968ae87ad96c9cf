"""The code must stay runnable on Python 3.10-3.12 (Humble and Jazzy workspaces build it too)."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYENV = Path.home() / ".pyenv" / "versions"


def interpreter(minor: str) -> Path | None:
    found = sorted(PYENV.glob(f"{minor}.*/bin/python{minor}"))
    return found[-1] if found else None


@pytest.mark.parametrize("minor", ["3.10", "3.12"])
def test_every_source_file_compiles(minor, tmp_path):
    py = interpreter(minor)
    if py is None:
        pytest.skip(f"no Python {minor} interpreter under {PYENV}")
    files = [str(p) for p in ROOT.glob("src/**/*.py") if "__pycache__" not in p.parts]
    files += [str(p) for p in ROOT.glob("benchmarks/*.py")] + [str(p) for p in ROOT.glob("tests/*.py")]
    code = (
        "import sys\n"
        "bad = []\n"
        "for f in sys.argv[1:]:\n"
        "    try: compile(open(f, encoding='utf-8').read(), f, 'exec')\n"
        "    except SyntaxError as e: bad.append(f'{f}:{e.lineno}: {e.msg}')\n"
        "print('\\n'.join(bad)); sys.exit(1 if bad else 0)\n"
    )
    out = subprocess.run([str(py), "-c", code, *files], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"Python {minor} cannot compile:\n{out.stdout}{out.stderr}"
    assert len(files) > 20
