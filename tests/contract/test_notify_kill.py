"""At-least-once, deduplicated delivery under SIGKILL (SPEC §11): two ``agentrun notify``
processes on one store, one of them SIGKILLed at random points and restarted while runs
enter awaiting_approval. Every transition is delivered; none twice, except one whose
notifier died between sending and marking (at most one per kill)."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from notify_sinks import webhook
from procs import child_env
from test_notify import awaiting

from durableagent import Store

RUNS = 10


def notifier(spec: str, url: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "durableagent.cli",
            "notify",
            "--to",
            url,
            "--store",
            spec,
            "--claim-ttl",
            "1.5",
        ],
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.mark.slow
def test_every_transition_is_delivered_and_none_twice_but_for_a_kill(
    any_store: Store, store_spec: str
) -> None:
    rng = random.Random(17)
    kills = 0
    with webhook() as sink:
        procs = [notifier(store_spec, sink.url), notifier(store_spec, sink.url)]
        try:
            time.sleep(1.0)
            for i in range(RUNS):
                awaiting(any_store, f"k{i}")
                time.sleep(rng.uniform(0.05, 0.4))
                if rng.random() < 0.4:
                    victim = rng.randrange(2)
                    procs[victim].send_signal(signal.SIGKILL)
                    procs[victim].wait()
                    kills += 1
                    procs[victim] = notifier(store_spec, sink.url)
            sink.wait(
                lambda ms: (
                    {str(m["title"]).split()[1] for m in ms} >= {f"k{i}" for i in range(RUNS)}
                ),
                timeout=40,
            )
            time.sleep(2.0)  # a late duplicate would land by now
        finally:
            for p in procs:
                p.kill()
                p.wait()
        per_run = Counter(str(m["title"]).split()[1] for m in sink.messages())
    assert kills >= 2, "the seed must kill a few times"
    assert set(per_run) == {f"k{i}" for i in range(RUNS)}
    assert sum(per_run.values()) - RUNS <= kills, per_run
