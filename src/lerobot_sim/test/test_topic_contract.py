"""The sim's ROS interface equals the real SO-101 driver's (lerobot_drivers motor_bus + emulated servos)."""

import pytest

from lerobot_core.ros.testing import RosProcess, wait_until

pytestmark = pytest.mark.ros

GENERIC = ("/rosout", "/parameter_events")


def _interface(node, name, namespace):
    """{relative topic: types} published and subscribed by one node, without ROS's own topics."""

    def relative(pairs):
        out = {}
        for topic, types in pairs:
            if topic in GENERIC or topic.endswith("/transition_event"):
                continue
            rel = topic[len(namespace) + 1 :] if topic.startswith(namespace + "/") else topic
            out[rel] = tuple(types)
        return out

    pubs = relative(node.get_publisher_names_and_types_by_node(name, namespace))
    subs = relative(node.get_subscriber_names_and_types_by_node(name, namespace))
    return pubs, subs


COMMANDS = {
    "joint_commands",
    "forward_position_controller/commands",
    "joint_trajectory_controller/joint_trajectory",
}


def _stable_interface(node, name, namespace, must_publish, timeout=60.0):
    """The node's interface once it shows the required topics and stops changing (discovery is gradual)."""
    last = None

    def ready():
        nonlocal last
        try:
            now = _interface(node, name, namespace)
        except Exception:
            return False
        pubs, subs = now
        complete = must_publish <= set(pubs) and set(subs) >= COMMANDS
        settled = complete and now == last
        last = now
        return settled

    assert wait_until(ready, timeout, interval=0.5), f"{namespace}/{name}: interface incomplete: {last}"
    return last


def test_sim_topics_and_types_equal_the_real_follower_driver(ros_node, tmp_path):
    emulator_mod = pytest.importorskip("lerobot_drivers.servo_emulator")
    emu = emulator_mod.emulator_for_robot(
        "so101_follower", link_path=str(tmp_path / "ttySO101"), tau_s=0.03
    ).start()
    try:
        driver = RosProcess(
            "lerobot_drivers",
            "motor_bus",
            name="follower",
            namespace="/real",
            parameters={"robot": "so101_follower", "port": emu.port, "autostart": True},
        )
        sim = RosProcess(
            "lerobot_sim",
            "sim",
            name="follower",
            namespace="/simulated",
            parameters={
                "mode": "realtime",
                "autostart": True,
                "cameras": ["front"],
                "image_width": 64,
                "image_height": 48,
            },
        )
        with driver, sim:
            real_pubs, real_subs = _stable_interface(
                ros_node, "follower", "/real", {"joint_states", "/diagnostics"}
            )
            sim_pubs, sim_subs = _stable_interface(
                ros_node,
                "follower",
                "/simulated",
                set(real_pubs) | {"cameras/front/image_raw", "sim/episode_info"},
            )
    finally:
        emu.stop()

    # commands: exactly the same three topics with the same types
    assert sim_subs == real_subs
    assert set(real_subs) == {
        "joint_commands",
        "forward_position_controller/commands",
        "joint_trajectory_controller/joint_trajectory",
    }
    # everything the driver publishes, the sim publishes with the same type
    for topic, types in real_pubs.items():
        assert sim_pubs.get(topic) == types, f"{topic}: driver {types}, sim {sim_pubs.get(topic)}"
    # camera topics of the topic map, and the sim's own extras
    assert sim_pubs["cameras/front/image_raw"] == ("sensor_msgs/msg/Image",)
    assert sim_pubs["cameras/front/camera_info"] == ("sensor_msgs/msg/CameraInfo",)
    assert sim_pubs["sim/episode_info"] == ("lerobot_msgs/msg/EpisodeInfo",)
