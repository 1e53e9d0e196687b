"""A real one-node Ray cluster for tests and benchmarks, started and stopped by this process.

It runs on loopback and on free ports of its own, in a temporary directory, so that it neither
reaches beyond this machine nor meets another cluster a concurrent test run started; and it is
stopped by its own process ids, never by `ray stop --force`, which SIGKILLs every Ray process
of the machine, other clusters' too.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# Ray's own addresses on loopback: without this it advertises the machine's interface address.
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


@dataclass
class Cluster:
    address: str  # 127.0.0.1:PORT of its GCS, for RAY_ADDRESS
    temp: Path  # Ray's logs and session files
    group: int | None  # the process group of its daemons


def free_ports(count: int) -> list:
    sockets = []
    for _ in range(count):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sockets.append(sock)
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def pids_mentioning(text: str) -> list:
    """Processes (other than this one) whose command line contains text."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if text.encode() in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def start_cluster(ray_cli: Path, num_cpus: int) -> Cluster:
    """`ray start --head` with num_cpus CPUs; raises RuntimeError with Ray's output if it fails."""
    # Short: Ray's Unix sockets live below it (108 bytes at most for a socket's path).
    temp = tempfile.mkdtemp(prefix="ocr-", dir="/tmp")
    gcs, dash, agent, agent_grpc, runtime_env, metrics, node_manager, objects = free_ports(8)
    started = subprocess.run(
        [
            str(ray_cli),
            "start",
            "--head",
            f"--num-cpus={num_cpus}",
            "--disable-usage-stats",
            "--include-dashboard=false",
            f"--temp-dir={temp}",
            "--node-ip-address=127.0.0.1",
            f"--port={gcs}",
            f"--dashboard-port={dash}",
            f"--dashboard-agent-listen-port={agent}",
            f"--dashboard-agent-grpc-port={agent_grpc}",
            f"--runtime-env-agent-port={runtime_env}",
            f"--metrics-export-port={metrics}",
            f"--node-manager-port={node_manager}",
            f"--object-manager-port={objects}",
        ],
        env={**os.environ, **LOOPBACK},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        # Its daemons stay in this new process group: stopping it stops them.
        start_new_session=True,
        timeout=120,
        check=False,
    )
    cluster = Cluster(f"127.0.0.1:{gcs}", Path(temp), _group_of_daemons(temp))
    if started.returncode != 0:
        stop_cluster(cluster)
        raise RuntimeError(started.stdout.decode(errors="replace"))
    return cluster


def _group_of_daemons(temp: str):
    for pid in pids_mentioning(temp):
        try:
            return os.getpgid(pid)
        except ProcessLookupError:
            continue
    return None


def stop_cluster(cluster: Cluster) -> None:
    """SIGKILLs the cluster's daemons (as `ray stop --force` would, but only these), then its
    workers, which have process groups of their own but name its directory."""
    if cluster.group is not None and cluster.group != os.getpgid(0):
        try:
            os.killpg(cluster.group, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = pids_mentioning(str(cluster.temp))
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    subprocess.run(["rm", "-rf", str(cluster.temp)], check=False)
