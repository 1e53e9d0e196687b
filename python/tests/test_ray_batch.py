"""The Ray engine of ``ocflow batch`` (:mod:`ocflow_ray`) on a REAL local cluster.

A module fixture starts a one-node cluster (``ray start --head --num-cpus=4``, ray_cluster.py)
in a temporary directory, on loopback and free ports, and stops exactly its own processes
afterwards. The
flows are real ``ocflow run --plan`` processes of the real binary (``$OCFLOW_BIN``, else
``$CARGO_TARGET_DIR/debug/ocflow``, else ``target/debug/ocflow``: ``cargo build`` makes it) on
temporary git repositories: command steps that sleep and write files, no LLM.

These tests need ``ray`` (``scripts/ray-venv`` makes ``.venv-ray``; ``scripts/test`` runs this
file there). Where ray or the binary is missing they are skipped, and fail under CI=true.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest
from ray_cluster import LOOPBACK, free_ports, pids_mentioning, start_cluster, stop_cluster

PYTHON_DIR = Path(__file__).resolve().parent.parent
ROOT = PYTHON_DIR.parent
IN_CI = os.environ.get("CI") == "true"

try:
    import ray  # noqa: F401

    RAY_IMPORTABLE = True
except ImportError:
    RAY_IMPORTABLE = False


def unavailable(reason: str):
    """Skips the test, or fails it under CI=true, where what it needs is installed."""
    if IN_CI:
        pytest.fail(f"{reason} (CI installs it: .ci/run)")
    pytest.skip(reason)


def ocflow_binary() -> Path:
    if os.environ.get("OCFLOW_BIN"):
        return Path(os.environ["OCFLOW_BIN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / "ocflow"


@pytest.fixture(scope="module")
def ocflow():
    binary = ocflow_binary()
    if not os.access(binary, os.X_OK):
        unavailable(f"no ocflow binary at {binary}: run `cargo build` (or set OCFLOW_BIN)")
    return binary


@pytest.fixture(scope="module")
def cluster():
    """A one-node Ray cluster of 4 CPUs on loopback (see ray_cluster.py)."""
    if not RAY_IMPORTABLE:
        unavailable(f"ray is not importable by {sys.executable}: run scripts/ray-venv")
    started = start_cluster(Path(sys.executable).parent / "ray", num_cpus=4)
    try:
        yield started
    finally:
        stop_cluster(started)


def git(*args, cwd=None) -> str:
    done = subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )
    return done.stdout.decode().strip()


def make_repo(path: Path, files: dict) -> Path:
    path.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=path)
    for name, text in files.items():
        (path / name).write_text(text, encoding="utf-8")
    git("add", ".", cwd=path)
    git("commit", "-qm", "start", cwd=path)
    return path


def command_step(step_id: str, command: str, after: str | None = None) -> dict:
    step = {"id": step_id, "operation": "execute_shell_command", "params": {"command": command}}
    if after:
        step["depends_on"] = after
    return step


def ocflow_env(root: Path) -> dict:
    """The flow's own user config and state (not the machine's), as the Rust tests give."""
    (root / "user-config" / "ocflow").mkdir(parents=True, exist_ok=True)
    return {
        "XDG_CONFIG_HOME": str(root / "user-config"),
        "XDG_STATE_HOME": str(root / "user-state"),
    }


def path_flow(root: Path, flow_id: str, steps: list) -> dict:
    """A flow on a fresh git repository under root, run with --plan (no LLM)."""
    repo = make_repo(root / "repos" / flow_id, {"README.md": f"{flow_id}\n"})
    plan = root / "plans" / f"{flow_id}.json"
    plan.parent.mkdir(parents=True, exist_ok=True)
    plan.write_text(json.dumps({"task": f"flow {flow_id}", "steps": steps}), encoding="utf-8")
    workspace = root / "workspace"
    return {
        "id": flow_id,
        # The repository, the workspace and the plan are fields: the runner puts them in.
        "argv": ["run", "--task-id", flow_id],
        "resume_argv": ["resume", flow_id],
        "workspace": str(workspace),
        "plan": str(plan),
        "task_dir": str(workspace / flow_id),
        "repo": {"path": str(repo)},
        "env": ocflow_env(root),
    }


def run_driver(request: dict, python: str = sys.executable, env: dict | None = None):
    """Runs the module as ocflow batch does; returns (exit code, stdout lines, stderr)."""
    done = subprocess.run(
        [python, "-m", "ocflow_ray"],
        input=json.dumps(request).encode(),
        cwd=PYTHON_DIR,
        env={**os.environ, "PYTHONPATH": str(PYTHON_DIR), **LOOPBACK, **(env or {})},
        capture_output=True,
        timeout=600,
        check=False,
    )
    lines = [json.loads(line) for line in done.stdout.decode().splitlines()]
    return done.returncode, lines, done.stderr.decode(errors="replace")


def journal(task_dir: Path) -> list:
    return [json.loads(line) for line in (task_dir / "journal.jsonl").read_text().splitlines()]


def parse_ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def kill_when_running(ocflow: Path, task_dir: Path, task_id: str, step: str, killed: list):
    """Waits until `step` of the flow runs, then SIGKILLs the flow's ocflow process (the one
    started with --task-id ID), once; notes the pid in `killed`."""
    deadline = time.monotonic() + 120
    marker = f"--task-id\0{task_id}\0".encode()
    while time.monotonic() < deadline:
        try:
            events = journal(task_dir)
        except (OSError, ValueError):
            events = []
        started = any(e["type"] == "step_started" and e.get("step") == step for e in events)
        finished = any(e["type"] == "step_finished" and e.get("step") == step for e in events)
        if started and not finished:
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    cmdline = (entry / "cmdline").read_bytes()
                except OSError:
                    continue
                if cmdline.startswith(str(ocflow).encode() + b"\0") and marker in cmdline + b"\0":
                    os.kill(int(entry.name), signal.SIGKILL)
                    killed.append(int(entry.name))
                    return
        time.sleep(0.05)


def test_twelve_flows_on_a_local_cluster_each_succeed_once_and_a_killed_one_resumes(
    cluster, ocflow, tmp_path
):
    flows = []
    for index in range(12):
        flow_id = f"f{index:02d}"
        steps = [
            command_step("work", f"sleep 1; echo {flow_id} > out-{flow_id}.txt"),
            command_step("note", "echo done > done.txt", after="work"),
        ]
        if flow_id == "f05":
            # The flow killed mid-step: a step long enough to be caught running.
            steps.insert(1, command_step("slow", "sleep 3; echo slow > slow.txt", after="work"))
            steps[2]["depends_on"] = "slow"
        flows.append(path_flow(tmp_path, flow_id, steps))
    request = {
        "address": "auto",
        "max_concurrent_flows": 6,
        "max_retries": 3,
        "ocflow": str(ocflow),
        "flows": flows,
    }
    killed = []
    killer = threading.Thread(
        target=kill_when_running,
        args=(ocflow, tmp_path / "workspace" / "f05", "f05", "slow", killed),
        daemon=True,
    )
    killer.start()
    started = time.monotonic()
    code, lines, stderr = run_driver(request, env={"RAY_ADDRESS": cluster.address})
    wall = time.monotonic() - started
    killer.join(timeout=5)

    assert code == 0, stderr
    assert len(killed) == 1, "the f05 flow's ocflow process was never caught mid-step"
    # One result line per flow; before it, the flow's events: its journal, line for line.
    results = [line for line in lines if "result" in line]
    assert sorted(line["id"] for line in results) == [f["id"] for f in flows], lines
    assert all(set(line) in ({"id", "result"}, {"id", "event"}) for line in lines), lines
    for flow in flows:
        relayed = [line["event"] for line in lines if line["id"] == flow["id"] and "event" in line]
        assert relayed == journal(Path(flow["task_dir"])), flow["id"]
        last = [line for line in lines if line["id"] == flow["id"]][-1]
        assert "result" in last, (flow["id"], last)
    lines = results
    serial_ms = 0
    for line in lines:
        result, flow_id = line["result"], line["id"]
        assert result["exit_code"] == 0, (flow_id, result)
        assert result["status"]["state"] == "succeeded", (flow_id, result["status"])
        assert result["attempts"] == (2 if flow_id == "f05" else 1), (flow_id, result)
        assert result["task_dir"] == str(tmp_path / "workspace" / flow_id)
        assert f"+{flow_id}" in result["diff"] and "done.txt" in result["diff"], result["diff"]
        assert f"The flow `{flow_id}` succeeded." in result["summary"], result["summary"]
        events = journal(Path(result["task_dir"]))
        # No step that finished ran again; each succeeded exactly once.
        for step in {e["step"] for e in events if e["type"] == "step_started"}:
            finishes = [
                i
                for i, e in enumerate(events)
                if e["type"] == "step_finished" and e["step"] == step
            ]
            succeeded = [i for i in finishes if events[i]["status"] == "succeeded"]
            assert len(succeeded) == 1, (flow_id, step, events)
            restarts = [
                i
                for i, e in enumerate(events)
                if e["type"] == "step_started" and e["step"] == step and i > succeeded[0]
            ]
            assert restarts == [], (flow_id, step)
        serial_ms += sum(e["duration_ms"] for e in events if e["type"] == "step_finished")
    # The killed flow ran `work` once, and `slow` twice (killed, then resumed by Ray's retry).
    f05 = journal(tmp_path / "workspace" / "f05")
    starts = [e["step"] for e in f05 if e["type"] == "step_started"]
    assert starts == ["work", "slow", "slow", "note"], starts
    # Ray ran them side by side, never more than the runner keeps in flight (6): the one-second
    # `work` steps of the flows overlapped. (The cluster's 4 CPUs are Ray's to count: a worker
    # freed as a flow's process ends may start the next while the last journal line is written,
    # so 5 were once seen at a time; the runner's bound is the one ocflow answers for.)
    spans = []
    for flow in flows:
        events = journal(Path(flow["task_dir"]))
        begin = [e["ts"] for e in events if e["type"] == "step_started" and e["step"] == "work"]
        end = [e["ts"] for e in events if e["type"] == "step_finished" and e["step"] == "work"]
        spans.append((parse_ts(begin[0]), parse_ts(end[0])))
    most_at_once = max(sum(1 for b, e in spans if b <= t < e) for t, _ in spans)
    assert 2 <= most_at_once <= 6, (most_at_once, spans)
    flows_per_hour = len(flows) / wall * 3600
    print(
        f"\nray engine: {len(flows)} flows in {wall:.1f} s wall ({flows_per_hour:.0f} flows/h), "
        f"serial sum of steps {serial_ms / 1000:.1f} s, at most {most_at_once} at once",
        file=sys.stderr,
    )


SECRET = "sk-ray-test-7f3a9c1e5b"


def files_holding(text: str, root: Path) -> list:
    found = []
    for path in root.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink() and text.encode() in path.read_bytes():
                found.append(str(path))
        except OSError:
            continue
    return found


def test_a_git_repository_flow_is_cloned_on_the_node_and_comes_back_through_ray(
    cluster, ocflow, tmp_path
):
    source = make_repo(tmp_path / "source", {"version.txt": "first\n"})
    first = git("rev-parse", "HEAD", cwd=source)
    (source / "version.txt").write_text("second\n", encoding="utf-8")
    git("commit", "-qam", "second", cwd=source)
    bare = tmp_path / "remote.git"
    git("clone", "-q", "--bare", str(source), str(bare))
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"task": "copy", "steps": [command_step("copy", "cat version.txt > copy.txt")]}),
        encoding="utf-8",
    )
    out = tmp_path / "out"
    flow = {
        "id": "g1",
        "argv": ["run", "--task-id", "g1"],
        "resume_argv": ["resume", "g1"],
        "workspace": str(out / "workspace"),
        "plan": str(plan),
        "task_dir": None,
        "repo": {"git": str(bare), "rev": first},
        # The key travels to the flow's ocflow in memory: never into a file, Ray's logs or output.
        "env": {**ocflow_env(tmp_path), "OCFLOW_API_KEY": SECRET},
    }
    # Two that cannot start: a repository no node can clone, a plan that does not exist.
    unclonable = {**flow, "id": "g2", "repo": {"git": str(tmp_path / "gone.git"), "rev": first}}
    unclonable["argv"] = ["run", "--task-id", "g2"]
    no_plan = path_flow(tmp_path, "p1", [command_step("s", "true")])
    no_plan["plan"] = str(tmp_path / "no-such-plan.json")
    request = {
        "address": "auto",
        "max_concurrent_flows": 2,
        "ocflow": str(ocflow),
        "flows": [flow, unclonable, no_plan],
    }
    code, lines, stderr = run_driver(request, env={"RAY_ADDRESS": cluster.address})
    assert SECRET not in stderr and SECRET not in json.dumps(lines)
    assert files_holding(SECRET, tmp_path) == [] and files_holding(SECRET, cluster.temp) == []

    assert code == 0, stderr
    results = {line["id"]: line["result"] for line in lines if "result" in line}
    assert sorted(results) == ["g1", "g2", "p1"], lines
    # A git flow's journal stays on its node; the one that never started has none.
    assert [line for line in lines if "event" in line] == [], lines
    # Refused, not retried, each with its reason.
    assert results["g2"]["exit_code"] == 2 and results["g2"]["attempts"] == 1, results["g2"]
    assert f"cannot clone {tmp_path / 'gone.git'} at {first}" in results["g2"]["stderr"]
    assert results["p1"]["exit_code"] == 2 and results["p1"]["attempts"] == 1, results["p1"]
    assert "no-such-plan.json" in results["p1"]["stderr"], results["p1"]
    result = results["g1"]
    assert result["exit_code"] == 0, result
    assert result["attempts"] == 1
    assert result["status"]["state"] == "succeeded", result["status"]
    assert result["status"]["task_id"] == "g1"
    assert "The flow `g1` succeeded." in result["summary"]
    # The checkout is the revision asked for, not the branch's head.
    assert "+++ b/copy.txt" in result["diff"] and "+first" in result["diff"], result["diff"]
    # The driver's disk was not used, and the node kept nothing once the result went back.
    assert not (out / "workspace").exists()
    assert not Path(result["task_dir"]).exists(), result["task_dir"]


def test_an_unreachable_cluster_is_an_error_line_and_exit_2(ocflow, tmp_path):
    if not RAY_IMPORTABLE:
        unavailable(f"ray is not importable by {sys.executable}: run scripts/ray-venv")
    (closed,) = free_ports(1)
    request = {
        "address": f"127.0.0.1:{closed}",
        "ocflow": str(ocflow),
        "flows": [path_flow(tmp_path, "u1", [command_step("s", "true")])],
    }
    started = time.monotonic()
    code, lines, _ = run_driver(request, env={"RAY_ADDRESS": ""})
    assert code == 2
    assert len(lines) == 1 and set(lines[0]) == {"error", "fix"}, lines
    assert f"127.0.0.1:{closed}" in lines[0]["error"]
    assert "ray start --head" in lines[0]["fix"]
    assert time.monotonic() - started < 30


def python_without_ray() -> str:
    """The interpreter this one was made from (a virtual environment's base): no ray there."""
    for candidate in (
        Path(sys.base_prefix) / "bin" / "python3",
        Path("/usr/bin/python3"),
    ):
        if candidate.exists():
            probe = subprocess.run(
                [str(candidate), "-c", "import ray"], capture_output=True, check=False
            )
            if probe.returncode != 0:
                return str(candidate)
    pytest.skip("every Python here can import ray: nothing to show the error with")


def test_ray_missing_says_what_to_install_and_exits_2(tmp_path):
    python = python_without_ray()
    request = {
        "address": "auto",
        "ocflow": "/usr/bin/ocflow",
        "flows": [path_flow(tmp_path, "m1", [command_step("s", "true")])],
    }
    code, lines, _ = run_driver(request, python=python, env={"VIRTUAL_ENV": ""})
    assert code == 2
    assert len(lines) == 1 and set(lines[0]) == {"error", "fix"}, lines
    assert "`ray`" in lines[0]["error"] and python in lines[0]["error"]
    assert f"{python} -m pip install 'ray==2.60.*'" in lines[0]["fix"], lines[0]["fix"]
    # Inside a virtual environment, the fix names it.
    code, lines, _ = run_driver(request, python=python, env={"VIRTUAL_ENV": "/opt/venv"})
    assert code == 2
    assert "/opt/venv/bin/pip install 'ray==2.60.*'" in lines[0]["fix"], lines[0]["fix"]


def test_an_invalid_request_names_the_problem_and_exits_2(tmp_path):
    flow = path_flow(tmp_path, "d1", [command_step("s", "true")])
    request = {"address": "auto", "ocflow": "/usr/bin/ocflow", "flows": [flow, dict(flow)]}
    code, lines, _ = run_driver(request, python=python_without_ray())
    assert code == 2
    assert lines == [
        {
            "error": "flow 2: the id 'd1' appears twice",
            "fix": "give every flow an id of its own",
        }
    ]
    # The repository and workspace are fields of the request, never looked for in `argv`.
    nowhere = {k: v for k, v in flow.items() if k != "workspace"}
    request["flows"] = [nowhere]
    code, lines, _ = run_driver(request, python=python_without_ray())
    assert code == 2
    assert lines[0]["error"] == "flow 1: `workspace` must be an absolute path", lines


@pytest.mark.parametrize("stop", ["sigterm", "driver_killed", "batch_killed"])
def test_a_stopped_batch_leaves_its_flows_resumable_and_a_second_run_finishes_them(
    cluster, ocflow, tmp_path, stop
):
    """sigterm: Ctrl-C/SIGTERM to the driver cancels the task, which stops the flow with
    SIGTERM. driver_killed: the driver SIGKILLed, Ray kills its workers, and each flow gets
    SIGTERM as its worker dies. batch_killed: the process that started the driver (ocflow
    batch) SIGKILLed: the driver sees it gone and stops as on SIGTERM."""
    steps = [
        command_step("work", "echo a > a.txt"),
        command_step("slow", "sleep 8; echo slow > slow.txt", after="work"),
    ]
    flow = path_flow(tmp_path, "c1", steps)
    request = {"address": "auto", "ocflow": str(ocflow), "flows": [flow]}
    task_dir = Path(flow["task_dir"])
    (tmp_path / "request.json").write_text(json.dumps(request), encoding="utf-8")
    driver_argv = [sys.executable, "-m", "ocflow_ray"]
    if stop == "batch_killed":
        # A parent that waits for the driver, as ocflow batch does (`; exit` keeps bash from
        # replacing itself with the driver).
        driver_argv = ["bash", "-c", '"$@"; exit $?', "batch", *driver_argv]
    out, err = (tmp_path / "driver.out").open("wb"), (tmp_path / "driver.err").open("wb")
    driver = subprocess.Popen(
        driver_argv,
        stdin=(tmp_path / "request.json").open("rb"),
        stdout=out,
        stderr=err,
        cwd=PYTHON_DIR,
        env={
            **os.environ,
            "PYTHONPATH": str(PYTHON_DIR),
            **LOOPBACK,
            "RAY_ADDRESS": cluster.address,
        },
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        events = journal(task_dir) if (task_dir / "journal.jsonl").exists() else []
        if any(e["type"] == "step_started" and e.get("step") == "slow" for e in events):
            break
        time.sleep(0.05)
    else:
        driver.kill()
        pytest.fail("the slow step never started")
    if stop == "sigterm":
        driver.send_signal(signal.SIGTERM)
        assert driver.wait(timeout=90) == 130, (tmp_path / "driver.err").read_text()
    else:
        driver.kill()
        driver.wait()
    out.close()
    err.close()
    # The flow's ocflow stops (the one started with --task-id c1), and the driver too.
    marker = f"--task-id\0{flow['id']}\0".encode()
    driver_marker = b"ocflow_ray\0"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        left = [
            pid
            for pid in pids_mentioning("")
            if marker in _cmdline(pid) or driver_marker in _cmdline(pid)
        ]
        if not left:
            break
        time.sleep(0.1)
    assert not left, [_cmdline(pid) for pid in left]
    relayed = [json.loads(line) for line in (tmp_path / "driver.out").read_text().splitlines()]
    assert [line for line in relayed if "event" not in line] == [], "a stopped flow: no result"
    # It stopped mid-step, resumably: the state saved is not running, `slow` never finished.
    status = subprocess.run(
        [str(ocflow), "--workspace", str(task_dir.parent), "--json", "status", str(task_dir)],
        env={**os.environ, **flow["env"]},
        capture_output=True,
        check=True,
    )
    assert json.loads(status.stdout)["state"] != "running", status.stdout
    finished = [e["step"] for e in journal(task_dir) if e["type"] == "step_finished"]
    assert finished == ["work"], finished

    # The same request again: the flow is resumed, not started again.
    code, lines, stderr = run_driver(request, env={"RAY_ADDRESS": cluster.address})
    assert code == 0, stderr
    (result,) = [line["result"] for line in lines if "result" in line]
    assert result["exit_code"] == 0 and result["status"]["state"] == "succeeded", result
    starts = [e["step"] for e in journal(task_dir) if e["type"] == "step_started"]
    assert starts == ["work", "slow", "slow"], starts


def test_a_killed_worker_stops_its_flow_and_rays_retry_resumes_it(cluster, ocflow, tmp_path):
    """The Ray worker running a flow SIGKILLed mid-step (the OOM killer, say): its flow gets
    SIGTERM and stops resumably, Ray retries the task, and the retry resumes the flow."""
    steps = [
        command_step("work", "echo a > a.txt"),
        command_step("slow", "sleep 4; echo slow > slow.txt", after="work"),
        command_step("note", "echo done > done.txt", after="slow"),
    ]
    flow = path_flow(tmp_path, "w1", steps)
    request = {"address": "auto", "ocflow": str(ocflow), "flows": [flow]}
    task_dir = Path(flow["task_dir"])
    killed = []

    def kill_the_worker():
        deadline = time.monotonic() + 120
        marker = b"--task-id\0w1\0"
        while time.monotonic() < deadline and not killed:
            events = journal(task_dir) if (task_dir / "journal.jsonl").exists() else []
            if any(e["type"] == "step_started" and e.get("step") == "slow" for e in events):
                for pid in pids_mentioning("w1"):
                    if marker in _cmdline(pid):
                        stat = (Path("/proc") / str(pid) / "stat").read_text()
                        worker = int(stat.rsplit(")", 1)[1].split()[1])
                        os.kill(worker, signal.SIGKILL)
                        killed.append((pid, worker))
                        return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_the_worker, daemon=True)
    killer.start()
    code, lines, stderr = run_driver(request, env={"RAY_ADDRESS": cluster.address})
    killer.join(timeout=5)

    assert len(killed) == 1, "the worker was never caught running the slow step"
    assert code == 0, stderr
    (result,) = [line["result"] for line in lines if "result" in line]
    assert result["exit_code"] == 0 and result["status"]["state"] == "succeeded", result
    assert result["attempts"] == 2, result
    starts = [e["step"] for e in journal(task_dir) if e["type"] == "step_started"]
    assert starts == ["work", "slow", "slow", "note"], starts


def _cmdline(pid: int) -> bytes:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes() + b"\0"
    except OSError:
        return b""


# --------------------------------------------------------------------------------------------
# End to end: the real `ocflow batch --engine ray` driving this runner on the local cluster


class FakeOpenAI:
    """A tiny OpenAI-compatible server: answers chat completions after `latency` seconds (a
    modify_code step's code block, or a flow's summary) and records the requests it holds at
    once and the keys they came with."""

    def __init__(self, latency: float):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.latency = latency
        self.lock = threading.Lock()
        self.now = self.most = self.requests = 0
        self.keys = set()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.now += 1
                    fake.most = max(fake.most, fake.now)
                    fake.requests += 1
                    fake.keys.add(self.headers.get("Authorization", ""))
                try:
                    time.sleep(fake.latency)
                finally:
                    with fake.lock:
                        fake.now -= 1
                text = "\n".join(str(m.get("content")) for m in body["messages"])
                if "Write a concise summary" in text:
                    content = "The file was updated."
                else:
                    content = "```python\ndef value():\n    return 1\n```"
                reply = json.dumps(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "m",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def watch_flow_processes(ocflow: Path, secret: str, stop: threading.Event, seen: dict):
    """Until stop: every ocflow flow process (`run --task-id` or `resume`), by pid, with
    whether the secret was in its environment or command line."""
    prefix = str(ocflow).encode() + b"\0"
    # A process whose environment shows no gate is looked at again a few times before it is
    # recorded so: one caught as it starts may not show its environment yet.
    looks: dict[int, int] = {}
    while not stop.is_set():
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) in seen:
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
                if not cmdline.startswith(prefix) or not (
                    b"\0--task-id\0" in cmdline or b"\0resume\0" in cmdline
                ):
                    continue
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            pid = int(entry.name)
            gate = b"OCFLOW_BASE_URL=http://" in environ
            looks[pid] = looks.get(pid, 0) + 1
            if not gate and looks[pid] < 10:
                continue
            seen[pid] = {
                "leaks": secret.encode() in cmdline + environ,
                "gate": gate,
                "cmdline": cmdline.replace(b"\0", b" ").decode(errors="replace")[:200],
            }
        time.sleep(0.02)


# The journal's events a run of a flow's process begins with.
RUN_STARTS = ("flow_started", "flow_resumed")


@pytest.mark.parametrize("address", ["auto", "explicit"])
def test_ocflow_batch_with_the_ray_engine_runs_twelve_flows_once_each_end_to_end(
    cluster, ocflow, tmp_path, address
):
    """The real `ocflow batch --engine ray` (the Rust driver, its LLM gate and this runner)
    on the local cluster: 12 flows whose modify_code step asks the fake server, at most 2
    requests at once; one flow's ocflow SIGKILLed mid-step and resumed by Ray's retry; every
    flow succeeds exactly once, and the key reaches neither a flow nor a file. `auto` (the
    issue's CI: RAY_ADDRESS names the cluster) puts the gate on this machine's own address,
    `explicit` (HOST:PORT of the head) on the address the route to the head takes."""
    llm = FakeOpenAI(latency=0.5)
    secret = "sk-ray-e2e-91c4d7a2f0"
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            [
                {
                    "id": "fix",
                    "operation": "modify_code",
                    "params": {"file_path": "f.py", "instructions": "make value() return 1"},
                },
                {**command_step("work", "sleep 1; echo w > work.txt"), "depends_on": ["fix"]},
            ]
        ),
        encoding="utf-8",
    )
    slow_plan = tmp_path / "slow-plan.json"
    slow_steps = json.loads(plan.read_text())
    # The flow killed mid-step: a step long enough to be caught running.
    slow_steps.append(command_step("slow", "sleep 4; echo slow > slow.txt", after="work"))
    slow_plan.write_text(json.dumps(slow_steps), encoding="utf-8")
    lines = []
    for index in range(12):
        flow_id = f"f{index:02d}"
        repo = make_repo(tmp_path / "repos" / flow_id, {"f.py": "def value():\n    return 0\n"})
        chosen = slow_plan if flow_id == "f05" else plan
        lines.append(
            json.dumps({"id": flow_id, "task": "fix", "repo": str(repo), "plan": str(chosen)})
        )
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    env = {
        **os.environ,
        **LOOPBACK,
        **ocflow_env(tmp_path),
        "OCFLOW_API_KEY": secret,
        "VIRTUAL_ENV": sys.prefix,
    }
    env.pop("RAY_ADDRESS", None)
    if address == "auto":
        env["RAY_ADDRESS"] = cluster.address
    ray_address = "auto" if address == "auto" else cluster.address
    killed, seen, stop = [], {}, threading.Event()
    killer = threading.Thread(
        target=kill_when_running,
        args=(ocflow, out / "workspace" / "f05", "f05", "slow", killed),
        daemon=True,
    )
    watcher = threading.Thread(
        target=watch_flow_processes, args=(ocflow, secret, stop, seen), daemon=True
    )
    killer.start()
    watcher.start()
    try:
        done = subprocess.run(
            [str(ocflow), "--base-url", llm.url, "--model", "m", "--json", "batch", str(tasks)]
            + ["--out", str(out), "--engine", "ray", "--ray-address", ray_address]
            + ["--flows", "6", "--max-llm-requests", "2"],
            env=env,
            capture_output=True,
            timeout=600,
            check=False,
        )
    finally:
        stop.set()
        llm.close()
    killer.join(timeout=5)
    watcher.join(timeout=5)
    said = done.stderr.decode(errors="replace")
    ray_log = (out / "logs" / "ray.log").read_text() if (out / "logs" / "ray.log").exists() else ""
    assert done.returncode == 0, (said, ray_log, (out / "summary.md").read_text())
    assert len(killed) == 1, "the f05 flow's ocflow process was never caught mid-step"

    # Every flow succeeded, exactly once: one line each in results.jsonl.
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in results) == [f"f{i:02d}" for i in range(12)], results
    for result in results:
        flow_id = result["id"]
        assert (result["state"], result["exit_code"]) == ("succeeded", 0), result
        assert result["task_dir"] == str(out / "workspace" / flow_id), result
        assert result["files_changed"] >= 1, result
        assert "+    return 1" in Path(result["diff"]).read_text(), result
        events = journal(Path(result["task_dir"]))
        for step in {e["step"] for e in events if e["type"] == "step_started"}:
            finished = [e for e in events if e["type"] == "step_finished" and e["step"] == step]
            assert [e["status"] for e in finished] == ["succeeded"], (flow_id, step, events)
        # duration_ms is the flow process's wall time, as with the local engine: at least its
        # steps' time in the run that ended it (a resumed flow's first run not counted).
        last_run = events[max(i for i, e in enumerate(events) if e["type"] in RUN_STARTS) :]
        steps_ms = sum(e["duration_ms"] for e in last_run if e["type"] == "step_finished")
        assert steps_ms <= result["duration_ms"] < 120_000, (flow_id, result, steps_ms)
    # The killed flow: `fix` and `work` ran once, `slow` twice (killed, then resumed by Ray).
    starts = [e["step"] for e in journal(out / "workspace" / "f05") if e["type"] == "step_started"]
    assert starts == ["fix", "work", "slow", "slow"], starts

    # The gate's cap held across the cluster; the server saw the real key, through the gate.
    assert llm.requests == 24, llm.requests  # each flow: its modify_code step and its summary
    assert llm.most == 2, llm.most
    assert llm.keys == {f"Bearer {secret}"}, llm.keys
    events = [json.loads(line) for line in done.stdout.decode().splitlines()]
    finished = events[-1]
    assert finished["type"] == "batch_finished" and finished["succeeded"] == 12, finished
    assert finished["max_llm_in_flight"] <= 2, finished
    # --json: each flow's events, relayed by the runner from its journal, tagged with its id.
    for index in range(12):
        flow_id = f"f{index:02d}"
        tagged = [e for e in events if e.get("task_id") == flow_id]
        done_steps = [e["step"] for e in tagged if e["type"] == "step_finished"]
        assert done_steps[:2] == ["fix", "work"], (flow_id, tagged)

    # The key never reached a flow: not in any flow process's environment or command line
    # (they had the gate and a token instead), nor in a file of the batch or of Ray.
    assert len(seen) >= 13, seen  # 12 runs, the killed flow's resume, and whatever was missed
    assert [pid for pid, flow in seen.items() if flow["leaks"]] == [], seen
    assert all(flow["gate"] for flow in seen.values()), seen
    assert files_holding(secret, out) == [] and files_holding(secret, cluster.temp) == []
    assert secret not in said and secret not in done.stdout.decode()


def test_ocflow_eval_with_the_ray_engine_scores_each_flow_by_its_check(cluster, ocflow, tmp_path):
    """`ocflow eval --engine ray` on the local cluster: the flows run as Ray tasks, each then
    scored by its check in a fresh copy of its repository — one right fix solved, one wrong
    fix the flow calls a success counted as a false success."""
    test = "from calc import add\n\nassert add(2, 3) == 5\n"
    lines = []
    for flow_id, body in (("right", "a + b"), ("wrong", "a * b")):
        repo = make_repo(
            tmp_path / "repos" / flow_id,
            {"calc.py": "def add(a, b):\n    return a - b\n", "check_calc.py": test},
        )
        content = f"def add(a, b):\n    return {body}\n"
        step = {"id": "fix", "operation": "write_file"}
        step["params"] = {"file_path": "calc.py", "content": content}
        plan = tmp_path / f"{flow_id}.json"
        plan.write_text(json.dumps([step]), encoding="utf-8")
        line = {"id": flow_id, "task": "Fix add", "repo": str(repo), "plan": str(plan)}
        lines.append(json.dumps({**line, "check": "python3 check_calc.py"}))
    suite = tmp_path / "suite.jsonl"
    suite.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "eval"
    env = {**os.environ, **LOOPBACK, **ocflow_env(tmp_path), "VIRTUAL_ENV": sys.prefix}
    env["RAY_ADDRESS"] = cluster.address
    done = subprocess.run(
        [str(ocflow), "--json", "eval", str(suite), "--out", str(out), "--engine", "ray"],
        env=env,
        capture_output=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    results = {
        r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())
    }
    assert (results["right"]["solved"], results["right"]["false_success"]) == (True, False)
    assert (results["wrong"]["solved"], results["wrong"]["false_success"]) == (False, True)
    events = [json.loads(line) for line in done.stdout.decode().splitlines()]
    finished = [e for e in events if e["type"] == "eval_finished"]
    assert finished and finished[0]["solved"] == 1, events
    assert any(e["type"] == "batch_started" and e["engine"] == "ray" for e in events), events
