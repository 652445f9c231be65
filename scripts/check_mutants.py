"""Break the core the way each pitfall of the reference note describes; a test must fail.

    python scripts/check_mutants.py [NAME ...]

Each mutant edits a copy of core/ in a temp dir (the work tree is never touched), runs the
core tests against it (PYTHONPATH puts the copy first) and prints which tests caught it.
A mutant no test catches is a hole in the tests: the script exits 1.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# name: (pitfall, file, original, mutated)
MUTANTS: dict[str, tuple[str, str, str, str]] = {
    "s01-completed-steps-rerun": (
        "1. completed steps run again",
        "journal.py",
        "        if done is not None:\n            return done.data",
        "        if False:\n            return done.data",
    ),
    "s02-unrecorded-write-rerun": (
        "2. an unrecorded write re-run",
        "journal.py",
        "if name in self.index.started and self.index.is_write(name):",
        "if False:",
    ),
    "s03-read-treated-as-write": (
        "2. an unrecorded read treated as a write",
        "journal.py",
        'return s is not None and isinstance(s.data, dict) and s.data.get("write") is True',
        "return s is not None",
    ),
    "s14-start-recorded-after-step": (
        "2. the start recorded after the step",
        "journal.py",
        "        await self.append(Record.make(STEP_STARTED, name, kind, started))\n"
        "        value = await fn()\n",
        "        value = await fn()\n"
        "        await self.append(Record.make(STEP_STARTED, name, kind, started))\n",
    ),
    "s05-torn-tail-is-corruption": (
        "3. a torn last record treated as corruption",
        "store.py",
        "    good = len(data) - len(lines.pop())\n",
        "    good = len(data)\n    if not lines[-1]:\n        lines.pop()\n",
    ),
    "s06-torn-tail-kept-on-append": (
        "3. a torn last record kept (the next record glued onto garbage)",
        "store.py",
        "            self._write(path, fd, line, good)",
        "            self._write(path, fd, line, size)",
    ),
    "s06b-nul-tail-kept": (
        "3. a NUL-filled last record kept",
        "store.py",
        '    if lines and b"\\0" in lines[-1]:',
        "    if False:",
    ),
    "s07-done-runs-the-write": (
        "4. a done reconciliation that runs the write anyway",
        "journal.py",
        'if verdict.outcome == "done":',
        'if verdict.outcome == "never":',
    ),
    "s08-approvals-not-applied": (
        "5. approve signals recorded but not applied",
        "run.py",
        "            approved.add(marker)",
        "            pass",
    ),
    "s10-reused-id-answers-old-question": (
        "6. a reused run id answering the old question",
        "run.py",
        'if given is not None and first.data["input"] != given:',
        "if False:",
    ),
    "s11-ids-unchecked": (
        "7. run ids used as paths unchecked",
        "store.py",
        "    if not valid_run_id(run_id):\n        raise InvalidRunIdError(run_id)",
        "    if False:\n        raise InvalidRunIdError(run_id)",
    ),
    "x01-crc-ignored": (
        "(extra) a damaged line whose crc no longer matches loads anyway",
        "record.py",
        "        if got != want:",
        "        if False:",
    ),
    "x02-seq-unchecked": (
        "(extra) a gap in the seqs goes unnoticed",
        "store.py",
        "        if rec.seq != expected:",
        "        if False:",
    ),
    "x03-signal-unvalidated": (
        "(extra) signals for calls nobody asked for are written",
        "run.py",
        "    if call_args is None or marker_for(step, call_args) != marker:",
        "    if False:",
    ),
}

TESTS = [
    "tests/test_hand_example.py",
    "tests/test_crash_recovery.py",
    "tests/test_input.py",
    "tests/test_filestore.py",
    "tests/test_run_ids.py",
    "tests/test_signals.py",
    "tests/test_statuses.py",
    "tests/test_kill.py",
]


def run_mutant(name: str, work: Path) -> list[str]:
    _pitfall, file, original, mutated = MUTANTS[name]
    core = work / "core"
    shutil.rmtree(core, ignore_errors=True)
    shutil.copytree(ROOT / "core", core)
    target = core / "durableagent" / file
    text = target.read_text()
    assert text.count(original) == 1, f"{name}: the original snippet is not in {file} once"
    target.write_text(text.replace(original, mutated))
    env = {**os.environ, "PYTHONPATH": str(core)}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", *TESTS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    return sorted(set(re.findall(r"^FAILED (\S+?)(?: - |$)", out.stdout, re.M)))


def main() -> int:
    names = sys.argv[1:] or list(MUTANTS)
    survivors = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            caught = run_mutant(name, Path(tmp))
            print(f"{name}: {MUTANTS[name][0]}")
            for test in caught[:6]:
                print(f"    caught by {test}")
            if len(caught) > 6:
                print(f"    ... and {len(caught) - 6} more")
            if not caught:
                print("    NOT CAUGHT")
                survivors.append(name)
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
