"""lerobot-sim-eval and the EvaluatePolicy action: policy in the loop over ROS, sim in its own process."""

import json
import os
import signal
import subprocess
import sys

import pytest
from rclpy.action import ActionClient

from lerobot_core.ament import share_path
from lerobot_core.ros.testing import MessageCollector, RosProcess, wait_until
from lerobot_msgs.action import EvaluatePolicy
from lerobot_sim.eval_cli import make_transport_factory, resolve_env
from lerobot_sim.evaluation import EvalSettings, ScriptedPolicy, run_episodes

pytestmark = pytest.mark.ros
SMALL = ["--cameras", "front", "--image-size", "48", "64"]


def _eval(tmp_path, name, *extra):
    out = tmp_path / f"{name}.json"
    cmd = [sys.executable, "-m", "lerobot_sim.eval_cli", "--env", "so101_cube", "--output", str(out), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=dict(os.environ))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text()), proc.stdout


def test_eval_command_scripted_same_seed_same_metrics(tmp_path):
    a, out = _eval(
        tmp_path,
        "a",
        "--episodes",
        "2",
        "--policy",
        "scripted",
        "--seed",
        "3",
        "--videos",
        str(tmp_path / "videos"),
        *SMALL,
    )
    b, _ = _eval(tmp_path, "b", "--episodes", "2", "--policy", "scripted", "--seed", "3", *SMALL)
    assert a["aggregated"]["pc_success"] == 100.0
    assert [e["seed"] for e in a["per_episode"]] == [3, 4]
    assert set(a["aggregated"]) == {"pc_success", "avg_sum_reward", "avg_max_reward", "eval_s", "eval_ep_s"}
    strip = [
        {k: e[k] for k in ("sum_reward", "max_reward", "success", "seed", "steps")} for e in a["per_episode"]
    ]
    assert strip == [{k: e[k] for k in strip[0]} for e in b["per_episode"]]  # lockstep: bit-identical
    assert sorted(os.listdir(tmp_path / "videos")) == ["eval_episode_0.mp4", "eval_episode_1.mp4"]
    assert a["meta"]["transport"] == "ros2"
    assert "started sim (pid" in out  # the sim ran as its own process


def test_eval_random_policy_and_bad_arguments(tmp_path):
    r, _ = _eval(tmp_path, "r", "--episodes", "1", "--policy", "random", "--max-steps", "15", *SMALL)
    assert r["per_episode"][0]["steps"] == 15 and r["aggregated"]["pc_success"] == 0.0
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "lerobot_sim.eval_cli",
            "--env",
            "nope",
            "--episodes",
            "1",
            "--policy",
            "random",
            "--output",
            str(tmp_path / "x.json"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "not a preset" in bad.stderr
    assert not (tmp_path / "x.json").exists()


def test_killed_sim_process_is_reported_restarted_and_the_episode_rerun():
    preset = resolve_env("so101_cube", ["front"])
    factory, _ = make_transport_factory(preset, {"image_height": 48, "image_width": 64}, log=lambda m: None)
    killed, logs = [], []

    def kill_once(episode, step):
        if episode == 0 and step == 10 and not killed:
            proc = factory.state["process"]
            killed.append(proc.pid)
            logs.append(proc.log_path)
            os.kill(proc.pid, signal.SIGKILL)  # a real crash of the sim process

    messages = []
    eps, _, _ = run_episodes(
        factory, ScriptedPolicy(), EvalSettings(1, seed=2), on_step=kill_once, log=messages.append
    )
    assert killed and factory.state["process"].pid != killed[0]
    assert eps[0].restarts == 1 and eps[0].success
    report = "\n".join(messages)
    assert "exited with code -9" in report and "restarting" in report
    # the killed sim's log stays (the report names it); a sim that ended cleanly leaves none behind
    assert os.path.exists(logs[0]) and logs[0] in report
    logs.append(factory.state["process"].log_path)
    clean, _, _ = run_episodes(factory, ScriptedPolicy(), EvalSettings(1, seed=2), log=lambda m: None)
    assert clean[0].sum_reward == eps[0].sum_reward and clean[0].restarts == 0
    logs.append(factory.state["process"].log_path)
    assert [os.path.exists(p) for p in logs] == [True, False, False]
    os.unlink(logs[0])


def test_evaluate_policy_action(ros_node):
    feedback = []
    client = ActionClient(ros_node, EvaluatePolicy, "/sim/evaluate")
    # rclpy's client stops calling feedback_callback once the result is in, and feedback and result
    # travel on different topics: the last feedback is watched on the action's feedback topic itself
    feedback_topic = MessageCollector(
        ros_node, EvaluatePolicy.Impl.FeedbackMessage, "/sim/evaluate/_action/feedback"
    )
    with RosProcess("lerobot_sim", "evaluator") as proc:
        assert client.wait_for_server(timeout_sec=20.0)
        goal = EvaluatePolicy.Goal(env="so101_cube", policy="scripted", n_episodes=1, seed=4)
        send = client.send_goal_async(goal, feedback_callback=lambda m: feedback.append(m.feedback))
        assert wait_until(send.done, 20)
        handle = send.result()
        assert handle.accepted
        result_future = handle.get_result_async()
        assert wait_until(result_future.done, 120), proc.output()
        result = result_future.result().result
        assert result.success, result.message
        assert result.pc_success == 100.0 and len(result.episodes) == 1 and result.episodes[0].seed == 4
        assert result.eval_s > 0 and result.avg_max_reward > 0.5
        assert feedback and all(
            f.episode_index == 0 and 0 < f.step <= result.episodes[0].steps for f in feedback
        )
        steps = result.episodes[0].steps
        assert wait_until(
            lambda: feedback_topic.messages and feedback_topic.messages[-1].feedback.step == steps, 10
        ), f"last feedback {[m.feedback.step for m in feedback_topic.messages[-3:]]}, result steps {steps}"
        bad = client.send_goal_async(EvaluatePolicy.Goal(env="so101_cube", policy="scripted", n_episodes=0))
        assert wait_until(bad.done, 20) and not bad.result().accepted


ACT_FIXTURE = share_path("lerobot_runtime") / "test" / "fixtures" / "act_small" / "pretrained_model"


@pytest.mark.skipif(
    not ACT_FIXTURE.is_dir(), reason="lerobot_runtime's ACT test checkpoint is not in this tree"
)
def test_eval_command_with_a_checkpoint_directory(tmp_path):
    # the fixture ACT takes observation.images.front (3x48x64) and observation.state (6): the sim's layout
    args = ["--episodes", "2", "--policy", str(ACT_FIXTURE), "--max-steps", "12", "--seed", "5", *SMALL]
    a, _ = _eval(tmp_path, "act_a", *args)
    b, _ = _eval(tmp_path, "act_b", *args)
    assert [e["steps"] for e in a["per_episode"]] == [12, 12]
    assert [e["sum_reward"] for e in a["per_episode"]] == [e["sum_reward"] for e in b["per_episode"]]
    assert a["meta"]["policy"] == str(ACT_FIXTURE)
    wrong = subprocess.run(
        [
            sys.executable,
            "-m",
            "lerobot_sim.eval_cli",
            "--env",
            "so101_cube",
            "--episodes",
            "1",
            "--policy",
            str(ACT_FIXTURE),
            "--cameras",
            "wrist",
            "--image-size",
            "48",
            "64",
            "--output",
            str(tmp_path / "w.json"),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert wrong.returncode == 2 and "observation.images.front" in wrong.stderr


def test_zero_episodes_is_refused_in_the_flags_words(tmp_path, capsys):
    from lerobot_sim.eval_cli import main

    with pytest.raises(SystemExit) as e:
        main(
            [
                "--env",
                "so101_cube",
                "--episodes",
                "0",
                "--policy",
                "scripted",
                "--output",
                str(tmp_path / "m.json"),
            ]
        )
    assert e.value.code == 2
    assert "argument --episodes: must be >= 1, got '0'" in capsys.readouterr().err
