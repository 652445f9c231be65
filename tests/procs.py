"""Real processes for the tests: ``agentrun worker`` children, and waiting with a deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

TESTS = Path(__file__).parent


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


class WorkerProcess:
    """``agentrun worker`` in a child process, its log in a file: ``agent`` is a name in
    ``_child_agents``, or any ``MODULE:ATTR``."""

    def __init__(self, root: Path | str, agent: str, log: Path, *args: str, **env: str) -> None:
        self.log = log
        self._log_file = open(log, "w")  # noqa: SIM115 - closed when the child is reaped
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "durableagent.cli",
                "worker",
                "--agent",
                agent if ":" in agent else f"_child_agents:{agent}",
                "--store",
                str(root),
                "--rescan",
                "0.5",
                *args,
            ],
            env=child_env(**env),
            stdout=subprocess.DEVNULL,
            stderr=self._log_file,
        )

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"worker did not stop:\n{self.log.read_text()}") from None
        finally:
            self._log_file.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._log_file.close()


def wait_for(what: Callable[[], bool], timeout: float = 10.0, why: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not what():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {why or what}")
        time.sleep(0.02)
