"""The sim bridges' parameters (ROS-free): the defaults each bridge declares, and bad values named."""

import pytest

from lerobot_sim.bridge_config import common_parameters, read_bridge_config


def _values(**given):
    defaults = {name: default for name, default, _ in common_parameters("gym_pusht/PushT-v0", ("x", "y"))}
    defaults.update(given)
    return defaults.__getitem__


def test_defaults_make_a_realtime_config():
    cfg = read_bridge_config(_values())
    assert cfg.env_id == "gym_pusht/PushT-v0" and cfg.mode == "realtime" and cfg.state_names == ("x", "y")
    assert cfg.required_consumers == () and cfg.env_kwargs == {}


@pytest.mark.parametrize(
    ("given", "needle"),
    [
        ({"mode": "fast"}, "parameter mode='fast' must be one of"),
        ({"env_kwargs": "{"}, "parameter env_kwargs is not valid JSON"),
        ({"env_kwargs": "[1]"}, "parameter env_kwargs must be a JSON object"),
        ({"env_id": ""}, "parameter env_id is empty"),
    ],
)
def test_bad_parameters_are_named(given, needle):
    with pytest.raises(ValueError, match=needle):
        read_bridge_config(_values(**given))
