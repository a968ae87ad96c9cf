"""Give a venv the heavy binary packages another venv on this disk already holds, as hard links.

Run with the target venv's python, before its `pip install`:

    VENV/bin/python scripts/venv_link.py -r requirements.txt [--name torch] DONOR_VENV...

For each exact pin (`name==version`, markers evaluated for this interpreter) of the names asked for (torch by
default), a donor venv on the same interpreter (same Python version and ABI) that has that version installed
gives the distribution and its binary dependencies (triton, nvidia-*, cuda-*) to the target: each file that the
distribution's RECORD lists is hard-linked, its console scripts are copied with this venv's python in the
shebang. pip then finds the pin satisfied and downloads none of it. The CUDA build of torch that PyPI has for
Python 3.12 is about 4.6 GB installed (torch, triton and 15 nvidia packages) and its wheels 3.5 GB more while
pip installs them: the Jazzy venv and LeRobot 0.6.1's side venv hold the same torch, and a small disk fills up
without this.

Why hard links are safe here: pip and Python never write into an installed file. pip unlinks a file before it
writes a new one (install, upgrade) and removes files by renaming (uninstall); Python writes .pyc files to a
temporary name and renames it. Editing a file of site-packages by hand would change it in both venvs.

Never fatal: a donor that is missing, on another Python or another filesystem is passed over, and pip installs
what was not linked. Prints one line per linked distribution. Standard library and pip's vendored `packaging`
only (a fresh venv has nothing else).
"""

from __future__ import annotations

import argparse
import email.message
import email.parser
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from pip._vendor.packaging.markers import default_environment
from pip._vendor.packaging.requirements import InvalidRequirement, Requirement
from pip._vendor.packaging.utils import canonicalize_name

# what comes along with a linked distribution: its dependencies with these names (the big compiled ones)
BINARY_DEPENDENCY = re.compile(r"^(triton|nvidia-.*|cuda-.*)$")


def interpreter_tag(python: str | Path) -> str | None:
    """Python version and ABI of an interpreter, e.g. '3.12 cpython-312-x86_64-linux-gnu'; None if it does not run."""
    code = "import sys, sysconfig; print('%d.%d' % sys.version_info[:2], sysconfig.get_config_var('SOABI'))"
    try:
        out = subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def own_tag() -> str:
    return f"{sys.version_info[0]}.{sys.version_info[1]} {sysconfig.get_config_var('SOABI')}"


def site_packages(venv: Path) -> Path | None:
    found = sorted(venv.glob("lib/python3.*/site-packages"))
    return found[0] if len(found) == 1 else None


def installed(site: Path) -> dict[str, Path]:
    """Canonical distribution name -> its .dist-info folder in one site-packages."""
    dists = {}
    for info in site.glob("*.dist-info"):
        meta = info / "METADATA"
        if meta.is_file():
            name = email.parser.Parser().parsestr(meta.read_text(errors="replace"), headersonly=True)["Name"]
            if name:
                dists[canonicalize_name(name)] = info
    return dists


def metadata(info: Path) -> email.message.Message:
    return email.parser.Parser().parsestr((info / "METADATA").read_text(errors="replace"))


def closure(dists: dict[str, Path], root: str) -> list[str] | None:
    """root and its binary dependencies (with the extras asked for), as installed in the donor; None if one
    of them is missing there."""
    todo: list[tuple[str, frozenset[str]]] = [(root, frozenset())]
    seen: dict[str, set[str]] = {}
    while todo:
        name, extras = todo.pop()
        if name in seen and extras <= seen[name]:
            continue
        if name not in dists:
            return None
        seen.setdefault(name, set()).update(extras)
        for line in metadata(dists[name]).get_all("Requires-Dist") or []:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            dep = canonicalize_name(req.name)
            wanted = req.marker is None or any(
                req.marker.evaluate({**default_environment(), "extra": extra}) for extra in {"", *seen[name]}
            )
            if BINARY_DEPENDENCY.match(dep) and wanted:
                todo.append((dep, frozenset(req.extras)))
    return list(seen)


def recorded_files(info: Path) -> list[str]:
    return [line.split(",")[0] for line in (info / "RECORD").read_text().splitlines() if line.strip()]


def link_file(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".venv-link")
    os.link(src, tmp)
    os.replace(tmp, dst)


def copy_script(src: Path, dst: Path, python: Path) -> None:
    """A console script of the donor's bin/, with this venv's python in its shebang."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    data = src.read_bytes()
    first, newline, rest = data.partition(b"\n")
    if first.startswith(b"#!") and b"python" in first:
        data = b"#!" + str(python).encode() + newline + rest
    dst.write_bytes(data)
    shutil.copymode(src, dst)


def link_distributions(infos: list[Path], donor: Path, target: Path) -> int:
    """Hard-links installed distributions from the donor venv into the target venv; returns their bytes.

    The .dist-info folders come last and go again if anything fails, so pip never sees a distribution
    as installed whose files are not all there (it then installs over the linked files, unlinking each).
    """
    donor_site, target_site = site_packages(donor), site_packages(target)
    assert donor_site is not None and target_site is not None
    files, records = [], []
    for info in infos:
        for rel in recorded_files(info):
            src = Path(os.path.normpath(donor_site / rel))
            if src.is_file():  # not a .pyc the donor never wrote
                (records if src.is_relative_to(info) else files).append(src)
    size = 0
    try:
        for src in files + records:
            if src.is_relative_to(donor_site):
                link_file(src, target_site / src.relative_to(donor_site))
                size += src.stat().st_size
            else:
                copy_script(src, target / src.relative_to(donor), target / "bin" / "python")
    except OSError:
        for info in infos:
            shutil.rmtree(target_site / info.name, ignore_errors=True)
        raise
    return size


def exact_pins(requirement_files: list[Path], names: set[str]) -> dict[str, str]:
    """name -> version of each `name==version` line (markers true here) among the names asked for."""
    pins = {}
    for path in requirement_files:
        for raw in path.read_text().splitlines():
            line = raw.split(" #")[0].strip()
            if not line or line.startswith(("#", "-")):
                continue
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            name = canonicalize_name(req.name)
            specs = list(req.specifier)
            wanted = name in names and (req.marker is None or req.marker.evaluate())
            if wanted and len(specs) == 1 and specs[0].operator == "==" and "*" not in specs[0].version:
                pins[name] = specs[0].version
    return pins


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("donors", nargs="*", type=Path, help="venvs that may hold the pinned versions")
    parser.add_argument("-r", "--requirement", dest="requirements", action="append", type=Path, default=[])
    parser.add_argument("--pin", action="append", default=[], help="an exact pin, e.g. torch==2.11.0")
    parser.add_argument("--name", action="append", default=[], help="which pins to link (default: torch)")
    args = parser.parse_args(argv)
    target = Path(sys.prefix)
    target_site = site_packages(target)
    if target_site is None or sys.prefix == sys.base_prefix:
        print(f"venv_link: {sys.executable} is not a venv's python; nothing linked", file=sys.stderr)
        return 0
    names = {canonicalize_name(n) for n in args.name} or {"torch"}
    pins = exact_pins(args.requirements, names)
    for pin in args.pin:
        req = Requirement(pin)
        pins[canonicalize_name(req.name)] = next(iter(req.specifier)).version
    have = installed(target_site)
    tag = own_tag()
    for name, version in pins.items():
        if name in have:
            continue  # pip decides about an installed version
        for donor in (d.resolve() for d in args.donors):
            donor_site = site_packages(donor)
            if donor == target.resolve() or donor_site is None or not (donor / "bin" / "python").exists():
                continue
            dists = installed(donor_site)
            if name not in dists or metadata(dists[name])["Version"].split("+")[0] != version:
                continue
            if interpreter_tag(donor / "bin" / "python") != tag:
                continue
            to_link = closure(dists, name)
            if to_link is None or any(n in have for n in to_link):
                continue
            try:
                size = link_distributions([dists[n] for n in to_link], donor, target)
            except OSError as exc:  # another filesystem (EXDEV), or no hard links there: pip installs it
                print(f"venv_link: cannot link {name} {version} from {donor} ({exc}); pip will install it")
                break
            print(
                f"venv_link: {name} {version} and {len(to_link) - 1} binary dependencies "
                f"({size / 1e9:.2f} GB) hard-linked from {donor}"
            )
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
