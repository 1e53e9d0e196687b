"""The ``ask_model`` operation: a task described in words, done by the model as text.

Seed 000's crew plans tasks by description alone ("Plan the CLI tool features", "QA the
generated output.txt file"), each for an agent of a role; its agents answer in text unless
told which files to write. This is that step: the model is given the flow's task, the step's
``instructions``, the file ``file_path`` names (when given) and what the steps it depends on
produced, and its answer is the result's ``summary``. It writes no file: a change to the
repository is another step's (``write_file`` or ``modify_code``, which name their file).
"""

from __future__ import annotations

from . import llm
from .code_blocks import fence_for
from .code_edit import read_text
from .instructions import Step
from .params import optional_str, require_str
from .paths import normalize_repo_path, staged_file
from .results import success
from .summary import step_facts


def ask_model(step: Step, llm_config: dict | None) -> dict:
    """Return the model's answer to ``params.instructions`` as ``summary``."""
    instructions = require_str(step.params, "instructions").strip()
    given = optional_str(step.params, "file_path")
    chat = llm.conversation(step, llm_config, step.operation)
    if chat is None:
        return llm.unavailable(step, step.operation)
    if given:
        rel = normalize_repo_path(given, "params.file_path")
        source = read_text(staged_file(step, rel), rel)
        fence = fence_for(source)
        files = f"The file {rel}:\n\n{fence}\n{source}\n{fence}"
    else:
        files = "(no file is given)"
    messages = [
        {"role": "system", "content": llm.render_prompt("ask_model_system")},
        {
            "role": "user",
            "content": llm.render_prompt(
                "ask_model_user",
                task=step.task or "(not given)",
                instructions=instructions,
                files=files,
                facts=step_facts(step, list(step.steps), detailed=True),
            ),
        },
    ]
    answer = chat.ask(messages).strip()
    if not answer:
        raise chat.fail("the LLM returned an empty answer: retry the step")
    return success(step.operation, "answered by the LLM", summary=answer, **chat.fields)
