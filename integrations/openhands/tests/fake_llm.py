"""A fake OpenAI-compatible server over real HTTP for the orchestrator's tests. It answers the
agent (requests that carry `tools`) with scripted tool calls chosen from the conversation so
far, and ocflow (requests without tools) with a plan or a summary, told apart by the planner's
system prompt. Every request is recorded with its headers."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# A sentence of ocflow's planning system prompt (prompts/plan_system.md).
PLANNER_MARK = "You break a coding task into a short flow"


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    def header(self, name: str) -> str | None:
        """A header by name, whatever its case on the wire."""
        return next((v for k, v in self.headers.items() if k.lower() == name.lower()), None)

    @property
    def from_agent(self) -> bool:
        return bool(self.body.get("tools"))

    @property
    def is_plan(self) -> bool:
        return not self.from_agent and PLANNER_MARK in json.dumps(self.body.get("messages"))


def text_of(content: Any) -> str:
    """A message's text, whether a string or a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def last_tool_result(messages: list[dict[str, Any]]) -> tuple[str | None, str]:
    """The tool that answered last (by the assistant call it answers) and its text; (None, "")
    when the last message is not a tool result."""
    if not messages or messages[-1].get("role") != "tool":
        return None, ""
    result = messages[-1]
    call_id = result.get("tool_call_id")
    for message in reversed(messages):
        for call in message.get("tool_calls") or []:
            if call.get("id") == call_id:
                return call["function"]["name"], text_of(result.get("content"))
    return None, text_of(result.get("content"))


AgentScript = Callable[[list[dict[str, Any]]], tuple[str, dict[str, Any]]]


@dataclass
class FakeLLM:
    """The server and what it was asked. `agent_script` picks the agent's next tool call;
    `plan` is the flow ocflow's planner receives; `summary` its summary answer."""

    agent_script: AgentScript
    plan: dict[str, Any]
    summary: str = "Created the requested file."
    # When set, ocflow's requests get this HTTP status and an OpenAI-style error body.
    ocflow_error_status: int | None = None
    requests: list[Recorded] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._calls = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                recorded = Recorded(self.path, dict(self.headers), body)
                with fake._lock:
                    fake.requests.append(recorded)
                status = 200
                if fake.ocflow_error_status and not recorded.from_agent:
                    status = fake.ocflow_error_status
                    error = {"message": "Incorrect API key provided", "type": "invalid_request"}
                    answer = json.dumps({"error": error}).encode()
                else:
                    answer = json.dumps(fake.answer(recorded)).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, request: Recorded) -> dict[str, Any]:
        with self._lock:
            self._calls += 1
            number = self._calls
        if request.from_agent:
            name, arguments = self.agent_script(request.body["messages"])
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{number}",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                ],
            }
            finish = "tool_calls"
        elif request.is_plan:
            message = {"role": "assistant", "content": json.dumps(self.plan)}
            finish = "stop"
        else:
            message = {"role": "assistant", "content": self.summary}
            finish = "stop"
        return {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": request.body.get("model", "fake"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        }
