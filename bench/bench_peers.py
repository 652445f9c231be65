"""Per durable step against DBOS and LangGraph in their durable settings, measured in one run.

    python bench/bench_peers.py [--steps 100] [--rounds 9] [--url URL] [--dir DIR]
                                [--only files|postgres] [--no-count]

Run it with an interpreter that has the peers installed next to this library, e.g.

    python3 -m venv /tmp/benchvenv && /tmp/benchvenv/bin/pip install -e '.[postgres]' \\
        dbos langgraph langgraph-checkpoint-sqlite langgraph-checkpoint-postgres
    /tmp/benchvenv/bin/python bench/bench_peers.py

durableagent depends on none of them: a peer that is not installed is reported as such and
the rest still runs.

The workload: one workflow of N steps (default 100), each step a function returning a small
JSON value (a lookup's result, ~100 bytes), a fresh workflow (run, thread, workflow id) per
round. Per step = the workflow's wall time / N, its start and finish included (our new
journal file, DBOS's workflow status row, LangGraph's input checkpoint: one each per
workflow). Next to each: ``cpu``, the CPU time of the contestant's process (all threads) per
step, which tells its own work from waiting on the disk or the server; and a floor measured
in this process in each round: N raw write+fsync of a journal-sized line (files), N
autocommit INSERTs of such a row, one synchronous commit each (PostgreSQL).

- ours: ``Journal.run_step`` on a lease, a read step each (its start is appended unsynced,
  its result fsynced before it is returned: one fsync a step), and the same with write steps
  (the start is fsynced too, before the function runs: two).
- LangGraph: a loop graph of one node (it returns the lookup and the next counter; a
  conditional edge loops to N), ``invoke(..., durability="sync")``: each superstep's writes
  and checkpoint are saved before the next step starts. On files: ``SqliteSaver`` on a
  file (it sets ``journal_mode=WAL``; ``synchronous`` stays the connection's default, which
  the output prints: FULL means every commit fsyncs the WAL). On PostgreSQL:
  ``PostgresSaver`` on an autocommit connection, its tables in a scratch schema.
- DBOS Transact: a ``@DBOS.workflow()`` calling a ``@DBOS.step()`` N times, each step's
  output recorded in the system database before the next one runs. On files: a SQLite
  system database (``sqlite:///FILE``: rollback journal, ``synchronous`` as printed); on
  PostgreSQL: ``dbos_system_schema`` a scratch schema.

Each contestant runs in a child process of its own (the peers set up logging, threads and
pools for the whole interpreter), set up and warmed by one workflow first; the rounds are
interleaved (one workflow of each contestant per round, the order rotated) so that all see
the same machine. The figure is the median over rounds (the best is printed too); a ratio
is the median of the per-round ratios (the two workflows ran back to back). Then, with
strace on the PATH and unless --no-count, each contestant runs again under
``strace -f -e trace=fsync,fdatasync,...`` for a few workflows, and the fsyncs (files) and
the sends to the server (PostgreSQL) between two markers are counted per step; on PostgreSQL
the write transactions per step are counted too, as the distinct ``xmin`` of the rows the
workflows left in the contestant's schema (a floor: a row updated again later shows only its
last transaction).

Scratch directories go under --dir (default: the current directory, a real disk; not a
tmpfs, where fsync is free) and are removed; scratch schemas are dropped. PostgreSQL is
$AGENTRUN_TEST_PG or postgresql://postgres@127.0.0.1:5432/test; without a server or
psycopg that half says so.

Caveats. fsync's cost is the disk's and the CPU's share is the machine's: the ratios hold
for this machine (read the floor and the cpu column with them). SQLite's durability
is its synchronous setting (printed); with synchronous=NORMAL in WAL mode (a common tuning)
LangGraph would skip the fsync per commit and lose the last commits on power loss, which our
FileStore never trades away. On PostgreSQL the fsync is the server's WAL flush at commit, shared
by concurrent committers (group commit); the figures are for one workflow at a time. Our
read step's start is an asynchronous commit there (synchronous_commit off for that
transaction), its result a synchronous one. LangGraph's state here is one counter and the last
result; an agent's state (its message list) grows each step and so does each checkpoint. DBOS
records a step's output, not its start: a step cut off mid-way runs again, as our read step
does (our write step records its start first, to stop as indeterminate instead).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import resource
import secrets
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypedDict

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
HERE = Path(__file__).resolve()
COUNT_WORKFLOWS = 3  # workflows of the counting pass (under strace)
CHILD_TIMEOUT = 600.0


def lookup(i: int) -> dict[str, Any]:
    """A step's result: a small JSON value, like a knowledge-base lookup (~100 bytes)."""
    return {"id": f"KB-{i:04d}", "title": "Access needs a ticket approved by IT", "score": 0.87}


# -- the contestants, each set up in its child process -----------------------------------------
#
# A setup returns (workflow, info, close): workflow(r) runs workflow number r to its end.


Setup = tuple[Callable[[int], None], dict[str, Any], Callable[[], None]]


def setup_ours(store: Any, steps: int, write: bool) -> Setup:
    from durableagent import Journal, Record, StepKind

    async def flow(run_id: str) -> None:
        store.append(run_id, Record.make("run.started", data={"input": []}))
        with store.lease(run_id) as lease:
            journal = Journal(store, run_id, store.load(run_id), lease=lease)
            for i in range(steps):

                async def fn(i: int = i) -> dict[str, Any]:
                    return lookup(i)

                await journal.run_step(f"tool/1/{i}/lookup", StepKind.TOOL, fn, write=write)

    checked = False

    def workflow(r: int) -> None:
        nonlocal checked
        asyncio.run(flow(f"wf-{r}"))
        if not checked:  # once, outside the timed rounds: a start and a result per step
            records = store.load(f"wf-{r}")
            assert len(records) == 1 + 2 * steps, len(records)
            checked = True

    kind = "write" if write else "read"
    return workflow, {"steps": kind, "version": version("durableagent")}, store.close


def setup_ours_file(target: str, steps: int, write: bool) -> Setup:
    from durableagent import FileStore

    return setup_ours(FileStore(Path(target) / "store"), steps, write)


def setup_ours_pg(target: str, steps: int, write: bool) -> Setup:
    from durableagent.stores.postgres import PostgresStore

    url, schema = target.split("#")
    return setup_ours(PostgresStore(url, schema=schema), steps, write)


class State(TypedDict):
    """LangGraph's state: the step counter and the last step's result."""

    i: int
    result: dict[str, Any]


def langgraph_graph(saver: Any, steps: int) -> Callable[[int], None]:
    from langgraph.graph import END, START, StateGraph

    def step(state: State) -> dict[str, Any]:
        return {"i": state["i"] + 1, "result": lookup(state["i"])}

    def more(state: State) -> str:
        return "step" if state["i"] < steps else END

    builder = StateGraph(State)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", more, ["step", END])
    graph = builder.compile(checkpointer=saver)
    checked = False

    def workflow(r: int) -> None:
        nonlocal checked
        config: Any = {"configurable": {"thread_id": f"wf-{r}"}, "recursion_limit": steps + 10}
        out = graph.invoke({"i": 0, "result": {}}, config, durability="sync")
        assert out["i"] == steps, out
        if not checked:  # once, outside the timed rounds: a checkpoint per step was saved
            saved = sum(1 for _ in saver.list(config))
            assert saved >= steps + 1, saved
            checked = True

    return workflow


def setup_langgraph_sqlite(target: str, steps: int, write: bool) -> Setup:
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(Path(target) / "checkpoints.sqlite", check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    sync = conn.execute("PRAGMA synchronous").fetchone()[0]
    info = {
        "version": version("langgraph"),
        "saver": version("langgraph-checkpoint-sqlite"),
        "sqlite": f"journal_mode={mode} synchronous={SYNCHRONOUS.get(sync, sync)}",
    }
    return langgraph_graph(saver, steps), info, conn.close


def setup_langgraph_pg(target: str, steps: int, write: bool) -> Setup:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import sql
    from psycopg.rows import dict_row

    url, schema = target.split("#")
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    # As PostgresSaver.from_conn_string connects, its tables in the scratch schema.
    conn = psycopg.connect(
        url,
        autocommit=True,
        prepare_threshold=0,
        row_factory=dict_row,
        options=f"-c search_path={schema}",
    )
    saver = PostgresSaver(conn)
    saver.setup()
    row = conn.execute("SHOW synchronous_commit").fetchone()
    commit = row["synchronous_commit"] if row else "?"
    info = {
        "version": version("langgraph"),
        "saver": version("langgraph-checkpoint-postgres"),
        "synchronous_commit": commit,
    }
    return langgraph_graph(saver, steps), info, conn.close


def setup_dbos(system_database_url: str, schema: str | None, steps: int) -> Setup:
    from dbos import DBOS, SetWorkflowID

    config: Any = {
        "name": "durableagent-bench",
        "system_database_url": system_database_url,
        "log_level": "WARNING",
    }
    if schema:
        config["dbos_system_schema"] = schema
    DBOS(config=config)

    @DBOS.step()
    def step(i: int) -> dict[str, Any]:
        return lookup(i)

    @DBOS.workflow()
    def flow(n: int) -> int:
        done = 0
        for i in range(n):
            done += step(i)["score"] > 0
        return done

    DBOS.launch()
    checked = False

    def workflow(r: int) -> None:
        nonlocal checked
        with SetWorkflowID(f"wf-{r}"):
            assert flow(steps) == steps
        if not checked:  # once: every step's output is in the system database
            recorded = DBOS.list_workflow_steps(f"wf-{r}")
            assert len(recorded) == steps, len(recorded)
            checked = True

    # Its settings, read on its own engine (DBOS sets no synchronous pragma and no
    # synchronous_commit: dbos/_sys_db_sqlite.py, _sys_db_postgres.py).
    from dbos._dbos import _get_dbos_instance

    engine = _get_dbos_instance()._sys_db.engine
    info: dict[str, Any] = {"version": version("dbos")}
    with engine.connect() as c:
        if system_database_url.startswith("sqlite"):
            mode = c.exec_driver_sql("PRAGMA journal_mode").scalar()
            sync = c.exec_driver_sql("PRAGMA synchronous").scalar()
            info["sqlite"] = f"journal_mode={mode} synchronous={SYNCHRONOUS.get(sync, sync)}"
        else:
            info["synchronous_commit"] = c.exec_driver_sql("SHOW synchronous_commit").scalar()
    return workflow, info, DBOS.destroy


def setup_dbos_sqlite(target: str, steps: int, write: bool) -> Setup:
    return setup_dbos(f"sqlite:///{Path(target) / 'dbos.sqlite'}", None, steps)


def setup_dbos_pg(target: str, steps: int, write: bool) -> Setup:
    url, schema = target.split("#")
    return setup_dbos(url, schema, steps)


SETUPS: dict[str, Callable[[str, int, bool], Setup]] = {
    "ours-file": setup_ours_file,
    "langgraph-sqlite": setup_langgraph_sqlite,
    "dbos-sqlite": setup_dbos_sqlite,
    "ours-pg": setup_ours_pg,
    "langgraph-pg": setup_langgraph_pg,
    "dbos-pg": setup_dbos_pg,
}
SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as v

    try:
        return v(dist)
    except PackageNotFoundError:
        return "?"


def distinct_xmins(target: str) -> int:
    """Transactions that left a row in the contestant's schema (see the docstring)."""
    import psycopg
    from psycopg import sql

    url, schema = target.split("#")
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = %s AND table_type = 'BASE TABLE'",
                (schema,),
            )
        ]
        if not tables:
            return 0
        union = sql.SQL(" UNION ALL ").join(
            sql.SQL("SELECT xmin::text AS x FROM {}").format(sql.Identifier(schema, t))
            for t in tables
        )
        query = sql.SQL("SELECT count(DISTINCT x) FROM ({}) AS all_rows").format(union)
        row = conn.execute(query).fetchone()
        return int(row[0]) if row else 0


def cpu_seconds() -> float:
    """CPU time of this process, all its threads, user and system."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child(kind: str, target: str, steps: int, write: bool, count: int, marker: str) -> None:
    """A contestant's process: set up, warm up, then answer the parent's commands on stdin
    (``run R``: run workflow R and report its seconds; ``quit``), or with ``count`` run that
    many workflows between two fsyncs of ``marker`` (the strace pass) and exit."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever a library prints goes to stderr, not into the protocol

    def say(**message: Any) -> None:
        proto.write(json.dumps(message) + "\n")

    try:
        workflow, info, close = SETUPS[kind](target, steps, write)
    except ImportError as e:
        say(missing=str(e))
        return
    try:
        workflow(0)  # warm: imports, prepared statements, caches; and the checks above
        if count:
            pg = "#" in target
            before = distinct_xmins(target) if pg else 0
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT, 0o644)
            os.fsync(fd)
            for r in range(1, count + 1):
                workflow(r)
            os.fsync(fd)
            os.close(fd)
            after = distinct_xmins(target) if pg else 0
            say(xacts=after - before)
            return
        say(ready=info)
        for line in sys.stdin:
            cmd = line.split()
            if cmd[0] == "run":
                t, cpu = time.perf_counter(), cpu_seconds()
                workflow(int(cmd[1]))
                say(seconds=time.perf_counter() - t, cpu=cpu_seconds() - cpu)
            else:
                break
    finally:
        close()


# -- the parent ---------------------------------------------------------------------------------


@dataclass
class Contestant:
    label: str
    short: str
    kind: str
    target: str
    write: bool = False
    proc: subprocess.Popen[str] | None = None
    err: IO[str] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    missing: str = ""
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    counts: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def child_cmd(c: Contestant, steps: int, count: int = 0, marker: str = "") -> list[str]:
    cmd = [sys.executable, str(HERE), "--child", c.kind, "--target", c.target]
    cmd += ["--steps", str(steps), "--count-workflows", str(count), "--marker", marker]
    return cmd + (["--write"] if c.write else [])


def read_message(c: Contestant) -> dict[str, Any]:
    assert c.proc is not None and c.proc.stdout is not None
    ready, _, _ = select.select([c.proc.stdout], [], [], CHILD_TIMEOUT)
    line = c.proc.stdout.readline() if ready else ""
    if not line:
        c.proc.kill()
        raise SystemExit(f"{c.label}: the child process failed:\n{child_stderr(c)}")
    message: dict[str, Any] = json.loads(line)
    return message


def child_stderr(c: Contestant) -> str:
    if c.err is None:
        return ""
    c.err.seek(0)
    return c.err.read()[-4000:]


def start(c: Contestant, steps: int, scratch: Path) -> None:
    c.err = open(scratch / f"{c.kind}-{int(c.write)}.stderr", "w+")  # noqa: SIM115
    c.proc = subprocess.Popen(
        child_cmd(c, steps),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=c.err,
        text=True,
    )
    message = read_message(c)
    if "missing" in message:
        c.missing = message["missing"]
        c.proc.wait(60)
        c.proc = None
    else:
        c.info = message["ready"]


def stop(c: Contestant) -> None:
    if c.proc is None:
        return
    assert c.proc.stdin is not None
    with contextlib.suppress(BrokenPipeError):
        c.proc.stdin.write("quit\n")
        c.proc.stdin.flush()
    try:
        c.proc.wait(60)
    except subprocess.TimeoutExpired:
        c.proc.kill()
        c.proc.wait()
    c.proc = None


STRACE_LINE = re.compile(r"^\d+\s+(\w+)\((\d+)<(.*?)>")
COUNTED = ("fsync", "fdatasync", "sync_file_range", "syncfs", "sendto", "sendmsg", "write")


def count_pass(c: Contestant, steps: int, target: str, scratch: Path) -> None:
    """Run ``c`` under strace for COUNT_WORKFLOWS workflows and count, per step, its fsyncs by
    file and its sends to the PostgreSQL server; on PostgreSQL also its write transactions."""
    out = scratch / f"strace-{c.kind}-{int(c.write)}.txt"
    marker = str(scratch / f"marker-{c.kind}-{int(c.write)}")
    cmd = ["strace", "-f", "-qq", "-yy", "-e", "signal=none", "-o", str(out)]
    cmd += ["-e", "trace=fsync,fdatasync,sync_file_range,syncfs,sendto,sendmsg"]
    counted = Contestant(c.label, c.short, c.kind, target, c.write)
    p = subprocess.run(
        cmd + child_cmd(counted, steps, COUNT_WORKFLOWS, marker),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
    )
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        c.counts = f"(strace pass failed: {p.stderr.strip()[-300:]})"
        return
    result = json.loads(lines[-1])
    calls: list[tuple[str, str]] = []
    inside = False
    for line in out.read_text().splitlines():
        m = STRACE_LINE.match(line)
        if not m or m.group(1) not in COUNTED:
            continue
        name, path = m.group(1), m.group(3)
        if path == marker:
            inside = not inside
            continue
        if inside:
            calls.append((name, path))
    n = COUNT_WORKFLOWS * steps
    syncs = Counter(
        what_file(path) for name, path in calls if name in ("fsync", "fdatasync", "syncfs")
    )
    sends = sum(1 for name, path in calls if name in ("sendto", "sendmsg") and "TCP" in path)
    parts = [f"{sum(syncs.values()) / n:.2f} fsyncs/step"]
    if syncs:
        parts[0] += " (" + ", ".join(f"{k} {v / n:.2f}" for k, v in syncs.most_common()) + ")"
    if "#" in target:
        parts = [f"{result['xacts'] / n:.2f} write txns/step", f"{sends / n:.2f} sends/step"]
    c.counts = "   ".join(parts)


def what_file(path: str) -> str:
    name = os.path.basename(path)
    if path.startswith(("socket:", "TCP", "UNIX", "pipe:")):
        return "socket"
    if os.path.isdir(path):
        return "directory"
    if name.endswith(".jsonl"):
        return "journal"
    if ".jsonl." in name and name.endswith(".new"):
        return "new journal"  # a run's first record: a temp file, fsynced, then linked
    if name.endswith("-wal"):
        return "WAL"
    if name.endswith("-journal"):
        return "rollback journal"
    if name.endswith((".sqlite", ".db")):
        return "database"
    return name


def bench(
    title: str,
    contestants: list[Contestant],
    steps: int,
    rounds: int,
    scratch: Path,
    count: bool,
    new_target: Callable[[str], str],
    floor: tuple[str, Callable[[int], float]],
) -> None:
    """Start the contestants, run ``rounds`` interleaved rounds of one workflow each (and
    ``floor``'s N raw durable writes, measured here), stop them, count, report."""
    floors: list[float] = []
    try:
        for c in contestants:
            start(c, steps, scratch)
        live = [c for c in contestants if c.proc is not None]
        for r in range(rounds):
            k = r % len(live)
            for c in live[k:] + live[:k]:  # interleaved, the order rotated each round
                assert c.proc is not None and c.proc.stdin is not None
                c.proc.stdin.write(f"run {r + 1}\n")
                c.proc.stdin.flush()
                message = read_message(c)
                c.times.append(message["seconds"] / steps)
                c.cpu.append(message["cpu"] / steps)
            floors.append(floor[1](steps) / steps)
    finally:
        for c in contestants:
            stop(c)
    if count:
        for c in contestants:
            if not c.missing:
                count_pass(c, steps, new_target(c.kind), scratch)
    report(title, contestants, steps, rounds, (floor[0], floors))


def report(
    title: str,
    contestants: list[Contestant],
    steps: int,
    rounds: int,
    floor: tuple[str, list[float]],
) -> None:
    """One line per contestant and the floor's, then the figure's line: ours (read steps)
    and each peer's ratio to it and to our write steps."""
    print(
        f"{title}: {steps} steps per workflow; µs per step, median (best) of {rounds} rounds; "
        "cpu: the contestant's process, all threads (median)"
    )
    ours, ours_w = contestants[0], contestants[1]
    for c in contestants:
        if c.missing:
            print(f"   {c.label:<42} not installed ({c.missing}): not measured")
            continue
        ratio = "" if c is ours else f"{paired(c, ours):.1f}x ours"
        settings = "   ".join(
            f"{k} {v}" for k, v in c.info.items() if k in ("sqlite", "synchronous_commit")
        )
        print(
            f"   {c.label:<42} {c.median * 1e6:6.0f} ({min(c.times) * 1e6:5.0f})  {ratio:>10}"
            f"   cpu {statistics.median(c.cpu) * 1e6:5.0f}   {c.counts}   {settings}".rstrip()
        )
    lowest = statistics.median(floor[1])
    print(
        f"   {'floor: ' + floor[0]:<42} {lowest * 1e6:6.0f} ({min(floor[1]) * 1e6:5.0f})"
        f"   ours is {paired(ours, floor[1]):.1f}x this floor"
    )
    figures = [f"ours {ours.median * 1e6:.0f} µs/step (write steps {ours_w.median * 1e6:.0f})"]
    for c in contestants[2:]:
        if c.missing:
            figures.append(f"{c.short} not installed")
        else:
            figures.append(
                f"{c.short} {c.median * 1e6:.0f} µs/step ({paired(c, ours):.1f}× ours, "
                f"{paired(c, ours_w):.1f}× our write steps)"
            )
    print(f"{title}: " + "   ".join(figures))
    sys.stdout.flush()


def paired(c: Contestant, base: Contestant | list[float]) -> float:
    """The median of the per-round ratios: each round's workflows ran back to back, so a
    ratio within a round sees one weather; a median of medians would mix two."""
    times = base if isinstance(base, list) else base.times
    return statistics.median(a / b for a, b in zip(c.times, times, strict=True))


@contextlib.contextmanager
def scratch_schemas(url: str) -> Iterator[Callable[[str], str]]:
    """Targets ``url#schema`` on fresh schema names, each dropped at the end."""
    import psycopg
    from psycopg import sql

    names: list[str] = []

    def new(what: str) -> str:
        names.append(f"bench_peers_{what.replace('-', '_')}_{secrets.token_hex(4)}")
        return f"{url}#{names[-1]}"

    try:
        yield new
    finally:
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                for name in names:
                    drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE")
                    conn.execute(drop.format(sql.Identifier(name)))
        except psycopg.Error as e:  # the server went away: say what is left behind
            print(f"postgres: could not drop the schemas {', '.join(names)}: {e}")


def versions_line() -> str:
    names = ["durableagent", "langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite"]
    names += ["langgraph-checkpoint-postgres", "dbos", "psycopg"]
    import sqlite3

    shown = [f"{n} {version(n)}" for n in names]
    return ", ".join(
        [*shown, f"SQLite {sqlite3.sqlite_version}", f"Python {sys.version.split()[0]}"]
    )


def bench_files(args: argparse.Namespace, scratch: Path) -> None:
    root = scratch / "files"

    def new(what: str) -> str:
        path = root / f"{what}-{secrets.token_hex(3)}"
        path.mkdir(parents=True)
        return str(path)

    contestants = [
        Contestant("durableagent FileStore, read steps", "ours", "ours-file", new("ours")),
        Contestant(
            "durableagent FileStore, write steps", "ours", "ours-file", new("ours"), write=True
        ),
        Contestant(
            "LangGraph SqliteSaver, durability=sync",
            "LangGraph(sqlite, sync)",
            "langgraph-sqlite",
            new("lg"),
        ),
        Contestant("DBOS, SQLite system database", "DBOS(sqlite)", "dbos-sqlite", new("dbos")),
    ]
    line = json.dumps({"seq": 3, "type": "step.completed", "data": lookup(0)}).encode() + b"\n"
    raw = os.open(root / "raw.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def floor(n: int) -> float:
        t = time.perf_counter()
        for _ in range(n):
            os.write(raw, line)
            os.fsync(raw)
        return time.perf_counter() - t

    label = f"write+fsync of a {len(line)}-byte line"
    try:
        bench(
            "files", contestants, args.steps, args.rounds, scratch, args.count, new, (label, floor)
        )
    finally:
        os.close(raw)


def bench_postgres(args: argparse.Namespace, scratch: Path) -> None:
    try:
        import psycopg
        from psycopg import sql
    except ImportError:
        print("postgres: psycopg is not installed (pip install -e '.[postgres]'): not measured")
        return
    try:
        with psycopg.connect(args.url, connect_timeout=5, autocommit=True) as conn:
            settings = {
                k: conn.execute(f"SHOW {k}").fetchone()[0]  # type: ignore[index]
                for k in ("server_version", "fsync", "synchronous_commit", "wal_sync_method")
            }
    except psycopg.OperationalError as e:
        print(f"postgres: no server at {args.url} ({str(e).strip()}): not measured")
        return
    print("postgres server: " + ", ".join(f"{k} {v}" for k, v in settings.items()))
    with scratch_schemas(args.url) as new:
        contestants = [
            Contestant("durableagent PostgresStore, read steps", "ours", "ours-pg", new("ours")),
            Contestant(
                "durableagent PostgresStore, write steps",
                "ours",
                "ours-pg",
                new("ours"),
                write=True,
            ),
            Contestant(
                "LangGraph PostgresSaver, durability=sync",
                "LangGraph(postgres, sync)",
                "langgraph-pg",
                new("lg"),
            ),
            Contestant(
                "DBOS, PostgreSQL system database", "DBOS(postgres)", "dbos-pg", new("dbos")
            ),
        ]
        url, schema = new("floor").split("#")
        with psycopg.connect(url, autocommit=True) as raw:
            raw.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            table = sql.Identifier(schema, "raw")
            raw.execute(
                sql.SQL("CREATE TABLE {} (seq bigint PRIMARY KEY, line bytea)").format(table)
            )
            insert = sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(table)
            line = json.dumps({"seq": 3, "type": "step.completed", "data": lookup(0)}).encode()
            seq = iter(range(10**9))

            def floor(n: int) -> float:
                t = time.perf_counter()
                for _ in range(n):
                    raw.execute(insert, (next(seq), line))
                return time.perf_counter() - t

            label = f"INSERT of a {len(line)}-byte row, autocommit"
            bench(
                "postgres",
                contestants,
                args.steps,
                args.rounds,
                scratch,
                args.count,
                new,
                (label, floor),
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=100, help="steps per workflow")
    ap.add_argument("--rounds", type=int, default=9, help="workflows per contestant")
    ap.add_argument("--url", default=os.environ.get("AGENTRUN_TEST_PG") or DEFAULT_URL)
    ap.add_argument("--dir", default=None, help="scratch directory parent (a real disk)")
    ap.add_argument("--only", choices=("files", "postgres"), action="append")
    ap.add_argument("--no-count", dest="count", action="store_false", help="skip strace")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--target", help=argparse.SUPPRESS)
    ap.add_argument("--write", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--count-workflows", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--marker", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.target, args.steps, args.write, args.count_workflows, args.marker)
        return 0
    if args.count and shutil.which("strace") is None:
        print("strace is not on the PATH: fsyncs and sends are not counted")
        args.count = False
    print(versions_line())
    scratch = Path(tempfile.mkdtemp(prefix="bench-peers-", dir=args.dir or ".")).resolve()
    try:
        for part in args.only or ["files", "postgres"]:
            {"files": bench_files, "postgres": bench_postgres}[part](args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
