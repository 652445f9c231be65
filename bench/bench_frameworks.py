"""Per step, a Pydantic AI agent made durable by durableagent against the same agent run
plainly, and against Pydantic AI's own durable engines, measured in one run.

    python bench/bench_frameworks.py [--turns 40] [--rounds 7] [--dir DIR] [--only NAME ...]

Run it with an interpreter that has the engines installed next to this library, e.g.

    python3 -m venv /tmp/benchvenv && /tmp/benchvenv/bin/pip install -e '.[pydantic-ai]' \\
        'pydantic-ai-slim[dbos,prefect]==2.68.0'
    /tmp/benchvenv/bin/python bench/bench_frameworks.py

An engine that is not installed, or does not start, is reported as such with why; the rest
still runs.

The workload: one Pydantic AI agent on its ``FunctionModel`` (no I/O), N turns (default 40),
each a model request asking for one tool call, then the answer: 2N+1 steps a run, a fresh run
(run id, workflow, flow) per round. The tool is a read (``lookup``, ~100 bytes back) or a
write (``file``). Per step = the run's wall time / (2N+1), its start and end included.

- plain: ``agent.run()``, nothing durable: the framework's own cost.
- ours (read / write): ``durable(agent)`` run by ``durableagent.run()`` on a FileStore (the
  write: ``durable(agent, writes=["file"], approve=["nobody"])``, a write nobody gates). The
  fsyncs are counted (``os.fsync`` is the only way our store syncs): at most one per read
  step, two per write step (its start is fsynced before the tool runs). They are printed a
  turn (a model step and a tool step: 2 for a read, 3 for a write), the run's own few (its
  journal file made, its end, its outcome saved) apart: those of a run of no turn, taken off.
- DBOS: Pydantic AI's ``DBOSDurability``, ``agent.run()`` inside a ``@DBOS.workflow``, the
  system database SQLite on a file (``sqlite:///FILE``; its synchronous setting as DBOS
  leaves it).
- sdk-plain, sdk-ours-read, sdk-ours-write: the same workload as an OpenAI Agents SDK agent on
  a ``Model`` of no I/O, run by ``Runner.run`` plainly and made durable by
  ``durableagent.integrations.openai_agents.durable`` (extra ``openai-agents``).
- Prefect: Pydantic AI's ``PrefectDurability``, ``agent.run()`` inside a ``@flow``. Prefect
  does not run without a server: with no ``PREFECT_API_URL`` it starts a temporary API server
  of its own (uvicorn on SQLite, in a subprocess) and talks to it over HTTP; that is what is
  measured (printed), its per-task INFO logging turned down to warnings.

Each contestant runs in a child process of its own (the engines set up logging, threads and
databases for the whole interpreter), set up and warmed by one run first; the rounds are
interleaved (one run of each contestant per round, the order rotated) so that all see the
same machine. A figure is the median over rounds; a ratio the median of the per-round ratios.
Scratch files go under --dir (default: the current directory, a real disk: not a tmpfs, where
fsync is free) and are removed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CONTESTANTS = (
    "plain",
    "ours-read",
    "ours-write",
    "dbos",
    "prefect",
    "sdk-plain",
    "sdk-ours-read",
    "sdk-ours-write",
)
LOOKUP = "x" * 100


def agent_for(name: str, turns: int, capabilities: list[Any] | None = None) -> Any:
    """The benchmark's agent: ``turns`` tool calls, then the answer."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def brain(messages: list[Any], info: AgentInfo) -> ModelResponse:
        done = sum(1 for m in messages if isinstance(m, ModelResponse))
        if done >= turns:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart(name, {"n": done}, tool_call_id=f"c{done}")])

    agent = Agent(FunctionModel(brain), name="bench", capabilities=capabilities or [])

    @agent.tool_plain
    async def lookup(n: int) -> str:
        return LOOKUP

    @agent.tool_plain
    async def file(n: int) -> str:
        return LOOKUP

    return agent


def sdk_agent_for(name: str, turns: int) -> Any:
    """The same workload as an OpenAI Agents SDK agent, on a Model of no I/O: ``turns`` tool
    calls, then the answer."""
    from agents import Agent, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    set_tracing_disabled(True)

    class Brain(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            items = kwargs.get("input", args[1] if len(args) > 1 else [])
            done = sum(
                1 for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"
            )
            usage = Usage(requests=1, input_tokens=50, output_tokens=7, total_tokens=57)
            if done >= turns:
                text = ResponseOutputText(type="output_text", text="done", annotations=[])
                out: Any = ResponseOutputMessage(
                    id="m", type="message", role="assistant", status="completed", content=[text]
                )
            else:
                out = ResponseFunctionToolCall(
                    type="function_call",
                    call_id=f"c{done}",
                    name=name,
                    arguments=f'{{"n": {done}}}',
                )
            return ModelResponse(output=[out], usage=usage, response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    async def lookup(n: int) -> str:
        """Look up."""
        return LOOKUP

    @function_tool
    async def file(n: int) -> str:
        """File."""
        return LOOKUP

    return Agent("bench", model=Brain(), tools=[lookup, file])


class Fsyncs:
    """Counts os.fsync calls (our store's only way to sync)."""

    def __init__(self) -> None:
        self.n = 0
        real = os.fsync

        def counting(fd: int) -> None:
            self.n += 1
            real(fd)

        os.fsync = counting  # type: ignore[assignment]


async def child(name: str, turns: int, scratch: Path) -> None:
    """One contestant: set up, warm up, then one run per ``go`` line on stdin, each answered
    with its seconds, CPU seconds and fsyncs as JSON."""
    tool = "file" if name.endswith("ours-write") else "lookup"
    run_once: Any
    if name == "sdk-plain":
        from agents import Runner

        sdk = sdk_agent_for(tool, turns)

        async def run_once(i: int) -> None:
            await Runner.run(sdk, "go", max_turns=turns + 2)

    elif name.startswith("sdk-ours"):
        from durableagent import Config, FileStore, Message, run
        from durableagent.integrations.openai_agents import durable as sdk_durable

        store = FileStore(scratch / "runs")
        made = (
            sdk_durable(
                sdk_agent_for(tool, turns), writes=["file"], approve=["nobody"], max_turns=turns + 1
            )
            if tool == "file"
            else sdk_durable(sdk_agent_for(tool, turns), max_turns=turns + 1)
        )
        config = Config(made.config, made.gate, store)

        async def run_once(i: int) -> None:
            out = await run(config, f"r{i}", [Message("user", "go")])
            assert out.status == "completed", out

        await run_once(-2)
        frame = sdk_durable(sdk_agent_for(tool, 0))
        counting = Fsyncs()
        out = await run(Config(frame.config, frame.gate, store), "frame", [Message("user", "go")])
        assert out.status == "completed", out
        print(json.dumps({"frame": counting.n}), flush=True)

    elif name == "plain":
        agent = agent_for(tool, turns)

        async def run_once(i: int) -> None:
            await agent.run("go")

    elif name.startswith("ours"):
        from durableagent import Config, FileStore, Message, run
        from durableagent.integrations.pydantic_ai import durable

        store = FileStore(scratch / "runs")
        pyd = agent_for(tool, turns)
        made = (
            durable(pyd, writes=["file"], approve=["nobody"], max_turns=turns + 1)
            if tool == "file"
            else durable(pyd, max_turns=turns + 1)
        )
        config = Config(made.config, made.gate, store)

        async def run_once(i: int) -> None:
            out = await run(config, f"r{i}", [Message("user", "go")])
            assert out.status == "completed", out

        # What a run costs besides its turns (its journal file made, run.completed, the saved
        # outcome, the one model step that answers): a run of no turn at all.
        await run_once(-2)  # first, so that the folders a store makes once are made
        frame = durable(agent_for(tool, 0))
        counting = Fsyncs()
        out = await run(Config(frame.config, frame.gate, store), "frame", [Message("user", "go")])
        assert out.status == "completed", out
        print(json.dumps({"frame": counting.n}), flush=True)

    elif name == "dbos":
        from dbos import DBOS
        from pydantic_ai.durable_exec.dbos import DBOSDurability

        DBOS(config={"name": "bench", "system_database_url": f"sqlite:///{scratch}/dbos.sqlite"})
        agent = agent_for(tool, turns, [DBOSDurability()])

        @DBOS.workflow()
        async def workflow(prompt: str) -> str:
            return str((await agent.run(prompt)).output)

        DBOS.launch()

        async def run_once(i: int) -> None:
            await workflow("go")

    elif name == "prefect":
        from prefect import flow
        from prefect.settings import PREFECT_API_URL
        from pydantic_ai.durable_exec.prefect import PrefectDurability

        agent = agent_for(tool, turns, [PrefectDurability()])
        api = PREFECT_API_URL.value()
        said = f"API {api}" if api else "no API configured: Prefect's own temporary server"
        print(json.dumps({"note": said}), flush=True)

        @flow(persist_result=True)
        async def workflow(prompt: str) -> str:
            return str((await agent.run(prompt)).output)

        async def run_once(i: int) -> None:
            await workflow("go")

    else:
        raise SystemExit(f"no contestant {name!r}")

    counter = Fsyncs()
    await run_once(-1)  # warm: the store's folders, the engine's tables exist after it
    print(json.dumps({"ready": True}), flush=True)
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line.strip():
            return
        i = int(line.split()[1])
        counter.n = 0
        cpu, t = time.process_time(), time.perf_counter()
        await run_once(i)
        took, cpu = time.perf_counter() - t, time.process_time() - cpu
        print(json.dumps({"seconds": took, "cpu": cpu, "fsyncs": counter.n}), flush=True)


class Child:
    """A contestant's process, driven one run at a time."""

    def __init__(self, name: str, turns: int, scratch: Path) -> None:
        self.name = name
        self.notes: list[str] = []
        self.frame = 0  # fsyncs a run of no turn makes (ours only)
        scratch.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        if name == "prefect":
            # Prefect runs every flow against an API server: with none configured it starts a
            # temporary one (uvicorn on SQLite, a subprocess) and waits for it; on a loaded
            # machine its default wait is too short. Its INFO lines per task are turned down
            # to warnings: the others log nothing per step either.
            env.setdefault("PREFECT_HOME", str(scratch / "prefect-home"))
            env.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "300")
            env.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--child",
                name,
                "--turns",
                str(turns),
                "--dir",
                str(scratch),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(scratch / "stderr.log", "w"),  # noqa: SIM115 - the child's whole life
            text=True,
            cwd=scratch,
            env=env,
        )
        self.error = ""
        reply = self._read()
        if not reply.get("ready"):
            self.error = self._why(scratch)

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                return {}
            try:
                reply = json.loads(line)
            except ValueError:
                continue  # an engine's own print
            if "note" in reply:
                self.notes.append(reply["note"])
                continue
            if "frame" in reply:
                self.frame = int(reply["frame"])
                continue
            return dict(reply)

    def _why(self, scratch: Path) -> str:
        self.proc.kill()
        lines = (scratch / "stderr.log").read_text().strip().splitlines()
        return lines[-1] if lines else f"exited {self.proc.wait()}"

    def go(self, i: int) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"go {i}\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--dir", default=".")
    parser.add_argument("--only", nargs="*", default=list(CONTESTANTS), choices=CONTESTANTS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(child(args.child, args.turns, Path(args.dir)))
        return 0

    steps = 2 * args.turns + 1
    root = Path(tempfile.mkdtemp(prefix="bench-frameworks-", dir=args.dir))
    children: dict[str, Child] = {}
    try:
        for name in args.only:
            c = Child(name, args.turns, root / name)
            if c.error:
                print(f"{name:14} not measured: {c.error}")
                c.close()
            else:
                children[name] = c
        names = list(children)
        per_step: dict[str, list[float]] = {n: [] for n in names}
        cpu: dict[str, list[float]] = {n: [] for n in names}
        fsyncs: dict[str, list[float]] = {n: [] for n in names}
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for n in order:
                got = children[n].go(r)
                if not got:
                    raise SystemExit(f"{n} died: {(root / n / 'stderr.log').read_text()[-500:]}")
                per_step[n].append(got["seconds"] / steps)
                cpu[n].append(got["cpu"] / steps)
                fsyncs[n].append((got["fsyncs"] - children[n].frame) / args.turns)
        print(
            f"A Pydantic AI agent on FunctionModel (and an Agents SDK agent on a Model of no I/O: "
            f"sdk-*), {args.turns} tool calls a run ({steps} steps), "
            f"{args.rounds} rounds interleaved; medians per step"
        )
        for n in names:
            m = statistics.median(per_step[n])
            line = (
                f"  {n:14} {m * 1e6:8.0f} µs/step   cpu {statistics.median(cpu[n]) * 1e6:7.0f} µs"
            )
            if "ours" in n:
                line += (
                    f"   fsyncs a turn {statistics.median(fsyncs[n]):.2f} (a model step and a "
                    f"{n.split('ours-')[1]} step; +{children[n].frame} a run: its file, end, "
                    "outcome)"
                )
            print(line + "".join(f"   ({note})" for note in children[n].notes))

        def ratio(a: str, b: str) -> str:
            if a not in per_step or b not in per_step:
                return "n/a"
            rs = [x / y for x, y in zip(per_step[a], per_step[b], strict=True)]
            return f"{statistics.median(rs):.2f}x"

        if "plain" in per_step:
            for ours in ("ours-read", "ours-write"):
                if ours in per_step:
                    extra = [o - p for o, p in zip(per_step[ours], per_step["plain"], strict=True)]
                    print(
                        f"  journal's cost, {ours}: {statistics.median(extra) * 1e6:+.0f} µs/step "
                        f"over plain ({ratio(ours, 'plain')} plain)"
                    )
        if "sdk-plain" in per_step:
            for ours in ("sdk-ours-read", "sdk-ours-write"):
                if ours in per_step:
                    extra = [
                        o - p for o, p in zip(per_step[ours], per_step["sdk-plain"], strict=True)
                    ]
                    print(
                        f"  journal's cost, {ours}: {statistics.median(extra) * 1e6:+.0f} µs/step "
                        f"over sdk-plain ({ratio(ours, 'sdk-plain')} sdk-plain)"
                    )
        for peer in ("dbos", "prefect"):
            print(
                f"  {peer} / ours-read per step: {ratio(peer, 'ours-read')}   "
                f"{peer} / ours-write: {ratio(peer, 'ours-write')}"
            )
    finally:
        for c in children.values():
            c.close()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
