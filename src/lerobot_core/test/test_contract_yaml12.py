"""A contract reads numbers as ROS 2 and YAML 1.2 do: ``max_staleness: 1e-9`` (PyYAML, on YAML 1.1,
reads a float without a dot as a string, and the contract refused it as "expected a number")."""

from lerobot_core import yaml_io
from lerobot_core.contract import Contract


def test_floats_without_a_dot_are_numbers():
    doc = yaml_io.load("a: 1e-9\nb: -2E+3\nc: 1.5\nd: 7\ne: x1e3\nf: '1e-9'\n")
    assert doc == {"a": 1e-9, "b": -2000.0, "c": 1.5, "d": 7, "e": "x1e3", "f": "1e-9"}


def test_a_contract_takes_max_staleness_1e_9(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "fps: 30\ntask: t\ndefaults:\n  max_staleness: 1e-9\n"
        "features:\n  observation.state: {topic: /joint_states, max_staleness: 2e-1}\n"
    )
    contract = Contract.load(path)
    (spec,) = contract.stream_specs()
    assert spec.max_staleness_s == 0.2
