"""Command operations: ``execute_shell_command``, ``run_tests`` and ``reproduce``.

Both run a shell command in the step's work_dir through :mod:`.process`
(timeout, process-group kill, output caps, scrubbed environment).
``run_tests`` runs the repository's first test command (:mod:`.testing_commands`) when none is given and adds the
parsed test report from :mod:`.tests_report`, completed from the JUnit XML
reports the command wrote (:mod:`.tests_junit_xml`) when its output falls short.
"""

from __future__ import annotations

import re
import time

from .instructions import Step
from .missing_packages import missing_package_hint
from .params import optional_positive_number, optional_str, require_str
from .paths import require_work_dir
from .process import CommandOutcome, run_command, scrub_env
from .results import StepError, make_result
from .testing_commands import find_test_commands
from .tests_junit_xml import complete_report, fresh_reports, lacks_message, read_reports
from .tests_report import parse_test_output, strip_ansi
from .view import View

_COUNTS = ("passed", "failed", "errors", "skipped")


def _check_passable(command: str, env: dict) -> None:
    """Refuse what no process can receive (a NUL byte), as a failure instead of a ValueError.

    A command or a reference value (``env``, from ``@{outputs...}``, e.g. the
    content of a binary file) may hold a NUL byte; ``subprocess`` would raise.
    """
    if "\0" in command:
        raise StepError("the command contains a NUL character: remove it from params.command")
    for name, value in env.items():
        if "\0" in name or "=" in name or not name:
            raise StepError(
                f"the step's env has an invalid variable name {name!r}: regenerate the step "
                "with ocflow"
            )
        if "\0" in value:
            raise StepError(
                f"the value of {name} (a reference in params.command) contains a NUL "
                "character, which cannot be passed to a command: reference a text field, "
                "or let the command read the file itself"
            )


def run_in_view(step: Step, command: str, llm_config: dict | None = None) -> CommandOutcome:
    """Run ``command`` as a command step does: at the repository view (``work_dir``), in the
    step's sandbox, with its time and output limits and a scrubbed environment.

    For plugin operations declared with ``runs_commands=True`` (only those get a view);
    ``timeout_seconds`` among the step's parameters overrides the step's time limit.
    """
    return _run(step, llm_config, command)[0]


def _run(step: Step, llm_config: dict | None, command: str) -> tuple[CommandOutcome, float]:
    _check_passable(command, step.env)
    work_dir = require_work_dir(step)
    timeout = optional_positive_number(step.params, "timeout_seconds", step.limits.timeout_seconds)
    api_key = (llm_config or {}).get("api_key")
    # The process's environment without secrets, and on top every variable the host sets for
    # the step (its ``env``, built in the host's ``engine/command_env.rs``); none of our own.
    env = scrub_env(api_key if isinstance(api_key, str) else None)
    env.update(step.env)
    try:
        outcome = run_command(
            command,
            cwd=work_dir,
            timeout_seconds=timeout,
            max_output_bytes=step.limits.max_output_bytes,
            env=env,
            launcher=step.sandbox_launcher,
        )
    except OSError as exc:
        raise StepError(f"could not start /bin/sh in {work_dir}: {exc}") from None
    return outcome, timeout


# What a command prints when the sandbox refused it something, and what to tell the user.
_NETWORK_REFUSED = (
    "could not resolve host",
    "temporary failure in name resolution",
    "name or service not known",
    "network is unreachable",
    "connection refused",
    "permission denied (connect",
    "failed to establish a new connection",
    "no route to host",
    "getaddrinfo",
)
# Error codes node and others print, matched as whole words in their own case.
_NETWORK_CODES = re.compile(r"\b(ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ENETUNREACH)\b")
_MEMORY_REFUSED = ("memoryerror", "cannot allocate memory", "out of memory", "bad_alloc")
_PROCESSES_REFUSED = ("fork: retry", "resource temporarily unavailable", "cannot fork")


def _outcome_message(
    outcome: CommandOutcome, timeout: float, what: str = "command", step: Step | None = None
) -> str:
    if outcome.timed_out:
        return f"{what} timed out after {timeout:g} s and was killed with its process group"
    if outcome.cancelled:
        return f"{what} was cancelled (ocflow is stopping) and killed with its process group"
    if outcome.exit_code is None:
        message = f"{what} was killed by signal {outcome.signal}"
    else:
        message = f"{what} exited with code {outcome.exit_code}"
    if outcome.exit_code != 0 and step is not None:
        message += _sandbox_hint(outcome, step)
    return message


def _sandbox_hint(outcome: CommandOutcome, step: Step) -> str:
    """What the sandbox refused the command, if its output shows it, and how to allow it.

    A package the repository has not installed comes first: that the network is off is
    only why it could not be fetched.
    """
    layers = step.sandbox_layers or {}
    printed = outcome.stdout + "\n" + outcome.stderr
    given = step.params.get("command")
    command = given if isinstance(given, str) else ""
    missing = missing_package_hint(command, printed, layers.get("network") == "off")
    if missing:
        return missing
    output = printed.lower()
    # Landlock refuses a TCP connect or bind with EACCES: "Permission denied" near a socket.
    denied_socket = "permission denied" in output and ("connect" in output or "socket" in output)
    refused = (
        any(sign in output for sign in _NETWORK_REFUSED)
        or _NETWORK_CODES.search(printed)
        or denied_socket
    )
    if layers.get("network") == "off" and refused:
        return (
            '; the network is off for command steps: give the step `"network": true` in a '
            "flow you write, or set `[sandbox] network = true` in your ocflow config"
        )
    if "memory_mb" in layers and any(sign in output for sign in _MEMORY_REFUSED):
        # How far the limit reaches ("256 MiB per step (cgroup)", "256 MiB per process
        # (rlimit)"), from a host that says so.
        limit = layers.get("memory") or f"{layers['memory_mb']} MiB"
        return f"; a command step may use {limit}: raise `[sandbox] memory_mb` if it needs more"
    if "processes" in layers and any(sign in output for sign in _PROCESSES_REFUSED):
        return (
            f"; a command step may run {layers['processes']} processes at once: raise "
            "`[sandbox] max_processes` if it needs more"
        )
    return ""


def _outcome_fields(command: str, outcome: CommandOutcome, step: Step) -> dict:
    return {
        "command": command,
        # What confined the command, in one word ("namespaces+landlock", "landlock", "none"),
        # and layer by layer in sandbox_layers (when the host sandboxed it).
        "sandbox": step.sandbox_kind,
        **({"sandbox_layers": step.sandbox_layers} if step.sandbox_layers else {}),
        "exit_code": outcome.exit_code,
        "stdout": outcome.stdout,
        "stderr": outcome.stderr,
        "timed_out": outcome.timed_out,
        "cancelled": outcome.cancelled,
        "truncated": outcome.truncated,
        "duration_ms": outcome.duration_ms,
    }


def _succeeded(outcome: CommandOutcome) -> bool:
    return outcome.exit_code == 0 and not outcome.timed_out and not outcome.cancelled


def execute_shell_command(step: Step, llm_config: dict | None) -> dict:
    """Run ``params.command`` with ``/bin/sh -c`` in the work_dir."""
    command = require_str(step.params, "command")
    outcome, timeout = _run(step, llm_config, command)
    status = "success" if _succeeded(outcome) else "failure"
    return make_result(
        step.operation,
        status,
        _outcome_message(outcome, timeout, step=step),
        **_outcome_fields(command, outcome, step),
    )


# Exit codes of a shell that could not run the command at all (not executable, not found):
# such a failure shows nothing about the repository.
_NOT_RUN = (126, 127)


def reproduce(step: Step, llm_config: dict | None) -> dict:
    """Run ``params.command`` on the repository before any change, to show the task's problem.

    The step succeeds when the command fails, having run (a non-zero exit code other than the
    shell's 126 and 127, or a signal): it ``reproduced`` the problem, and the host makes the
    same command one that must pass after the change. A command that passes now shows no
    problem, and one the shell could not run (or that timed out) shows nothing: then
    ``params.fallback_command`` (the repository's own tests, which ocflow gives a model's
    reproduction) runs, and its failure is the problem shown; the result's ``command`` is the
    one that showed it, which the check after the change runs (``run_tests``'s
    ``command_from_step``). Without either the step fails, saying so, and a recovery may give
    it a command that does show the problem.
    """
    command = require_str(step.params, "command")
    outcome, timeout = _run(step, llm_config, command)
    ran = _ran(outcome)
    reproduced = ran and outcome.exit_code != 0
    if reproduced:
        message = (
            _outcome_message(outcome, timeout)
            + " before any change: it shows the problem, and must pass after the change"
        )
    elif not ran:
        message = (
            _outcome_message(outcome, timeout, step=step)
            + " before any change, so it shows nothing about the problem: give this step a "
            "command that runs and fails now because of it"
        )
    else:
        message = (
            "the command passes before any change, so it does not show the problem: give this "
            "step a command that fails now because of it (one that calls the code the task is "
            "about with the input it describes)"
        )
    fallback = optional_str(step.params, "fallback_command")
    if not reproduced and fallback and fallback.strip() and fallback.strip() != command.strip():
        shown, fallback_timeout = _run(step, llm_config, fallback)
        if _ran(shown) and shown.exit_code != 0 and _a_test_failed(shown):
            why = "passes" if ran else "shows nothing"
            return make_result(
                step.operation,
                "success",
                f"`{command}` {why} before any change; the repository's tests "
                f"`{fallback}` fail now ({_outcome_message(shown, fallback_timeout)}): they "
                "show the problem, and must pass after the change",
                reproduced=True,
                first_command=command,
                **_outcome_fields(fallback, shown, step),
            )
        message += f"; the repository's tests `{fallback}` show nothing either ({_outcome_message(shown, fallback_timeout)})"
    return make_result(
        step.operation,
        "success" if reproduced else "failure",
        message,
        reproduced=reproduced,
        **_outcome_fields(command, outcome, step),
    )


def _a_test_failed(outcome: CommandOutcome) -> bool:
    """Whether a test run that exited non-zero shows a failing test: its runner's report counts
    a failure or an error, or no known runner's report is read (then the exit code is all there
    is). pytest's "no tests ran" (exit 5) or a usage error (exit 4) shows no problem."""
    report = parse_test_output(outcome.stdout + "\n" + outcome.stderr, outcome.exit_code)
    if report["framework"] is None:
        return True
    return bool(report["failed"] or report["errors"])


def _ran(outcome: CommandOutcome) -> bool:
    """Whether a command ran to its own end: not killed for time, not cancelled, not refused by
    the shell (126, 127)."""
    return not (outcome.timed_out or outcome.cancelled) and outcome.exit_code not in _NOT_RUN


def reproduced_command(step: Step) -> str | None:
    """The command ``params.command_from_step`` (a ``reproduce`` step) showed the problem with,
    when it did: what the check after the change runs."""
    source = optional_str(step.params, "command_from_step")
    ref = step.steps.get(source) if source else None
    result = ref.load_result()[0] if ref is not None else None
    if not isinstance(result, dict) or result.get("reproduced") is not True:
        return None
    command = result.get("command")
    return command if isinstance(command, str) and command.strip() else None


def default_test_command(work_dir: str | View) -> tuple[str, str]:
    """``(command, framework)``: the first of :func:`~.testing_commands.find_test_commands`."""
    found = find_test_commands(work_dir)
    if not found:
        raise StepError(
            "no test command found: give params.command (the repository has no package.json "
            "with a test script, no go.mod, pom.xml, build.gradle or Cargo.toml, no pytest "
            "configuration or Python tests, and no Makefile with a test target)"
        )
    return found[0]["command"], found[0]["framework"]


def run_tests(step: Step, llm_config: dict | None) -> dict:
    """Run the test command (given or detected) and report the parsed results."""
    command = reproduced_command(step) or optional_str(step.params, "command")
    view = View(require_work_dir(step), step.view_layers)
    if command is None or not command.strip():
        command, _ = default_test_command(view)
    started = time.time()
    outcome, timeout = _run(step, llm_config, command)
    report = parse_test_output(outcome.stdout + "\n" + outcome.stderr, outcome.exit_code)
    if _falls_short(report, outcome):
        # Every file the command wrote is in `view.written` (under an overlay, the upper
        # directory; it is read before ocflow takes it apart).
        reports = read_reports(fresh_reports(view.written, started), view.written)
        report = complete_report(report, reports)
    passed = _succeeded(outcome)
    if outcome.timed_out or outcome.cancelled or outcome.exit_code is None:
        message = _outcome_message(outcome, timeout, "test command", step)
    elif report["problem"] is not None:
        message = f"{report['problem']} (exit code {outcome.exit_code})"
    elif report["framework"] is None and not passed:
        # A command that is no test runner (a `python3 -c` assertion): what it said last is
        # the cause a recovery needs, not that no runner was recognised.
        message = f"test command exited with code {outcome.exit_code}" + _last_words(outcome)
    elif report["framework"] is None:
        message = (
            f"test command exited with code {outcome.exit_code} "
            "(its output was not recognised as any known test runner's, "
            "and it wrote no JUnit XML report)"
        )
    else:
        verdict = "tests passed" if passed else "tests failed"
        message = f"{verdict}: {_counts_phrase(report)} (exit code {outcome.exit_code})"
    if not passed and not (outcome.timed_out or outcome.cancelled or outcome.exit_code is None):
        # A package the tests need and the repository has not installed, named.
        network_off = (step.sandbox_layers or {}).get("network") == "off"
        printed = outcome.stdout + "\n" + outcome.stderr
        message += missing_package_hint(command, printed, network_off)
    return make_result(
        step.operation,
        "success" if passed else "failure",
        message,
        tests=report,
        **_outcome_fields(command, outcome, step),
    )


def _last_words(outcome: CommandOutcome) -> str:
    """``: `LAST LINE``` — the last line the command printed (stderr first: a traceback's
    exception), cut to 200 characters; empty when it printed nothing."""
    for text in (outcome.stderr, outcome.stdout):
        # The command's own words: escape sequences and control characters left out (they
        # would reach a terminal and the summary as such).
        plain = "".join(c for c in strip_ansi(text) if c == "\n" or c.isprintable())
        lines = [line.strip() for line in plain.splitlines() if line.strip()]
        if lines:
            return f": {lines[-1][:200]}"
    return ""


def _falls_short(report: dict, outcome: CommandOutcome) -> bool:
    """Whether the report read from the output lacks what a JUnit XML report could give."""
    if report["problem"] is not None:
        return False
    if report["framework"] is None or any(report[key] is None for key in _COUNTS):
        return True
    if not report["failures"]:
        return outcome.exit_code != 0 or bool(report["failed"] or report["errors"])
    return any(lacks_message(item) for item in report["failures"])


def _counts_phrase(report: dict) -> str:
    """``1 passed, 1 failed, 0 errors, 0 skipped``, leaving out counts the output did not say."""
    phrase = ", ".join(f"{report[key]} {key}" for key in _COUNTS if report[key] is not None)
    subtests = report.get("subtests") or {}
    counted = [f"{n} subtests {key}" for key, n in subtests.items() if n]
    return ", ".join([phrase, *counted]) if counted else phrase
