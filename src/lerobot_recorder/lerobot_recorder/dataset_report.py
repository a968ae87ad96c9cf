"""A static report of one episode for headless machines: PNG plots and a contact sheet (ROS-free).

Drawn with OpenCV (already a dependency; no matplotlib needed):

* ``<feature>.png`` for ``observation.state`` and ``action``: one panel per joint, value against
  time; where both exist each panel shows the state (blue) and the action (orange) together in
  ``state_action.png`` instead.
* ``flags.png``: every other per-frame numeric column (``next.reward``, ``next.done``,
  ``complementary_info.*``), one panel each.
* ``contact_sheet_<camera>.png``: frames spread evenly over the episode, labelled with frame index
  and time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lerobot_dataset import DatasetError, DatasetReader
from lerobot_dataset.depth import depth_preview

DEFAULT_COLUMNS = ("timestamp", "frame_index", "episode_index", "index", "task_index")
STATE, ACTION = "observation.state", "action"
BLUE, ORANGE, GREY, BLACK = (180, 119, 31), (14, 127, 255), (200, 200, 200), (40, 40, 40)  # BGR
RED, SHADE = (40, 40, 214), (200, 235, 255)  # sim reset lines; the background of human-driven frames
INTERVENTION = "complementary_info.is_intervention"
DONE = "next.done"
# How info.json's "units" read on an axis (lerobot_core.contract writes these words).
UNIT_LABELS = {
    "radians": "rad",
    "degrees": "deg",
    "normalized": "normalized",
    "metres": "m",
    "quaternion": "quat",
}
PANEL_W, PANEL_H, MARGIN = 420, 200, 46


def flag_columns(reader: DatasetReader) -> list[str]:
    """Per-frame numeric columns besides the defaults, state, action and cameras: flags and rewards
    (``next.done``, ``next.reward``, ``complementary_info.*``), extra state vectors."""
    out = []
    for key, spec in reader.features.items():
        if key in DEFAULT_COLUMNS or key in (STATE, ACTION) or key.startswith("observation.images."):
            continue
        if spec["dtype"] not in ("video", "image", "string"):
            out.append(key)
    return sorted(out)


def _names(reader: DatasetReader, key: str, width: int) -> list[str]:
    """info.json's names of the feature's values (``cube.x``, ``shoulder_pan.pos``), else ``key[i]``."""
    names = reader.features[key].get("names")
    if isinstance(names, dict):
        names = next(iter(names.values()))
    if names and len(names) == width:
        return [str(n) for n in names]
    return [key] if width == 1 else [f"{key}[{i}]" for i in range(width)]


def _units(reader: DatasetReader, key: str, width: int) -> list[str]:
    """Each value's unit as info.json records it (one for all, or one per value); "?" where it does not."""
    units = reader.features[key].get("units")
    if isinstance(units, str):
        units = [units] * width
    if not isinstance(units, list) or len(units) != width:
        return ["?"] * width
    return [UNIT_LABELS.get(str(u), str(u)) for u in units]


def _labels(reader: DatasetReader, key: str, width: int) -> list[str]:
    return [f"{n} [{u}]" for n, u in zip(_names(reader, key, width), _units(reader, key, width), strict=True)]


def reset_frames(reader: DatasetReader, cols: dict) -> list[int]:
    """Frames (positions in the episode) where a simulation episode began inside the recorded one: after
    a frame with ``next.done`` set, or where a joint of ``observation.state`` moved further in one frame
    than twice its velocity limit allows (the sim's reset puts the arm back at once; a real arm cannot)."""
    n = len(cols["timestamp"])
    out = set()
    if DONE in cols:
        done = np.asarray(cols[DONE]).reshape(n, -1).any(axis=1)
        out.update(int(i) + 1 for i in np.flatnonzero(done[:-1]))
    units = reader.features.get(STATE, {}).get("units")
    if STATE in cols and n > 1 and units in ("radians", "degrees"):
        from lerobot_core.robots import get_robot_spec

        try:
            spec = get_robot_spec(str(reader.info.get("robot_type")))
        except (KeyError, ValueError):
            spec = None
        names = [x.removesuffix(".pos") for x in _names(reader, STATE, cols[STATE].shape[1])]
        if spec is not None:
            scale = 1.0 if units == "radians" else np.pi / 180.0
            for j, name in enumerate(names):
                if name in spec.limits:
                    step = np.abs(np.diff(np.asarray(cols[STATE][:, j], np.float64))) * scale
                    too_fast = step > 2.0 * spec.limits[name].velocity / float(reader.fps)
                    out.update(int(i) + 1 for i in np.flatnonzero(too_fast))
    return sorted(out)


def _title(img: np.ndarray, text: str) -> np.ndarray:
    import cv2

    bar = np.full((28, img.shape[1], 3), 255, np.uint8)
    cv2.putText(bar, text, (10, 20), cv2.FONT_HERSHEY_SIMPLEX, 0.55, BLACK, 1, cv2.LINE_AA)
    return np.vstack([bar, img])


def _panel(
    t: np.ndarray,
    series: list[tuple[np.ndarray, tuple[int, int, int]]],
    title: str,
    shade: np.ndarray | None = None,
    marks: list[int] = (),
) -> np.ndarray:
    """One value-against-time panel; ``shade`` (bool per frame) tints those frames' background (the
    interventions), ``marks`` (frame positions) draw a vertical line where a sim reset happened."""
    import cv2

    img = np.full((PANEL_H, PANEL_W, 3), 255, np.uint8)
    x0, x1, y0, y1 = MARGIN, PANEL_W - 10, 24, PANEL_H - 28
    cv2.rectangle(img, (x0, y0), (x1, y1), GREY, 1)
    values = np.concatenate([s for s, _ in series]) if series else np.zeros(1)
    finite = values[np.isfinite(values)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    t0, t1 = float(t[0]), float(t[-1]) if len(t) > 1 else float(t[0]) + 1.0
    span_t = max(t1 - t0, 1e-9)

    def px(tt, v):
        x = x0 + (np.asarray(tt) - t0) / span_t * (x1 - x0)
        y = y1 - (np.asarray(v) - lo) / (hi - lo) * (y1 - y0)
        return np.stack([x, y], axis=-1).round().astype(np.int32)

    if shade is not None and len(t) > 1:
        half = (x1 - x0) / (len(t) - 1) / 2
        for i in np.flatnonzero(shade):
            xa, xb = int(px(t[i], 0)[0] - half), int(np.ceil(px(t[i], 0)[0] + half))
            cv2.rectangle(img, (max(xa, x0), y0 + 1), (min(xb, x1), y1 - 1), SHADE, -1)
    for i in marks:
        x = int(px(t[i], 0)[0])
        for ya in range(y0, y1, 8):  # dashed
            cv2.line(img, (x, ya), (x, min(ya + 4, y1)), RED, 1)
    for values_, colour in series:
        ok = np.isfinite(values_)
        if ok.sum() >= 2:
            cv2.polylines(img, [px(t[ok], values_[ok])], False, colour, 2, cv2.LINE_AA)
        elif ok.sum() == 1:
            cv2.circle(img, tuple(px(t[ok], values_[ok])[0]), 3, colour, -1)
    font = cv2.FONT_HERSHEY_SIMPLEX
    cv2.putText(img, title, (x0, 16), font, 0.45, BLACK, 1, cv2.LINE_AA)
    cv2.putText(img, f"{hi:.3g}", (2, y0 + 10), font, 0.35, BLACK, 1, cv2.LINE_AA)
    cv2.putText(img, f"{lo:.3g}", (2, y1), font, 0.35, BLACK, 1, cv2.LINE_AA)
    cv2.putText(img, f"{t0:.1f} s", (x0, PANEL_H - 10), font, 0.35, BLACK, 1, cv2.LINE_AA)
    cv2.putText(img, f"{t1:.1f} s", (x1 - 40, PANEL_H - 10), font, 0.35, BLACK, 1, cv2.LINE_AA)
    return img


def _grid(panels: list[np.ndarray], columns: int = 2) -> np.ndarray:
    rows = -(-len(panels) // columns)
    blank = np.full_like(panels[0], 255)
    padded = panels + [blank] * (rows * columns - len(panels))
    return np.vstack([np.hstack(padded[r * columns : (r + 1) * columns]) for r in range(rows)])


def _legend(img: np.ndarray, entries: list[tuple[str, tuple[int, int, int]]]) -> np.ndarray:
    import cv2

    bar = np.full((26, img.shape[1], 3), 255, np.uint8)
    x = 10
    for text, colour in entries:
        if colour == SHADE:
            cv2.rectangle(bar, (x, 5), (x + 24, 21), colour, -1)
        elif colour == RED:
            cv2.line(bar, (x + 12, 3), (x + 12, 23), colour, 1)
        else:
            cv2.line(bar, (x, 13), (x + 24, 13), colour, 3)
        cv2.putText(bar, text, (x + 30, 18), cv2.FONT_HERSHEY_SIMPLEX, 0.45, BLACK, 1, cv2.LINE_AA)
        x += 40 + 9 * len(text)
    return np.vstack([bar, img])


def contact_sheet(
    frames: np.ndarray, frame_indices: np.ndarray, times: np.ndarray, columns: int = 4
) -> np.ndarray:
    """Frames (k, H, W, 3 RGB) tiled ``columns`` wide, each labelled; returns a BGR image."""
    import cv2

    tiles = []
    for frame, i, t in zip(frames, frame_indices, times, strict=True):
        tile = cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2BGR)
        if tile.shape[1] < 160:  # small cameras: enlarge so the label fits
            scale = 160 / tile.shape[1]
            tile = cv2.resize(tile, None, fx=scale, fy=scale, interpolation=cv2.INTER_NEAREST)
        label = np.full((20, tile.shape[1], 3), 255, np.uint8)
        cv2.putText(
            label, f"frame {i}  {t:.2f} s", (4, 14), cv2.FONT_HERSHEY_SIMPLEX, 0.4, BLACK, 1, cv2.LINE_AA
        )
        tiles.append(
            cv2.copyMakeBorder(np.vstack([label, tile]), 2, 2, 2, 2, cv2.BORDER_CONSTANT, value=GREY)
        )
    return _grid(tiles, columns)


def write_report(
    reader: DatasetReader,
    episode_index: int,
    out_dir: str | Path,
    sheet_frames: int = 12,
    title: str | None = None,
) -> list[Path]:
    """Write the episode's PNGs into ``out_dir``; returns their paths. Each image is titled with
    ``title`` (the dataset, by default its folder) and the episode; each panel says its unit; frames a
    human drove are shaded and sim resets inside the episode are marked on the state/action plot."""
    import cv2

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cols = reader.episode(episode_index)
    t = np.asarray(cols["timestamp"], dtype=np.float64)
    written: list[Path] = []
    head = f"{title or reader.root.name} - episode {episode_index} ({len(t)} frames at {reader.fps} fps)"

    def save(name: str, img: np.ndarray, what: str) -> None:
        path = out_dir / name
        if not cv2.imwrite(str(path), _title(img, f"{head} - {what}")):
            raise OSError(f"cannot write {path}")
        written.append(path)

    shade = None
    if INTERVENTION in cols:
        shade = np.asarray(cols[INTERVENTION]).reshape(len(t), -1).any(axis=1)
    marks = reset_frames(reader, cols)
    extra = ([("human drove", SHADE)] if shade is not None and shade.any() else []) + (
        [("sim reset", RED)] if marks else []
    )
    vectors = [k for k in (STATE, ACTION) if k in cols]
    if len(vectors) == 2 and cols[STATE].shape[1] == cols[ACTION].shape[1]:
        labels = _labels(reader, STATE, cols[STATE].shape[1])
        panels = [
            _panel(t, [(cols[STATE][:, j], BLUE), (cols[ACTION][:, j], ORANGE)], labels[j], shade, marks)
            for j in range(len(labels))
        ]
        save(
            "state_action.png",
            _legend(_grid(panels), [(STATE, BLUE), (ACTION, ORANGE), *extra]),
            "state and action",
        )
    else:
        for key in vectors:
            labels = _labels(reader, key, cols[key].shape[1])
            panels = [
                _panel(t, [(cols[key][:, j], BLUE)], labels[j], shade, marks) for j in range(len(labels))
            ]
            save(f"{key}.png", _legend(_grid(panels), [(key, BLUE), *extra]), key)
    flags = [k for k in flag_columns(reader) if k in cols]
    if flags:
        panels = []
        for key in flags:
            values = np.asarray(cols[key], dtype=np.float64).reshape(len(t), -1)
            labels = _names(reader, key, values.shape[1])
            if reader.features[key].get("units") is not None:
                labels = _labels(reader, key, values.shape[1])
            panels += [
                _panel(t, [(values[:, j], BLUE)], labels[j], shade, marks) for j in range(values.shape[1])
            ]
        save("flags.png", _grid(panels), "other per-frame values")
    for key in reader.camera_keys:
        frames = reader.video_frames(key, episode_index)
        if len(frames) == 0:
            raise DatasetError(f"{key}: the video holds no frame of episode {episode_index}")
        depth = reader.depth_quantizer(key)
        if depth is not None:  # a depth camera: its depth through a colour map
            frames = depth_preview(frames, depth)
        pick = np.unique(np.linspace(0, len(frames) - 1, min(sheet_frames, len(frames))).round().astype(int))
        pick = pick[pick < len(t)]
        sheet = contact_sheet(frames[pick], np.asarray(cols["frame_index"])[pick], t[pick])
        save(f"contact_sheet_{key.removeprefix('observation.images.')}.png", sheet, key)
    return written
