"""An agent loop over sandboxd: a model is handed a run's tools, asks for
calls, and reads their results until it answers.

Any model fits behind ``Model.next(messages, tools)``. The ScriptedModel
below plays a fixed plan so the example runs offline end to end:

    SANDBOXD_URL=http://127.0.0.1:7788 SANDBOXD_TOKEN=$(cat DATA_DIR/token) \\
        PYTHONPATH=clients/python python3 clients/python/examples/agent_loop.py

A real model is a few lines around its SDK. With Anthropic's, for instance:

    class ClaudeModel:
        def __init__(self, client, model):
            self.client, self.model = client, model
        def next(self, messages, tools):
            msg = self.client.messages.create(model=self.model, max_tokens=4096,
                tools=[t.to_anthropic() for t in tools], messages=to_anthropic_messages(messages))
            calls = [ToolCall(b.id, b.name, b.input) for b in msg.content if b.type == "tool_use"]
            text = "".join(b.text for b in msg.content if b.type == "text")
            return Turn(text=text, calls=calls)

(OpenAI's chat completions take ``[t.to_openai() for t in tools]`` the same way.)
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Protocol

import sandboxd


@dataclass
class ToolCall:
    """One call the model asks for."""

    id: str
    name: str
    args: Dict[str, Any]


@dataclass
class Turn:
    """A model's answer: calls to make, or (no calls) its final text."""

    text: str = ""
    calls: List[ToolCall] = field(default_factory=list)


Message = Dict[str, Any]
"""{"role": "user"|"assistant"|"tool", ...}: a neutral transcript an adapter
turns into its SDK's messages."""


class Model(Protocol):
    def next(self, messages: List[Message], tools: List[sandboxd.ToolSpec]) -> Turn: ...


class ScriptedModel:
    """Plays a fixed plan: write a program, run it, check it in eval, answer.
    It reads each result as a model would, and stops when one is an error."""

    def __init__(self) -> None:
        self._step = 0

    def next(self, messages: List[Message], tools: List[sandboxd.ToolSpec]) -> Turn:
        names = {t.name for t in tools}
        missing = {"write", "shell", "eval"} - names
        if missing:
            return Turn(text=f"I cannot work: the run lacks {sorted(missing)}")
        last = messages[-1]
        if last["role"] == "tool" and last["is_error"]:
            return Turn(text="stopping: a tool failed: " + last["content"])
        self._step += 1
        if self._step == 1:
            program = "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\nprint(f'fib(20) = {fib(20)}')\n"
            return Turn(calls=[ToolCall("c1", "write", {"path": "fib.py", "content": program})])
        if self._step == 2:
            return Turn(calls=[ToolCall("c2", "shell", {"command": "python3 fib.py"})])
        if self._step == 3:
            code = "import subprocess\nout = subprocess.run(['python3', 'fib.py'], capture_output=True, text=True).stdout\nout.strip()"
            return Turn(calls=[ToolCall("c3", "eval", {"code": code, "description": "check the program's output"})])
        return Turn(text="fib.py prints " + last["content"].splitlines()[-1])


def agent_loop(client: sandboxd.Client, run: sandboxd.Run, model: Model, task: str, max_steps: int = 10) -> str:
    """Runs the model on the task with the run's tools; returns its answer."""
    tools = client.list_tools(run.id)
    messages: List[Message] = [{"role": "user", "content": task}]
    for _ in range(max_steps):
        turn = model.next(messages, tools)
        messages.append({"role": "assistant", "content": turn.text, "calls": [c.__dict__ for c in turn.calls]})
        if not turn.calls:
            return turn.text
        for call in turn.calls:
            print(f"-> {call.name} {json.dumps(call.args)[:80]}")
            # Streamed, so a long command's output shows as it runs.
            result = client.call_tool_stream(
                run.id, call.name, call.args, lambda ev: print(f"   [{ev.stream}] {ev.text}", end="")
            )
            print(f"<- {'error: ' if result.is_error else ''}{result.text[:200]}")
            messages.append({"role": "tool", "id": call.id, "content": result.text, "is_error": result.is_error})
    return "stopped: the step budget ran out"


def main() -> int:
    image: Optional[str] = os.environ.get("SANDBOXD_IMAGE") or None
    conversation = "agent-loop-" + uuid.uuid4().hex[:8]
    with sandboxd.Client() as client:
        sandbox = client.create_sandbox(conversation, image=image)
        try:
            run = client.create_run(conversation)
            try:
                answer = agent_loop(client, run, ScriptedModel(), "Write fib.py printing fib(20), run it, and check it.")
            finally:
                client.delete_run(run.id)
        finally:
            client.delete_sandbox(sandbox.id)
    print("done:", answer)
    return 1 if answer.startswith(("stopping", "stopped", "I cannot")) else 0


if __name__ == "__main__":
    sys.exit(main())
