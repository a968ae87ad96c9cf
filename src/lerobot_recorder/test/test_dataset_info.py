"""`lerobot-dataset-info`: describes a dataset and catches videos that do not match their rows."""

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lerobot_recorder.dataset_info import main

FIXTURE = Path(__file__).parent / "fixtures" / "lerobot_v30_small"


def test_describes_and_checks_the_dataset_lerobot_wrote(capsys):
    assert main([str(FIXTURE), "--check"]) == 0
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
