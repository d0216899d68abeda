"""perfbench: measure the latency, throughput, tokens and cost of LLM agents and LLM APIs."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("perfbench")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
