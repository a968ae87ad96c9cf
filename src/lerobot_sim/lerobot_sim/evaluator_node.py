"""``evaluator``: the EvaluatePolicy action server (``sim/evaluate``).

Each goal starts its own lockstep sim process for the requested environment, runs the episodes with the
policy in the loop over ROS (the same code as ``lerobot-sim-eval``) and returns LeRobot's metrics.
Feedback after every step; cancel stops after the current step.
"""

from __future__ import annotations

import threading
from functools import partial

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node

from lerobot_core.ros.node import run_node
from lerobot_msgs.action import EvaluatePolicy
from lerobot_msgs.msg import EpisodeMetrics
from lerobot_sim.evaluation import (
    EvalSettings,
    EvaluationError,
    SimUnavailableError,
    aggregate,
    make_policy,
    run_episodes,
)


class _GoalCancelledError(Exception):
    pass


class EvaluatorNode(Node):
    def __init__(self, **kwargs):
        super().__init__("evaluator", **kwargs)
        self._busy = threading.Lock()
        self._server = ActionServer(
            self,
            EvaluatePolicy,
            "sim/evaluate",
            execute_callback=self._execute,
            goal_callback=self._on_goal,
            cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            callback_group=ReentrantCallbackGroup(),
        )

    def _on_goal(self, goal: EvaluatePolicy.Goal) -> GoalResponse:
        if goal.n_episodes == 0:
            self.get_logger().warn("rejecting goal: n_episodes is 0")
            return GoalResponse.REJECT
        if self._busy.locked():
            self.get_logger().warn("rejecting goal: an evaluation is already running")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _execute(self, goal_handle) -> EvaluatePolicy.Result:
        from lerobot_sim.eval_cli import _spaces, make_transport_factory, resolve_env

        goal = goal_handle.request
        result = EvaluatePolicy.Result()
        with self._busy:
            done: list[bool] = []

            def on_step(episode: int, step: int) -> None:
                if goal_handle.is_cancel_requested:
                    raise _GoalCancelledError()
                feedback = EvaluatePolicy.Feedback(episode_index=episode, step=step)
                feedback.running_pc_success = 100.0 * sum(done) / len(done) if done else 0.0
                goal_handle.publish_feedback(feedback)

            def log(message: str) -> None:
                self.get_logger().info(message)
                if message.startswith("episode ") and "success=" in message:
                    done.append("success=True" in message)

            try:
                preset = resolve_env(goal.env, None)
                factory, fps = make_transport_factory(preset, {}, log=log)
                space = _spaces(preset)[0] if goal.policy == "random" else None
                policy = make_policy(goal.policy, action_space=space, fps=int(round(fps)))
                settings = EvalSettings(
                    int(goal.n_episodes), int(goal.seed), int(goal.max_steps), goal.video_dir
                )
                episodes, eval_s, _videos = run_episodes(factory, policy, settings, on_step=on_step, log=log)
            except _GoalCancelledError:
                goal_handle.canceled()
                result.success, result.message = False, "cancelled"
                return result
            except (EvaluationError, SimUnavailableError, ValueError, FileNotFoundError) as exc:
                goal_handle.abort()
                result.success, result.message = False, str(exc)
                self.get_logger().error(f"evaluation failed: {exc}")
                return result
        agg = aggregate(episodes, eval_s)
        result.success = True
        result.message = f"{len(episodes)} episodes, pc_success {agg['pc_success']:.1f}"
        result.episodes = [
            EpisodeMetrics(
                episode_index=e.episode_index,
                seed=e.seed,
                sum_reward=e.sum_reward,
                max_reward=e.max_reward,
                success=e.success,
                steps=e.steps,
                duration_s=e.duration_s,
            )
            for e in episodes
        ]
        result.pc_success = agg["pc_success"]
        result.avg_sum_reward = agg["avg_sum_reward"]
        result.avg_max_reward = agg["avg_max_reward"]
        result.eval_s = agg["eval_s"]
        result.eval_ep_s = agg["eval_ep_s"]
        goal_handle.succeed()
        return result


def main(args=None) -> int:
    return run_node(EvaluatorNode, args, executor=partial(MultiThreadedExecutor, num_threads=2))


if __name__ == "__main__":
    raise SystemExit(main())
