"""The policy node's callbacks in its own executor, in this process: a camera frame that takes long to
prepare (a JPEG decode, the codec round trip) does not hold up the joint states."""

import threading

import numpy as np
import pytest

from .conftest import ACT_SMALL

pytestmark = pytest.mark.ros

rclpy = pytest.importorskip("rclpy")

from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402

from lerobot_core.robots import SO_JOINTS  # noqa: E402
from lerobot_core.ros.testing import wait_until  # noqa: E402

from .emulated_robot import camera_image  # noqa: E402


def test_a_slow_camera_frame_does_not_hold_up_the_joint_states(ros_node):
    from rclpy.executors import MultiThreadedExecutor

    from lerobot_core.image_conversion import fill_image_msg
    from lerobot_policy_node.policy_node import PolicyNode

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    params = {
        "policy_path": str(ACT_SMALL),
        "autostart": True,
        "torch_threads": 1,
        "control_priority": 0,  # this is pytest's process: no real-time thread in it
        "image_codec_roundtrip": True,
    }
    node = PolicyNode(context=ctx, parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
    executor = MultiThreadedExecutor(num_threads=5, context=ctx)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    entered, release = threading.Event(), threading.Event()

    def slow_roundtrip(rgb):  # the camera's frame takes as long as the test says
        entered.set()
        assert release.wait(60)
        return rgb

    try:
        assert wait_until(
            lambda: node.controller is not None
            and "observation.images.front" in getattr(node, "_roundtrip", ()),
            30,
        )
        node._roundtrip["observation.images.front"] = slow_roundtrip
        image_pub = ros_node.create_publisher(Image, "cameras/front/image_raw", 10)
        joint_pub = ros_node.create_publisher(JointState, "joint_states", 10)
        frame = Image()
        fill_image_msg(frame, camera_image(np.zeros(6)), "rgb8")
        assert wait_until(lambda: image_pub.get_subscription_count() > 0, 10)
        assert wait_until(lambda: (image_pub.publish(frame), entered.is_set())[1], 10)
        # the frame's callback is still running: the joint states must get through meanwhile
        sent = np.linspace(0.1, 0.6, 6)
        js = JointState(name=list(SO_JOINTS), position=sent.tolist())

        def joints_arrived() -> bool:
            js.header.stamp = ros_node.get_clock().now().to_msg()
            joint_pub.publish(js)
            got = node.controller.obs.latest_joints()
            return got is not None and np.allclose(got, sent)

        arrived = wait_until(joints_arrived, 10)
        assert not release.is_set()
        assert arrived, "joint states were held up behind a camera frame's callback"
    finally:
        release.set()
        executor.shutdown(timeout_sec=5.0)
        node.shutdown_safely()
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
        spinner.join(timeout=5.0)
