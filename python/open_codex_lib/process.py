"""Running shell commands for steps, safely and within limits.

:func:`run_command` runs ``/bin/sh -c COMMAND`` in an explicit directory, in a
new session (so the command and everything it starts share one process group),
with stdin from ``/dev/null`` and a scrubbed environment (:func:`scrub_env`).
stdout and stderr are drained by a background thread into
:class:`CappedBuffer` objects that keep the head and a rolling tail of each
stream.  On timeout the whole process group gets SIGKILL; after the main
process exits, any leftovers in its group are killed too, so a command such as
``sleep 100 &`` cannot keep us waiting on its pipe.

:func:`cancel_all` kills every command currently running under this library in
this process (the host calls it on Ctrl-C / SIGTERM).  Everything here is
thread-safe and never touches the process's current directory or
``os.environ``.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

SENSITIVE_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
# How long to keep draining the pipes after the command's process group was
# killed; only a descendant that left the group (setsid) can hold them longer.
DRAIN_GRACE_SECONDS = 2.0
_READ_CHUNK = 65536

_lock = threading.Lock()
_running: dict[int, _Run] = {}
_cancel_generation = 0


def scrub_env(api_key: str | None = None, base: Mapping[str, str] | None = None) -> dict:
    """Return a copy of the environment without secrets.

    Drops every variable whose upper-cased name contains one of
    :data:`SENSITIVE_NAME_PARTS`, and every variable whose value equals
    ``api_key`` (when that is a non-empty string).  ``base`` defaults to
    ``os.environ``, which is only read.
    """
    source = os.environ if base is None else base
    env = {}
    for name, value in source.items():
        upper = name.upper()
        if any(part in upper for part in SENSITIVE_NAME_PARTS):
            continue
        if isinstance(api_key, str) and api_key and value == api_key:
            continue
        env[name] = value
    return env


class CappedBuffer:
    """Collects a byte stream, keeping at most ``cap`` bytes.

    The first quarter of the cap holds the head of the stream; the rest is a
    rolling tail.  Bytes in between are dropped and counted.
    """

    def __init__(self, cap: int):
        self._head_cap = cap // 4
        self._tail_cap = cap - self._head_cap
        self._head = bytearray()
        self._tail = bytearray()
        self._lock = threading.Lock()
        self.dropped = 0

    def feed(self, data: bytes) -> None:
        """Append a chunk of the stream."""
        with self._lock:
            room = self._head_cap - len(self._head)
            if room > 0:
                self._head += data[:room]
                data = data[room:]
            if not data:
                return
            if len(data) >= self._tail_cap:
                self.dropped += len(self._tail) + len(data) - self._tail_cap
                self._tail = bytearray(data[len(data) - self._tail_cap :])
                return
            self._tail += data
            excess = len(self._tail) - self._tail_cap
            if excess > 0:
                del self._tail[:excess]
                self.dropped += excess

    @property
    def truncated(self) -> bool:
        """True if bytes were dropped."""
        with self._lock:
            return self.dropped > 0

    def text(self) -> str:
        """The kept bytes decoded as UTF-8, with a marker where bytes were dropped."""
        with self._lock:
            head = bytes(self._head).decode("utf-8", errors="replace")
            tail = bytes(self._tail).decode("utf-8", errors="replace")
            if self.dropped:
                return f"{head}\n[... {self.dropped} bytes truncated ...]\n{tail}"
            return head + tail


@dataclass(frozen=True)
class CommandOutcome:
    """What happened when a command ran."""

    exit_code: int | None  # None when the command was killed by a signal
    signal: int | None
    stdout: str
    stderr: str
    timed_out: bool
    cancelled: bool
    truncated: bool
    duration_ms: int


class _Run:
    """Book-keeping for one running command (guarded by the module lock)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.exited = False
        self.timed_out = False
        self.cancelled = False


def _killpg(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def cancel_all() -> None:
    """SIGKILL the process group of every command running under this library.

    Commands whose start races with this call are killed as soon as they are
    registered.  Safe to call from any thread, any number of times.
    """
    global _cancel_generation
    with _lock:
        _cancel_generation += 1
        for run in _running.values():
            if not run.exited:
                run.cancelled = True
                _killpg(run.pid)


def active_count() -> int:
    """Number of commands currently running under this library."""
    with _lock:
        return len(_running)


def run_command(
    command: str,
    cwd: str,
    timeout_seconds: float,
    max_output_bytes: int,
    env: Mapping[str, str],
    launcher: Sequence[str] = (),
) -> CommandOutcome:
    """Run ``/bin/sh -c command`` in ``cwd`` and return its outcome.

    ``launcher`` is put before the shell (the host's sandbox, which then becomes the shell).
    Raises ``OSError`` only if the shell cannot be started at all.
    """
    with _lock:
        generation = _cancel_generation
    started = time.monotonic()
    proc = subprocess.Popen(
        [*launcher, "/bin/sh", "-c", command],
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        close_fds=True,
    )
    run = _Run(proc.pid)
    with _lock:
        _running[proc.pid] = run
        if _cancel_generation != generation:
            run.cancelled = True
            _killpg(proc.pid)

    def on_timeout() -> None:
        with _lock:
            if not run.exited:
                run.timed_out = True
                _killpg(run.pid)

    stdout_buf = CappedBuffer(max_output_bytes)
    stderr_buf = CappedBuffer(max_output_bytes)
    stop_draining = threading.Event()
    drainer = threading.Thread(
        target=_drain,
        args=(
            {proc.stdout.fileno(): stdout_buf, proc.stderr.fileno(): stderr_buf},
            stop_draining,
        ),
        name=f"open_codex_lib-drain-{proc.pid}",
        daemon=True,
    )
    timer = threading.Timer(timeout_seconds, on_timeout)
    timer.daemon = True
    try:
        drainer.start()
        timer.start()
        _wait_for_exit_without_reaping(proc)
    finally:
        # Runs on every path, so the command's process group never outlives us.
        timer.cancel()
        with _lock:
            run.exited = True
            # The main process is a zombie until reaped below, so its pid (the
            # group id) cannot be reused yet: killing leftovers is safe.
            _killpg(proc.pid)
            del _running[proc.pid]
        proc.wait()
    duration_ms = int((time.monotonic() - started) * 1000)

    drainer.join(DRAIN_GRACE_SECONDS)
    if drainer.is_alive():
        stop_draining.set()
        drainer.join()
    proc.stdout.close()
    proc.stderr.close()

    code = proc.returncode
    return CommandOutcome(
        exit_code=code if code >= 0 else None,
        signal=-code if code < 0 else None,
        stdout=stdout_buf.text(),
        stderr=stderr_buf.text(),
        timed_out=run.timed_out,
        cancelled=run.cancelled,
        truncated=stdout_buf.truncated or stderr_buf.truncated,
        duration_ms=duration_ms,
    )


def _wait_for_exit_without_reaping(proc: subprocess.Popen) -> None:
    """Block until ``proc`` exits, leaving it a zombie where the OS allows it."""
    if not hasattr(os, "waitid"):  # macOS before Python 3.13
        proc.wait()
        return
    # ChildProcessError: already reaped elsewhere; proc.wait() copes with that.
    with contextlib.suppress(ChildProcessError):
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)


def _drain(buffers: dict[int, CappedBuffer], stop: threading.Event) -> None:
    """Read the pipes into their buffers until EOF on all of them or ``stop``."""
    selector = selectors.DefaultSelector()
    try:
        for fd, buffer in buffers.items():
            selector.register(fd, selectors.EVENT_READ, buffer)
        while selector.get_map() and not stop.is_set():
            for key, _ in selector.select(timeout=0.1):
                data = os.read(key.fd, _READ_CHUNK)
                if data:
                    key.data.feed(data)
                else:
                    selector.unregister(key.fd)
    finally:
        selector.close()
