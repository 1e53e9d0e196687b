"""Command line: ``python -m open_codex_lib FILE [--result-file PATH]``.

Runs one step standalone (outside ocflow) and prints its result dict as JSON
on stdout.  Exit status: 0 on success, 1 when the step failed, 2 when the
instructions file is missing or invalid (or the result file cannot be
written).  The LLM settings are read from the environment and kept in memory
only.  A step that needs a model gets a ``complete`` callable built from the
optional ``openai`` package (:mod:`.standalone`); without it such a step
fails, saying what to install or set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping

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
    """Run the step; return the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m open_codex_lib",
        description="Run one ocflow step from its open_codex_instructions.md file.",
    )
    parser.add_argument("instructions_file", help="path of open_codex_instructions.md")
    parser.add_argument("--result-file", help="also write the result JSON to this file")
    args = parser.parse_args(argv)

    try:
        step = parse_instructions(args.instructions_file)
    except InstructionsError as exc:
        result, status = failure(exc.operation, str(exc)), 2
    else:
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
