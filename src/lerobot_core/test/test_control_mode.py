"""ControlMode against the installed lerobot_msgs/ControlStatus: the same names, the same numbers."""

from lerobot_core.control_mode import ControlMode


def test_control_mode_matches_the_message_constants():
    from lerobot_msgs.msg import ControlStatus

    from_msg = {
        name[len("MODE_") :]: getattr(ControlStatus, name)
        for name in dir(ControlStatus)
        if name.startswith("MODE_")
    }
    assert from_msg == {mode.name: mode.value for mode in ControlMode}
