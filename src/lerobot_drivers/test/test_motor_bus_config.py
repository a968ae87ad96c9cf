"""The motor bus node's ROS-free parts: parameters -> config, and the bus's status words."""

import pytest

from lerobot_drivers.motor_bus_config import PARAMETERS, bus_status, read_config


def test_config_from_the_declared_parameters_and_a_bad_safe_state_named():
    given = {"port": "/dev/ttyUSB3", "max_step_rad": 0.1}
    seen = {}

    def declare(name, default, description, **kw):
        seen[name] = kw
        return given.get(name, default)

    cfg = read_config(declare)
    assert cfg.port == "/dev/ttyUSB3" and cfg.max_step_rad == 0.1 and cfg.rate_hz == 100.0
    assert seen["max_step_rad"] == {"read_only": False, "range": (0.0, 6.3)} and seen["robot"] == {}
    assert set(seen) == set(PARAMETERS)
    given["safe_state"] = "float"
    with pytest.raises(
        ValueError, match=r"parameter safe_state='float': use one of \('hold', 'torque_off'\)"
    ):
        read_config(declare)


@pytest.mark.parametrize(
    ("connected", "error", "age", "expected"),
    [
        (False, "", 0.0, ("error", "not connected")),
        (False, "port gone", 0.0, ("error", "disconnected: port gone")),
        (True, "timeout", 4.0, ("warn", "connected; last error: timeout")),
        (True, "timeout", 6.0, ("ok", "connected; recovered, last error 6 s ago: timeout")),
        (True, "", 0.0, ("ok", "connected")),
    ],
)
def test_bus_status_recovers_after_five_quiet_periods(connected, error, age, expected):
    assert bus_status(connected, error, age, 1.0) == expected
