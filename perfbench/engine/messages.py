"""What the parent and its worker processes (``--workers N``) say to each other, and how.

Frames on the Unix socket are a 4-byte length and a pickle of one of the dataclasses below;
both ends ``match`` on the class, so mypy checks what each message carries.

    worker → parent   Hello (once, on connecting), Ready, Samples… and Refused… (adaptive),
                      PassDone per pass, Done (or Failed)
    parent → worker   Start (once), Go per pass, Limit (adaptive), Stop
"""

from __future__ import annotations

import pickle
import struct
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from perfbench.engine.resume import Resume
from perfbench.engine.share import Share
from perfbench.sample import Phase
from perfbench.spec import RunSpec
from perfbench.stats.cost import Pricer
from perfbench.stats.histogram import Histogram
from perfbench.stats.summary import RunScopes
from perfbench.suite import Suite

_HEADER = struct.Struct(">I")


# ---------------------------------------------------------------------------- worker → parent


@dataclass(frozen=True, slots=True)
class Hello:
    """The first frame on a new connection: which worker this is."""

    index: int
    # The worker's host's boot (host.boot_id): the same as the parent's, one monotonic clock;
    # else the parent measures the offset between them (Ping, Pong).
    boot: str = ""


@dataclass(frozen=True, slots=True)
class Pong:
    """The answer to a Ping: the worker's monotonic clock when it answered."""

    sent: float
    clock: float


@dataclass(frozen=True, slots=True)
class Ready:
    """The worker's target is open: it waits for the first go."""


@dataclass(frozen=True, slots=True)
class Samples:
    """Finished tasks, already encoded as samples.jsonl lines."""

    lines: bytes
    count: int


@dataclass(frozen=True, slots=True)
class Refused:
    """Adaptive: a 429 answer arrived in this worker at ``at`` (run time), as it arrived."""

    at: float
    retry_after: float | None
    window: bool = False  # the 429 said a per-minute budget was spent


@dataclass(frozen=True, slots=True)
class PassDone:
    """A pass ended in this worker; ``scopes`` is what its statistics accumulated (measured
    passes only), merged losslessly by the parent."""

    phase: Phase
    run: int
    scopes: RunScopes | None
    # How late the worker's first task of the pass started after it was due (seconds; None:
    # it ran none): the parent's start skew between workers.
    late: float | None = None


@dataclass(frozen=True, slots=True)
class Done:
    """The worker finished every pass: its warmup count and how busy its client was."""

    warmup_tasks: int
    lag: Histogram
    cpu_s: float
    wall_s: float


@dataclass(frozen=True, slots=True)
class Failed:
    """perfbench's own failure in the worker (the parent raises it as a WorkerError)."""

    reason: str


# ---------------------------------------------------------------------------- parent → worker


@dataclass(frozen=True)
class Start:
    """Everything a worker needs to run its share: the run's spec and suite (read once, by
    the parent), its share, and what a resumed run has done. Holds no API key: a worker reads
    keys from the environment it inherits, as the parent did."""

    spec: RunSpec
    suite: Suite
    share: Share
    origin: float  # the run's t0 on the parent's monotonic clock (a worker adds ``offset``)
    pricer: Pricer
    price_ref: str | None
    resume: Resume
    server_url: str | None  # mock+http: the parent's server, instead of starting another
    offset: float = 0.0  # the worker's monotonic clock minus the parent's (0: one host)


@dataclass(frozen=True, slots=True)
class Ping:
    """Before Start, to a worker on another host: answer with your clock (a Pong)."""

    sent: float  # the parent's monotonic clock


@dataclass(frozen=True, slots=True)
class Go:
    """Start this pass; ``start`` is its start on the shared monotonic clock."""

    phase: Phase
    run: int
    start: float


@dataclass(frozen=True, slots=True)
class Limit:
    """Adaptive: this worker's share of the coordinated limit, and the hold (run time)."""

    share: int
    hold_until: float


@dataclass(frozen=True, slots=True)
class Stop:
    """Stop now: tasks in flight are cancelled and recorded as such."""


FromWorker = Hello | Pong | Ready | Samples | Refused | PassDone | Done | Failed
ToWorker = Ping | Start | Go | Limit | Stop


class Channel:
    """One end of the socket: whole frames in and out; one send at a time (the sender task
    and a final flush, or a go and a stop, must not interleave their bytes)."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.reader = BufferedByteReceiveStream(stream)
        self._lock = anyio.Lock()

    async def send(self, message: Any) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        async with self._lock:
            await self.stream.send(_HEADER.pack(len(data)) + data)

    async def receive(self) -> Any:
        (size,) = _HEADER.unpack(await self.reader.receive_exactly(_HEADER.size))
        return pickle.loads(await self.reader.receive_exactly(size))

    async def aclose(self) -> None:
        await self.stream.aclose()
