"""Progress reporting through ``tqdm``: quiet under CI, calm in log files.

* ``progressbar=False`` or the ``CI`` environment variable set (to anything but
  ``0``/``false``/``no``) -- nothing is written;
* in Jupyter -- ``tqdm.auto`` draws a notebook widget;
* on a terminal -- tqdm's text bar, redrawn at most every 0.1 s;
* into a file or pipe (a log) -- one line at most every :data:`LOG_INTERVAL` seconds
  (``mininterval``), so a long run does not fill the log.
"""

from __future__ import annotations

import os
import sys

#: seconds between two progress lines when stderr is not a terminal
LOG_INTERVAL = 30.0


def progress_enabled(requested):
    """Whether to draw: ``requested`` and the ``CI`` environment variable unset/false.

    Examples
    --------
    >>> progress_enabled(False)
    False
    """
    ci = os.environ.get("CI", "").strip().lower()
    return bool(requested) and ci in ("", "0", "false", "no")


def _is_terminal(stream):
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class ProgressBar:
    """``with ProgressBar(total) as bar: bar.update(done)`` over ``tqdm.auto``.

    ``update`` takes the absolute count done (not an increment), so that a polling loop
    over parallel chains can report their sum.

    Parameters
    ----------
    total : int
    enabled : bool
        Passed through :func:`progress_enabled`.
    description : str
    unit : str, default="sweep"
    stream : file, default=sys.stderr

    Examples
    --------
    >>> with ProgressBar(3, enabled=False) as bar:
    ...     bar.update(3)
    >>> bar.done
    3
    """

    def __init__(self, total, enabled=True, description="", unit="sweep", stream=None):
        self.total = max(int(total), 1)
        self.enabled = progress_enabled(enabled)
        self.description = description
        self.unit = unit
        self.stream = sys.stderr if stream is None else stream
        self.done = 0
        self._bar = None

    def __enter__(self):
        if self.enabled:
            terminal = _is_terminal(self.stream)
            from tqdm.auto import tqdm

            nb = sys.modules.get("tqdm.notebook")  # imported by tqdm.auto in a kernel only
            notebook = nb is not None and issubclass(tqdm, nb.tqdm_notebook)
            self._bar = tqdm(total=self.total, desc=self.description, unit=self.unit,
                             file=None if notebook else self.stream, dynamic_ncols=terminal,
                             mininterval=0.1 if (terminal or notebook) else LOG_INTERVAL,
                             leave=True)
        return self

    def update(self, done):
        done = min(int(done), self.total)
        if self._bar is not None and done > self.done:
            self._bar.update(done - self.done)
        self.done = max(self.done, done)

    def write(self, message):
        """Print a line without breaking the bar (``tqdm.write``); quiet if disabled."""
        if self._bar is not None:
            self._bar.write(message, file=self.stream)

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.close()
        return False
