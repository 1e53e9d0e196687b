"""Command line: run one step, or print the catalogue of operations.

``python -m open_codex_lib FILE [--result-file PATH] [--plugins DIR]...
[--no-entry-points]`` runs one step standalone (outside ocflow) and prints its
result dict as JSON on stdout.  Exit status: 0 on success, 1 when the step
failed, 2 when the instructions file is missing or invalid (or the result file
cannot be written).  The LLM settings are read from the environment and kept
in memory only.  A step that needs a model gets a ``complete`` callable built
from the optional ``openai`` package (:mod:`.standalone`); without it such a
step fails, saying what to install or set.  A step whose operation is not a
built-in loads the plugins first: those of the ``--plugins`` folders and,
unless ``--no-entry-points``, those of installed entry points.

``python -m open_codex_lib catalogue [--plugins DIR ...] [--no-entry-points]``
loads the plugins and prints :func:`.registry.catalogue` (every operation with
its parameters, and the loading problems); exit status 1 if there was a
problem.  (A step file named ``catalogue`` is run as ``./catalogue``.)
Problems are also written to stderr, one line each.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping

from . import registry
from .instructions import InstructionsError, parse_instructions
from .operations import run_step
from .results import failure
from .standalone import prepare_llm_config

ENV_NAMES = {
    "base_url": ("OCFLOW_BASE_URL", "OPENAI_BASE_URL", "LLM_BASE_URL"),
    "model": ("OCFLOW_MODEL", "LLM_MODEL"),
    "api_key": ("OCFLOW_API_KEY", "OPENAI_API_KEY", "LLM_API_KEY"),
}


def llm_config_from_env(environ: Mapping[str, str]) -> dict:
    """Build ``llm_config`` from the first non-empty variable of each setting."""
    config = {}
    for setting, names in ENV_NAMES.items():
        config[setting] = next((environ[n] for n in names if environ.get(n)), None)
    return config


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["catalogue"]:
        return catalogue_main(args[1:])
    return run_main(args)


def add_plugin_options(parser: argparse.ArgumentParser, several: bool) -> None:
    """The options saying which plugins to load.

    With ``several``, ``--plugins`` takes several folders at once; otherwise one
    (repeat the option), so it cannot swallow a positional argument after it.
    """
    parser.add_argument(
        "--plugins",
        action="extend" if several else "append",
        nargs="+" if several else None,
        default=[],
        metavar="DIR",
        help="load the plugin operations of this folder (*.py files and packages); repeatable",
    )
    parser.add_argument(
        "--no-entry-points",
        action="store_true",
        help=f"do not load the plugins of installed entry points ({registry.ENTRY_POINT_GROUP})",
    )


def load_plugins(args: argparse.Namespace) -> None:
    """Load the plugins ``args`` name; report each problem on stderr."""
    for problem in registry.load_plugins(args.plugins, entry_points=not args.no_entry_points):
        print(f"plugin problem: {problem['source']}: {problem['message']}", file=sys.stderr)


def catalogue_main(argv: list[str]) -> int:
    """Print the catalogue of operations; 1 if a plugin could not be loaded."""
    parser = argparse.ArgumentParser(
        prog="python -m open_codex_lib catalogue",
        description="Print every operation (built-in and plugin) with its parameters, as JSON.",
    )
    add_plugin_options(parser, several=True)
    args = parser.parse_args(argv)
    load_plugins(args)
    sys.stdout.buffer.write((registry.catalogue() + "\n").encode("utf-8"))
    sys.stdout.flush()
    return 1 if registry.problems() else 0


def run_main(argv: list[str]) -> int:
    """Run the step; return the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m open_codex_lib",
        description="Run one ocflow step from its open_codex_instructions.md file.",
        epilog="To list the operations: python -m open_codex_lib catalogue --help",
    )
    parser.add_argument("instructions_file", help="path of open_codex_instructions.md")
    parser.add_argument("--result-file", help="also write the result JSON to this file")
    add_plugin_options(parser, several=False)
    args = parser.parse_args(argv)

    try:
        step = parse_instructions(args.instructions_file)
    except InstructionsError as exc:
        result, status = failure(exc.operation, str(exc)), 2
    else:
        info = registry.find(step.operation)
        if info is None or not info.builtin:
            load_plugins(args)
        llm_config, problem = prepare_llm_config(step, llm_config_from_env(os.environ))
        if problem is not None:
            result = failure(step.operation, problem)
        else:
            result = run_step(step, llm_config)
        status = 0 if result["status"] == "success" else 1

    text = json.dumps(result, indent=2, ensure_ascii=False) + "\n"
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.flush()
    if args.result_file:
        try:
            with open(args.result_file, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            print(f"cannot write result file {args.result_file}: {exc}", file=sys.stderr)
            return 2
    return status


if __name__ == "__main__":
    sys.exit(main())
