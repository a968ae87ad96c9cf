"""DatasetWriter durability: SIGKILL mid-episode and mid-commit, disk full (file-size limit, tmpfs)."""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from lerobot_dataset import DatasetError, DatasetReader, DatasetWriter

FPS = 10
H, W = 24, 32

# Shared by the child processes and the checks below.
HELPERS = textwrap.dedent(
    """
    import numpy as np
    from lerobot_dataset import DatasetWriter, DatasetError
    FPS, H, W = 10, 24, 32
    FEATURES = {
        "observation.state": {"dtype": "float32", "shape": (6,), "names": [f"j{i}.pos" for i in range(6)]},
        "observation.images.front": {"dtype": "video", "shape": (H, W, 3), "names": ["height", "width", "channels"]},
    }
    def state(ep, i):
        return np.array([ep * 100 + i + j / 8 for j in range(6)], dtype=np.float32)
    def frame(ep, i):
        img = np.full((H, W, 3), (10 + 20 * i % 240, 30 + 60 * ep % 240, 90), dtype=np.uint8)
        return {"observation.state": state(ep, i), "observation.images.front": img}
    def record(w, ep, n, task="pick"):
        for i in range(n):
            w.add_frame(frame(ep, i), task=task)
        return w.save_episode()
    """
)
_NS: dict = {}
exec(HELPERS, _NS)  # the same definitions the children use
state, frame, record, FEATURES = _NS["state"], _NS["frame"], _NS["record"], _NS["FEATURES"]


def run_child(body: str, timeout: float = 60, **kwargs) -> subprocess.Popen:
    code = HELPERS + textwrap.dedent(body)
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def check_episodes(root: Path, lengths: list[int]) -> DatasetReader:
    r = DatasetReader(root)
    assert r.num_episodes == len(lengths)
    assert r.num_frames == sum(lengths)
    for ep, n in enumerate(lengths):
        np.testing.assert_array_equal(
            r.episode(ep)["observation.state"], np.stack([state(ep, i) for i in range(n)])
        )
        assert len(r.video_frames("observation.images.front", ep)) == n
    return r


def test_sigkill_mid_episode_keeps_saved_episodes_and_resumes(tmp_path):
    root = tmp_path / "ds"
    child = run_child(
        f"""
        import sys, time
        w = DatasetWriter.create({str(root)!r}, fps=FPS, features=FEATURES)
        record(w, 0, 4)
        record(w, 1, 3)
        for i in range(6):
            w.add_frame(frame(2, i), task="pick")
        print("RECORDING", flush=True)
        time.sleep(60)
        """
    )
    line = child.stdout.readline()
    assert line.strip() == "RECORDING", child.stderr.read()
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL
    assert (root / ".lerobot_ros" / "episode").exists()  # the partial episode's encoder output

    check_episodes(root, [4, 3])  # loadable as is, without any recovery step
    w = DatasetWriter.resume(root)
    assert w.dropped_partial_episode and not w.recovered_interrupted_save
    assert w.total_episodes == 2
    record(w, 2, 5)
    w.finalize()
    check_episodes(root, [4, 3, 5])


def test_sigkill_during_commit_is_completed_on_resume(tmp_path, capsys):
    root = tmp_path / "ds"
    child = run_child(
        f"""
        import os, signal
        from lerobot_dataset import storage
        w = DatasetWriter.create({str(root)!r}, fps=FPS, features=FEATURES)
        record(w, 0, 4)
        record(w, 1, 3)
        real_replace, calls = os.replace, []
        def dying_replace(src, dst):
            real_replace(src, dst)
            calls.append(dst)
            if len(calls) == 3:  # journal written, two of the episode's files moved into place
                os.kill(os.getpid(), signal.SIGKILL)
        storage.os.replace = dying_replace
        record(w, 2, 5)
        """
    )
    child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL, child.stderr.read()
    assert (root / ".lerobot_ros" / "commit-journal.json").exists()
    with pytest.raises(DatasetError, match="interrupted mid-commit"):
        DatasetReader(root)
    # the CLI says what to type, in its own flags; --repair on a copy completes the commit
    from lerobot_dataset.info import main as dataset_info

    assert dataset_info([str(root)]) == 2
    err = capsys.readouterr().err
    assert f"lerobot-dataset-info --repair {root}" in err and "DatasetWriter" not in err, err
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    assert dataset_info(["--repair", "--check", str(copy)]) == 0, capsys.readouterr()
    assert "repaired" in capsys.readouterr().out
    check_episodes(copy, [4, 3, 5])
    w = DatasetWriter.resume(root)
    assert w.recovered_interrupted_save
    assert w.total_episodes == 3
    record(w, 3, 2)
    w.finalize()
    check_episodes(root, [4, 3, 5, 2])


def test_disk_full_via_file_size_limit(tmp_path):
    """RLIMIT_FSIZE makes the kernel refuse to grow files (EFBIG), as a full disk refuses with ENOSPC."""
    root = tmp_path / "ds"
    child = run_child(
        f"""
        import resource, signal
        from pathlib import Path
        w = DatasetWriter.create({str(root)!r}, fps=FPS, features=FEATURES)
        record(w, 0, 4)
        record(w, 1, 3)
        biggest = max(p.stat().st_size for p in Path({str(root)!r}).rglob("*") if p.is_file())
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
        resource.setrlimit(resource.RLIMIT_FSIZE, (biggest, resource.RLIM_INFINITY))  # no file may grow
        try:
            record(w, 2, 40)
        except DatasetError as exc:
            print("ERROR:", exc)
        else:
            print("SAVED")
        """
    )
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert out.startswith("ERROR:"), out + err
    assert "disk full" in out and "saved before it are intact" in out and "needs about" in out
    assert "save_episode" not in out, out  # the library's message reads well in every tool
    assert not (root / ".lerobot_ros" / "commit-journal.json").exists()
    check_episodes(root, [4, 3])
    w = DatasetWriter.resume(root)
    record(w, 2, 6)
    w.finalize()
    check_episodes(root, [4, 3, 6])


def _mount_tmpfs(path: Path, size: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    path.mkdir()
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True
    )
    return res.returncode == 0


def test_disk_full_on_a_real_full_filesystem_then_retry(tmp_path):
    mnt = tmp_path / "small"
    if not _mount_tmpfs(mnt, "4m"):
        pytest.skip("needs root and permission to mount a tmpfs (not available in this environment)")
    try:
        root = mnt / "ds"
        w = DatasetWriter.create(root, fps=FPS, features=FEATURES)
        record(w, 0, 4)
        record(w, 1, 3)
        for i in range(8):
            w.add_frame(frame(2, i), task="pick")
        # Fill the filesystem, leaving less room than the episode's commit needs.
        st = os.statvfs(mnt)
        filler = mnt / "filler"
        with open(filler, "wb") as f:
            f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - 8 * 1024))
        with pytest.raises(DatasetError, match="disk full|No space left") as info:
            w.save_episode()
        assert "intact" in str(info.value)
        check_episodes(root, [4, 3])
        filler.unlink()  # space freed: the same episode can now be saved
        summary = w.save_episode()
        assert summary["episode_index"] == 2 and summary["length"] == 8
        w.finalize()
        check_episodes(root, [4, 3, 8])
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
