"""Asking the model again when its answer cannot be used: the one re-ask loop of the LLM steps.

``modify_code``/``refactor_function``, ``write_file`` with instructions and
``analyze_code`` all judge an answer, and when it cannot be used ask once more
with the problem.  A small model only answers differently if the re-ask
changes something for it, so:

- the problem is said twice (:class:`Problem`): precisely for the people
  reading the step's message, and in plain words, with what to do instead,
  for the model;
- each re-ask is sent a little warmer (:meth:`.llm.Conversation.reask_temperature`);
- an answer exactly the same as an earlier one (spaces at its ends aside)
  ends the re-asks at once: the model repeats itself, and asking once more
  would only cost time (on a CPU, minutes).  The outcome says ``repeated``;
- an answer cut off at the token limit (:class:`.llm.Truncated`) is a problem
  like the others: a small model that ran to the limit has mostly repeated a
  line or a block until it was stopped, and a warmer re-ask told to answer
  shorter often ends.  The cut-off text is left out of the re-ask (it would
  fill the context with the repetition); a placeholder says where it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from . import llm

MAX_ASKS = 2  # the first question and one re-ask
SAME_ANSWER = "the model gave the same answer again"
CUT_OFF_TELL = (
    "Your answer was cut off at the token limit before it ended: it was too long, or it "
    "repeated the same lines over and over. Answer again, shorter: write each part once, "
    "with no repetition and no explanation"
)
CUT_OFF_PLACEHOLDER = "(an answer cut off at the token limit; left out)"


@dataclass(frozen=True)
class Problem:
    """Why an answer cannot be used.

    ``reason`` goes into the step's message, for people; ``tell`` is what the
    re-ask says to the model: the problem in plain words and what to do
    instead.  Without ``tell`` the model is told the ``reason``.
    """

    reason: str
    tell: str = ""

    def for_model(self) -> str:
        """``tell`` (or ``reason``), ending with a full stop."""
        text = (self.tell or self.reason).strip()
        return text if text.endswith((".", "!", "?")) else text + "."


@dataclass
class Outcome:
    """What the asks gave: every answer, the problem of each unusable one, the usable value."""

    answers: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    value: Any = None
    repeated: bool = False  # the asks ended because an answer repeated an earlier one
    cut_off: set[int] = field(default_factory=set)  # indices of answers cut off at the limit

    def whole_answers(self) -> list[str]:
        """The answers not cut off at the token limit, in order: only these may stand for
        anything (a cut-off answer is never used)."""
        return [text for at, text in enumerate(self.answers) if at not in self.cut_off]

    @property
    def usable(self) -> bool:
        """True when the last answer could be used (then ``value`` holds what it gave)."""
        return len(self.problems) < len(self.answers)

    @property
    def problem(self) -> Problem | None:
        """The problem of the last unusable answer."""
        return self.problems[-1] if self.problems else None

    def reason(self) -> str:
        """Why the asks gave nothing usable, for the step's message."""
        reason = self.problem.reason if self.problem else "no answer"
        if self.repeated:
            return f"{reason}; {SAME_ANSWER}"
        return reason


Judge = Callable[[str], "tuple[Any, Problem | None]"]


def ask_until_usable(
    chat: llm.Conversation,
    messages: list[dict],
    judge: Judge,
    reask: Callable[[Problem], str],
    json: bool = False,
) -> Outcome:
    """Ask with ``messages``; while the answer is unusable, ask again, at most :data:`MAX_ASKS`.

    ``judge(answer)`` gives ``(value, None)`` for a usable answer, else
    ``(None, problem)``; ``reask(problem)`` is the user message that follows
    the unusable answer in the next request.  An answer the same as an
    earlier one ends the asks (it was unusable then, it is unusable now).
    """
    outcome = Outcome()
    asking = messages
    for asked in range(MAX_ASKS):
        cut: llm.Truncated | None = None
        try:
            answer = chat.ask(asking, json=json, reask=asked)
        except llm.Truncated as error:
            answer, cut = error.content, error
            outcome.cut_off.add(len(outcome.answers))
        earlier = [text.strip() for text in outcome.answers]
        outcome.answers.append(answer)
        if answer.strip() in earlier:
            outcome.problems.append(outcome.problems[earlier.index(answer.strip())])
            outcome.repeated = True
            return outcome
        value, problem = judge(answer) if cut is None else (None, Problem(str(cut), CUT_OFF_TELL))
        if problem is None:
            outcome.value = value
            return outcome
        outcome.problems.append(problem)
        asking = messages + [
            {"role": "assistant", "content": answer if cut is None else CUT_OFF_PLACEHOLDER},
            {"role": "user", "content": reask(problem)},
        ]
    return outcome
