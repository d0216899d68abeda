"""perfbench's own version, from the installed package's metadata (recorded in every run)."""

from importlib.metadata import PackageNotFoundError, version

# The name pip knows it by. `perfbench` on PyPI is another project (and would shadow this import):
# install lines say `perfbench-llm`, the command and the package stay `perfbench`.
DISTRIBUTION = "perfbench-llm"

try:
    __version__ = version(DISTRIBUTION)
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
