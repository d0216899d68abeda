"""perfbench's own version, from the installed package's metadata (recorded in every run)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("perfbench")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
