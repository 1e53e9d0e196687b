"""A real MCP client (the Python `mcp` package's stdio client) driving `ocflow mcp` the way an
agent would: list the tools, start a flow, poll its status until it ends, read the diff, apply.

Usage: mcp_client.py SCENARIO ARGS_FILE -- SERVER_COMMAND...
ARGS_FILE holds a JSON object (a file: a long task does not fit on a command line). The
server's environment is exactly what its "env" gives (as an agent's MCP config
would), over the package's safe defaults. Prints one JSON object: every call's result.
"""

import asyncio
import json
import sys
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def result(answer):
    return {"is_error": bool(answer.is_error), "value": answer.structured_content}


def timed(answer, began):
    """A result with the seconds its call took and the size of its structured answer."""
    value = result(answer)
    value["seconds"] = round(time.monotonic() - began, 2)
    value["bytes"] = len(json.dumps(value["value"], separators=(",", ":")))
    return value


async def poll(session, task_id, deadline_seconds):
    deadline = time.monotonic() + deadline_seconds
    polls = []
    while time.monotonic() < deadline:
        status = result(await session.call_tool("ocflow_status", {"task_id": task_id}))
        polls.append(status)
        if status["is_error"] or not status["value"].get("running", False):
            return polls
        await asyncio.sleep(0.3)
    return polls


async def scenario_flow(session, args):
    report = {}
    tools = await session.list_tools()
    report["tools"] = sorted(tool.name for tool in tools.tools)
    report["schemas"] = {tool.name: tool.input_schema for tool in tools.tools}
    started = result(await session.call_tool("ocflow_run", {"task": args["task"]}))
    report["run"] = started
    if started["is_error"]:
        return report
    task_id = started["value"]["task_id"]
    report["polls"] = await poll(session, task_id, 120)
    report["diff"] = result(await session.call_tool("ocflow_diff", {"task_id": task_id}))
    report["apply"] = result(await session.call_tool("ocflow_apply", {"task_id": task_id}))
    report["unknown"] = result(
        await session.call_tool("ocflow_status", {"task_id": "no-such-task"})
    )
    report["neither"] = result(await session.call_tool("ocflow_run", {}))
    return report


async def scenario_start_and_leave(session, args):
    """Starts a flow and ends the session while one of its steps runs."""
    started = result(await session.call_tool("ocflow_run", {"task": args["task"]}))
    if not started["is_error"]:
        task_id = started["value"]["task_id"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = result(await session.call_tool("ocflow_status", {"task_id": task_id}))
            if (status["value"] or {}).get("status", {}).get("running_steps"):
                break
            await asyncio.sleep(0.2)
    return {"run": started}


async def scenario_long_poll(session, args):
    """Starts a flow and polls it with `wait_seconds` to its end, as an agent should; once a
    step runs, also polls twice without waiting (which must not answer the same twice)."""
    run = {"task": args["task"], **args.get("run", {})}
    report = {"run": result(await session.call_tool("ocflow_run", run))}
    if report["run"]["is_error"]:
        return report
    task_id = report["run"]["value"]["task_id"]
    polls, quick = [], []
    began = time.monotonic()
    while time.monotonic() - began < 120:
        call = time.monotonic()
        answer = await session.call_tool(
            "ocflow_status", {"task_id": task_id, "wait_seconds": args["wait_seconds"]}
        )
        polls.append(timed(answer, call))
        value = polls[-1]["value"] or {}
        if polls[-1]["is_error"] or not value.get("running", False):
            break
        if not quick and value.get("status", {}).get("running_steps"):
            for _ in range(2):
                call = time.monotonic()
                answer = await session.call_tool("ocflow_status", {"task_id": task_id})
                quick.append(timed(answer, call))
    report["polls"] = polls
    report["quick"] = quick
    report["seconds"] = round(time.monotonic() - began, 2)
    return report


async def scenario_status(session, args):
    """A finished flow's status: compact, in detail, and without a task id (the latest)."""
    report = {}
    for name, arguments in [
        ("compact", {"task_id": args["task_id"]}),
        ("detail", {"task_id": args["task_id"], "detail": True}),
        ("latest", {}),
        ("waited", {"task_id": args["task_id"], "wait_seconds": 30}),
    ]:
        call = time.monotonic()
        report[name] = timed(await session.call_tool("ocflow_status", arguments), call)
    return report


async def scenario_plan(session, args):
    return {"plan": result(await session.call_tool("ocflow_plan", {"task": args["task"]}))}


async def scenario_approve(session, args):
    """Two flows that wait for a person's yes to their plan: one approved, one rejected."""
    report = {}
    run = {"plan": args["plan"], "approve": ["plan"]}
    started = result(await session.call_tool("ocflow_run", run))
    report["run"] = started
    task_id = started["value"]["task_id"]
    report["waiting"] = await poll(session, task_id, 60)
    report["approve"] = result(await session.call_tool("ocflow_approve", {"task_id": task_id}))
    report["approved"] = await poll(session, task_id, 60)
    started = result(await session.call_tool("ocflow_run", run))
    other = started["value"]["task_id"]
    report["other"] = other
    await poll(session, other, 60)
    no = {"task_id": other, "approve": False, "reason": "not this one"}
    report["reject"] = result(await session.call_tool("ocflow_approve", no))
    report["rejected"] = result(await session.call_tool("ocflow_status", {"task_id": other}))
    return report


SCENARIOS = {
    "flow": scenario_flow,
    "start_and_leave": scenario_start_and_leave,
    "plan": scenario_plan,
    "long_poll": scenario_long_poll,
    "status": scenario_status,
    "approve": scenario_approve,
}


async def main():
    scenario, args_file = sys.argv[1], sys.argv[2]
    server = sys.argv[sys.argv.index("--") + 1 :]
    args = json.loads(Path(args_file).read_text(encoding="utf-8"))
    params = StdioServerParameters(command=server[0], args=server[1:], env=args.get("env"))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        report = await SCENARIOS[scenario](session, args)
        report["server"] = {"name": init.server_info.name, "instructions": init.instructions}
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main())
