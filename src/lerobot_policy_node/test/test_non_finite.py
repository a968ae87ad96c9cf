"""Non-finite numbers never become actions: NaN in a checkpoint's weights or statistics is a load-time
error naming the tensor; a NaN or inf action chunk is an error, never an output (predict CLI, node)."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from lerobot_runtime import NonFiniteActionError, PolicyLoadError, load_policy

from .conftest import ACT_SMALL

STATS = "policy_preprocessor_step_3_normalizer_processor.safetensors"
UNNORM = "policy_postprocessor_step_0_unnormalizer_processor.safetensors"


def _copy(tmp_path):
    ckpt = tmp_path / "pretrained_model"
    shutil.copytree(ACT_SMALL, ckpt)
    return ckpt


def _poison(path, name, value, index=0):
    tensors = load_file(str(path))
    t = tensors[name].clone()
    t.view(-1)[index] = value
    tensors[name] = t
    save_file(tensors, str(path))


@pytest.mark.parametrize(
    ("filename", "tensor", "value", "message"),
    [
        ("model.safetensors", "model.action_head.weight", float("nan"), "holds 1 NaN value(s)"),
        (STATS, "observation.state.std", float("nan"), "holds 1 NaN or inf value(s)"),
        (STATS, "observation.state.mean", float("inf"), "holds 1 NaN or inf value(s)"),
        (UNNORM, "action.mean", float("-inf"), "holds 1 NaN or inf value(s)"),
    ],
)
def test_non_finite_weights_or_statistics_are_a_load_error_naming_the_tensor(
    tmp_path, filename, tensor, value, message
):
    ckpt = _copy(tmp_path)
    _poison(ckpt / filename, tensor, value)
    with pytest.raises(PolicyLoadError) as info:
        load_policy(ckpt)
    text = str(info.value)
    assert f"tensor {tensor!r}" in text and message in text and filename in text, text


def _diverged(tmp_path):
    """inf is allowed in weights (attention masks use it), but these make every action inf or NaN."""
    ckpt = _copy(tmp_path)
    _poison(ckpt / "model.safetensors", "model.action_head.bias", float("inf"))
    _poison(ckpt / "model.safetensors", "model.action_head.bias", float("-inf"), index=1)
    return ckpt


def test_a_non_finite_action_chunk_is_an_error_not_an_output(tmp_path, act_observations):
    policy = load_policy(_diverged(tmp_path))
    with pytest.raises(NonFiniteActionError, match="first at chunk step 0, action dimension 0"):
        policy.predict_action_chunk(act_observations)
    assert np.isfinite(load_policy(ACT_SMALL).predict_action_chunk(act_observations)).all()


def _predict(*args):
    exe = shutil.which("lerobot-policy-predict")
    cmd = [exe] if exe else [sys.executable, "-m", "lerobot_runtime.predict_cli"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([*cmd, *map(str, args)], capture_output=True, text=True, env=env, timeout=120)


def test_predict_cli_writes_no_nan_chunk(tmp_path, act_observations):
    ckpt = _diverged(tmp_path)
    obs = tmp_path / "in.npz"
    np.savez(obs, **act_observations)
    out = tmp_path / "out.npz"
    res = _predict("--policy", ckpt, "--observations", obs, "--output", out)
    assert res.returncode == 1, res.stderr
    assert "non-finite action value(s)" in res.stderr and "nothing was sent" in res.stderr
    assert "Traceback" not in res.stderr
    assert not out.exists()
    res = _predict("--policy", ckpt.parent.parent / "nope", "--observations", obs, "--output", out)
    assert res.returncode != 0 and not out.exists()


def test_load_check_sees_the_same_tensors_torch_would_use(tmp_path):
    """The check reads the file the model loads: a clean copy loads and predicts finite actions."""
    ckpt = _copy(tmp_path)
    policy = load_policy(ckpt)
    assert all(torch.isfinite(p).all() for p in policy.model.parameters())


def test_the_policy_controller_holds_and_never_publishes_a_non_finite_command(tmp_path):
    """The policy node's control and inference threads (PolicyController, no ROS) with a checkpoint
    whose every action is inf/NaN: inference fails with the reason, the robot is held."""
    import time

    from lerobot_core.safety import SafetyFilter, SafetyLimits
    from lerobot_policy_node.action_queue import SchedulerConfig
    from lerobot_policy_node.controller import HOLDING, PolicyController
    from lerobot_policy_node.observation import ObservationBuilder, ObservationSpec

    joints = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
    front = "observation.images.front"
    sent = []
    seen = set()  # every (state, message) the controller went through
    clock = time.time_ns
    ctl = PolicyController(
        load_policy(_diverged(tmp_path)),
        ObservationBuilder(
            ObservationSpec(state_names=joints, image_shapes={front: (3, 48, 64)}, fps=30.0, max_age_s=0.5)
        ),
        SchedulerConfig(fps=10.0, n_action_steps=5, chunk_size=10),
        SafetyFilter(SafetyLimits.build(6, max_step=0.05)),
        publish_command=lambda cmd, held: sent.append((np.array(cmd, dtype=float), held)),
        now_ns=clock,
        on_state_change=lambda state, message: seen.add((state, message)),
    )
    ctl.start()
    try:
        deadline = time.monotonic() + 30
        k = 0
        while time.monotonic() < deadline and ctl.stats.inference_errors < 2:
            k += 1
            ctl.obs.push_joints(list(joints), [0.01 * (k % 10)] * 6, clock())
            ctl.obs.push_image(front, np.full((48, 64, 3), k % 255, np.uint8), clock())
            time.sleep(0.02)
    finally:
        ctl.stop()
    failed = [m for st, m in seen if st == HOLDING and "inference failed" in m and "non-finite action" in m]
    assert failed, seen
    assert ctl.stats.inference_errors >= 2
    assert ctl.stats.chunks == 0
    assert all(np.isfinite(c).all() for c, _ in sent)
    assert not [c for c, held in sent if not held]  # nothing but holds
