"""PostgresStore figures, each against a baseline measured in the same run on the same server.

    python bench/bench_postgres.py [--url URL] [--runs 100000] [--steps 200] [--signals 20]

1. append: PostgresStore.append vs a raw single-row INSERT (autocommit: the INSERT and its
   COMMIT in one round trip), and vs INSERT then COMMIT in a transaction; medians of
   interleaved samples, target <= 1.5x; round trips counted in libpq's protocol trace.
2. per durable step: this library on PostgreSQL vs DBOS Transact on the same server (its own
   schema): one workflow of N steps, each a function returning a value.
3. agentrun ls on 100,000 runs (bulk-loaded with COPY, not 100,000 run() calls): wall time
   and peak RSS of the process; targets <= 1 s and <= 150 MB.
4. a signal from another process -> the worker resumes the run, vs the raw NOTIFY latency
   of the same signal; target <= 150 ms over it.

URL defaults to $AGENTRUN_TEST_PG, else postgresql://postgres@127.0.0.1:5432/test. Each part
works in a schema of its own, dropped at the end. Needs the postgres extra; part 2 needs DBOS
(`pip install dbos`), which durableagent does not depend on: without it that part says so.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from durableagent import (
    Agent,
    AgentConfig,
    Journal,
    Message,
    Outcome,
    Pending,
    PolicyGate,
    Record,
    RunStatus,
    ScriptedModel,
    Status,
    StepKind,
    Tool,
    ToolCall,
    marker_for,
    signal,
    submit,
)
from durableagent.fold import Fold
from durableagent.record import encode_line
from durableagent.stores.postgres import PostgresStore
from durableagent.stores.postgres.append import dumps, summary_args

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
HERE = Path(__file__).resolve().parent
M = statistics.median


@contextlib.contextmanager
def scratch_schema(url: str, what: str) -> Iterator[str]:
    name = f"bench_{what}_{secrets.token_hex(4)}"
    try:
        yield name
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def store_url(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


# -- 1. append vs a raw INSERT ----------------------------------------------------------------


def round_trips(borrow: Callable[[], Any], fn: Callable[[], object]) -> int:
    """Round trips ``fn`` makes on the connection ``borrow()`` lends (a context manager),
    read in libpq's protocol trace: each Sync (or simple Query) the client sends is a point
    where it waits for the server's ReadyForQuery. (Counting turns between sending and
    receiving overcounts: the server starts answering a pipeline before its Sync is sent.)"""
    with tempfile.NamedTemporaryFile("w+") as f:
        with borrow() as conn:
            conn.pgconn.trace(os.dup(f.fileno()))
        try:
            fn()
        finally:
            with borrow() as conn:
                conn.pgconn.untrace()
        text = Path(f.name).read_text()
    sent = [line.split("\t") for line in text.splitlines() if line.count("\t") >= 3]
    return sum(1 for p in sent if p[1] == "F" and p[3].split()[0] in ("Sync", "Query"))


def bench_append(url: str, n: int = 1500) -> None:
    with scratch_schema(url, "append") as schema:
        # One pooled connection: the one whose protocol trace is read.
        store = PostgresStore(url, schema=schema, pool_size=1)
        rec = Record.make(
            "step.completed",
            "tool/1/0/lookup",
            "tool",
            {"content": "Access needs a ticket approved by IT. " * 3, "is_error": False},
        )
        store.append("a", Record.make("run.started", data={"input": [{"role": "user"}]}))
        line = encode_line(rec, 2)[:-1]
        raw = psycopg.connect(url, autocommit=True)
        tx = psycopg.connect(url)
        table = sql.Identifier(schema, "raw")
        create = "CREATE TABLE {} (k text, seq bigint, line bytea, PRIMARY KEY (k, seq))"
        raw.execute(sql.SQL(create).format(table))
        insert = sql.SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(table)
        seq = iter(range(10**9))
        for _ in range(20):  # warm: prepared statements, caches
            store.append("a", rec)
            raw.execute(insert, ("r", next(seq), line))
        ours, auto, txn = [], [], []
        for _ in range(n):  # interleaved, so all three see the same server weather
            t = time.perf_counter()
            store.append("a", rec)
            ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            raw.execute(insert, ("r", next(seq), line))
            auto.append(time.perf_counter() - t)
            t = time.perf_counter()
            tx.execute(insert, ("t", next(seq), line))
            tx.commit()
            txn.append(time.perf_counter() - t)
        pooled = store._db.connection
        rt_ours = round_trips(pooled, lambda: store.append("a", rec))
        rt_check = round_trips(pooled, lambda: store.append("a", rec, check=lambda r: None))
        rt_auto = round_trips(
            lambda: contextlib.nullcontext(raw), lambda: raw.execute(insert, ("r", next(seq), line))
        )
        rt_txn = round_trips(
            lambda: contextlib.nullcontext(tx),
            lambda: (tx.execute(insert, ("t", next(seq), line)), tx.commit()),
        )
        m_ours, m_auto, m_txn = M(ours), M(auto), M(txn)
        print("1. append (medians of interleaved samples)")
        print(f"   raw INSERT, autocommit       {m_auto * 1e6:7.0f} µs   {rt_auto} round trip(s)")
        print(f"   raw INSERT then COMMIT       {m_txn * 1e6:7.0f} µs   {rt_txn} round trip(s)")
        print(
            f"   PostgresStore.append         {m_ours * 1e6:7.0f} µs   {rt_ours} round trip(s) "
            f"({rt_check} with a check)"
        )
        print(
            f"   ratio vs autocommit INSERT   {m_ours / m_auto:.2f}x (<= 1.5)   "
            f"vs INSERT+COMMIT {m_ours / m_txn:.2f}x"
        )
        raw.close()
        tx.close()
        store.close()


# -- 2. per durable step: this library vs DBOS Transact ---------------------------------------


def ours_per_step(url: str, steps: int, rounds: int) -> float:
    with scratch_schema(url, "steps") as schema:
        store = PostgresStore.from_url(store_url(url, schema))

        async def workflow(run_id: str) -> None:
            store.append(run_id, Record.make("run.started", data={"input": []}))
            with store.lease(run_id) as lease:
                journal = Journal(store, run_id, store.load(run_id), lease=lease)
                for i in range(steps):

                    async def fn(i: int = i) -> int:
                        return i

                    await journal.run_step(f"tool/1/{i}/step", StepKind.TOOL, fn)

        times = []
        for r in range(rounds + 1):
            t = time.perf_counter()
            asyncio.run(workflow(f"w{r}"))
            if r:  # the first round warms up
                times.append((time.perf_counter() - t) / steps)
        store.close()
        return M(times)


DBOS_CHILD = """
import json, sys, time
from dbos import DBOS
url, schema, steps, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
DBOS(config={"name": "durableagent-bench", "system_database_url": url,
             "dbos_system_schema": schema, "log_level": "WARNING"})

@DBOS.step()
def step(i: int) -> int:
    return i

@DBOS.workflow()
def workflow(n: int) -> int:
    total = 0
    for i in range(n):
        total += step(i)
    return total

DBOS.launch()
times = []
for r in range(rounds + 1):
    t = time.perf_counter()
    workflow(steps)
    if r:
        times.append((time.perf_counter() - t) / steps)
DBOS.destroy()
print(json.dumps(times))
"""


def dbos_per_step(url: str, steps: int, rounds: int) -> float | None:
    try:
        import dbos  # noqa: F401
    except ImportError:
        return None
    import json

    with scratch_schema(url, "dbos") as schema:
        # Its own process: DBOS configures logging and threads for the whole interpreter.
        p = subprocess.run(
            [sys.executable, "-c", DBOS_CHILD, url, schema, str(steps), str(rounds)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if p.returncode != 0:
            raise SystemExit(f"DBOS run failed:\n{p.stderr}")
        return M(json.loads(p.stdout.strip().splitlines()[-1]))


def bench_steps(url: str, steps: int, rounds: int = 5) -> None:
    ours = ours_per_step(url, steps, rounds)
    theirs = dbos_per_step(url, steps, rounds)
    print(f"2. per durable step ({steps} steps per workflow, median of {rounds} workflows)")
    print(f"   durableagent on PostgreSQL   {ours * 1e6:7.0f} µs per step")
    if theirs is None:
        print("   DBOS Transact: not installed (pip install dbos) - not measured")
        return
    print(f"   DBOS Transact on PostgreSQL  {theirs * 1e6:7.0f} µs per step")
    faster, slower = ("durableagent", "DBOS") if ours < theirs else ("DBOS", "durableagent")
    print(f"   {faster} is faster: {max(ours, theirs) / min(ours, theirs):.1f}x ({slower} slower)")


# -- 3. agentrun ls on 100,000 runs ------------------------------------------------------------


def journal(state: str) -> tuple[list[bytes], Fold, Outcome | None]:
    """One run's lines, its fold and its last outcome, for a state of the listing."""
    now = time.time() - 3600
    user = {"role": "user", "content": "I need access to the billing dashboard."}
    call = ToolCall("c1", "create_ticket", {"summary": "billing"})
    marker = marker_for("tool/1/0/create_ticket", call.arguments)
    records = [
        Record(0, "run.started", "", "", {"input": [user]}, now),
        Record(0, "step.started", "llm/1", "model", {}, now + 1),
        Record(
            0,
            "step.completed",
            "llm/1",
            "model",
            Message("assistant", tool_calls=(call,)).to_dict(),
            now + 2,
        ),
    ]
    outcome = None
    if state == "awaiting":
        pending = Pending(marker, "tool/1/0/create_ticket", "create_ticket", call.arguments)
        outcome = Outcome(Status.AWAITING_APPROVAL, pending=(pending,), seq=3)
    if state in ("indeterminate", "completed"):
        records.append(
            Record(0, "step.started", "tool/1/0/create_ticket", "tool", {"write": True}, now + 3)
        )
    if state == "completed":
        answer = {"role": "assistant", "content": "ok"}
        records += [
            Record(
                0,
                "step.completed",
                "tool/1/0/create_ticket",
                "tool",
                {"content": "T-1", "is_error": False},
                now + 4,
            ),
            Record(0, "step.started", "llm/2", "model", {}, now + 5),
            Record(0, "step.completed", "llm/2", "model", answer, now + 6),
            Record(0, "run.completed", "", "", {"message": answer}, now + 7),
        ]
    lines, f = [], Fold()
    for seq, r in enumerate(records, 1):
        lines.append(encode_line(r, seq)[:-1])
        f.add(Record(seq, r.type, r.step, r.kind, r.data, r.at))
    return lines, f, outcome


def bulk_load(store: PostgresStore, n: int) -> None:
    """n runs in four states, written with COPY in one transaction."""
    from psycopg.types.json import Jsonb

    states = ["completed", "awaiting", "indeterminate", "ready"]
    shapes = {s: journal(s) for s in states}
    with store._db.connection() as conn, conn.transaction(), conn.cursor() as cur:
        with cur.copy("COPY records (run_id, seq, line) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["text", "int8", "bytea"])
            for i in range(n):
                lines = shapes[states[i % 4]][0]
                run_id = f"run-{i:06d}"
                for seq, line in enumerate(lines, 1):
                    copy.write_row((run_id, seq, line))
        names = list(summary_args("r", Fold(), None))
        columns = ", ".join(["run_id", "last_seq", "version", "fold", "outcome", *names])
        types = ["text", "int8", "int8", "text", "jsonb", "text", "int4", "int4", "float8"]
        types += ["float8", "text", "text", "text", "text", "text", "int4", "text"]
        with cur.copy(f"COPY runs ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(types)
            for i in range(n):
                lines, f, outcome = shapes[states[i % 4]]
                run_id = f"run-{i:06d}"
                summary = summary_args(run_id, f, outcome)
                done = None if outcome is None else Jsonb(outcome.to_dict())
                copy.write_row((run_id, len(lines), 1, dumps(f.to_json()), done, *summary.values()))
    with store._db.connection() as conn:
        conn.execute("VACUUM ANALYZE runs")
        conn.execute("VACUUM ANALYZE records")


def bench_ls(url: str, n: int) -> None:
    with scratch_schema(url, "ls") as schema:
        spec = store_url(url, schema)
        store = PostgresStore.from_url(spec)
        t = time.perf_counter()
        bulk_load(store, n)
        built = time.perf_counter() - t
        summaries = store.summaries()
        assert len(summaries) == n
        counts = {str(s): sum(1 for x in summaries if x.status == s) for s in RunStatus}
        walls, rss = [], []
        for _ in range(3):
            t = time.perf_counter()
            p = subprocess.Popen(
                [sys.executable, "-m", "durableagent.cli", "ls", "--store", spec],
                stdout=subprocess.DEVNULL,
            )
            _, status, usage = os.wait4(p.pid, 0)
            walls.append(time.perf_counter() - t)
            assert os.waitstatus_to_exitcode(status) == 0
            rss.append(usage.ru_maxrss / 1024)  # kB on Linux
        t = time.perf_counter()
        store.summaries()
        in_process = time.perf_counter() - t
        store.close()
    shown = ", ".join(f"{k} {v}" for k, v in counts.items() if v)
    print(f"3. agentrun ls on {n:,} runs ({shown}; bulk-loaded in {built:.1f} s)")
    print(f"   wall (process start to exit) {min(walls):7.2f} s (<= 1)   median {M(walls):.2f} s")
    print(f"   peak RSS                     {max(rss):7.0f} MB (<= 150)")
    print(f"   summaries() in a process     {in_process:7.2f} s")


# -- 4. signal -> worker, vs the raw NOTIFY ---------------------------------------------------


def agent(root: object) -> Agent:
    """One gated write, then the answer (the bench's worker runs this)."""

    def reply(messages: Sequence[Message]) -> Message:
        if not any(m.role == "tool" for m in messages):
            return Message("assistant", tool_calls=(ToolCall("t", "create_ticket", {"n": 1}),))
        return Message("assistant", "filed")

    tool = Tool("create_ticket", "file a ticket", {"type": "object"}, lambda a: "TICKET-1")
    return Agent(AgentConfig(ScriptedModel(reply), [tool]), PolicyGate(writes={"create_ticket"}))


def bench_signal(url: str, runs: int) -> None:
    with scratch_schema(url, "signal") as schema:
        spec = store_url(url, schema)
        store = PostgresStore.from_url(spec)
        ids = [f"sig-{i:02d}" for i in range(runs)]
        for run_id in ids:
            submit(store, run_id, [Message("user", f"ticket {run_id}")])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
        cmd = [sys.executable, "-m", "durableagent.cli", "worker", "--agent"]
        cmd += ["bench_postgres:agent", "--store", spec]
        proc = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
        heard: dict[str, float] = {}
        armed: set[str] = set()
        stop = threading.Event()

        def listen() -> None:
            # The raw notification, timed the moment psycopg hands it over, in a thread.
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(store._channel)))
                while not stop.is_set():
                    for n in conn.notifies(timeout=0.2):
                        if n.payload in armed and n.payload not in heard:
                            heard[n.payload] = time.time()

        listener = threading.Thread(target=listen, daemon=True)
        try:

            def wait_until(check: Callable[[], bool], timeout: float = 60) -> None:
                deadline = time.monotonic() + timeout
                while not check():
                    if time.monotonic() > deadline:
                        raise SystemExit("bench: timed out (is the worker running?)")
                    time.sleep(0.001)

            def status(r: str) -> RunStatus | None:
                s = store.summary(r)
                return None if s is None else s.status

            wait_until(lambda: all(status(r) == RunStatus.AWAITING_APPROVAL for r in ids))
            listener.start()
            time.sleep(0.5)
            raw, worker = [], []
            for run_id in ids:
                pending = store.summary(run_id).pending[0]  # type: ignore[union-attr]
                armed.add(run_id)
                t0 = time.time()
                sig = signal(store, run_id, "approve", {"marker": pending.marker}, by="bench")
                wait_until(lambda r=run_id: r in heard)
                wait_until(lambda r=run_id, n=sig.seq: len(store.load(r)) > n)
                raw.append(heard[run_id] - t0)
                worker.append(store.load(run_id)[sig.seq].at - t0)
                wait_until(lambda r=run_id: status(r) == RunStatus.COMPLETED)
                time.sleep(0.05)
        finally:
            stop.set()
            proc.terminate()
            proc.wait(15)
            store.close()
    print(f"4. signal -> worker ({runs} runs, medians)")
    print(f"   raw NOTIFY heard             {M(raw) * 1e3:7.1f} ms")
    print(f"   worker's first new record    {M(worker) * 1e3:7.1f} ms")
    print(f"   worker adds                  {(M(worker) - M(raw)) * 1e3:7.1f} ms (<= 150)")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default=os.environ.get("AGENTRUN_TEST_PG") or DEFAULT_URL)
    ap.add_argument("--runs", type=int, default=100_000, help="runs for the ls figure")
    ap.add_argument("--steps", type=int, default=200, help="steps per workflow")
    ap.add_argument("--signals", type=int, default=20, help="runs for the signal figure")
    ap.add_argument("--only", type=int, choices=(1, 2, 3, 4), action="append")
    args = ap.parse_args(argv)
    parts = {
        1: lambda: bench_append(args.url),
        2: lambda: bench_steps(args.url, args.steps),
        3: lambda: bench_ls(args.url, args.runs),
        4: lambda: bench_signal(args.url, args.signals),
    }
    for k in args.only or sorted(parts):
        parts[k]()
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
