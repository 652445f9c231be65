"""agentrun fork, show --follow and ls --watch, with real processes: a worker resumes the fork
with a changed agent; a follower streams what another process appends."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _child_agents import lines
from procs import child_env, wait_for
from test_cli import Ran, agentrun, refused, usage

from durableagent import FileStore, Message, RunStatus, submit, view_store

pytestmark = pytest.mark.slow


class Child:
    """An agentrun process whose stdout is read line by line as it comes."""

    def __init__(self, *args: str, log: Path | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "durableagent.cli", *args],
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=open(log, "w") if log else subprocess.PIPE,  # noqa: SIM115
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def until(self, want: str | Callable[[list[str]], bool], timeout: float = 20.0) -> list[str]:
        """Read lines until one holds ``want`` (or ``want(lines)`` holds); every line so far."""
        done = want if callable(want) else lambda seen: any(want in x for x in seen)
        deadline = time.monotonic() + timeout
        while not done(self.seen):
            left = deadline - time.monotonic()
            try:
                line = self.lines.get(timeout=max(left, 0.0)) if left > 0 else None
            except queue.Empty:
                continue
            if line is None:
                why = "exited" if self.proc.poll() is not None else "timed out"
                raise AssertionError(f"{why} waiting for {want!r}; got:\n" + "\n".join(self.seen))
            self.seen.append(line)
        return self.seen

    def rest(self, timeout: float = 20.0) -> tuple[int, list[str], str]:
        """Wait for the exit: its code, every line it printed, its stderr."""
        code = self.proc.wait(timeout)
        while (line := self.lines.get(timeout=timeout)) is not None:
            self.seen.append(line)
        err = self.proc.stderr.read() if self.proc.stderr else ""
        return code, self.seen, err

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def children() -> Iterator[list[Child]]:
    started: list[Child] = []
    yield started
    for c in started:
        c.stop()


def worker(children: list[Child], root: Path, agent: str, log: Path) -> Child:
    c = Child("worker", "--agent", agent, "--store", str(root), "--rescan", "0.5", log=log)
    children.append(c)
    return c


def status(root: Path, run_id: str) -> RunStatus:
    return view_store(FileStore(root), run_id).status


# -- fork ----------------------------------------------------------------------------------


def test_a_fork_resumed_by_a_worker_replays_the_copy_and_runs_the_fixed_agent_from_the_step(
    tmp_path: Path, children: list[Child]
) -> None:
    root = tmp_path / "runs"
    s = str(root)
    assert agentrun("submit", "a1", "I need billing access", "--store", s).code == 0
    v1 = worker(children, root, "_ops_agents:helpdesk_v1", tmp_path / "v1.log")
    wait_for(lambda: status(root, "a1") == RunStatus.AWAITING_APPROVAL, 30, "a1 to ask")
    assert agentrun("approve", "a1", "--all", "--by", "ana", "--store", s).code == 0
    wait_for(lambda: status(root, "a1") == RunStatus.COMPLETED, 30, "a1 to complete")
    v1.stop()
    original = (root / "a1.jsonl").read_bytes()
    assert lines(root, "model") == ["v1 llm/1", "v1 llm/2", "v1 llm/3"]

    r = agentrun(
        "fork", "a1", "--at", "tool/2/0/create_ticket", "--as", "a2",
        "--reason", "tickets move to the new system", "--by", "bo", "--store", s,
    )  # fmt: skip
    assert r.code == 0, r.err
    assert "forked a1 at tool/2/0/create_ticket as a2" in r.out
    assert "kept     approve tool/2/0/create_ticket#" in r.out
    assert "by ana (a2 runs it without asking again)" in r.out

    worker(children, root, "_ops_agents:helpdesk_v2", tmp_path / "v2.log")
    wait_for(lambda: status(root, "a2") == RunStatus.COMPLETED, 30, "a2 to complete")

    # The model was called for llm/3 only; the lookup replayed; the ticket step ran with v2.
    assert lines(root, "model") == ["v1 llm/1", "v1 llm/2", "v1 llm/3", "v2 llm/3"]
    assert lines(root, "lookups") == ["v1"]
    assert lines(root, "tickets") == ["v1", "v2"]
    view = view_store(FileStore(root), "a2")
    assert view.answer is not None and view.answer.content == "v2: filed NEW-1"
    assert (root / "a1.jsonl").read_bytes() == original

    shown = agentrun("show", "a2", "--store", s).out
    assert (
        "lineage  forked from a1 at tool/2/0/create_ticket (seq 8) by bo: "
        "tickets move to the new system"
    ) in shown
    assert "forks    a2" in agentrun("show", "a1", "--store", s).out
    (a2,) = [
        json.loads(x)
        for x in agentrun("ls", "--json", "--store", s).out.splitlines()
        if json.loads(x)["run_id"] == "a2"
    ]
    assert a2["forked_from"] == {
        "run": "a1",
        "seq": 8,
        "step": "tool/2/0/create_ticket",
        "by": "bo",
        "reason": "tickets move to the new system",
        "copied": 7,
    }
    shown_json = json.loads(agentrun("show", "a1", "--json", "--store", s).out)
    assert shown_json["forks"] == ["a2"] and shown_json["forked_from"] is None


# A forker killed (SIGKILL) after its fourth append: the real write_fork, cut short.
KILLED_FORKER = """
import os, signal, sys
from durableagent import FileStore, fork

class Dying:
    def __init__(self, store):
        self.store, self.appends = store, 0
    def append(self, *args, **kwargs):
        if self.appends == 4:
            os.kill(os.getpid(), signal.SIGKILL)
        self.appends += 1
        return self.store.append(*args, **kwargs)
    def __getattr__(self, name):
        return getattr(self.store, name)

fork(Dying(FileStore(sys.argv[1])), "a1", "a2", at_step="llm/3", by="bo", reason="fix")
"""


def test_a_fork_killed_midway_is_never_run_and_the_same_fork_finishes_it(
    tmp_path: Path, children: list[Child]
) -> None:
    root = tmp_path / "runs"
    s = str(root)
    assert agentrun("submit", "a1", "I need billing access", "--store", s).code == 0
    v1 = worker(children, root, "_ops_agents:helpdesk_v1", tmp_path / "v1.log")
    wait_for(lambda: status(root, "a1") == RunStatus.AWAITING_APPROVAL, 30, "a1 to ask")
    assert agentrun("approve", "a1", "--all", "--store", s).code == 0
    wait_for(lambda: status(root, "a1") == RunStatus.COMPLETED, 30, "a1 to complete")

    killed = subprocess.run(
        [sys.executable, "-c", KILLED_FORKER, s], env=child_env(), capture_output=True
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = FileStore(root).load("a2")
    assert len(left) == 4 and left[0].data["forked_from"]["copied"] == 9

    # The worker looks at the store after the kill (it answers a new run) and leaves a2 be.
    assert agentrun("submit", "probe", "hello", "--store", s).code == 0
    wait_for(lambda: status(root, "probe") == RunStatus.AWAITING_APPROVAL, 30, "the probe")
    assert FileStore(root).load("a2") == left
    r = agentrun("show", "a2", "--store", s)
    refused(r, "run a2 is an interrupted fork of a1 at llm/3 (3 of 9 records copied)")
    assert "corrupt" in agentrun("ls", "--store", s).out.split("a2")[0].splitlines()[-1]

    r = agentrun("fork", "a1", "--at", "llm/3", "--as", "a2", "--reason", "again", "--store", s)
    assert r.code == 0 and r.out.startswith("finished the interrupted fork: forked a1"), r
    wait_for(lambda: status(root, "a2") == RunStatus.COMPLETED, 30, "a2 to complete")
    v1.stop()
    assert lines(root, "model").count("v1 llm/3") == 2  # a1's, then a2's: nothing before it
    assert lines(root, "lookups") == ["v1", "v1"]  # a1's and the probe's


def test_fork_refusals_are_one_line_and_name_the_run(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    submit(FileStore(root), "a1", [Message("user", "hi")])

    def fork(run: str, at: str, new: str, *more: str) -> Ran:
        return agentrun("fork", run, "--at", at, "--as", new, *more, "--store", str(root))

    refused(fork("nosuch", "nowhere", "b", "--reason", "x"), "no run 'nosuch'")
    refused(fork("a1", "llm/7", "b", "--reason", "x"), "no step 'llm/7'", "llm/1")
    refused(fork("a1", "llm/1", "a1", "--reason", "x"), "new run id")
    refused(fork("a1", "llm/1", "b c", "--reason", "x"), "invalid run id")
    usage(fork("a1", "llm/1", "b"), "--reason")
    assert fork("a1", "llm/1", "b", "--reason", "x").code == 0
    refused(fork("a1", "llm/1", "b", "--reason", "x"), "run 'b' already exists")


def test_fork_completes_the_steps_a_fork_may_start_at(tmp_path: Path) -> None:
    from test_completion import complete

    from durableagent.demo import build_demo_store

    root = tmp_path / "demo"
    build_demo_store(root)
    offered = complete(f"agentrun fork --store {root} billing-access --at ")
    assert offered[:2] == ["llm/1", "tool/1/0/lookup_policy"] and "llm/3" in offered
    assert complete(f"agentrun fork --store {root} laptop-broken --at tool/2/1") == [
        "tool/2/1/send_email"
    ]
    assert complete(f"agentrun audit --store {root} --run bill") == ["billing-access"]


# -- follow --------------------------------------------------------------------------------


def seqs(output: list[str]) -> list[int]:
    """The seqs of the timeline lines printed."""
    out = []
    for line in output:
        head = line.split()
        if len(head) > 2 and line.startswith("  ") and head[0].isdigit():
            out.append(int(head[0]))
    return out


def test_show_follow_prints_each_record_as_another_process_appends_it(
    tmp_path: Path, children: list[Child]
) -> None:
    root = tmp_path / "runs"
    submit(FileStore(root), "r1", [Message("user", "write it")])
    follower = Child("show", "r1", "--follow", "--store", str(root))
    children.append(follower)
    follower.until("run.started")
    assert status(root, "r1") == RunStatus.READY  # nothing runs it yet: the follower waits

    worker(children, root, "_ops_agents:held", tmp_path / "w.log")
    # The read's start is printed while the read is held open: streamed, not at exit.
    follower.until("step.started   tool/1/0/wait_for_go")
    assert "step.completed tool/1/0/wait_for_go" not in "\n".join(follower.seen)
    (root / ".side").mkdir(exist_ok=True)
    (root / ".side" / "go").touch()
    code, out, err = follower.rest()
    assert code == 0, (out, err)
    assert err == ""
    timeline = seqs(out)
    assert timeline == list(range(1, len(timeline) + 1))  # in order, each once
    assert len(timeline) == len(FileStore(root).load("r1")) == 8
    assert out[-2:] == ["status   ✓ completed", "answer: went"]


def test_show_follow_stops_when_the_run_waits_for_a_human(
    tmp_path: Path, children: list[Child]
) -> None:
    root = tmp_path / "runs"
    submit(FileStore(root), "g1", [Message("user", "file it")])
    follower = Child("show", "g1", "--follow", "--store", str(root))
    children.append(follower)
    follower.until("run.started")
    from procs import WorkerProcess

    w = WorkerProcess(root, "gated", tmp_path / "w.log")
    try:
        code, out, _ = follower.rest(30)
    finally:
        w.stop()
    assert code == 3
    assert "status   ▲ awaiting_approval" in out
    assert any(line.startswith("approve:  agentrun approve g1") for line in out)

    # Already stopped: the timeline, how it stopped, at once.
    r = agentrun("show", "g1", "--follow", "--store", str(root))
    assert r.code == 3 and "awaiting_approval" in r.out


def test_show_follow_json_prints_one_record_per_line(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = FileStore(root)
    submit(store, "g1", [Message("user", "file it")])
    import asyncio

    from _child_agents import gated

    from durableagent import Config, run

    agent = gated(root)
    asyncio.run(run(Config(agent.config, agent.gate, store), "g1", None))
    r = agentrun("show", "g1", "--follow", "--json", "--store", str(root))
    assert r.code == 3
    records = [json.loads(x) for x in r.out.splitlines()]
    assert [x["seq"] for x in records] == [1, 2, 3]
    assert all(x["v"] == 1 and x["run_id"] == "g1" and "at_iso" in x for x in records)


def test_ctrl_c_ends_show_follow_and_ls_watch_quietly(
    tmp_path: Path, children: list[Child]
) -> None:
    root = tmp_path / "runs"
    submit(FileStore(root), "r1", [Message("user", "hi")])
    for args in (["show", "r1", "--follow"], ["ls", "--watch"]):
        c = Child(*args, "--store", str(root))
        children.append(c)
        c.until("r1")
        time.sleep(0.3)  # let it reach the change feed (a SIGINT before is fine too)
        c.proc.send_signal(signal.SIGINT)
        code, _, err = c.rest()
        assert (code, err) == (130, ""), args


def test_ls_watch_prints_a_new_listing_after_a_blank_line_at_each_change(
    tmp_path: Path, children: list[Child]
) -> None:
    root = tmp_path / "runs"
    store = FileStore(root)
    submit(store, "r1", [Message("user", "hi")])
    watcher = Child("ls", "--watch", "--store", str(root))
    children.append(watcher)
    first = list(watcher.until("r1"))
    assert first[0].startswith("STATUS") and "\x1b" not in "".join(first)

    submit(store, "r2", [Message("user", "hello")])
    out = watcher.until(lambda seen: len(seen) == len(first) + 4)
    assert out[len(first)] == "" and out[len(first) + 1].startswith("STATUS")
    assert {line.split()[2] for line in out[len(first) + 2 :]} == {"r1", "r2"}


def test_ls_watch_on_a_terminal_clears_the_screen_and_redraws(tmp_path: Path) -> None:
    import os
    import pty
    import select

    root = tmp_path / "runs"
    submit(FileStore(root), "r1", [Message("user", "hi")])
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "durableagent.cli", "ls", "--watch", "--store", str(root)],
        env=child_env(),
        stdout=slave,
        stderr=subprocess.PIPE,
    )
    os.close(slave)
    seen = b""
    poller = select.poll()
    poller.register(master, select.POLLIN)

    def screen_with(text: bytes) -> bool:
        """Read what is there (never blocking); True once the last screen shows ``text``."""
        nonlocal seen
        if poller.poll(100):  # poll, not select: a long suite's fds pass FD_SETSIZE
            seen += os.read(master, 65536)
        return b"\x1b[H\x1b[2J" in seen and text in seen.rpartition(b"\x1b[2J")[2]

    try:
        wait_for(lambda: screen_with(b"r1"), 20, "the first screen")
        submit(FileStore(root), "r2", [Message("user", "hello")])
        wait_for(lambda: screen_with(b"r2"), 20, "a redrawn screen")
        last = seen.rpartition(b"\x1b[2J")[2]
        assert b"agentrun ls --watch" in last and b"r1" in last
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 130
        os.close(master)
