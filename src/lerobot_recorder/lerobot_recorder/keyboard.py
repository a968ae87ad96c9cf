"""Raw-terminal key reading for the recording control tool (ROS-free, no X, works over SSH).

LeRobot's keys: right arrow ends the episode early (or the reset), left arrow re-records the
episode, Esc stops and finalizes. Extras: space starts an episode, ``q`` = Esc.
Human-in-the-loop (``KeyDecoder(hil=True)``), LeRobot's HIL bindings: space pauses the policy,
``c`` takes control, ``p`` returns control to the policy; ``s`` starts an episode.
The terminal is put in cbreak mode with termios (echo off, no line buffering) and restored on exit.
"""

from __future__ import annotations

import os
import select
import termios
import tty

RIGHT, LEFT, ESC, START, UNKNOWN = "right", "left", "esc", "start", "unknown"
PAUSE, TAKEOVER, RESUME = "pause", "takeover", "resume"
_HIL_KEYS = {b" ": PAUSE, b"c": TAKEOVER, b"C": TAKEOVER, b"p": RESUME, b"P": RESUME}

_SEQUENCES = {
    b"\x1b[C": RIGHT,
    b"\x1bOC": RIGHT,
    b"\x1b[D": LEFT,
    b"\x1bOD": LEFT,
}


class KeyDecoder:
    """Bytes from the terminal in, key names out; a lone ESC is told from an arrow's prefix by a pause."""

    def __init__(self, hil: bool = False):
        self._buf = b""
        self._hil = hil

    def feed(self, data: bytes, more_pending: bool = False) -> list[str]:
        """Decode ``data``; ``more_pending`` = more bytes are already waiting (keep an ESC prefix open)."""
        self._buf += data
        keys = []
        while self._buf:
            b = self._buf
            if b[:1] == b"\x1b":
                seq = next((s for s in _SEQUENCES if b.startswith(s)), None)
                if seq is not None:
                    keys.append(_SEQUENCES[seq])
                    self._buf = b[len(seq) :]
                    continue
                if len(b) == 1 or (len(b) == 2 and b[1:2] in (b"[", b"O")):
                    if more_pending:
                        break  # wait for the rest of an escape sequence
                    keys.append(ESC)
                    self._buf = b""
                    break
                if b[1:2] in (b"[", b"O"):
                    # another escape sequence (up/down, F-keys): skip to its final byte
                    end = next((i for i in range(2, len(b)) if 0x40 <= b[i] <= 0x7E), None)
                    if end is None:
                        if more_pending:
                            break
                        self._buf = b""
                        break
                    keys.append(UNKNOWN)
                    self._buf = b[end + 1 :]
                    continue
                keys.append(ESC)
                self._buf = b[1:]
                continue
            ch = b[:1]
            self._buf = b[1:]
            if self._hil and ch in _HIL_KEYS:
                keys.append(_HIL_KEYS[ch])
            elif ch in (b"q", b"Q"):
                keys.append(ESC)
            elif ch in (b" ", b"s", b"S"):
                keys.append(START)
            elif ch in (b"n", b"N"):
                keys.append(RIGHT)
            elif ch in (b"r", b"R"):
                keys.append(LEFT)
            else:
                keys.append(UNKNOWN)
        return keys

    def flush(self) -> list[str]:
        """The input paused: a pending lone ESC is the Esc key."""
        if self._buf:
            return self.feed(b"", more_pending=False)
        return []


class RawTerminal:
    """Context manager: cbreak mode on a tty file descriptor, restored on exit."""

    def __init__(self, fd: int):
        self.fd = fd
        self._saved = None

    def __enter__(self) -> RawTerminal:
        if os.isatty(self.fd):
            self._saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd)
        return self

    def __exit__(self, *exc) -> None:
        if self._saved is not None:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)

    def read_keys(self, decoder: KeyDecoder, timeout: float) -> list[str] | None:
        """Keys typed within ``timeout`` seconds ([] if none); None at end of input."""
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return decoder.flush()
        data = os.read(self.fd, 64)
        if not data:
            return None
        pending, _, _ = select.select([self.fd], [], [], 0.03)
        return decoder.feed(data, more_pending=bool(pending))
