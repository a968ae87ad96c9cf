"""The lockstep fast paths: topics nobody reads, the executor-free client, large images over ROS."""

from pathlib import Path

import numpy as np
import pytest

from lerobot_core.dds_transport import SHM_PREFIXES, large_image_transport_profile


class _CountingPublisher:
    def __init__(self, subscribers: int):
        self.subscribers = subscribers
        self.sent = []

    def get_subscription_count(self) -> int:
        return self.subscribers

    def publish(self, msg) -> None:
        self.sent.append(msg)


@pytest.mark.ros
def test_topics_without_subscribers_are_not_built():
    import rclpy
    from rclpy.parameter import Parameter

    from lerobot_sim.sim_node import SimNode

    context = rclpy.Context()
    rclpy.init(context=context)
    node = SimNode(
        context=context,
        parameter_overrides=[
            Parameter("mode", value="lockstep"),
            Parameter("cameras", value=["front"]),
            Parameter("image_width", value=32),
            Parameter("image_height", value=24),
        ],
    )
    try:
        node.trigger_configure()
        node.trigger_activate()  # publishes the first observation: creates the camera publishers
        read = ("joint_states", "episode_info", "cube_pose")
        for key in list(node._pubs):
            node._pubs[key] = _CountingPublisher(1 if key in read else 0)
        image, info, jpeg = _CountingPublisher(1), _CountingPublisher(0), _CountingPublisher(0)
        node._cam_pubs["front"] = (image, info, jpeg)
        result = node.session.step(node._target)
        node._publish(result)
        sent = {key: len(pub.sent) for key, pub in node._pubs.items()}
        assert sent["joint_states"] == sent["episode_info"] == sent["cube_pose"] == 1
        assert sent["clock"] == 1  # latched: always current, even with no one listening yet
        assert sent["state"] == sent["joint_states_lerobot"] == 0
        assert (
            len(image.sent) == 1 and len(info.sent) == 0 and len(jpeg.sent) == 0
        )  # no JPEG encoded for no one
        msg = image.sent[0]
        assert (msg.height, msg.width, msg.encoding) == (24, 32, "rgb8")
        pixels = np.frombuffer(msg.data, np.uint8).reshape(24, 32, 3)
        assert np.array_equal(pixels, result.observation["pixels"]["front"])
    finally:
        node._cleanup()
        node.destroy_node()
        rclpy.try_shutdown(context=context)


SHM_FILES = tuple(f"/dev/shm/{prefix}" for prefix in SHM_PREFIXES)  # Fast DDS 3 and 2.x names


def _shm_segments(pid: int) -> dict[str, int]:
    """Fast DDS shared-memory segments mapped by a process: name -> mapped bytes."""
    sizes: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[5].startswith(SHM_FILES) and "_el" not in parts[5]:
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            sizes[parts[5]] = sizes.get(parts[5], 0) + hi - lo
    return sizes


@pytest.mark.ros
def test_large_images_step_over_ros_with_the_sim_s_own_profile():
    """Two 480x640 cameras (0.9 MB each) in lockstep: every step's images arrive whole, and the sim's
    participant has the profile's large segment (the default 512 KB one would stall each step)."""
    if large_image_transport_profile() is None:
        pytest.skip("the stack is not on a localhost Fast DDS setup (source env.sh)")
    from lerobot_sim.eval_cli import make_transport_factory, resolve_env
    from lerobot_sim.evaluation import ScriptedPolicy

    factory, _ = make_transport_factory(
        resolve_env("so101_cube", ["front", "wrist"]), {"image_height": 480, "image_width": 640}, log=print
    )
    transport = factory()
    try:
        sim_pid = factory.state["process"].pid
        assert max(_shm_segments(sim_pid).values(), default=0) >= 32 * 1024 * 1024
        policy = ScriptedPolicy()
        obs = transport.reset(3)
        policy.reset(3)
        for step in range(1, 6):
            obs, ep = transport.step(policy.select_action(obs))
            assert ep.step == step
            for cam in ("front", "wrist"):
                img = obs[f"observation.images.{cam}"]
                assert img.shape == (480, 640, 3) and img.dtype == np.uint8 and img.any()
    finally:
        transport.close()
