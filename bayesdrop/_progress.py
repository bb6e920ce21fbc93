"""A dependency-free text progress bar on stderr that stays quiet under CI."""

from __future__ import annotations

import os
import sys
import time


def progress_enabled(requested):
    """Whether to draw: ``requested`` and the ``CI`` environment variable unset/false."""
    ci = os.environ.get("CI", "").strip().lower()
    return bool(requested) and ci in ("", "0", "false", "no")


class ProgressBar:
    """``with ProgressBar(total) as bar: bar.update(done)``; redraws at most every 0.1 s.

    Parameters
    ----------
    total : int
    enabled : bool
        Passed through :func:`progress_enabled`.
    description : str
    stream : file, default=sys.stderr
    """

    def __init__(self, total, enabled=True, description="", stream=None):
        self.total = max(int(total), 1)
        self.enabled = progress_enabled(enabled)
        self.description = description
        self.stream = sys.stderr if stream is None else stream
        self.done = 0
        self._start = None
        self._last = 0.0
        self._drawn = -1

    def __enter__(self):
        self._start = time.perf_counter()
        return self

    def update(self, done):
        self.done = int(done)
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._last < 0.1 and self.done < self.total:
            return
        self._last = now
        self._draw(now)
        self._drawn = self.done

    def _draw(self, now):
        frac = min(self.done / self.total, 1.0)
        elapsed = now - self._start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else float("nan")
        width = 30
        filled = int(round(width * frac))
        bar = "#" * filled + "-" * (width - filled)
        self.stream.write(
            f"\r{self.description} [{bar}] {self.done}/{self.total} "
            f"{rate:7.1f} sweeps/s, {elapsed:6.1f} s elapsed, eta {eta:6.1f} s"
        )
        self.stream.flush()

    def __exit__(self, *exc):
        if self.enabled:
            if self._drawn != self.done:
                self._draw(time.perf_counter())
            self.stream.write("\n")
            self.stream.flush()
        return False
