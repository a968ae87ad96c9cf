"""DatasetReader on the datasets the real LeRobot 0.4.4 and 0.6.1 wrote (fixtures/make_lerobot_fixture.py;
LeRobot loading ours: test_lerobot_compat.py)."""

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest

from lerobot_dataset import DatasetError, DatasetReader

FIXTURES = Path(__file__).resolve().parent / "fixtures"
LEROBOT_FIXTURE = FIXTURES / "lerobot_v30_small"
# the same dataset as written by each LeRobot version
WRITTEN_BY = pytest.mark.parametrize(
    "written_by",
    [LEROBOT_FIXTURE, FIXTURES / "lerobot_v30_small_lerobot06"],
    ids=["lerobot-0.4.4", "lerobot-0.6.1"],
)


def _fixture_module():
    spec = importlib.util.spec_from_file_location(
        "make_lerobot_fixture", FIXTURES / "make_lerobot_fixture.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@WRITTEN_BY
def test_reads_dataset_written_by_lerobot(written_by):
    fx = _fixture_module()
    r = DatasetReader(written_by)
    assert r.info["codebase_version"] == "v3.0"
    assert (r.num_episodes, r.num_frames, r.fps) == (len(fx.EPISODE_LENGTHS), sum(fx.EPISODE_LENGTHS), fx.FPS)
    assert r.tasks == ["pick the cube", "place the cube"]
    assert r.camera_keys == ["observation.images.front"]
    index = 0
    for ep, (n, task) in enumerate(zip(fx.EPISODE_LENGTHS, fx.TASKS, strict=True)):
        cols = r.episode(ep)
        want = np.stack([fx.expected_state(ep, i) for i in range(n)])
        np.testing.assert_array_equal(cols["observation.state"], want)
        np.testing.assert_array_equal(cols["action"], -want)
        np.testing.assert_array_equal(cols["index"], np.arange(index, index + n))
        assert list(cols["task"]) == [task] * n
        frames = r.video_frames("observation.images.front", ep)
        assert frames.shape == (n, fx.HEIGHT, fx.WIDTH, 3)
        want_img = np.stack([fx.expected_frame(ep, i) for i in range(n)]).astype(np.float64)
        assert np.abs(frames.astype(np.float64) - want_img).mean() < 4
        index += n
    item = r[6]
    assert (item["episode_index"], item["frame_index"], item["task"]) == (1, 1, "place the cube")
    np.testing.assert_array_equal(item["observation.state"], fx.expected_state(1, 1))
    assert item["timestamp"] == pytest.approx(0.1)
    img = item["observation.images.front"]
    assert img.dtype == np.uint8 and np.abs(img.astype(int) - fx.expected_frame(1, 1)).mean() < 4
    assert r.stats["observation.images.front"]["mean"].shape == (3, 1, 1)
    es = r.episode_stats(0)
    np.testing.assert_allclose(es["observation.state"]["max"], fx.expected_state(0, 4), rtol=1e-6)
    with pytest.raises(IndexError):
        r[r.num_frames]
    with pytest.raises(DatasetError, match="out of range"):
        r.episode(3)


@WRITTEN_BY
def test_fixture_is_small(written_by):
    total = sum(p.stat().st_size for p in written_by.rglob("*") if p.is_file())
    assert total < 300_000


def test_rejects_non_v3_dataset(tmp_path):
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta/info.json").write_text('{"codebase_version": "v2.1", "fps": 30, "features": {}}')
    with pytest.raises(DatasetError, match="only LeRobotDataset v3"):
        DatasetReader(tmp_path)
    with pytest.raises(DatasetError, match="not a LeRobot dataset"):
        DatasetReader(tmp_path / "nothing")


@WRITTEN_BY
def test_resume_appends_to_a_lerobot_written_dataset(tmp_path, written_by):
    from lerobot_dataset import DatasetWriter

    fx = _fixture_module()
    root = tmp_path / "ds"
    shutil.copytree(written_by, root)
    w = DatasetWriter.resume(root)
    assert w.vcodec == "libsvtav1" and w.total_episodes == 3
    for i in range(6):
        state = fx.expected_state(3, i)
        w.add_frame(
            {
                "observation.state": state,
                "action": -state,
                "observation.images.front": fx.expected_frame(3, i),
            },
            task="place the cube",
        )
    summary = w.save_episode()
    w.finalize()
    assert summary["dataset_from_index"] == sum(fx.EPISODE_LENGTHS)
    r = DatasetReader(root)
    assert (r.num_episodes, r.num_frames, r.tasks) == (
        4,
        sum(fx.EPISODE_LENGTHS) + 6,
        ["pick the cube", "place the cube"],
    )
    new = r.episode_meta(3)
    assert (new["data/file_index"], new["videos/observation.images.front/file_index"]) == (1, 1)
    np.testing.assert_array_equal(r.episode(3)["observation.state"][5], fx.expected_state(3, 5))
    np.testing.assert_array_equal(r.episode(3)["task_index"], [1] * 6)
    assert len(r.video_frames("observation.images.front", 3)) == 6
    assert len(r.video_frames("observation.images.front", 0)) == fx.EPISODE_LENGTHS[0]  # old data untouched
    assert list(r.stats["observation.state"]["count"]) == [sum(fx.EPISODE_LENGTHS) + 6]
