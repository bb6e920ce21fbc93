"""The package version (from the installed metadata), importable by every layer."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("bayesdrop")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.1.0"
