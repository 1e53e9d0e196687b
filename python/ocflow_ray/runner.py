"""The Ray engine of ``ocflow batch``: one Ray task per flow, scheduled across a Ray cluster.

``ocflow batch --engine ray`` starts ``python -m ocflow_ray`` and writes ONE JSON
request on its stdin::

    {"address": "auto", "max_concurrent_flows": M, "max_retries": 3, "ocflow": "/abs/ocflow",
     "flows": [{"id": ID, "argv": [...], "stdin": TASK or null, "resume_argv": [...],
                "repo": {"path": P} or {"git": URL, "rev": REV}, "workspace": W,
                "plan": P or null, "task_dir": P or null, "env": {...}}]}

``argv`` (a run) and ``resume_argv`` are ocflow's arguments without the repository, the
workspace and the plan file, which are fields of their own: the runner puts them in, as the
node sees them (a cloned repository and its workspace live on the node, and the plan travels
with the task). ``stdin`` is what ``argv``'s run reads on its stdin (the task; ``resume_argv``
reads nothing).

Stdout carries one JSON object per line and nothing else (everything Ray or ocflow says goes
to stderr): ``{"id": ID, "event": {...}}`` for each event of a flow on shared storage (its
journal's new lines, as ``--json`` prints them), ``{"id": ID, "result": {"exit_code",
"attempts", "status", "summary", "diff", "task_dir"}}`` when a flow ends (after its events;
``"stderr"``, the end of its ocflow's stderr, when it did not succeed), or ``{"error": ...,
"fix": ...}`` with exit status 2 when the request is invalid, ``ray`` is not importable or the
cluster cannot be reached. Optional in the request: ``"cpus_per_flow"`` (Ray's ``num_cpus`` of
a flow's task, default 1). Exit status 0 when every flow ended (whatever its own exit code),
130 when stopped (SIGINT, SIGTERM, or ocflow batch gone): the running flows then stop
resumably and have no result line.

A flow's whole state lives in its task directory, so Ray's own retry is the recovery: a task
whose ocflow process died by a signal raises :class:`FlowProcessDied`, Ray runs it again
(``max_retries``), and the new attempt finds the task directory started and runs
``ocflow resume`` instead of ``ocflow run``. A flow that failed (exit 1) or was refused
(exit 2) is a result, never retried. Attempts are counted by a small actor, because Ray does
not tell a task which attempt it is.

This module needs only the standard library and ``ray``: it is shipped to the workers by value,
so a node needs Ray, git and the ocflow binary (with its library), not this package.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

# What to install when ray is missing: the series this engine is written and tested against.
RAY_REQUIREMENT = "ray==2.60.*"
# Exit statuses of an ocflow process stopped by a signal (128 + SIGINT, SIGKILL, SIGTERM):
# ocflow exits 130 itself when interrupted, having saved its state.
DIED_BY_SIGNAL = (130, 137, 143)
# A cancelled flow gets this long to stop resumably after SIGTERM before it is killed.
STOP_GRACE_SECONDS = 60
# How long connecting to the cluster may take before the driver gives up (ray.init itself
# keeps retrying an unreachable address for minutes).
CONNECT_TIMEOUT_SECONDS = float(os.environ.get("OCFLOW_RAY_CONNECT_TIMEOUT", "60"))
# The most of a failed flow's stderr a result carries (its reason when no status was written).
STDERR_TAIL_BYTES = 4000
# Where an LLM key may travel in a flow's env: only the flow's own ocflow run gets it (git and
# the status and diff commands need none), and nothing here writes or prints it.
SECRET_NAMES = ("OCFLOW_API_KEY", "OPENAI_API_KEY", "LLM_API_KEY")
# prctl(2)'s request for a signal when the parent dies (linux/prctl.h).
PR_SET_PDEATHSIG = 1
# The files of a task directory that say a run already started it.
STATUS_FILE = "flow_status.json"
FLOW_FILE = "flow.json"
# The task's lock (an flock held by the ocflow running it).
LOCK_FILE = ".lock"


class RequestError(Exception):
    """The request on stdin is not what the protocol says; ``fix`` tells the caller how."""

    def __init__(self, message: str, fix: str):
        super().__init__(message)
        self.fix = fix


class FlowProcessDied(Exception):
    """The flow's ocflow process was killed by a signal: transient, Ray retries the task and
    the retry resumes the flow from its task directory."""

    def __init__(self, flow_id: str, exit_code: int, attempt: int, task_dir: str | None):
        super().__init__(
            f"flow {flow_id}: its ocflow process died (exit {exit_code}) on attempt {attempt}"
        )
        self.flow_id = flow_id
        self.exit_code = exit_code
        self.attempt = attempt
        self.task_dir = task_dir

    def __reduce__(self):
        # Ray sends the exception back to the driver: keep every field through pickling.
        return (FlowProcessDied, (self.flow_id, self.exit_code, self.attempt, self.task_dir))


# --------------------------------------------------------------------------------------------
# The request


def parse_request(text: str) -> dict:
    """Validates the request on stdin and returns it with defaults filled in."""
    try:
        request = json.loads(text)
    except json.JSONDecodeError as err:
        raise RequestError(
            f"the request on stdin is not JSON ({err})",
            "write one JSON object on stdin, as `ocflow batch --engine ray` does",
        ) from None
    if not isinstance(request, dict):
        raise RequestError("the request on stdin is not a JSON object", "send one object")
    ocflow = request.get("ocflow")
    if not isinstance(ocflow, str) or not os.path.isabs(ocflow):
        raise RequestError(
            "`ocflow` must be the absolute path of the ocflow binary",
            "set `ocflow` to the binary's absolute path (the same on every node)",
        )
    for key, default in (("max_concurrent_flows", 0), ("max_retries", 3)):
        value = request.setdefault(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise RequestError(
                f"`{key}` must be a whole number >= 0, not {value!r}",
                f"set `{key}` to 0 or more (0 flows at once: as many as the cluster has CPUs)",
            )
    # Optional: the CPUs Ray reserves for one flow. A flow mostly waits for its LLM, so a
    # fraction lets a node run more flows than it has cores.
    cpus = request.setdefault("cpus_per_flow", 1)
    if not isinstance(cpus, (int, float)) or isinstance(cpus, bool) or cpus <= 0:
        raise RequestError(
            f"`cpus_per_flow` must be a number > 0, not {cpus!r}", "use e.g. 1 or 0.25"
        )
    address = request.setdefault("address", "auto")
    if not isinstance(address, str) or not address:
        raise RequestError("`address` must be a Ray address", "use `auto` or HOST:PORT")
    flows = request.get("flows")
    if not isinstance(flows, list):
        raise RequestError("`flows` must be a list", "send the flows as a JSON list")
    seen = set()
    for index, flow in enumerate(flows):
        where = f"flow {index + 1}"
        if not isinstance(flow, dict) or not isinstance(flow.get("id"), str) or not flow["id"]:
            raise RequestError(f"{where} has no string `id`", "give every flow an id")
        if flow["id"] in seen:
            raise RequestError(
                f"{where}: the id {flow['id']!r} appears twice", "give every flow an id of its own"
            )
        seen.add(flow["id"])
        for key in ("argv", "resume_argv"):
            argv = flow.get(key)
            if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
                raise RequestError(
                    f"{where}: `{key}` must be a list of strings",
                    f"send `{key}` as ocflow's arguments without the binary, as a JSON list",
                )
        if flow.get("stdin") is not None and not isinstance(flow["stdin"], str):
            raise RequestError(
                f"{where}: `stdin` must be a string or null",
                "send the task `argv` reads on its stdin as a string",
            )
        if not isinstance(flow.get("workspace"), str) or not os.path.isabs(flow["workspace"]):
            raise RequestError(
                f"{where}: `workspace` must be an absolute path",
                "send the batch's workspace directory (`--out`/workspace)",
            )
        if flow.setdefault("plan", None) is not None and not isinstance(flow["plan"], str):
            raise RequestError(
                f"{where}: `plan` must be a path or null",
                "send the flow file's path, or null for a flow the model plans",
            )
        repo = flow.get("repo")
        if not isinstance(repo, dict) or not (
            isinstance(repo.get("path"), str) or isinstance(repo.get("git"), str)
        ):
            raise RequestError(
                f'{where}: `repo` must be {{"path": P}} or {{"git": URL, "rev": REV}}',
                "name the repository by a path every node sees, or by a git URL",
            )
        env = flow.setdefault("env", {})
        if not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
            raise RequestError(
                f"{where}: `env` must map names to strings",
                'send `env` as {"NAME": "value", ...}',
            )
        task_dir = flow.setdefault("task_dir", None)
        if task_dir is not None and not isinstance(task_dir, str):
            raise RequestError(
                f"{where}: `task_dir` must be a path or null",
                "send the task directory's absolute path, or null for a git repository",
            )
    return request


def ray_missing_error(err: BaseException) -> dict:
    """The error line when ``import ray`` failed: what to install, and into which Python."""
    venv = os.environ.get("VIRTUAL_ENV")
    where = (
        f"the virtual environment VIRTUAL_ENV names ({venv}): {venv}/bin/pip install "
        f"'{RAY_REQUIREMENT}'"
        if venv
        else f"the Python ocflow runs on: {sys.executable} -m pip install '{RAY_REQUIREMENT}'"
    )
    return {
        "error": f"--engine ray needs the Python package `ray`, which {sys.executable} cannot "
        f"import ({type(err).__name__}: {err})",
        "fix": f"pip install '{RAY_REQUIREMENT}' into {where}; or run with --engine local",
    }


# --------------------------------------------------------------------------------------------
# Inside a Ray task: one attempt at one flow


def scratch_dir(flow: dict) -> Path:
    """The node-local directory of a flow whose repository is cloned from git.

    The same flow of the same batch gets the same directory, so a retry that Ray places on the
    same node finds the clone and the task directory and resumes; elsewhere it starts afresh.
    """
    repo = flow["repo"]
    key = json.dumps([flow["id"], repo.get("git"), repo.get("rev"), flow["workspace"]])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in flow["id"])[:40]
    return Path(tempfile.gettempdir()) / "ocflow-ray" / f"{safe}-{digest}"


def has_started(task_dir: Path | None) -> bool:
    """Whether a run already saved the flow's plan or status there (ocflow's own test for a
    task that must be resumed, not started again)."""
    return task_dir is not None and (
        (task_dir / STATUS_FILE).exists() or (task_dir / FLOW_FILE).exists()
    )


def clone(url: str, rev: str | None, into: Path, env: dict) -> None:
    """Clones ``url`` at ``rev`` into ``into`` (a fresh directory)."""
    if into.exists():
        shutil.rmtree(into)
    into.parent.mkdir(parents=True, exist_ok=True)
    git = ["git", "-c", "advice.detachedHead=false"]
    subprocess.run(
        [*git, "clone", "--quiet", url, str(into)],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    if rev:
        subprocess.run(
            [*git, "-C", str(into), "checkout", "--quiet", rev],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )


def feed_stdin(process: subprocess.Popen, text: str) -> None:
    """Writes the task on the flow's stdin, on a thread (a pipe holds 64 KiB: a longer task
    would block here while the flow waits to be stopped), and closes it. A flow that refuses the
    task before reading it all ends the write, alone."""

    def write() -> None:
        try:
            process.stdin.write(text.encode("utf-8"))
            process.stdin.close()
        except OSError:
            pass

    threading.Thread(target=write, daemon=True).start()


class StopRequested(Exception):
    """The driver stopped the batch (its control actor says so, or is gone with it)."""


def wait_or_stop(process: subprocess.Popen, stopping=None) -> int:
    """Waits for the flow's process; a cancel (``ray.cancel`` raises KeyboardInterrupt here),
    or ``stopping()`` turning true, sends it SIGTERM so it stops resumably, then raises.

    The wait polls because Ray's interrupt reaches Python only between bytecodes, never inside
    a blocking waitpid. ``stopping`` is asked about once a second: a cancel that never reaches
    the task (seen under load, on a worker that ran an earlier flow) still stops its flow."""
    try:
        polls = 0
        while True:
            try:
                return process.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                polls += 1
                if stopping is not None and polls % 5 == 0 and stopping():
                    raise StopRequested() from None
    except BaseException:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        raise


def stop_with_parent():
    """A preexec_fn asking Linux to send the flow SIGTERM when this worker dies.

    A worker killed outright (SIGKILL, the OOM killer) cannot stop its flow itself: the flow
    then stops resumably, as on Ctrl-C, instead of running on unowned and holding its task's
    lock against the retry that resumes it. Ray runs a task on its worker's main thread, whose
    end is the process's, which is what the signal follows. The function is looked up before
    the fork; the child only calls it."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: nothing to ask for
        return None
    parent = os.getpid()

    def preexec():
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the worker died before the request took effect
            os._exit(143)

    return preexec


def ocflow_output(ocflow: str, args: list, env: dict) -> tuple:
    """(exit code, stdout) of a short ocflow command (status, diff)."""
    done = subprocess.run([ocflow, *args], env=env, capture_output=True, check=False)
    return done.returncode, done.stdout.decode("utf-8", "replace")


def read_status(ocflow: str, globals_: list, task_dir: Path, env: dict):
    """The flow's status as `ocflow status --json` gives it (flow_status.json with the journal's
    later steps replayed), else the file as it is, else None."""
    code, out = ocflow_output(ocflow, [*globals_, "--json", "status", str(task_dir)], env)
    if code == 0:
        try:
            return json.loads(out)
        except json.JSONDecodeError:
            pass
    try:
        return json.loads((task_dir / STATUS_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def wait_until_unlocked(task_dir: Path) -> None:
    """Waits (a while) until no ocflow holds the task's lock.

    The previous attempt's ocflow may still be stopping (SIGTERM, when its worker died): a
    resume started before it let go would be refused as running. ocflow's lock is an flock."""
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    try:
        handle = (task_dir / LOCK_FILE).open("rb")
    except OSError:  # no lock file: no ocflow ever held it
        return
    with handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(handle, fcntl.LOCK_UN)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return  # resume itself then says who holds it
                time.sleep(0.1)


def clone_problem(repo: dict, err: BaseException) -> str:
    """Why the repository could not be cloned, with git's own words."""
    said = getattr(err, "stderr", None)
    said = said.decode("utf-8", "replace").strip() if isinstance(said, bytes) else str(err)
    return (
        f"cannot clone {repo['git']} at {repo.get('rev') or 'its default branch'}: {said}; "
        "check that every node can reach the URL and that the revision exists"
    )


def refused(attempt: int, reason: str) -> dict:
    """The result of a flow that could not start (exit 2, as ocflow's own bad input)."""
    return {
        "exit_code": 2,
        "attempts": attempt,
        "status": None,
        "summary": "",
        "diff": "",
        "task_dir": None,
        "stderr": reason,
    }


def run_flow_attempt(flow: dict, ocflow: str, attempt: int, stopping=None) -> dict:
    """Runs (or resumes) one flow to its end and returns its result; raises FlowProcessDied
    when its ocflow process died by a signal, so that Ray tries again."""
    env = {**os.environ, **flow["env"]}
    keyless = {name: value for name, value in env.items() if name not in SECRET_NAMES}
    repo, plan = flow["repo"], flow.get("plan")
    scratch = None
    if "git" in repo:
        scratch = scratch_dir(flow)
        repo_dir, workspace = scratch / "repo", scratch / "workspace"
        task_dir = workspace / flow["id"]
        if not has_started(task_dir):
            # Nothing worth resuming: a clean clone (an attempt killed mid-clone left debris).
            try:
                clone(repo["git"], repo.get("rev"), repo_dir, keyless)
            except (subprocess.CalledProcessError, OSError) as err:
                shutil.rmtree(scratch, ignore_errors=True)
                return refused(attempt, clone_problem(repo, err))
            shutil.rmtree(workspace, ignore_errors=True)
        plan_text = flow.get("plan_text")
        if plan_text is not None:
            plan = scratch / "plan.json"
            plan.write_text(plan_text, encoding="utf-8")
    else:
        repo_dir, workspace = repo["path"], flow["workspace"]
        task_dir = Path(flow["task_dir"]) if flow["task_dir"] else None
    # The repository and workspace as this node sees them: global options, first.
    globals_ = ["--repo", str(repo_dir), "--workspace", str(workspace)]
    argv = [*globals_, *flow["argv"], *(["--plan", str(plan)] if plan is not None else [])]
    resume_argv = [*globals_, *flow["resume_argv"]]

    feed = None
    if has_started(task_dir):
        chosen = resume_argv
        wait_until_unlocked(task_dir)
    else:
        chosen = argv
        feed = flow.get("stdin")
    # The flow process's wall time, as the local engine measures it (its spawn to its end).
    started = time.monotonic()
    with tempfile.TemporaryFile() as stderr:
        # Its own session: a signal meant for the Ray worker's group is not the flow's; the
        # flow is stopped only through wait_or_stop, resumably.
        process = subprocess.Popen(
            [ocflow, *chosen],
            env=env,
            stdin=subprocess.DEVNULL if feed is None else subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
            preexec_fn=stop_with_parent(),  # noqa: PLW1509 - only calls a looked-up prctl
        )
        if feed is not None:
            feed_stdin(process, feed)
        exit_code = wait_or_stop(process, stopping)
        duration_ms = int((time.monotonic() - started) * 1000)
        stderr.seek(max(0, stderr.seek(0, os.SEEK_END) - STDERR_TAIL_BYTES))
        stderr_tail = stderr.read().decode("utf-8", "replace")
    if exit_code < 0 or exit_code in DIED_BY_SIGNAL:
        code = 128 - exit_code if exit_code < 0 else exit_code
        raise FlowProcessDied(flow["id"], code, attempt, str(task_dir) if task_dir else None)

    result = {
        "exit_code": exit_code,
        "attempts": attempt,
        "status": None,
        "summary": "",
        "diff": "",
        "task_dir": str(task_dir) if task_dir else None,
        "duration_ms": duration_ms,
    }
    if task_dir is not None and task_dir.is_dir():
        result["status"] = read_status(ocflow, globals_, task_dir, keyless)
        try:
            result["summary"] = (task_dir / "summary.md").read_text(encoding="utf-8")
        except OSError:
            pass
        task_id = task_dir.name
        code, diff = ocflow_output(ocflow, [*globals_, "diff", task_id], keyless)
        if code == 0:
            result["diff"] = diff
    if exit_code != 0:
        # The reason when the flow was refused before it wrote a status (bad plan, bad repo).
        result["stderr"] = stderr_tail
    if scratch is not None:
        # Everything the driver needs travels back in the result: the node keeps nothing.
        shutil.rmtree(scratch, ignore_errors=True)
    return result


def flow_task_body(flow: dict, ocflow: str, control) -> dict:
    """What one Ray task runs: count the attempt, then run or resume the flow, stopping it when
    the driver stops the batch (or is gone: its control actor goes with it)."""
    import ray

    attempt = ray.get(control.next.remote(flow["id"]))

    def stopping() -> bool:
        try:
            return ray.get(control.stopping.remote(), timeout=5)
        except Exception:  # noqa: BLE001 - the driver and its actor are gone: stop
            return True

    return run_flow_attempt(flow, ocflow, attempt, stopping)


class BatchControl:
    """Counts each flow's attempts across retries and nodes, and says when the driver stops
    the batch (a Ray actor of no CPU, owned by the driver)."""

    def __init__(self):
        self.attempts = {}
        self.stopped = False

    def next(self, flow_id: str) -> int:
        self.attempts[flow_id] = self.attempts.get(flow_id, 0) + 1
        return self.attempts[flow_id]

    def stop(self) -> None:
        self.stopped = True

    def stopping(self) -> bool:
        return self.stopped


# --------------------------------------------------------------------------------------------
# The driver


class Output:
    """The protocol's stdout: whole JSON lines on the real stdout, flushed one by one.

    File descriptor 1 itself is pointed at stderr, so nothing Ray or a library prints (Python
    or C++) can slip a line into the protocol."""

    def __init__(self):
        sys.stdout.flush()
        self.stream = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        self.lock = threading.Lock()
        # Set when the reader is gone (ocflow batch died): the batch then stops resumably.
        self.closed = threading.Event()

    def line(self, obj: dict) -> None:
        with self.lock:
            try:
                self.stream.write(json.dumps(obj, ensure_ascii=False) + "\n")
                self.stream.flush()
            except OSError:  # a broken pipe: nobody reads the results any more
                self.closed.set()


class JournalTail:
    """A path flow's journal, read as it grows: its new lines are the flow's events (the same
    objects `ocflow --json run` prints), relayed to ocflow batch as ``{"id", "event"}`` lines.

    Only what is appended from now on is relayed (a resumed flow's past is not news), and only a
    whole line (the flow may be writing the next). A git flow's journal is on its node only: it
    has no events, just its result."""

    def __init__(self, task_dir: str):
        self.path = Path(task_dir) / "journal.jsonl"
        try:
            self.offset = self.path.stat().st_size
        except OSError:
            self.offset = 0

    def new_events(self) -> list:
        try:
            with self.path.open("rb") as journal:
                journal.seek(self.offset)
                data = journal.read()
        except OSError:
            return []
        whole = data[: data.rfind(b"\n") + 1]
        self.offset += len(whole)
        events = []
        for line in whole.splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:  # a line torn by a crash: the journal's reader skips it too
                continue
        return events


def log(message: str) -> None:
    print(f"ocflow ray: {message}", file=sys.stderr, flush=True)


def probe(address: str) -> str | None:
    """Why ``address`` (HOST:PORT) cannot be reached, or None; `auto` and ray:// are left to
    Ray. A refused port fails here at once instead of after Ray's long retries."""
    if address == "auto" or "://" in address or ":" not in address:
        return None
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=5):
            return None
    except (OSError, ValueError) as err:
        return str(err)


def connect(ray, address: str) -> str | None:
    """ray.init with the address; the reason when it failed or took too long, else None."""
    reason = probe(address)
    if reason is not None:
        return reason
    outcome = {}

    def init():
        try:
            ray.init(
                address=address,
                log_to_driver=False,
                logging_level="WARNING",
                namespace="ocflow-batch",
            )
            outcome["ok"] = True
        except Exception as err:  # noqa: BLE001 - any failure to connect is the error line
            outcome["error"] = f"{type(err).__name__}: {err}"

    thread = threading.Thread(target=init, daemon=True)
    thread.start()
    thread.join(CONNECT_TIMEOUT_SECONDS)
    if thread.is_alive():
        return f"no answer within {CONNECT_TIMEOUT_SECONDS:.0f} s"
    return outcome.get("error")


def died_result(flow: dict, err: BaseException, max_retries: int, retried: bool) -> dict:
    """The result of a flow Ray gave up on: its process kept dying, or its worker or node
    died past the retries."""
    cause = getattr(err, "cause", None) or err
    if isinstance(cause, FlowProcessDied) or type(cause).__name__ == "FlowProcessDied":
        exit_code, attempts, task_dir = cause.exit_code, cause.attempt, cause.task_dir
    else:
        # An error of the task's own code is not retried (only FlowProcessDied is); a worker or
        # node that died is, up to max_retries.
        attempts = max_retries + 1 if retried else 1
        exit_code, task_dir = 1, flow.get("task_dir")
    status = None
    if task_dir:
        # On storage the driver sees (a path repository), the state the flow was left in.
        try:
            status = json.loads((Path(task_dir) / STATUS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass
    return {
        "exit_code": exit_code,
        "attempts": attempts,
        "status": status,
        "summary": "",
        "diff": "",
        "task_dir": task_dir,
        "stderr": f"Ray gave up on the flow after {attempts} attempt(s): {cause}",
    }


def drive(ray, request: dict, out: Output, stopping: threading.Event) -> int:
    """Submits one task per flow, at most M in flight, and prints each result as it comes."""
    max_retries = request["max_retries"]
    if __name__ != "__main__":
        # Imported rather than run with -m: still ship this module's code by value, so that a
        # node needs only Ray and ocflow, not this package on its Python path.
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    # Unset: as many flows in flight as the cluster has room for.
    in_flight_cap = request["max_concurrent_flows"] or max(
        1, int(ray.cluster_resources().get("CPU", 1) / request["cpus_per_flow"])
    )
    control = ray.remote(num_cpus=0)(BatchControl).remote()
    flow_task = ray.remote(
        num_cpus=request["cpus_per_flow"],
        max_retries=max_retries,
        retry_exceptions=[FlowProcessDied],
    )(flow_task_body)
    for flow in request["flows"]:
        # The plan file travels with the task: a node need not see the driver's disk.
        plan = flow["plan"]
        if plan and os.path.isfile(plan):
            flow["plan_text"] = Path(plan).read_text(encoding="utf-8")
    pending = deque(request["flows"])
    in_flight = {}
    tails = {}
    started = time.monotonic()
    log(f"{len(pending)} flow(s), at most {in_flight_cap} at once, {max_retries} retries each")
    parent = os.getppid()
    while (pending or in_flight) and not stopping.is_set():
        if os.getppid() != parent or out.closed.is_set():
            # ocflow batch died (a SIGKILL): nobody will read a result, so stop as on Ctrl-C
            # and leave every flow to be resumed by the next run.
            log("ocflow batch is gone: stopping")
            stopping.set()
            break
        while pending and len(in_flight) < in_flight_cap:
            flow = pending.popleft()
            in_flight[flow_task.remote(flow, request["ocflow"], control)] = flow
            if flow["task_dir"] and "path" in flow["repo"]:
                tails[flow["id"]] = JournalTail(flow["task_dir"])
        # A timeout, so that a signal is seen, and events relayed, within half a second.
        ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=0.5)
        ready_ids = {in_flight[ref]["id"] for ref in ready}
        for flow in in_flight.values():
            if flow["id"] in tails:
                for event in tails[flow["id"]].new_events():
                    out.line({"id": flow["id"], "event": event})
                if flow["id"] in ready_ids:
                    del tails[flow["id"]]
        for ref in ready:
            flow = in_flight.pop(ref)
            try:
                result = ray.get(ref)
            except ray.exceptions.RayError as err:  # the task's failure is the flow's result
                retried = not isinstance(err, ray.exceptions.RayTaskError)
                result = died_result(flow, err, max_retries, retried)
            out.line({"id": flow["id"], "result": result})
    if stopping.is_set():
        log(f"stopping: cancelling {len(in_flight)} running flow(s) (they stop resumably)")
        try:
            ray.get(control.stop.remote(), timeout=5)
        except Exception as err:  # noqa: BLE001 - the cancels below stop them all the same
            log(f"the batch's control actor did not answer ({type(err).__name__})")
        for ref in in_flight:
            ray.cancel(ref)
        # Each task sends its flow SIGTERM and waits for it to save its state.
        ray.wait(list(in_flight), num_returns=len(in_flight), timeout=STOP_GRACE_SECONDS + 10)
        return 130
    log(f"all flows ended in {time.monotonic() - started:.1f} s")
    return 0


def main(stdin=None) -> int:
    out = Output()
    try:
        request = parse_request((stdin or sys.stdin).read())
    except RequestError as err:
        out.line({"error": str(err), "fix": err.fix})
        return 2
    try:
        import ray
    except ImportError as err:
        out.line(ray_missing_error(err))
        return 2
    if not ray.__version__.startswith("2.60."):
        log(f"ray {ray.__version__} is not the tested series ({RAY_REQUIREMENT})")
    stopping = threading.Event()

    def stop(signum, _frame):
        stopping.set()

    def catch_signals():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, stop)

    catch_signals()
    reason = connect(ray, request["address"])
    # ray.init installs its core's own handler for SIGTERM (it logs "SIGTERM received" and, on
    # its way out, may abort the process: exit -6, seen under load): ours comes back over it.
    catch_signals()
    if reason is not None:
        out.line(
            {
                "error": f"cannot reach the Ray cluster at {request['address']}: {reason}",
                "fix": "start it (`ray start --head` on the head node) or pass its address "
                "with --ray-address HOST:PORT",
            }
        )
        # ray.init may still be retrying in its thread: do not wait for it.
        sys.stderr.flush()
        os._exit(2)
    try:
        return drive(ray, request, out, stopping)
    finally:
        ray.shutdown()
