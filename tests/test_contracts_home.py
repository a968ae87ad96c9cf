"""The shipped mapping contracts have one home, src/lerobot_core/lerobot_core/config/contracts/, and every
name or path of one that a user reads (docs, READMEs, profiles' contract:= arguments, the LeRobot
plugins' presets, scripts) is a file there. Plain pytest, no ROS: the files are read as text and YAML."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
HOME = ROOT / "src" / "lerobot_core" / "lerobot_core" / "config" / "contracts"
SHIPPED = {p.stem for p in HOME.glob("*.yaml")}

# what a user reads or runs: where a contract is named
TEXTS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted(ROOT.glob("src/*/README.md")),
    ROOT / "lerobot_plugins" / "README.md",
    *sorted((ROOT / "scripts").glob("*.py")),
    *sorted((ROOT / "src" / "lerobot_bringup" / "profiles").glob("*.yaml")),
]
# contract:=NAME (profiles), --robot.contract=NAME / --teleop.contract=NAME (plugins), --contract NAME
# (replay), --config NAME (bag import/export): a name, not a path (no folder part, no .yaml)
NAME_ARGS = re.compile(
    r"(?:\bcontract:=|--(?:robot|teleop)\.contract=|--contract[ =]|--config[ =])[\"']?([a-z][a-z0-9_]*)(?![\w./-])"
)
PRESET_DEFAULT = re.compile(r'^\s*contract: str \| None = "([^"]+)"', re.M)
YAML_PATH = re.compile(r"[\w./-]*?([\w-]+)\.ya?ml\b")


def _is_contract(path: Path) -> bool:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError:
        return False
    return isinstance(data, dict) and "features" in data and "fps" in data


def test_no_contract_yaml_outside_the_one_folder():
    """Every contract YAML in the packages and plugins is in the home (a package's test/ keeps the
    fixtures of its own tests)."""
    stray = []
    for top in (ROOT / "src", ROOT / "lerobot_plugins"):
        for path in sorted([*top.rglob("*.yaml"), *top.rglob("*.yml")]):
            rel = path.relative_to(ROOT)
            if path.parent == HOME or "test" in rel.parts or not _is_contract(path):
                continue
            stray.append(str(rel))
    assert not stray, f"contract YAML outside {HOME.relative_to(ROOT)}: {stray}"
    assert len(SHIPPED) >= 10 and all(_is_contract(HOME / f"{n}.yaml") for n in SHIPPED)


def _names_in_texts() -> dict[str, list[str]]:
    names: dict[str, list[str]] = {}
    for path in TEXTS:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for name in NAME_ARGS.findall(line):
                names.setdefault(name, []).append(f"{path.relative_to(ROOT)}:{n}")
    for path in sorted((ROOT / "src" / "lerobot_bringup" / "profiles").glob("*.yaml")):
        default = ((yaml.safe_load(path.read_text()).get("arguments") or {}).get("contract") or {}).get(
            "default"
        )
        if default:
            names.setdefault(str(default), []).append(f"{path.relative_to(ROOT)}: contract default")
    for path in sorted((ROOT / "lerobot_plugins").glob("*/*/config_ros.py")):
        for name in PRESET_DEFAULT.findall(path.read_text()):
            names.setdefault(name, []).append(f"{path.relative_to(ROOT)}: preset")
    return names


def test_every_contract_name_users_type_is_a_shipped_contract():
    names = _names_in_texts()
    # the names the docs and profiles use today: the scan finds them (it is not silently empty)
    assert {
        "so101_one_camera",
        "so101_two_cameras",
        "so101_teleop_demo",
        "so101_hil_one_camera",
        "so101_policy_rollout",
        "so101_sim_contract",
        "so101_sim_env_state_contract",
        "so101_sim_hil_contract",
        "so101_sim_hil_env_state_contract",
        "so101_sim_robot",
    } <= set(names), sorted(names)
    unknown = {name: where for name, where in names.items() if name not in SHIPPED}
    assert not unknown, f"contract names that are no shipped contract ({sorted(SHIPPED)}): {unknown}"


def test_a_path_to_a_shipped_contract_is_its_path_in_the_home():
    """A doc or comment that gives a shipped contract as a file names the file in the home."""
    home = str(HOME.relative_to(ROOT))
    wrong = []
    for path in TEXTS + [p for p in HOME.glob("*.yaml")]:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in YAML_PATH.finditer(line):
                text, stem = match.group(0), match.group(1)
                if (
                    stem in SHIPPED
                    and "/" in text
                    and not (home + "/").endswith(text.rsplit("/", 1)[0] + "/")
                ):
                    wrong.append(f"{path.relative_to(ROOT)}:{n}: {text}")
    assert not wrong, f"paths of shipped contracts outside {home}: {wrong}"
