"""Meta-World over ROS: the env wrapper, its task names, and multi-task evaluation with parallel sims."""

import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

pytest.importorskip(
    "metaworld", reason="metaworld is installed by ./setup.sh; this venv was set up without it"
)

from lerobot_sim.envs.metaworld import MetaWorldEnv, MetaWorldExpert, resolve_tasks

SMALL = ["--image-size", "32", "32"]


# ---------------------------------------------------------------------- the env (no ROS)
def test_env_keys_and_same_seed_same_episode():
    env = MetaWorldEnv("reach-v3", observation_height=32, observation_width=40)
    try:
        a, info = env.reset(seed=5)
        assert set(a) == {"pixels", "agent_pos", "environment_state"}
        assert a["pixels"].shape == (32, 40, 3) and a["pixels"].dtype == np.uint8
        assert a["agent_pos"].shape == (4,) and a["environment_state"].shape == (39,)
        assert info["is_success"] is False
        actions = [np.array([0.3, -0.2, 0.1, 0.0]), np.array([-0.1, 0.5, 0.0, 1.0])]
        run_a = [env.step(u) for u in actions]
        b, _ = env.reset(seed=5)
        run_b = [env.step(u) for u in actions]
        c, _ = env.reset(seed=6)
    finally:
        env.close()
    np.testing.assert_array_equal(a["environment_state"], b["environment_state"])
    np.testing.assert_array_equal(a["pixels"], b["pixels"])
    for (oa, ra, *_), (ob, rb, *_) in zip(run_a, run_b, strict=True):
        np.testing.assert_array_equal(oa["environment_state"], ob["environment_state"])
        assert ra == rb
    assert not np.array_equal(a["environment_state"], c["environment_state"])  # the seed places the goal


def test_scripted_expert_solves_reach_and_success_terminates():
    env = MetaWorldEnv("reach-v3", obs_type="state")
    expert = MetaWorldExpert("reach-v3")
    try:
        obs, _ = env.reset(seed=0)
        steps = 0
        while steps < 200:
            obs, _r, terminated, truncated, info = env.step(
                expert.select_action({"observation.environment_state": obs["environment_state"]})
            )
            steps += 1
            if terminated or truncated:
                break
    finally:
        env.close()
    assert terminated and info["is_success"] and not truncated, f"no success after {steps} steps"
    with pytest.raises(ValueError, match="observation.environment_state"):
        expert.select_action({"observation.state": np.zeros(4)})


def test_task_names_and_groups():
    mt10 = resolve_tasks("mt10")
    assert len(mt10) == 10 and mt10[0] == ("mt10", "reach-v3")
    assert len(resolve_tasks("MT50")) == 50
    assert resolve_tasks("pick-place-v3, reach-v3") == [
        ("pick-place-v3", "pick-place-v3"),
        ("reach-v3", "reach-v3"),
    ]
    assert {t for g, t in resolve_tasks("very_hard")} >= {"shelf-place-v3"}
    with pytest.raises(
        ValueError, match=r"--tasks 'pick-plce-v3': .*Groups: mt10, mt25, mt50.*pick-place-v3"
    ):
        resolve_tasks("reach-v3,pick-plce-v3")
    with pytest.raises(ValueError, match="unknown; tasks: assembly-v3"):
        MetaWorldEnv("nope-v3")


# ---------------------------------------------------------------------- the command
def _eval(tmp_path, name, *extra, ok=True):
    out = tmp_path / f"{name}.json"
    cmd = [sys.executable, "-m", "lerobot_sim.eval_cli", "--env", "metaworld", "--output", str(out), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=dict(os.environ))
    if not ok:
        return proc
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text()), proc.stdout


def test_command_errors_name_the_flag(tmp_path):
    bad = _eval(tmp_path, "x", "--episodes", "1", "--policy", "random", "--tasks", "mt11", ok=False)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "--tasks 'mt11': not a Meta-World task or group. Groups: mt10" in bad.stderr
    assert "pick-place-v3" in bad.stderr  # the valid names are listed
    missing = _eval(tmp_path, "x", "--episodes", "1", "--policy", "random", ok=False)
    assert missing.returncode == 2 and "--env metaworld needs --tasks" in missing.stderr
    other = subprocess.run(
        [sys.executable, "-m", "lerobot_sim.eval_cli", "--env", "so101_cube", "--episodes", "1"]
        + ["--policy", "random", "--tasks", "mt10"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert other.returncode == 2 and "--tasks: only with a multi-task env (metaworld, libero)" in other.stderr
    zero = _eval(
        tmp_path,
        "x",
        "--episodes",
        "1",
        "--policy",
        "random",
        "--tasks",
        "mt10",
        "--max-parallel-tasks",
        "0",
        ok=False,
    )
    assert zero.returncode == 2 and "--max-parallel-tasks" in zero.stderr
    assert not (tmp_path / "x.json").exists()


def _strip(doc):
    return {
        (r["task"], r["seed"]): (r["sum_reward"], r["max_reward"], r["success"], r["steps"], r["ended"])
        for r in doc["overall"]["per_episode"]
    }


@pytest.mark.ros
def test_parallel_equals_serial_per_seed_in_lerobot_eval_layout(tmp_path):
    """Two tasks, two episodes each, scripted expert: serial and two sims at once give the same episodes."""
    common = ["--tasks", "reach-v3,button-press-topdown-v3", "--episodes", "2", "--seed", "7"]
    common += ["--policy", "scripted", "--max-steps", "25", *SMALL]
    serial, _ = _eval(tmp_path, "serial", *common)
    parallel, out = _eval(tmp_path, "parallel", *common, "--max-parallel-tasks", "4")
    assert "--max-parallel-tasks 4 is more than the 2 task(s); using 2" in out
    assert parallel["meta"]["max_parallel_tasks"] == 2 and serial["meta"]["max_parallel_tasks"] == 1
    assert _strip(serial) == _strip(parallel)
    assert len(_strip(serial)) == 4 and {s for _t, s in _strip(serial)} == {7, 8}
    # lerobot-eval's multi-task layout
    assert set(parallel) >= {"per_task", "per_group", "overall"}
    for level in [parallel["overall"], *parallel["per_group"].values()] + [
        t["metrics"] for t in parallel["per_task"]
    ]:
        assert {"pc_success", "avg_sum_reward", "avg_max_reward", "per_episode"} <= set(level)
    assert [(t["task_group"], t["task_id"], t["task"]) for t in parallel["per_task"]] == [
        ("reach-v3", 0, "reach-v3"),
        ("button-press-topdown-v3", 0, "button-press-topdown-v3"),
    ]
    task = parallel["per_task"][0]["metrics"]
    assert len(task["successes"]) == len(task["sum_rewards"]) == 2
    rewards = [r["sum_reward"] for r in parallel["overall"]["per_episode"]]
    assert parallel["overall"]["avg_sum_reward"] == pytest.approx(np.mean(rewards))
    assert all(r > 0 for r in rewards)  # the expert moved the arm: Meta-World's shaped reward is positive


@pytest.mark.ros
def test_a_sim_that_dies_fails_its_task_and_the_other_finishes():
    from lerobot_sim.eval_cli import _spaces, make_transport_factory, resolve_env
    from lerobot_sim.evaluation import EvalSettings
    from lerobot_sim.multitask import multitask_document, run_tasks, task_specs

    base = resolve_env("metaworld", None)
    kwargs = {**base.env_kwargs, "observation_height": 32, "observation_width": 32}

    def preset(spec):
        return base.__class__(base.executable, base.env_id, {**kwargs, "task": spec.task}, (), True)

    specs = task_specs([("mt", "reach-v3"), ("mt", "push-v3")])
    spaces = _spaces(preset(specs[0]))
    factories = {}

    def factory_for(spec):
        factory, _ = make_transport_factory(
            preset(spec), {}, log=lambda m: None, namespace=f"kill_{spec.task_id}", spaces=spaces
        )
        factories[spec.task] = factory
        return factory

    def kill_reach(spec, episode, step):
        if spec.task == "reach-v3" and episode == 1 and step == 3:
            factories["reach-v3"].state["process"].proc.kill()

    settings = EvalSettings(n_episodes=3, seed=0, max_steps=6, max_restarts=0)
    results, eval_s = run_tasks(
        specs,
        factory_for,
        lambda spec: MetaWorldExpert(spec.task),
        settings,
        max_parallel=2,
        log=lambda m: None,
        on_step=kill_reach,
    )
    reach, push = results
    assert [e.episode_index for e in push.episodes] == [0, 1, 2] and not push.error
    assert [e.episode_index for e in reach.episodes] == [0]  # finished before the kill: kept
    assert "exited with code -9" in reach.error
    doc = multitask_document(results, eval_s, meta={})
    records = doc["per_task"][0]["metrics"]["per_episode"]
    assert [r["ended"] for r in records] == ["timeout", "failed", "failed"]
    assert "exited with code -9" in records[1]["error"] and records[1]["success"] is False
    assert doc["overall"]["n_failed"] == 2 and doc["overall"]["n_episodes"] == 6
    assert doc["per_task"][0]["error"] == reach.error


@pytest.mark.ros
def test_realtime_sim_driven_by_the_scripted_expert_node_over_ros(ros_node):
    """Meta-World in realtime mode on the gym bridge's topics, the scripted_expert node (metaworld_task)
    closing the loop over DDS: the images, the 4-value state and the stamped 39-value environment state
    arrive, and the expert's commands make the episode succeed (reach-v3 from seed 0)."""
    from sensor_msgs.msg import Image, JointState

    from lerobot_core.ros.testing import MessageCollector, RosProcess, wait_until
    from lerobot_msgs.msg import EpisodeInfo
    from lerobot_msgs.srv import ResetSim

    info = MessageCollector(ros_node, EpisodeInfo, "/sim/episode_info")
    img = MessageCollector(ros_node, Image, "/cameras/image/image_raw")
    state = MessageCollector(ros_node, JointState, "/joint_states")
    env_state = MessageCollector(ros_node, JointState, "/sim/environment_state")
    sim = {
        "env_id": "LeRobotRos/MetaWorld-v0",
        "env_kwargs": json.dumps({"task": "reach-v3", "observation_height": 24, "observation_width": 32}),
        "mode": "realtime",
        "fps": 20.0,  # below Meta-World's 80 Hz: realtime on a loaded 2-core machine
        "seed": 0,
        "auto_reset": False,
        "autostart": True,
        "state_names": ["hand_x", "hand_y", "hand_z", "gripper"],
    }
    with (
        RosProcess("lerobot_sim", "gym_bridge", parameters=sim) as proc,
        RosProcess("lerobot_sim", "scripted_expert", parameters={"metaworld_task": "reach-v3"}),
    ):
        # the bridge has no "hold" action for a generic env: it steps once commands come, and the expert
        # answers observations: a reset once the expert listens starts the loop (as a recorder's would)
        assert wait_until(lambda: ros_node.count_subscribers("/sim/environment_state") >= 2, 60)
        assert wait_until(lambda: ros_node.count_subscribers("/sim/episode_info") >= 2, 60)
        client = ros_node.create_client(ResetSim, "/sim/reset")
        assert client.wait_for_service(timeout_sec=30.0)
        future = client.call_async(ResetSim.Request(use_seed=True, seed=0))
        assert wait_until(future.done, 30.0) and future.result().success
        assert wait_until(lambda: any(m.is_success for m in info.messages), 90), proc.output()[-2000:]
    frame = img.messages[-1]
    assert (frame.height, frame.width, frame.encoding) == (24, 32, "rgb8")
    assert state.messages[-1].name == ["hand_x", "hand_y", "hand_z", "gripper"]
    assert len(env_state.messages[-1].position) == 39
    done = next(m for m in info.messages if m.is_success)
    assert done.terminated and done.seed == 0 and done.step > 0


def test_checkpoint_copies_share_weights_and_keep_their_own_ensembler(tmp_path):
    """Every task's copy of a checkpoint policy shares one weights object; its per-episode state (history,
    queue, ACT's temporal ensembler) is its own: two copies stepped at once from two threads give exactly
    the actions each gives alone (an ensembler shared between them would mix their chunks)."""
    import shutil

    from lerobot_core.ament import share_path
    from lerobot_sim.eval_cli import TaskPolicies
    from lerobot_sim.multitask import TaskSpec

    src = share_path("lerobot_runtime") / "test" / "fixtures" / "act_env_state" / "pretrained_model"
    ckpt = tmp_path / "act_te"
    shutil.copytree(src, ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    config.update(temporal_ensemble_coeff=0.01, n_action_steps=1)
    (ckpt / "config.json").write_text(json.dumps(config))
    notes = []
    policies = TaskPolicies(str(ckpt), None, fps=30, parallel=2, log=notes.append)
    assert any("each task keeps its own ensembler" in n for n in notes)
    a, b = (policies.for_task(TaskSpec("g", t, i)) for i, t in enumerate(("reach-v3", "push-v3")))
    assert a.path.policy is b.path.policy and a.path is not b.path

    rng = np.random.default_rng(0)
    streams = [
        [
            {
                "observation.state": rng.uniform(-1, 1, 6),
                "observation.environment_state": rng.uniform(-1, 1, 7),
            }
            for _ in range(12)
        ]
        for _ in range(2)
    ]

    def run(policy, stream, out):
        policy.reset(0)
        out.extend(policy.select_action(o) for o in stream)

    alone = [[], []]
    for policy, stream, out in zip((a, b), streams, alone, strict=True):
        run(policy, stream, out)
    together = [[], []]
    threads = [
        threading.Thread(target=run, args=(p, s, o))
        for p, s, o in zip((a, b), streams, together, strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for x, y in zip(alone, together, strict=True):
        np.testing.assert_array_equal(np.stack(x), np.stack(y))
    assert not np.allclose(np.stack(alone[0]), np.stack(alone[1]))  # different inputs, different actions


def test_a_policy_fault_stops_every_task_at_its_next_step():
    """A non-finite action is the policy's fault: the whole evaluation stops with that error (as in a
    single-task run), and the task running beside it ends at its next step instead of running on."""
    from lerobot_sim.evaluation import EvalSettings, EvaluationError, LocalEnvTransport, RandomPolicy
    from lerobot_sim.multitask import run_tasks, task_specs
    from lerobot_sim.session import SimSession

    faulted = threading.Event()

    class NaNAfterTwo(RandomPolicy):
        def select_action(self, observation):
            self.n = getattr(self, "n", 0) + 1
            if self.n > 2:
                faulted.set()
                return np.full(4, np.nan)
            return super().select_action(observation)

    class WaitsForTheFault(RandomPolicy):
        """push-v3's policy: its 3rd step waits for reach-v3's fault (task construction order and
        speed must not decide the test), and then it is slow, so push-v3 cannot run through its
        episodes before the stop reaches it"""

        def select_action(self, observation):
            self.n = getattr(self, "n", 0) + 1
            if self.n == 3:
                assert faulted.wait(120), "reach-v3 never reached its non-finite action"
            if faulted.is_set():
                time.sleep(0.01)
            return super().select_action(observation)

    specs = task_specs([("g", "reach-v3"), ("g", "push-v3")])
    steps = {"reach-v3": 0, "push-v3": 0}

    def factory_for(spec):
        return lambda: LocalEnvTransport(SimSession(MetaWorldEnv(spec.task, obs_type="state")))

    def policy_for(spec):
        space = MetaWorldEnv(spec.task, obs_type="state").action_space
        return NaNAfterTwo(space) if spec.task == "reach-v3" else WaitsForTheFault(space)

    def count(spec, episode, step):
        steps[spec.task] += 1

    with pytest.raises(EvaluationError, match="non-finite action"):
        run_tasks(
            specs, factory_for, policy_for, EvalSettings(3, 0, 400), 2, log=lambda m: None, on_step=count
        )
    assert steps["reach-v3"] == 2
    assert steps["push-v3"] < 1200  # stopped, not run through its 3 x 400 steps


def test_benchmarks_built_at_once_are_the_serial_ones():
    """Parallel evaluation builds tasks from several threads; MT1 uses numpy's global random state, so
    building must not interleave: every thread gets the goals a serial build gives."""

    from lerobot_sim.envs.metaworld import benchmark_for

    def goals(task):
        return [t.data for t in benchmark_for(task).train_tasks]

    serial = {task: goals(task) for task in ("push-v3", "reach-v3")}
    got: dict[int, tuple[str, list]] = {}
    threads = [
        threading.Thread(target=lambda i=i, task=task: got.__setitem__(i, (task, goals(task))))
        for i, task in enumerate(["push-v3", "reach-v3"] * 3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 6
    for task, g in got.values():
        assert g == serial[task]
