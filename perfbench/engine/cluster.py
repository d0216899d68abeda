"""``--ray``: the fleet's workers as Ray actors, one CPU each, spread over a cluster.

An actor runs the same worker as a local process (``engine.worker``), on its own event loop
with its own clients; only the link differs. A local worker connects to the parent's Unix
socket; an actor, wherever Ray placed it, connects to a TCP listener of the parent's on the
address the cluster reaches it by (127.0.0.1 for ``--ray local``) and proves itself with a
token sent as the link's first bytes, before any frame is read (frames are pickles: nothing
from a stranger is ever unpickled). The token travels with the actor's arguments, through Ray.
The run's spec, suite, prices and resume state travel in the ``Start`` frame, so no file is
shared: an actor needs perfbench installed, not the run's folder.

Ray is an optional extra (``pip install 'perfbench-llm[ray]'``): it is imported only here, and
only when a run asks for it. An actor that dies, with its node or alone, ends the run
``interrupted`` (resumable) rather than failed: its finished samples are already with the
parent. docs/distributed.md."""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field, replace
from typing import Any

import anyio

from perfbench.errors import WorkerError
from perfbench.spec import RunSpec, auto_workers

TOKEN_BYTES = 32
INSTALL = "pip install 'perfbench-llm[ray]'"
LOCAL_STORE = 200 * 2**20  # bytes of a local instance's object store: samples go by socket


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise WorkerError(f"--ray needs Ray, an optional extra: {INSTALL}") from None
    return ray


@dataclass
class Cluster:
    """The Ray cluster a run's actors are placed on: joined (or, for ``local``, started) by
    ``join``, left by ``leave``."""

    address: str  # local, auto, or host:port / ray://host:port
    joined: bool = False
    started: bool = False  # this run started the Ray instance (local): it stops it
    host: str = "127.0.0.1"  # where the actors reach the parent
    token: bytes = field(default_factory=lambda: secrets.token_bytes(TOKEN_BYTES))

    def join(self, cpus: int) -> None:
        """Connect (``local``: start a Ray instance of ``cpus`` CPUs on 127.0.0.1). It blocks
        for the seconds Ray takes to start, before the run's first pass, in the main thread
        (Ray installs its signal handlers there). Joined once: again, it does nothing."""
        if self.joined:
            return
        ray = _ray()
        if ray.is_initialized():  # a caller's own Ray session (perfbench as a library)
            self.host = _node_ip(ray)
            self.joined = True
            return
        quiet = {"include_dashboard": False, "log_to_driver": False,
                 "logging_level": logging.ERROR}  # fmt: skip
        try:
            if self.address == "local":
                # Ray's own servers listen on every interface, whatever the node address
                # (2.60): its token authentication, on by default for a local instance since
                # 2.59 (the extra's floor), keeps a stranger who reaches them from running
                # code here. Not set from here: Ray reads RAY_AUTH_MODE when imported.
                ray.init(address="local", num_cpus=cpus, _node_ip_address="127.0.0.1",
                         object_store_memory=LOCAL_STORE, **quiet)  # fmt: skip
                self.started = True
            else:
                address = None if self.address == "auto" else self.address
                ray.init(address=address or "auto", **quiet)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise WorkerError(f"--ray {self.address}: cannot join the cluster: {exc}") from None
        self.host = "127.0.0.1" if self.address == "local" else _node_ip(ray)
        self.joined = True

    @property
    def local(self) -> bool:
        return self.address == "local"

    def cpus(self) -> int:
        """The cluster's CPUs, for ``--workers auto``."""
        return int(_ray().cluster_resources().get("CPU", 1))

    def spawn(self, address: str, index: int) -> Actor:
        ray = _ray()
        remote = ray.remote(num_cpus=1, max_restarts=0)(_WorkerActor)
        actor = remote.options(scheduling_strategy="SPREAD").remote()
        return Actor(ray, actor, actor.serve.remote(address, index, self.token))

    def leave(self) -> None:
        if self.started:
            _ray().shutdown()
            self.started = False
            self.joined = False


def sized(spec: RunSpec, cluster: Cluster) -> RunSpec:
    """``--workers auto`` on a cluster (``Plan.workers`` 0, as the CLI leaves it): the cluster
    is joined now, before anything is recorded, and the count is ``auto_workers``' with the
    cluster's CPUs in place of this machine's cores, so the run directory holds the number the
    run was made with (and ``--resume`` uses it again)."""
    if spec.plan.workers:
        return spec
    cluster.join(2)  # the CPUs size a local instance only; the CLI settles local's count
    count = auto_workers(spec.plan, cluster.cpus())
    return replace(spec, plan=replace(spec.plan, workers=count))


def _node_ip(ray: Any) -> str:
    return str(ray.util.get_node_ip_address())


class Actor:
    """The fleet's handle of one actor, with a local process's face: ``returncode`` (None
    while it serves), ``wait``, ``kill``; no stderr (Ray keeps the actor's logs)."""

    stderr = None

    def __init__(self, ray: Any, actor: Any, done: Any) -> None:
        self._ray, self._actor, self._done = ray, actor, done
        self.returncode: int | None = None
        self.error = ""  # why it ended, when it failed

    def poll(self) -> int | None:
        ready, _ = self._ray.wait([self._done], timeout=0)
        if ready and self.returncode is None:
            self._settle()
        return self.returncode

    async def wait(self) -> int:
        if self.returncode is None:
            # Ray's wait cannot be cancelled: at the run's end its thread is left to finish.
            await anyio.to_thread.run_sync(self._ray.wait, [self._done], abandon_on_cancel=True)
            self._settle()
        assert self.returncode is not None
        return self.returncode

    def _settle(self) -> None:
        try:
            self._ray.get(self._done, timeout=0)
        except Exception as exc:  # RayActorError, a node lost, the worker's own failure
            self.error = " ".join(str(exc).split())[-1500:]
            self.returncode = -1
        else:
            self.returncode = 0

    def kill(self) -> None:
        self._ray.kill(self._actor, no_restart=True)

    async def aclose(self) -> None:
        return None

    def where(self) -> str:
        """The node the actor runs on (its id's start), for the run's meta.json."""
        node: str = self._ray.get(self._actor.node.remote(), timeout=30)
        return node


class _WorkerActor:
    """One worker in a Ray actor (made remote by ``Cluster.spawn``)."""

    def serve(self, address: str, index: int, token: bytes) -> None:
        from perfbench.engine.worker import serve

        serve(address, index, token)

    def node(self) -> str:
        import socket

        import ray

        return f"{socket.gethostname()}:{ray.get_runtime_context().get_node_id()[:12]}"
