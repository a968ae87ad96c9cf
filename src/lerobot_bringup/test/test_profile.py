"""The profile loader: substitution, types, and errors that name the file and the key."""

from pathlib import Path

import pytest
import yaml

from lerobot_bringup.profile import ProfileError, load_profile, package_installed, parse_overrides

PROFILES = Path(__file__).resolve().parent.parent / "profiles"


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "graph.yaml"
    p.write_text(text)
    return p


GOOD = """
description: two nodes
arguments:
  rate: {default: 50.0, description: "rate [Hz]"}
  robot: {default: so101, description: robot type}
nodes:
  - name: src
    package: pkg_a
    executable: source
    namespace: arm
    parameters: {rate_hz: "${rate}", label: "${robot}_follower", urdf: "${share:pkg_a}/urdf/x.urdf", ids: [1, 2]}
    remappings: {joint_states: /follower/joint_states}
  - name: sink
    package: pkg_b
    executable: sink
    required: false
"""


def share(pkg: str) -> str:
    return f"/opt/share/{pkg}"


def test_substitution_keeps_types_and_formats_strings(tmp_path):
    prof = load_profile(write(tmp_path, GOOD), share_lookup=share)
    src = prof.node("src")
    assert src.parameters == {
        "rate_hz": 50.0,
        "label": "so101_follower",
        "urdf": "/opt/share/pkg_a/urdf/x.urdf",
        "ids": [1, 2],
    }
    assert src.remappings == (("joint_states", "/follower/joint_states"),)
    assert prof.node("sink").required is False


def test_command_line_overrides_take_the_default_type(tmp_path):
    prof = load_profile(
        write(tmp_path, GOOD), parse_overrides(["rate:=20", "robot:=koch"]), share_lookup=share
    )
    assert prof.node("src").parameters["rate_hz"] == 20.0
    assert isinstance(prof.node("src").parameters["rate_hz"], float)
    assert prof.node("src").parameters["label"] == "koch_follower"


def test_ros_args_and_params_file(tmp_path):
    src = load_profile(write(tmp_path, GOOD), share_lookup=share).node("src")
    args = src.ros_args("/tmp/p.yaml")
    assert args == [
        "--ros-args", "-r", "__node:=src", "-r", "__ns:=/arm", "--params-file", "/tmp/p.yaml",
        "-r", "joint_states:=/follower/joint_states",
    ]  # fmt: skip
    assert yaml.safe_load(src.params_yaml())["/arm/src"]["ros__parameters"]["rate_hz"] == 50.0


@pytest.mark.parametrize(
    "text, expected",
    [
        ("nodes: [", "graph.yaml:1:"),
        ("nodes: []", "nodes: must be a non-empty list"),
        ("nodez: []", "unknown key(s) ['nodez']"),
        ("nodes:\n  - {name: a, package: p}", "nodes[0] (a).executable: required"),
        (
            "nodes:\n  - {name: a, package: p, executable: e, params: {}}",
            "nodes[0] (a): unknown key(s) ['params']",
        ),
        ("nodes:\n  - {name: 9a, package: p, executable: e}", "nodes[0] (9a).name"),
        (
            "nodes:\n  - {name: a, package: p, executable: e}\n  - {name: a, package: p, executable: e}",
            "nodes[1] (a).name: duplicate",
        ),
        (
            "nodes:\n  - {name: a, package: p, executable: e, parameters: {x: '${nope}'}}",
            "parameters.x: unknown argument",
        ),
        (
            "nodes:\n  - {name: a, package: p, executable: e, parameters: {x: {y: 1}}}",
            "parameters.x: unsupported",
        ),
        (
            "nodes:\n  - {name: a, package: p, executable: e, parameters: {x: [1, a]}}",
            "parameters.x: a list parameter",
        ),
        (
            "arguments: {r: 5}\nnodes:\n  - {name: a, package: p, executable: e}",
            "arguments.r: must be a mapping",
        ),
    ],
)
def test_bad_profiles_name_file_and_key(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(ProfileError) as e:
        load_profile(path, share_lookup=share)
    assert str(path) in str(e.value)
    assert expected in str(e.value)


def test_unknown_override_and_unknown_profile(tmp_path):
    with pytest.raises(ProfileError, match="unknown argument 'speed'"):
        load_profile(write(tmp_path, GOOD), {"speed": 1}, share_lookup=share)
    with pytest.raises(ProfileError, match="unknown profile 'no_such_graph'"):
        load_profile("no_such_graph")
    with pytest.raises(ProfileError, match="not of the form name:=value"):
        parse_overrides(["rate=5"])


@pytest.mark.parametrize("path", sorted(PROFILES.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_profile_loads_and_its_executables_exist(path):
    """The single source of truth must be valid, and every node must be an installed executable."""
    from lerobot_core.ament import find_executable

    prof = load_profile(path)
    assert prof.description, f"{path}: add a description"
    for node in prof.nodes:
        if node.if_installed and not package_installed(node.package):
            continue  # optional here (robot_state_publisher); its stand-ins are checked instead
        assert find_executable(node.package, node.executable).is_file()
    launch_file = PROFILES.parent / "launch" / f"{path.stem}.launch.py"
    assert launch_file.is_file(), f"{path.stem} has no launch/{path.stem}.launch.py for ros2 launch"
    assert f'generate_profile_launch_description("{path.stem}")' in launch_file.read_text()


ALTERNATIVES = """
nodes:
  - name: robot_state_publisher
    package: robot_state_publisher
    executable: robot_state_publisher
    if_installed: true
    parameters: {robot_description: "${read:pkg_a/urdf/x.urdf}"}
  - name: our_tf
    package: pkg_b
    executable: joint_state_tf
    unless_installed: robot_state_publisher
"""


@pytest.mark.parametrize("rsp_installed", [True, False])
def test_a_node_can_stand_in_for_a_package_that_is_not_installed(tmp_path, rsp_installed):
    (tmp_path / "share" / "pkg_a" / "urdf").mkdir(parents=True)
    (tmp_path / "share" / "pkg_a" / "urdf" / "x.urdf").write_text("<robot name='x'/>\n")
    prof = load_profile(write(tmp_path, ALTERNATIVES), share_lookup=lambda pkg: str(tmp_path / "share" / pkg))
    rsp, tf = prof.node("robot_state_publisher"), prof.node("our_tf")
    assert rsp.parameters == {"robot_description": "<robot name='x'/>\n"}  # ${read:...}: the file's text

    def installed(pkg):
        return pkg != "robot_state_publisher" or rsp_installed

    if rsp_installed:
        assert (rsp.skip_reason(installed), tf.skip_reason(installed)) == (
            "",
            "package 'robot_state_publisher' is installed",
        )
    else:
        assert (rsp.skip_reason(installed), tf.skip_reason(installed)) == (
            "package 'robot_state_publisher' is not installed",
            "",
        )


def test_an_unreadable_read_substitution_names_the_key(tmp_path):
    with pytest.raises(
        ProfileError, match=r"nodes\[0\] \(robot_state_publisher\)\.parameters\.robot_description: "
    ):
        load_profile(write(tmp_path, ALTERNATIVES), share_lookup=lambda pkg: str(tmp_path / "nowhere"))
