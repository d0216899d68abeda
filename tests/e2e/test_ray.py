"""`perfbench run --ray local` (issue 25): the workers as Ray actors on a local Ray instance
the run starts on 127.0.0.1 and stops at its end. The same guarantees as worker processes
(tests/e2e/test_workers.py): every task exactly once, a summary equal to the statistics of
samples.jsonl, one open-loop schedule shared (and one AIMD limit: test_workers.py's adaptive
test, its `2-ray` case), and an actor killed mid-run leaves an interrupted run that resumes
exactly once. Bounded: small suites, a timeout on each
command; skipped only when Ray (the `ray` extra, which `make test` installs) is missing.

One test runs a real two-node cluster: a head on this machine and a second node in a network
namespace of its own, reached over a veth pair, as `ray start --head` and `ray start
--address` make one on two hosts (root and `ip netns` needed: skipped, saying so, without)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from perfbench import store
from perfbench.stats.summary import summarize
from perfbench.suite import load_suite
from tests.e2e.test_workers import PACED, offsets
from tests.helpers import CASES, cli, perfbench

pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]'")

RAY = ("--ray", "local")


def _run(tmp: Path, *args: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp / "runs"
    proc = cli("run", str(CASES), "--out", str(out), "-q", *RAY, *args, timeout=180)
    dirs = sorted(out.iterdir()) if out.exists() else []
    return (dirs[-1] if dirs else out), proc


def _meta(run_dir: Path) -> dict[str, Any]:
    meta: dict[str, Any] = json.loads((run_dir / "meta.json").read_text())
    return meta


def test_two_actors_split_the_load_and_the_summary_equals_the_samples(tmp_path: Path) -> None:
    run_dir, proc = _run(tmp_path, "-t", "mock:zero", "--workers", "2", "-c", "6",
                         "--runs", "3", "--repeat", "7")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    samples = list(store.read_samples(run_dir))
    keys = Counter(s.key for s in samples)
    assert len(keys) == 16 * 7 * 4 and set(keys.values()) == {1}  # every task exactly once
    summary = json.loads((run_dir / "summary.json").read_text())
    suite = load_suite([CASES])
    recomputed = summarize(samples, {c.id: c.timeout_s for c in suite.cases})
    client = summary.pop("client")
    assert summary == json.loads(json.dumps(recomputed, default=dict))  # merged losslessly
    # The passes began together: every actor's first task within 0.5 s of the other's.
    assert client["start_skew_s"] is not None and 0 <= client["start_skew_s"] < 0.5
    assert client["start_late_s"] is not None and client["start_late_s"] < 1.0
    assert client["clock_offsets_s"] == [0.0, 0.0]  # one host, one clock: nothing corrected
    meta = _meta(run_dir)
    assert meta["status"] == "completed" and meta["plan"]["ray"] == "local"
    assert len(meta["nodes"]) == 2  # where each actor ran
    assert meta["ray"] == {"address": "local", "actors": 2, "nodes": 1}
    assert "Ray (local): 2 actors on 1 node" in " ".join(proc.stdout.split())  # the header says
    assert "Traceback" not in proc.stderr and "Ray" not in proc.stderr  # Ray's logs kept quiet


def test_actors_share_one_open_loop_schedule(tmp_path: Path) -> None:
    args = ["-t", "mock:zero", "--rate", "400", "--duration", "0.5", "--runs", "1", "--warmup", "0"]
    run_dir, proc = _run(tmp_path, *args, "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    one = cli("run", str(CASES), "--out", str(tmp_path / "one"), "-q", *args, "--workers", "1")
    assert one.returncode == 0, one.stderr
    (one_dir,) = list((tmp_path / "one").iterdir())

    two, single = offsets(run_dir), offsets(one_dir)
    assert len(two) == len(single) == 200
    assert two == pytest.approx(single, abs=1e-4)  # the same arrivals, dealt between actors


def _actors() -> list[int]:
    found = subprocess.run(["pgrep", "-f", "_WorkerActor.serve"], capture_output=True, text=True)
    return [int(pid) for pid in found.stdout.split()]


def test_an_actor_killed_mid_run_leaves_a_run_that_resumes_exactly_once(tmp_path: Path) -> None:
    profile = tmp_path / "paced.yaml"
    profile.write_text(PACED)
    out = tmp_path / "runs"
    cmd = perfbench("run", str(CASES), "-t", f"mock:{profile}", "--workers", "2", "-c", "4",
                    "--runs", "20", *RAY, "--out", str(out))  # fmt: skip
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            deadline = time.monotonic() + 90
            while not _measuring(out) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert _measuring(out), "the run never started measuring"
            time.sleep(0.5)
            victims = _actors()
            assert len(victims) == 2, victims
            os.kill(victims[0], signal.SIGKILL)
            _, stderr = proc.communicate(timeout=60)
        finally:
            proc.kill()
    [run_dir] = list(out.iterdir())
    meta = _meta(run_dir)
    assert meta["status"] == "interrupted", stderr
    assert "was lost" in meta["stopped_by"] and "Traceback" not in stderr
    assert list(store.read_samples(run_dir))  # what was measured is kept
    assert not _actors()  # the run's Ray instance is gone, its actors with it

    resumed = cli("run", "--resume", str(run_dir), "-q", timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    keys = Counter(s.key for s in store.read_samples(run_dir))
    assert len(keys) == 16 * 21 and set(keys.values()) == {1}
    assert _meta(run_dir)["status"] == "completed"


def _measuring(out: Path) -> bool:
    """Some measured sample is on disk."""
    return any('"phase":"measured"' in p.read_text() for p in out.glob("*/samples.jsonl"))


# A /30 of the benchmarking range (RFC 2544), unlikely to be routed on a CI machine.
HEAD_IP, NODE_IP, PORT = "198.18.77.1", "198.18.77.2", 6391


def _sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, timeout=30)


@contextmanager
def _namespace(name: str) -> Iterator[None]:
    """A network namespace joined to this one by a veth pair: a second host's network."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("a second Ray node needs root and ip netns (iproute2)")
    try:
        _sh("ip", "netns", "add", name)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"ip netns add failed: {exc.stderr.decode().strip()}")
    try:
        _sh("ip", "link", "add", f"{name}a", "type", "veth", "peer", "name", f"{name}b")
        _sh("ip", "link", "set", f"{name}b", "netns", name)
        _sh("ip", "addr", "add", f"{HEAD_IP}/30", "dev", f"{name}a")
        _sh("ip", "link", "set", f"{name}a", "up")
        for step in (["addr", "add", f"{NODE_IP}/30", "dev", f"{name}b"],
                     ["link", "set", f"{name}b", "up"], ["link", "set", "lo", "up"]):  # fmt: skip
            _sh("ip", "netns", "exec", name, "ip", *step)
        yield
    finally:
        subprocess.run(["ip", "link", "del", f"{name}a"], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


def _ray_node(
    stack: ExitStack, env: dict[str, str], log: Path, cpus: int, *args: str, netns: str = ""
) -> None:
    """`ray start ARGS --block`, its output in ``log``, stopped (its processes with it) when
    the stack closes: not `ray stop`, which would stop every Ray instance on the machine,
    other tests' too."""
    ray = [str(Path(sys.executable).with_name("ray")), "start", "--block", "--num-cpus", str(cpus),
           "--disable-usage-stats", *args]  # fmt: skip
    cmd = ["ip", "netns", "exec", netns, *ray] if netns else ray
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)

    def stop() -> None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()

    stack.callback(stop)


def _nodes_up(count: int, env: dict[str, str], logs: list[Path], within: float = 90) -> None:
    """Wait until the head counts ``count`` nodes (a loaded machine takes tens of seconds)."""
    ray = str(Path(sys.executable).with_name("ray"))
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        status = subprocess.run([ray, "status", "--address", f"{HEAD_IP}:{PORT}"],
                                capture_output=True, text=True, timeout=60, env=env)  # fmt: skip
        if status.returncode == 0 and status.stdout.count(" node_") >= count:
            return
        time.sleep(0.5)
    tails = "\n".join(f"{log.name}: {log.read_text()[-800:]}" for log in logs)
    pytest.fail(f"the cluster never had {count} nodes: {status.stderr[-500:]}\n{tails}")


def test_a_two_node_cluster_places_one_actor_per_node(tmp_path: Path) -> None:
    # --ray HOST:PORT joins a head; --workers auto counts the cluster's CPUs (3), not this
    # machine's cores (2); each actor starts its own mock server where it runs (-t mock+http),
    # and the first pass waits for both (start_late_s was 1.2 s, a mock server's start).
    # A cluster set up as Ray's security guide says, every node and client with one token
    # (a head without it takes ~/.ray/auth_token, if a local instance left one, and a client
    # without RAY_AUTH_MODE=token is then refused: perfbench's --ray joins with the user's).
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    name = f"pb{os.getpid() % 100000}"
    with _namespace(name), ExitStack() as stack:
        logs = [tmp_path / "head.log", tmp_path / "node.log"]
        _ray_node(stack, env, logs[0], 1, "--head", "--node-ip-address", HEAD_IP, "--port",
                  str(PORT), "--include-dashboard", "false")  # fmt: skip
        _nodes_up(1, env, logs)  # the head first: a node started before its GCS gives up
        _ray_node(stack, env, logs[1], 2, "--address", f"{HEAD_IP}:{PORT}", "--node-ip-address",
                  NODE_IP, netns=name)  # fmt: skip
        _nodes_up(2, env, logs)
        out = tmp_path / "runs"
        proc = cli("run", str(CASES), "-t", "mock+http", "--ray", f"{HEAD_IP}:{PORT}",
                   "--workers", "auto", "-c", "300", "--runs", "2", "--out", str(out), "-q",
                   timeout=180, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = list(out.iterdir())
    meta = _meta(run_dir)
    assert meta["plan"]["workers"] == 3  # min(the cluster's 3 CPUs, 300 in flight / 128 → 3)
    assert len(meta["nodes"]) == 3 and len(set(meta["nodes"])) == 2  # actors on both nodes
    keys = Counter(s.key for s in store.read_samples(run_dir))
    assert len(keys) == 16 * 3 and set(keys.values()) == {1}
    client = json.loads((run_dir / "summary.json").read_text())["client"]
    assert client["clock_offsets_s"] == [0.0, 0.0, 0.0]  # one kernel's clock: nothing to correct
    assert client["start_late_s"] < 0.5, client


# A local instance as `--ray local` starts it (Cluster.join), its GCS address printed; it is
# left when its stdin closes.
HOST = """
import sys, ray
from perfbench.engine.cluster import Cluster
cluster = Cluster("local")
cluster.join(1)
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()
cluster.leave()
"""
PROBE = "import ray, sys; ray.init(address=sys.argv[1]); print('joined', flush=True)"


def _probe(gcs: str, **env: str) -> str:
    """Join the cluster at ``gcs`` from another process: 'joined', or the GCS's refusal."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    cmd = [sys.executable, "-c", PROBE, gcs]
    with subprocess.Popen(cmd, env={**clean, **env}, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None
            for line in proc.stdout:  # Ray retries a refused client for 20 s: the first says
                if "joined" in line or "InvalidAuthToken" in line:
                    return "joined" if "joined" in line else "refused"
            return f"exited {proc.wait()}"
        finally:
            proc.kill()


def test_a_local_instance_refuses_a_client_without_its_token() -> None:
    # Ray's servers listen on every interface (ss -ltnp: gcs_server, raylet, workers on *):
    # its token authentication (on by default for local instances since Ray 2.59, the
    # extra's floor) is what keeps a stranger on the network from running code here.
    with subprocess.Popen([sys.executable, "-c", HOST], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as host:  # fmt: skip
        try:
            assert host.stdout is not None and host.stdin is not None
            gcs = host.stdout.readline().strip()
            assert gcs, "the local instance did not start"
            assert _probe(gcs, RAY_AUTH_MODE="disabled") == "refused"
            assert _probe(gcs, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="0" * 64) == "refused"
            assert _probe(gcs, RAY_AUTH_MODE="token") == "joined"  # this user's own token
            host.stdin.close()
            host.wait(timeout=60)
        finally:
            host.kill()
