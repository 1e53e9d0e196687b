"""One ocflow command as a child process: its `--json` event stream read line by line on a
thread, kept in order, so that a tool call can wait for the next change and show what happened
since the last one. The child runs in a session of its own: a flow outlives the tool call that
started it, and can be interrupted as Ctrl-C would (state saved, `ocflow resume` continues)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

# Events that say nothing new about the flow: a wait for "the next change" ignores them.
QUIET_EVENT_TYPES = frozenset({"heartbeat"})


def parse_event_line(raw: bytes) -> dict[str, Any] | None:
    """One line of ocflow's stdout as an event; a line that is not a JSON object (it should
    never happen with `--json`) is kept as an `output` event rather than lost."""
    line = raw.decode("utf-8", errors="replace").strip()
    if not line:
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return {"type": "output", "message": line}
    if not isinstance(event, dict):
        return {"type": "output", "message": line}
    return event


class FlowProcess:
    """A running (or finished) ocflow child and every event it has printed so far."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], cwd: str) -> None:
        self.argv = list(argv)
        self.started_at = time.monotonic()
        self._events: list[dict[str, Any]] = []
        self._stderr_tail: deque[str] = deque(maxlen=40)
        self._exit_code: int | None = None
        self._changed = threading.Condition()
        # No TTY and no stdin, as in a headless OpenHands runtime; a session of its own so a
        # signal meant for the agent's process group does not reach the flow.
        self._process = subprocess.Popen(
            self.argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()
        self._stdout_reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._stdout_reader.start()

    def _read_stdout(self) -> None:
        assert self._process.stdout is not None
        for raw in self._process.stdout:
            event = parse_event_line(raw)
            if event is None:
                continue
            with self._changed:
                self._events.append(event)
                self._changed.notify_all()
        # stderr is drained too before the end is announced, so an error line is never missed.
        self._stderr_reader.join()
        code = self._process.wait()
        with self._changed:
            self._exit_code = code
            self._changed.notify_all()

    def _read_stderr(self) -> None:
        assert self._process.stderr is not None
        for raw in self._process.stderr:
            line = raw.decode("utf-8", errors="replace").rstrip()
            if line:
                with self._changed:
                    self._stderr_tail.append(line)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def exit_code(self) -> int | None:
        """The child's exit code once it has ended and its output is read, else None."""
        with self._changed:
            return self._exit_code

    @property
    def finished(self) -> bool:
        return self.exit_code is not None

    def elapsed_seconds(self) -> float:
        return time.monotonic() - self.started_at

    def events(self) -> list[dict[str, Any]]:
        with self._changed:
            return list(self._events)

    def stderr_tail(self) -> list[str]:
        with self._changed:
            return list(self._stderr_tail)

    def wait_for_change(
        self,
        seen: int,
        timeout: float,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> None:
        """Return when an event after the first `seen` ones says something (a heartbeat does
        not), when the child ends, when `cancelled()` turns true, or after `timeout` seconds."""
        self._wait(lambda: self._has_news(seen), timeout, cancelled)

    def wait_for_end(self, timeout: float, cancelled: Callable[[], bool] = lambda: False) -> None:
        self._wait(lambda: self._exit_code is not None, timeout, cancelled)

    def _has_news(self, seen: int) -> bool:
        if self._exit_code is not None:
            return True
        return any(e.get("type") not in QUIET_EVENT_TYPES for e in self._events[seen:])

    def _wait(self, done: Callable[[], bool], timeout: float, cancelled: Callable[[], bool]):
        deadline = time.monotonic() + max(0.0, timeout)
        with self._changed:
            while not done() and not cancelled():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                # Wake up now and then to notice a cancellation from another thread.
                self._changed.wait(min(remaining, 0.5))

    def interrupt(self) -> None:
        """Stop the flow as Ctrl-C would: ocflow saves its state and exits 130."""
        if self._process.poll() is None:
            try:
                os.killpg(self._process.pid, signal.SIGINT)
            except ProcessLookupError:
                pass


def run_to_end(
    argv: Sequence[str], env: Mapping[str, str], cwd: str, timeout: float
) -> tuple[int, str, list[str]]:
    """A short ocflow command (diff, apply): its exit code, its stdout, its stderr lines."""
    completed = subprocess.run(
        list(argv),
        check=False,
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
        start_new_session=True,
    )
    stdout = completed.stdout.decode("utf-8", errors="replace")
    stderr = completed.stderr.decode("utf-8", errors="replace").splitlines()
    return completed.returncode, stdout, stderr


def parse_events(stdout: str) -> list[dict[str, Any]]:
    """Every event of a `--json` command's whole stdout."""
    events = (parse_event_line(line.encode()) for line in stdout.splitlines())
    return [event for event in events if event is not None]
