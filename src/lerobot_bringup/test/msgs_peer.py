"""A peer process for test_msgs.py: serves lerobot_msgs interfaces from another process."""

import rclpy
from rclpy.action import ActionServer
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

from lerobot_msgs.action import RecordEpisode
from lerobot_msgs.msg import ActionChunk, StreamStatus
from lerobot_msgs.srv import ResetSim


class Peer(Node):
    def __init__(self):
        super().__init__("msgs_peer")
        self.create_service(ResetSim, "sim/reset", self.reset)
        ActionServer(self, RecordEpisode, "recorder/record_episode", self.record)
        self.pub = self.create_publisher(ActionChunk, "policy/action_chunk", 10)
        self.create_timer(0.05, self.publish_chunk)
        self.chunks = 0

    def reset(self, req, resp):
        resp.success = True
        resp.message = f"seed {req.seed}" if req.use_seed else "unseeded"
        resp.info.seed = req.seed if req.use_seed else -1
        resp.info.episode_index = 7
        return resp

    def record(self, handle):
        for k in range(3):
            fb = RecordEpisode.Feedback(frames=(k + 1) * 10, elapsed_s=k * 0.5)
            fb.streams = [StreamStatus(name="front", received=k + 1)]
            handle.publish_feedback(fb)
        handle.succeed()
        res = RecordEpisode.Result(result_code=RecordEpisode.Result.RESULT_SAVED, frames=30)
        res.message = f"task={handle.request.task}"
        return res

    def publish_chunk(self):
        msg = ActionChunk(policy_type="act", chunk_index=self.chunks)
        msg.trajectory.joint_names = ["a.pos", "b.pos"]
        self.pub.publish(msg)
        self.chunks += 1


def main():
    rclpy.init()
    node = Peer()
    ex = MultiThreadedExecutor()
    ex.add_node(node)
    try:
        ex.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
