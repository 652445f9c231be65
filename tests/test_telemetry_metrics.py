"""Metrics (SPEC §12): ``agentrun worker --metrics-port`` scraped over HTTP while it works,
parsed by prometheus_client's own parser, its counts matching the journals."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from procs import child_env, wait_for
from prometheus_client.parser import text_string_to_metric_families
from telemetry_support import worker

from durableagent import FileStore, Message, RunStatus, submit, view_store
from durableagent import signal as send_signal
from durableagent.attempts import spans
from durableagent.record import STEP_COMPLETED

pytestmark = pytest.mark.slow

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def port_of(log: Path) -> int:
    def found() -> bool:
        return re.search(r"metrics at http://[^:]+:(\d+)/metrics", log.read_text()) is not None

    wait_for(found, 20, "the metrics address in the worker's log")
    m = re.search(r"metrics at http://[^:]+:(\d+)/metrics", log.read_text())
    assert m is not None
    return int(m.group(1))


def from_journals(store: FileStore, owner: str) -> tuple[Counter[tuple[str, str]], int, int]:
    """What ``owner``'s attempts did, by the journals and attempt logs: steps by (kind,
    outcome), and the model tokens (in, out) of the steps they ran."""
    steps: Counter[tuple[str, str]] = Counter()
    tokens_in = tokens_out = 0
    for run_id in store.run_ids():
        records = store.load(run_id)
        kinds = {r.step: r.kind for r in records if r.step}
        for span in spans(records, store.attempts(run_id)):
            if span.attempt.owner != owner:
                continue
            for step in span.replayed:
                steps[(kinds[step], "replayed")] += 1
            for step in (*span.ran, *span.reran):
                steps[(kinds[step], "ran")] += 1
            for r in records:
                if r.type == STEP_COMPLETED and span.first <= r.seq <= span.last:
                    usage = r.data.get("usage") if r.kind == "model" else None
                    if usage:
                        tokens_in += usage["input_tokens"]
                        tokens_out += usage["output_tokens"]
    return steps, tokens_in, tokens_out


def test_metrics_scraped_while_workers_run_match_the_journals(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = FileStore(root)
    for i in range(3):
        submit(store, f"r{i}", [Message("user", f"printer {i} is on fire")])
    submit(store, "slow", [Message("user", "a slow question")])
    log_a, log_b = tmp_path / "a.log", tmp_path / "b.log"
    a = worker(root, log_a, "--owner", "A", "--metrics-port", "0")
    try:
        port = port_of(log_a)
        ready = [f"r{i}" for i in range(3)]

        def parked() -> bool:
            return all(view_store(store, r).status == RunStatus.AWAITING_APPROVAL for r in ready)

        wait_for(parked, 30, "the runs at their approvals")
        looking = lambda: any(r.step.startswith("tool/") for r in store.load("slow"))  # noqa: E731
        wait_for(looking, 10, "the slow run's lookup")
        seen = scrape(port)
        assert seen[("durableagent_worker_up", ())] == 1
        assert seen[("durableagent_attempts_total", (("ended", "awaiting_approval"),))] == 3
        assert seen[("durableagent_steps_total", (("kind", "model"), ("outcome", "ran")))] >= 3
    finally:
        a.send_signal(signal.SIGKILL)  # the slow run's attempt is lost, mid-lookup
        a.wait(10)
    for run_id in ready:
        for p in view_store(store, run_id).pending:
            send_signal(store, run_id, "approve", {"marker": p.marker}, by="ana")
    (root / ".side").mkdir(exist_ok=True)
    (root / ".side" / "go").write_text("")
    b = worker(root, log_b, "--owner", "B", "--metrics-port", "0")
    try:
        port = port_of(log_b)
        everything = [*ready, "slow"]
        wait_for(
            lambda: all(view_store(store, r).status == RunStatus.COMPLETED for r in everything),
            30,
            f"every run completed\n{log_b.read_text()}",
        )

        def counted() -> bool:
            seen = scrape(port)
            return seen.get(("durableagent_runs", (("status", "completed"),))) == 4

        wait_for(counted, 15, "the run counts")
        seen = scrape(port)
    finally:
        b.send_signal(signal.SIGTERM)
        b.wait(15)
    steps, tokens_in, tokens_out = from_journals(store, "B")
    for kind in ("model", "tool"):
        for outcome in ("ran", "replayed"):
            labels = (("kind", kind), ("outcome", outcome))
            assert seen[("durableagent_steps_total", labels)] == steps[(kind, outcome)], labels
        assert seen[("durableagent_steps_total", (("kind", kind), ("outcome", "failed")))] == 0
    assert steps[("model", "replayed")] == 4  # every run's llm/1
    ran = steps[("model", "ran")] + steps[("tool", "ran")]
    assert ran == sum(
        v for (name, labels), v in seen.items() if name == "durableagent_step_seconds_count"
    )
    assert seen[("durableagent_model_tokens_total", (("direction", "input"),))] == tokens_in
    assert seen[("durableagent_model_tokens_total", (("direction", "output"),))] == tokens_out
    assert seen[("durableagent_attempts_total", (("ended", "completed"),))] == 4
    assert seen[("durableagent_attempts_total", (("ended", "lost"),))] == 1
    assert seen[("durableagent_lease_takeovers_total", ())] == 1
    appended = seen[("durableagent_append_seconds_count", ())]
    assert appended >= ran  # each step at least one append, the final records too
    assert seen[("durableagent_waiting_for_human_seconds", ())] == 0
    assert seen[("durableagent_worker_heartbeat_timestamp_seconds", ())] > 0
    for status in RunStatus:
        expected = 4 if status == RunStatus.COMPLETED else 0
        assert seen[("durableagent_runs", (("status", str(status)),))] == expected


def test_metrics_port_without_prometheus_client_says_what_to_install(tmp_path: Path) -> None:
    hide = tmp_path / "hide"
    (hide / "prometheus_client").mkdir(parents=True)
    (hide / "prometheus_client" / "__init__.py").write_text(
        "raise ImportError('No module named prometheus_client', name='prometheus_client')\n"
    )
    env = child_env()
    env["PYTHONPATH"] = f"{hide}:{env['PYTHONPATH']}"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "durableagent.cli",
            "worker",
            "--agent",
            "_telemetry_agents:helpdesk",
            "--store",
            str(tmp_path / "runs"),
            "--metrics-port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    assert "pip install 'durableagent[metrics]'" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_a_metrics_port_in_use_is_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "durableagent.cli",
                "worker",
                "--agent",
                "_telemetry_agents:helpdesk",
                "--store",
                str(tmp_path / "runs"),
                "--metrics-port",
                str(port),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env=child_env(),
        )
    assert out.returncode == 1
    assert out.stderr.strip() == (
        f"agentrun worker: cannot serve metrics on 127.0.0.1:{port} (Address already in use)"
    )
