"""robot_description_publisher and joint_state_tf as processes."""

import pytest

from lerobot_core.ament import share_path
from lerobot_drivers.kinematics import parse_urdf

pytestmark = pytest.mark.ros
URDF = share_path("lerobot_bringup") / "urdf" / "so101.urdf"


def test_description_is_latched_for_late_subscribers(ros_node):
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    from lerobot_core.ros.testing import RosProcess, wait_for_messages

    qos = QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )
    with RosProcess(
        "lerobot_drivers", "robot_description_publisher", parameters={"urdf_path": str(URDF)}
    ) as proc:
        assert proc.wait_for_output("published", 20), proc.output()
        # subscribe only after it was published: transient local still delivers it
        msg = wait_for_messages(ros_node, String, "/robot_description", 1, timeout=10, qos=qos)[0]
    assert msg.data == URDF.read_text()
    assert [j.name for j in parse_urdf(msg.data, is_text=True).movable_joints][0] == "shoulder_pan"


def test_description_bad_file_exits_with_reason(tmp_path):
    from lerobot_core.ros.testing import RosProcess, wait_until

    bad = tmp_path / "bad.urdf"
    bad.write_text("<robot><joint></robot>")
    with RosProcess(
        "lerobot_drivers", "robot_description_publisher", parameters={"urdf_path": str(bad)}
    ) as proc:
        assert wait_until(lambda: proc.returncode is not None, 20)
    assert proc.returncode == 2 and str(bad) in proc.output()


def test_joint_state_tf_without_tf2_msgs_says_so():
    from lerobot_core.ros.testing import RosProcess, wait_until

    try:
        import tf2_msgs  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("tf2_msgs is installed here; the missing-package path cannot be exercised")
    with RosProcess("lerobot_drivers", "joint_state_tf", parameters={"urdf_path": str(URDF)}) as proc:
        assert wait_until(lambda: proc.returncode is not None, 20)
    assert proc.returncode == 0  # optional in a graph: a warning, not a failure
    assert "WARN" in proc.output() and "tf2_msgs is not installed" in proc.output()
    assert "ERROR" not in proc.output()
