"""The profile loader: substitution, types, and errors that name the file and the key."""

import re
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


TYPED = """
arguments:
  rate: {default: 50.0, description: "rate [Hz]"}
  count: {default: 3, description: messages}
  flag: {default: true, description: a switch}
  names: {default: [a, b], description: a list}
  policy_path: {required: true, type: checkpoint, description: the checkpoint}
  data: {default: datasets/x, type: path, description: the dataset}
  seed: {default: auto, type: seed, dataset: data, description: first seed}
  demo: {default: false, description: no policy}
nodes:
  - name: policy
    package: pkg_a
    executable: policy
    unless: ${demo}
    parameters: {policy_path: "${policy_path}", rate_hz: "${rate}"}
  - name: src
    package: pkg_a
    executable: source
    parameters: {count: "${count}", flag: "${flag}", names: "${names}", seed: "${seed}", root: "${data}"}
"""


@pytest.mark.parametrize(
    "item, message",
    [
        ("rate:=fast", "argument rate:=fast: expected a number"),
        ("count:=2.5", "argument count:=2.5: expected a whole number"),
        ("count:=true", "argument count:=true: expected a whole number"),
        ("flag:=yes please", "argument flag:=yes please: expected true or false"),
        ("names:=a", "argument names:=a: expected a list"),
        ("seed:=x", "argument seed:=x: expected a whole number or auto"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_naming_the_argument(tmp_path, item, message):
    """Before: rate:=fast went to the node as the text 'fast', the node died after the graph started."""
    with pytest.raises(ProfileError, match=re.escape(message)):
        load_profile(write(tmp_path, TYPED), parse_overrides([item]), share_lookup=share)


def test_values_of_the_right_type_are_taken(tmp_path):
    prof = load_profile(
        write(tmp_path, TYPED),
        parse_overrides(["rate:=20", "count:=5", "flag:=false", "names:=[c]", "seed:=7", "policy_path:=p"]),
        share_lookup=share,
    )
    assert prof.node("src").parameters == {
        "count": 5,
        "flag": False,
        "names": ["c"],
        "seed": 7,
        "root": "datasets/x",
    }
    assert prof.node("policy").parameters == {"policy_path": "p", "rate_hz": 20.0}
    assert prof.given == {"rate", "count", "flag", "names", "seed", "policy_path"}


def test_a_required_argument_is_missing_only_where_a_started_node_uses_it(tmp_path):
    prof = load_profile(write(tmp_path, TYPED), share_lookup=share)
    assert [a.name for a in prof.missing_required()] == ["policy_path"]
    assert prof.arguments["policy_path"].help_line() == "checkpoint, required: the checkpoint"
    # the node that needs it is off: nothing is missing, and the node is not started
    prof = load_profile(write(tmp_path, TYPED), parse_overrides(["demo:=true"]), share_lookup=share)
    assert prof.missing_required() == []
    assert prof.node("policy").skip_reason(lambda _p: True) == "unless: ${demo} is true"
    with pytest.raises(ProfileError, match=r"nodes\[0\] \(policy\)\.unless: must be true or false"):
        load_profile(write(tmp_path, TYPED.replace("unless: ${demo}", "unless: ${rate}")), share_lookup=share)


def test_seed_auto_continues_after_the_seeds_the_dataset_holds(tmp_path):
    """Before: a resumed recording started again at seed 0, recording the same demonstrations."""
    import json

    from lerobot_recorder.sim_seeds import record_seed

    data = tmp_path / "ds"

    def seed():
        prof = load_profile(write(tmp_path, TYPED), {"data": str(data)}, share_lookup=share)
        return prof.node("src").parameters["seed"], prof.notes["seed"]

    assert seed() == (0, f"auto: 0 (no dataset at {data} yet)")
    (data / "meta").mkdir(parents=True)
    (data / "meta" / "info.json").write_text(json.dumps({"total_episodes": 2}))
    assert seed()[0] == 2  # an older recording without a seed record: taken as seeds 0 and 1
    record_seed(data, 0, 10)
    record_seed(data, 1, 11)
    assert seed() == (12, f"auto: 12 (the seeds {data} holds end at 11)")
    given = load_profile(write(tmp_path, TYPED), {"data": str(data), "seed": 3}, share_lookup=share)
    assert given.node("src").parameters["seed"] == 3 and "seed" not in given.notes


@pytest.mark.parametrize("name", ["hil_sim_so101", "deploy", "deploy_sim_so101", "hil"])
def test_profiles_that_run_a_policy_require_its_checkpoint(name):
    prof = load_profile(PROFILES / f"{name}.yaml", share_lookup=share)
    assert [a.name for a in prof.missing_required()] == ["policy_path"]
    assert prof.arguments["policy_path"].type == "checkpoint"
    assert prof.node("policy").required


def test_hil_sim_demonstrations_need_no_policy():
    prof = load_profile(PROFILES / "hil_sim_so101.yaml", {"demonstrate": True}, share_lookup=share)
    assert prof.missing_required() == [] and prof.node("policy").disabled
