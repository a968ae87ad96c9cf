"""`lerobot-dataset-info`: describes a dataset and catches videos that do not match their rows."""

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lerobot_dataset import DatasetReader
from lerobot_dataset.info import main

FIXTURE = Path(__file__).parent / "fixtures" / "lerobot_v30_small"


@pytest.mark.parametrize(
    "written_by", ["lerobot_v30_small", "lerobot_v30_small_lerobot06"], ids=["lerobot-0.4.4", "lerobot-0.6.1"]
)
def test_describes_and_checks_the_dataset_lerobot_wrote(capsys, written_by):
    """The same dataset as LeRobot 0.4.4 and 0.6.1 write it (fixtures/make_lerobot_fixture.py)."""
    assert main([str(FIXTURE.parent / written_by), "--check"]) == 0
    out = capsys.readouterr().out
    assert "format    v3.0" in out and "check: every video matches its rows" in out
    assert out.count("\nepisode ") >= 2


def test_a_video_shorter_than_its_rows_fails_the_check(tmp_path, capsys):
    ds = tmp_path / "ds"
    shutil.copytree(FIXTURE, ds)
    ep_file = next((ds / "meta" / "episodes").rglob("*.parquet"))
    table = pq.read_table(ep_file)
    key = next(c for c in table.column_names if c.startswith("videos/") and c.endswith("/to_timestamp"))
    # cut the first episode's video span by 2 frames' worth of time
    fps = json.loads((ds / "meta" / "info.json").read_text())["fps"]
    col = table.column(key).to_pylist()
    col[0] = col[0] - 2.0 / fps
    table = table.set_column(table.column_names.index(key), key, pa.array(col, table.schema.field(key).type))
    pq.write_table(table, ep_file)
    assert main([str(ds), "--check"]) == 1
    assert "CHECK FAILED: episode 0" in capsys.readouterr().out


def test_not_a_dataset_is_a_clear_error(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert "meta/info.json is missing" in capsys.readouterr().err


# ---- damage cases: each one makes LeRobot fail (IndexError) or silently lose a frame ----------------
def _copy(tmp_path) -> Path:
    ds = tmp_path / "ds"
    shutil.copytree(FIXTURE, ds)
    return ds


def _data_file(ds: Path) -> Path:
    return sorted((ds / "data").rglob("*.parquet"))[0]


def _drop_rows(ds: Path) -> None:
    path = _data_file(ds)
    table = pq.read_table(path)
    pq.write_table(pa.concat_tables([table.slice(0, 2), table.slice(3)]), path)


def _delete_parquet(ds: Path) -> None:
    _data_file(ds).unlink()


def _truncate_parquet(ds: Path) -> None:
    path = _data_file(ds)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _edit_total_frames(ds: Path) -> None:
    info_path = ds / "meta" / "info.json"
    info = json.loads(info_path.read_text())
    info["total_frames"] += 1
    info_path.write_text(json.dumps(info, indent=4))


def _truncate_mp4(ds: Path) -> None:
    path = sorted((ds / "videos").rglob("*.mp4"))[0]
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])


def _delete_mp4(ds: Path) -> None:
    sorted((ds / "videos").rglob("*.mp4"))[0].unlink()


def _shift_timestamps(ds: Path) -> None:
    path = _data_file(ds)
    table = pq.read_table(path)
    ts = table.column("timestamp").to_pylist()
    ts[1] += 0.01
    pq.write_table(
        table.set_column(table.column_names.index("timestamp"), "timestamp", pa.array(ts, pa.float32())), path
    )


def _gap_in_index(ds: Path) -> None:
    path = _data_file(ds)
    table = pq.read_table(path)
    idx = table.column("index").to_pylist()
    idx[2] += 100
    pq.write_table(
        table.set_column(table.column_names.index("index"), "index", pa.array(idx, pa.int64())), path
    )


@pytest.mark.parametrize(
    "damage, expect",
    [
        (_drop_rows, "episode 0: data/chunk-000/file-000.parquet has"),
        (_delete_parquet, "data file data/chunk-000/file-000.parquet is missing"),
        (_truncate_parquet, "data file data/chunk-000/file-000.parquet does not open"),
        (_edit_total_frames, "total_frames is"),
        (_truncate_mp4, "episode 0, camera observation.images.front, file videos/observation.images.front/"),
        (_delete_mp4, "video file is missing"),
        (_shift_timestamps, "episode 0: data/chunk-000/file-000.parquet: timestamp"),
        (_gap_in_index, "index is not contiguous"),
    ],
    ids=lambda v: v.__name__.strip("_") if callable(v) else None,
)
def test_check_catches_damage_without_traceback(tmp_path, capsys, damage, expect):
    ds = _copy(tmp_path)
    damage(ds)
    assert main([str(ds), "--check"]) == 1
    cap = capsys.readouterr()
    failed = [line for line in cap.out.splitlines() if line.startswith("CHECK FAILED: ")]
    assert any(expect in line for line in failed), cap.out + cap.err
    assert "Traceback" not in cap.out + cap.err


def test_reader_reports_the_real_row_count(tmp_path):
    ds = _copy(tmp_path)
    _edit_total_frames(ds)
    r = DatasetReader(ds)
    assert r.num_frames == int(json.loads((ds / "meta/info.json").read_text())["total_frames"]) - 1
    _drop_rows(ds)
    assert DatasetReader(ds).num_frames == r.num_frames - 1
