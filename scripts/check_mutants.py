"""Break the core the way each pitfall of the reference note describes; a test must fail.

    python scripts/check_mutants.py [NAME ...]

Each mutant edits a copy of core/ and tui/ in a temp dir (the work tree is never touched),
runs the core tests against it (PYTHONPATH puts the copies first; a file's own tests too, see
MORE_TESTS) and prints which tests caught it. A mutant's file is relative to core/durableagent,
or to the repository when it starts with tui/. A mutant no test catches is a hole in the tests:
the script exits 1.
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
        "step_index.py",
        'return s is not None and isinstance(s.data, dict) and s.data.get("write") is True',
        "return s is not None",
    ),
    "s14-start-recorded-after-step": (
        "2. the start recorded after the step",
        "journal.py",
        "        deferred = not write and not gated and not budgeted\n",
        "        deferred = True\n",
    ),
    "s05-torn-tail-is-corruption": (
        "3. a torn last record treated as corruption",
        "stores/lines.py",
        "    piece = lines.pop()\n    good = len(data) - len(piece)\n",
        "    piece = lines.pop()\n    good = len(data) - len(piece)\n"
        "    if piece:\n        lines.append(piece)\n        good = len(data)\n",
    ),
    "s06-torn-tail-kept-on-append": (
        "3. a torn last record kept (the next record glued onto garbage)",
        "stores/file/store.py",
        "            self._write(path, fd, data, good)",
        "            self._write(path, fd, data, st.st_size)",
    ),
    "s06b-nul-tail-kept": (
        "3. a NUL-filled last record kept",
        "stores/lines.py",
        '    if lines and b"\\0" in lines[-1]:',
        "    if False:",
    ),
    "s06c-zeros-inside-last-line-are-corruption": (
        "3. a zero-filled block inside the last line (its newline on disk) bricks the run",
        "stores/lines.py",
        '    if lines and b"\\0" in lines[-1]:',
        '    if lines and lines[-1].endswith(b"\\0"):',
    ),
    "s06d-lone-nul-is-a-tear": (
        "3. one flipped bit (a space turned NUL) in the last record drops it as a torn tail",
        "stores/lines.py",
        "        if zeroed_blocks(last, base + good - len(last) - 1):",
        "        if True:",
    ),
    "s06e-sectors-counted-from-the-read": (
        "3. a zeroed sector judged by where a read began, not by its place in the file",
        "stores/file/journals.py",
        "lines, good = split_journal(buf[begin:], start + begin)",
        "lines, good = split_journal(buf[begin:])",
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
        "ids.py",
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
        "stores/lines.py",
        "        if rec.seq != expected:",
        "        if False:",
    ),
    "x03-signal-unvalidated": (
        "(extra) signals for calls nobody asked for are written",
        "signals.py",
        "    if call is None or marker_for(step, call.arguments) != marker:",
        "    if False:",
    ),
    # -- issue "races and hostile stores": each hole found there stays guarded --------------
    "r01-deny-not-rechecked-at-start": (
        "an accepted deny does not stop a write whose turn already began",
        "journal.py",
        "await self.append(start, unless_denied=marker, sync=sync",
        "await self.append(start, unless_denied=None, sync=sync",
    ),
    "r02-loop-drops-the-marker": (
        "the loop does not tell the journal which decision a call depends on",
        "turns.py",
        "invoke, write=write, marker=marker, **policy",
        "invoke, write=write, marker=None, **policy",
    ),
    "r03-lease-freed-under-a-live-step": (
        "a cancelled attempt frees its lease while its tool thread still runs",
        "run.py",
        "                lease.keep_until(journal.unfinished)",
        "                pass",
    ),
    "r04-worker-waits-instead-of-exiting": (
        "a worker out of grace waits for (or abandons) a live step instead of exiting",
        "worker/serve.py",
        "            os._exit(EXIT_STEPS_ABANDONED)",
        "            pass",
    ),
    "r05-signal-checked-outside-the-lock": (
        "signal() validates, then appends without the lock: a competing decision slips in",
        "signals.py",
        "    stored: Record = store.append("
        'run_id, Record.make(SIGNAL, step, "", data), check=check)',
        "    check(store.load(run_id))\n"
        '    stored: Record = store.append(run_id, Record.make(SIGNAL, step, "", data))',
    ),
    "r06-decision-on-a-started-call": (
        "approving or denying a call whose step already started is accepted",
        "signals.py",
        "    if step in index.started:\n        started = index.started[step]\n",
        "    if False:\n        started = index.started[step]\n",
    ),
    "r07-busy-counts-as-failure": (
        "a busy run (another worker holds it) uses up the failure budget",
        "worker/serve.py",
        "        except RunBusyError:\n",
        "        except RunBusyError as busy:\n"
        "            await asyncio.to_thread(self._count_failure, run_id, busy)\n",
    ),
    "r08-signal-does-not-reset-the-budget": (
        "a new signal does not give a failed run a fresh budget",
        "worker/retry.py",
        "        return self.signals != signals",
        "        return False",
    ),
    "r09-store-file-written-in-place": (
        "outcomes and failure counts are overwritten in place (a failed write loses the old)",
        "stores/file/fs.py",
        '    tmp = f".{name}.{os.getpid()}.{threading.get_ident()}.tmp"',
        "    tmp = name",
    ),
    "r10-store-folder-not-fsynced": (
        "a replaced store file's folder is not fsynced",
        "stores/file/fs.py",
        "    os.fsync(dir_fd)\n",
        "    pass\n",
    ),
    "r11-new-journal-folder-not-fsynced": (
        "a new journal's folder is not fsynced",
        "stores/file/store.py",
        "            fsync_dir(self.root)\n            return True",
        "            return True",
    ),
    "r12-recorded-call-gated-again": (
        "a call that has its result is gated again when the gate changed",
        "turns.py",
        "            self.runner.is_recorded(step)\n            or not (asked",
        "            not (asked",
    ),
    "r13-awaiting-before-indeterminate": (
        "the status rules in another order (awaiting_approval before indeterminate)",
        "fold.py",
        "        if self.indeterminate is not None:\n            return RunStatus.INDETERMINATE\n"
        "        if self.over_budget(outcome):\n            return RunStatus.OVER_BUDGET\n"
        "        if self.incompatible(outcome):\n            return RunStatus.INCOMPATIBLE\n"
        "        if self.pending(outcome):\n            return RunStatus.AWAITING_APPROVAL\n",
        "        if self.pending(outcome):\n            return RunStatus.AWAITING_APPROVAL\n"
        "        if self.indeterminate is not None:\n            return RunStatus.INDETERMINATE\n"
        "        if self.over_budget(outcome):\n            return RunStatus.OVER_BUDGET\n"
        "        if self.incompatible(outcome):\n            return RunStatus.INCOMPATIBLE\n",
    ),
    "r14-running-before-completed": (
        "the status rules in another order (running before completed)",
        "fold.py",
        "        if self.completed:\n            return RunStatus.COMPLETED\n",
        "        if leased:\n            return RunStatus.RUNNING\n"
        "        if self.completed:\n            return RunStatus.COMPLETED\n",
    ),
    "r15-last-result-wins": (
        "a later step.completed replaces the first one",
        "step_index.py",
        "            self.completed.setdefault(r.step, r)",
        "            self.completed[r.step] = r",
    ),
    "r16-non-regular-journal-read": (
        "a journal that is a FIFO or a directory is read like a file",
        "stores/file/fs.py",
        "        if kind != stat.S_IFREG:",
        "        if False:",
    ),
    "r17-store-folder-symlink-followed": (
        "a symlinked .leases/.outcomes/.worker is followed out of the store",
        "stores/file/fs.py",
        "O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC",
        "O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC",
    ),
    "r18-whole-final-record-dropped": (
        "an fsynced final record that lost its newline is treated as a torn tail",
        "stores/lines.py",
        "        for whole in (piece, piece[:-1]):",
        "        for whole in ():",
    ),
    "r20-unrecordable-failures-forgotten": (
        "a worker on a store that cannot record failures retries at once, forever",
        "worker/serve.py",
        "            self._seen_failures[run_id] = Attempts(\n"
        "                failures, signals, time.time(), text, retry_after_of(error)\n"
        "            )",
        "            pass",
    ),
    "r21-submit-accepts-bad-utf8": (
        "agentrun submit takes argv bytes that are not UTF-8",
        "cli/runs.py",
        "        args.text.encode()",
        "        pass",
    ),
    "m01-idempotent-write-left-for-a-human": (
        "an unfinished idempotent write stops the run instead of running again",
        "journal.py",
        "                if not self.index.is_idempotent(name):\n"
        "                    raise IndeterminateError(name)\n",
        "                raise IndeterminateError(name)\n",
    ),
    "m02-every-open-write-rerun": (
        "an unfinished write that is not idempotent runs again",
        "step_index.py",
        'data.get("write") is True and data.get("idempotent") is True\n',
        'data.get("write") is True\n',
    ),
    "m05-open-idempotent-write-shown-indeterminate": (
        "the status fold calls an unfinished idempotent write indeterminate",
        "fold.py",
        '                data.get("write") is True\n'
        '                and data.get("idempotent") is not True\n',
        '                data.get("write") is True\n',
    ),
    "m03-retry-after-ignored": (
        "the worker retries before the provider's Retry-After",
        "worker/retry.py",
        "max(min(cap, base * 2 ** (failures - 1)), retry_after or 0.0)",
        "min(cap, base * 2 ** (failures - 1))",
    ),
    "m04-malformed-call-runs-the-tool": (
        "a tool call whose arguments were not JSON runs the tool with {}",
        "turns.py",
        "            return denied\n        return call.error\n",
        "            return denied\n        return None\n",
    ),
    "o01-fork-copies-an-open-write": (
        "a fork copies a write that may or may not have happened",
        "fork.py",
        "    _refuse_open_writes(run_id, at_step, copies, dropped)\n",
        "",
    ),
    "o02-interrupted-fork-looks-ready": (
        "a fork cut short shows as ready, for a worker to run with half its history",
        "fold.py",
        "        if self.origin is not None and self.unfinished_fork() is not None:\n",
        "        if False:\n",
    ),
    "o03-interrupted-fork-runs": (
        "run() executes a fork cut short",
        "run.py",
        "    gap = unfinished_fork(records, run_id)\n    if gap is not None:\n        raise Fork",
        "    gap = None\n    if gap is not None:\n        raise Fork",
    ),
    "o04-approval-carried-for-other-arguments": (
        "a fork carries an approval over to a call with other arguments",
        "fork.py",
        "keep = isinstance(marker, str) and requested.get(marker_step(marker)) == marker",
        "keep = True",
    ),
    "o05-audit-hides-an-override": (
        "the audit calls an approval that a later deny beat applied",
        "audit.py",
        "            if deny is not None:\n",
        "            if False:\n",
    ),
    "o06-fork-looks-as-old-as-its-copies": (
        "a new fork's last activity is its newest copied record's time, not the fork's",
        "fold.py",
        "        if self.last_at is None or r.at > self.last_at:\n"
        "            self.last_at = r.at\n",
        "        self.last_at = r.at\n",
    ),
    # issue "safety and speed"
    "f01-deny-learnt-earlier-forgotten": (
        "a deny read at an earlier call's checked start no longer stops the call it names",
        "journal.py",
        "reason = index.denied.get(marker) or denial_of(marker, missed)",
        "reason = denial_of(marker, missed)",
    ),
    "f02-row-before-fsync": (
        "a summary row written before the journal's fsync outlives records a crash lost",
        "stores/file/store.py",
        "            if sync:\n                try:\n                    os.fsync(fd)\n"
        "                except OSError as e:\n                    self.keeper.tip(run_id)",
        "            if row is not None:\n                self.keeper.write_row(row)\n"
        "                row = None\n"
        "            if sync:\n                try:\n                    os.fsync(fd)\n"
        "                except OSError as e:\n                    self.keeper.tip(run_id)",
    ),
    "f03-denied-write-recorded-as-read": (
        "a call refused by policy or a deny records its start as a read",
        "turns.py",
        "refuse, write=write, refused=True",
        "refuse, write=False, refused=True",
    ),
    "f04-refused-write-indeterminate": (
        "a refused write's start (it never acted) stops the run as indeterminate",
        "fold.py",
        '                and data.get("refused") is not True\n            )',
        "            )",
    ),
    "f05-stale-tip-trusted": (
        "an append trusts this process's last seq though the journal was rewritten since",
        "stores/file/summaries.py",
        '        if line[-1:] != b"\\n":\n            return False',
        "        return True",
    ),
    "f06-no-lease-check-before-the-call": (
        "a holder whose lease may be lost calls the tool anyway",
        "journal.py",
        "            self._check_lease(name)  # a holder that may have lost its lease calls "
        "nothing\n",
        "",
    ),
    # agentrun web (issue "safety and speed")
    "w01-origin-suffix-match": (
        "agentrun web takes an Origin that merely ends with its address (evilproxy.example)",
        "tui/durableagent_tui/web.py",
        'origin.lower() not in (f"http://{host}", f"https://{host}")',
        "not origin.lower().endswith(host)",
    ),
    # the mutation audit (issue "safety and speed")
    "a01-landed-append-made-again": (
        "an append whose reply was lost after its commit is made again",
        "stores/postgres/append.py",
        "                if found is not None and bytes(found[0]) == line:",
        "                if False:",
    ),
    "a03-check-reads-before-the-lock": (
        "a PostgreSQL check runs on records read before the run's row lock",
        "stores/postgres/append.py",
        '                    cur = conn.execute(*_q("lock_state", {"run_id": run_id}))\n'
        "                    got = None\n"
        "                    if check is not None:\n"
        '                        args = {"run_id": run_id, "after": since}\n'
        '                        got = conn.cursor(binary=True).execute(*_q("load_since", args))\n',
        "                    got = None\n"
        "                    if check is not None:\n"
        '                        args = {"run_id": run_id, "after": since}\n'
        '                        got = conn.cursor(binary=True).execute(*_q("load_since", args))\n'
        '                    cur = conn.execute(*_q("lock_state", {"run_id": run_id}))\n',
    ),
    "a02-renewal-unfenced": (
        "renewing a PostgreSQL lease whose epoch was taken over succeeds",
        "stores/postgres/sql/queries.sql",
        "WHERE run_id = %(run_id)s AND holder_epoch = %(epoch)s\nRETURNING true;",
        "WHERE run_id = %(run_id)s\nRETURNING true;",
    ),
    "a04-late-outcome-saved": (
        "a superseded holder's outcome is saved over the new holder's attempt",
        "stores/postgres/sql/schema.sql",
        "    IF p_lease AND r.holder_epoch IS DISTINCT FROM p_epoch THEN",
        "    IF false THEN",
    ),
    "a05-superseded-attempt-running": (
        "an attempt taken over reads as running while the new holder runs",
        "stores/postgres/attempts.py",
        "            if ended is None and epoch != holder:",
        "            if ended is None and holder is None:",
    ),
    "a06-stale-fold-reused": (
        "a FileStore summary is folded on from before another process's appends",
        "stores/file/store.py",
        "        else:\n            tip.extend(new)\n",
        "        else:\n            pass\n",
    ),
    "a07-imported-run-unlisted": (
        "a journal import_run brought in is missing from the listing",
        "stores/file/summaries.py",
        "if listed is not None and listed[1] == logs.stamp_of(root_mtime, 0):",
        "if listed is not None:",
    ),
    "a08-deny-refuses-the-whole-turn": (
        "a deny signal refuses every call of its turn, not just the one it names",
        "turns.py",
        "denied = self.denied.get(self.marker(index, call, turn=turn))",
        "denied = next(iter(self.denied.values()), None)",
    ),
    "a09-late-deny-refuses-any-call": (
        "a deny that lands while the turn runs refuses whichever call starts next",
        "step_index.py",
        'if name == "deny" and payload.get("marker") == marker:',
        'if name == "deny":',
    ),
    "s20-deadline-overrules-an-approval": (
        "a lapsed approval's deny lands over a human's approval that came first",
        "signals.py",
        '        if name == "deny" and by == DEADLINE:',
        "        if False:",
    ),
    "c01-cancel-not-rechecked-under-the-lock": (
        "a cancel that lands while a step is under way does not stop the step's record",
        "journal.py",
        "                    if any(halts(r) for r in missed):",
        "                    if False:",
    ),
    "c02-lost-call-reservation-forgotten": (
        "a model call lost in a crash counts nothing against the budget: a restart resets it",
        "budget.py",
        "        return used + sum(self.lost.values()) + sum(t for t, _ in self.open.values())",
        "        return used",
    ),
    "a10-write-start-not-fsynced": (
        "a write's step.started is not fsynced before the tool runs",
        "journal.py",
        "            sync = write or (budgeted and kind == StepKind.MODEL)",
        "            sync = budgeted and kind == StepKind.MODEL",
    ),
    "a11-lapsed-lease-runs-the-next-step": (
        "an attempt whose lease went unrenewed past its ttl starts its next step",
        "journal.py",
        "        if self.lease is not None and self.lease.lost:",
        "        if False:",
    ),
    "a12-lease-renewed-once-a-ttl": (
        "a running attempt renews its lease once a ttl, not every third",
        "run.py",
        "        await asyncio.sleep(lease.ttl / 3)",
        "        await asyncio.sleep(lease.ttl)",
    ),
    "a13-unrun-retry-applied": (
        "the audit calls a reconcile-retry applied before the write ran again",
        "audit.py",
        "            if again is not None:\n"
        '                effect, note = APPLIED, f"the write ran',
        '            if True:\n                effect, note = APPLIED, f"the write ran',
    ),
    "a14-in-doubt-look-misses-a-late-commit": (
        "the look for an append in doubt reads before the lost session's commit lands",
        "stores/postgres/append.py",
        '                    conn.execute(*_q("lock_row", {"run_id": run_id}))\n',
        "",
    ),
    # issue 23: guarantees the mutation audit found no test holding
    "g01-no-halt-check-at-a-steps-start": (
        "a cancel accepted while a write ran: the model is called after the write anyway",
        "journal.py",
        "        self._check_halt(name)\n        started: dict",
        "        started: dict",
    ),
    "g02-a-pause-heard-leaves-the-read-running": (
        "a pause heard while a read runs (its start shown) does not cancel the read",
        "listen.py",
        "        halt = controls.halt\n",
        "        halt = controls.moved or controls.cancelled\n",
    ),
    "g03-cost-check-forgets-the-lost": (
        "the cost check's copy of the spend drops the reservations of calls lost in a crash",
        "budget.py",
        "        return Spend.from_json(self.to_json())",
        "        return Spend(\n"
        "            dict(self.used), {}, dict(self.open), self.model_calls, self.tool_calls\n"
        "        )",
    ),
    "g04-reservation-not-fsynced": (
        "a budgeted model step's start (its reservation) is not fsynced before the call",
        "journal.py",
        "            sync = write or (budgeted and kind == StepKind.MODEL)",
        "            sync = write",
    ),
    "g05-approval-deadline-from-the-attempt": (
        "an approval deadline counts from the attempt that stopped for it, not from the ask",
        "deadlines.py",
        "deadline_at=asked.at + seconds",
        "deadline_at=time.time() + seconds",
    ),
    "g06-yes-beats-dry-run": (
        "--dry-run --yes applies the bulk action (--yes wins over --dry-run)",
        "cli/bulk.py",
        "    if args.dry_run:\n",
        "    if args.dry_run and not args.yes:\n",
    ),
    "g07-move-copies-before-the-write-ends": (
        "copy --move copies a run whose attempt is still inside a write (its result lost)",
        "copying.py",
        "    _wait_free(src, run_id, wait)\n",
        "",
    ),
    "g08-escalates-a-run-no-longer-waiting": (
        "a run that stopped needing a human (cancelled) stays watched and is escalated",
        "notify/notifier.py",
        "            self._seen.pop(rid, None)\n            if summary is not None and summary",
        "            if summary is not None and summary",
    ),
    "g09-liveness-from-the-default-period": (
        "a worker's liveness is judged from the default heartbeat, not its own",
        "roster.py",
        "        return now - self.beat_at < LIVE_BEATS * max(self.heartbeat, 0.1)",
        "        return now - self.beat_at < LIVE_BEATS * DEFAULT_HEARTBEAT",
    ),
    "g09b-registered-heartbeat-not-read": (
        "a registration read back loses its worker's heartbeat (the default taken instead)",
        "roster.py",
        'heartbeat=float(d.get("heartbeat") or DEFAULT_HEARTBEAT),',
        "heartbeat=DEFAULT_HEARTBEAT,",
    ),
    "g10-retry-applied-only-once-the-write-finished": (
        "the audit calls a reconcile-retry pending when its write ran again and died again",
        "audit.py",
        "            again = after(starts, step, r.seq)",
        "            again = after(results, step, r.seq)",
    ),
    "g11-late-write-judged-from-the-attempts-start": (
        "the late-write warning measures from the attempt's start, not its last record",
        "takeover.py",
        "last_sign = max((r.at for r in records if r.seq >= holder.first_seq), default=start.at)",
        "last_sign = holder.started_at or start.at",
    ),
    "g12-fork-copies-the-cancel": (
        "a fork of a cancelled run at a step the cancel came before carries the cancel along",
        "fork.py",
        '            keep = name == "reconcile" and r.step in started',
        '            keep = name == "cancel" or (name == "reconcile" and r.step in started)',
    ),
    "a15-silent-holder-not-warned": (
        "an open write whose holder's lease expired shows no warning once two ttls of silence "
        "passed with no takeover (the holder may be paused, and its write may still land)",
        "takeover.py",
        "    took_over = later[0].started_at if later else None",
        "    took_over = later[0].started_at if later else now",
    ),
    "a16-dead-holder-warned": (
        "a holder whose process is known to be gone is warned of as if it might still write",
        "takeover.py",
        "    if known_dead(holder.owner, workers):",
        "    if False:",
    ),
    "a17-run-started-under-its-own-call": (
        "a worker starts a run again while a call of its earlier attempt still runs in the "
        "worker's own threads (two attempts of one run in one process)",
        "worker/serve.py",
        "        if self._call_in_flight(run_id):\n            return\n",
        "",
    ),
    "a18-tool-threads-not-counted": (
        "a sync tool's thread is not counted as a call of its run in flight",
        "tools/base.py",
        "    with in_flight(run_id):\n        return fn(arguments, **extra)",
        '    with in_flight(""):\n        return fn(arguments, **extra)',
    ),
    "a19-tui-timeline-without-the-late-write": (
        "the TUI's followed run (the reconcile dialog opens on it) never says that its open "
        "write's holder may still write",
        "tui/durableagent_tui/tracker.py",
        "            view = with_late_write(store, view, records, attempts)\n",
        "",
    ),
    # Pydantic AI under the journal (integrations/pydantic_ai): its own tests catch these.
    "p01-pydantic-turn-runs-before-approval": (
        "a Pydantic AI turn's reads run while another of its calls waits for a human",
        "integrations/pydantic_ai/attempt.py",
        "        if pending:\n            raise Waiting(pending)\n",
        "",
    ),
    "p02-pydantic-usage-lost-on-replay": (
        "usage a tool added to the run is lost when its step is replayed (pydantic-ai #6886)",
        "integrations/pydantic_ai/attempt.py",
        "        if not ran and isinstance(spent, dict):",
        "        if False:",
    ),
    "p03-pydantic-calls-in-parallel": (
        "a turn's tool calls run in parallel, their steps in whatever order they finish",
        "integrations/pydantic_ai/engine.py",
        "sequential_tools_in_durable_context=True,",
        "sequential_tools_in_durable_context=False,",
    ),
    "p04-pydantic-deny-runs-the-tool": (
        "a human's deny is handed to Pydantic AI as an approval",
        "integrations/pydantic_ai/attempt.py",
        "decided[part.tool_call_id] = ToolDenied(reason)",
        "decided[part.tool_call_id] = True",
    ),
    "p05-pydantic-output-call-as-tool-step": (
        "a structured output's call is recorded as a tool call that never gets a step",
        "integrations/pydantic_ai/shapes.py",
        "        if p.tool_name not in output_tools",
        "        if True",
    ),
    "p06-pydantic-reconciled-result-not-given-back": (
        "the result a human reconciled is not what the model reads as the tool's return",
        "integrations/pydantic_ai/shapes.py",
        'content = recorded.get("content", "") if isinstance(recorded, dict) else ""',
        'content = ""',
    ),
    # Deploys (issue 25): a resume checks the run's journal against the new code first.
    "d01-removed-tool-passes": (
        "a pending call whose tool is gone is let through to the new code",
        "deploys.py",
        "        if call.tool not in code.schemas:\n            blockers.append(",
        "        if call.tool not in code.schemas:\n            continue\n"
        "            blockers.append(",
    ),
    "d02-new-schema-not-checked": (
        "recorded arguments are not validated against the tool's new schema",
        "deploys.py",
        "        problem = schema_problem(new, call.arguments)",
        "        problem = None",
    ),
    "d03-new-required-argument-ignored": (
        "an argument the new schema requires is not looked for",
        "deploys.py",
        '        for name in schema.get("required") or ():',
        "        for name in ():",
    ),
    "d04-incompatible-run-runs-anyway": (
        "the worker runs an incompatible run instead of stopping before any step",
        "run.py",
        "            if blocked:",
        "            if False:",
    ),
    "d05-asked-call-forgotten": (
        "a call a human was asked about is not checked once the new gate no longer gates it",
        "deploys.py",
        "        human = marker in approved or marker in asked or gate.needs_approval(call.tool)",
        "        human = marker in approved or gate.needs_approval(call.tool)",
    ),
    "d06-completed-call-blocks": (
        "a completed call of a changed tool blocks instead of replaying",
        "deploys.py",
        "            if step in completed:\n                continue\n",
        "",
    ),
    "d07-incompatible-is-ready": (
        "an incompatible run reads as ready: the workers retry it in a loop",
        "fold.py",
        "        if self.incompatible(outcome):\n            return RunStatus.INCOMPATIBLE\n",
        "",
    ),
    "d08-accepted-call-runs": (
        "after accept-change the old call runs (or is asked again) with its old arguments",
        "run.py",
        "        denied.setdefault(marker, text)",
        "        pass",
    ),
    "d09-accept-change-unchecked": (
        "accept-change is not validated under the journal's lock",
        "signals.py",
        "        if call is None or marker_for(at, call.arguments) != marker:",
        "        if False:",
    ),
    "t01-summary-folds-records-twice": (
        "a summary disagrees with its journal (a check's re-read folded onto the tip)",
        "stores/file/store.py",
        "start, seq0, tip = 0, 0, None",
        "start, seq0 = 0, 0",
    ),
    "t02-reloaded-fold-forgets-finished-steps": (
        "a summary disagrees with its journal (a saved fold counts a finished step again)",
        "fold.py",
        '"finished": None if self.finished is None else sorted(self.finished),',
        '"finished": None,',
    ),
    "t03-cancelled-run-not-copied": (
        "a cancelled run refused by copy as if it could still run (SPEC §7)",
        "copying.py",
        "FINISHED = frozenset({RunStatus.COMPLETED, RunStatus.CANCELLED})",
        "FINISHED = frozenset({RunStatus.COMPLETED})",
    ),
    "h01-one-approval-notice-per-turn": (
        "two calls waiting after one turn get one approval notice (a shared claim key)",
        "notify/notices.py",
        "        if not self.subject:\n            return self.kind",
        "        if True:\n            return self.kind",
    ),
    "h02-budget-hint-raises-tokens": (
        "the over-budget notice raises tokens, whatever limit stopped the run",
        "notify/notices.py",
        "limit = stopped_at(s.budget, s.waiting_on or s.error)",
        'limit = "tokens"',
    ),
    "h03-fork-hint-without-as-and-reason": (
        "a fork hint that fails when pasted (no --as, no --reason)",
        "hints.py",
        "--at {_q(at)} --as {_q(new)} --reason WHY{_where(store)}",
        "{_q(new)} --at {_q(at)}{_where(store)}",
    ),
    "h04-demo-failure-not-exhausted": (
        "the demo's failed run's count never says the workers gave up: no failed notice",
        "demo/build.py",
        'note_failure(store, "vpn-access", e, max_attempts=DEFAULT_MAX_ATTEMPTS)',
        'note_failure(store, "vpn-access", e)',
    ),
    "h06-give-up-unsaid": (
        "a worker gives up on a run whose count does not say so: no failed notice, ever",
        "worker/retry.py",
        '    if not d or d.get("exhausted") or d.get("signals") != signals:\n        return\n',
        "    return\n",
    ),
    "h05-mail-body-taken-for-html": (
        "a notice's plain text sent unlabelled: the mail loses its line breaks",
        "notify/targets.py",
        "title=title, body=body, body_format=self._apprise_module.NotifyFormat.TEXT",
        "title=title, body=body",
    ),
    # The OpenAI Agents SDK under the journal (integrations/openai_agents): its own tests
    # catch these.
    "o01-agents-turn-runs-before-approval": (
        "an Agents SDK turn's reads run while another of its calls waits for a human",
        "integrations/openai_agents/attempt.py",
        "        if pending:\n            self.fatal = Waiting(pending)\n"
        "            raise self.fatal\n",
        "",
    ),
    "o02-agents-raised-write-recorded-done": (
        "a write that raised is recorded as done with the SDK's error text (its default)",
        "integrations/openai_agents/attempt.py",
        "if error is not None and self.turns.gate.is_write(call.name):",
        "if False:",
    ),
    "o03-agents-calls-in-parallel": (
        "a turn's tool calls run in parallel, their steps in whatever order they finish",
        "integrations/openai_agents/attempt.py",
        "        if self.fatal is not None or index not in self.order:\n            return True\n",
        "        return True\n",
    ),
    "o04-agents-deny-without-the-reason": (
        "a human's deny reaches the model as the SDK's default rejection, not their reason",
        "integrations/openai_agents/attempt.py",
        "self.context.reject_tool(item, rejection_message=reason)",
        "self.context.reject_tool(item)",
    ),
    "o05-agents-reconciled-result-not-given-back": (
        "the result a human reconciled is not what the model reads as the tool's return",
        "integrations/openai_agents/shapes.py",
        'return recorded.get("content", "") if isinstance(recorded, dict) else ""',
        'return ""',
    ),
    "o06-agents-handoff-not-a-step": (
        "a handoff runs outside the journal: its on_handoff runs again on every replay",
        "integrations/openai_agents/attempt.py",
        "            handed_off = await self.turns.tool(index, call, run)",
        "            handed_off = await run()",
    ),
    "o07-agents-step-without-its-agent": (
        "a model step does not name the agent that asked (handoffs replayed blind)",
        "integrations/openai_agents/shapes.py",
        '    out["agent"] = agent\n',
        "",
    ),
    "o08-agents-provider-replaced": (
        "the caller's model provider is replaced by the SDK's default instead of wrapped",
        "integrations/openai_agents/loop.py",
        "            provider = JournalProvider(provider)",
        "            provider = JournalProvider(RunConfig().model_provider)",
    ),
    "o09-agents-retry-asks-a-second-turn": (
        "the SDK's own retry of a failed model request goes out as the next turn's step",
        "integrations/openai_agents/attempt.py",
        "        if self.fatal is not None:\n            raise self.fatal\n"
        "        agent = self.active\n",
        "        agent = self.active\n",
    ),
    "h01-bulk-retry-writes-no-signal": (
        "a bulk retry (retry --where, R on marked runs) clears the failure count and writes no "
        "retry signal: who retried, and why, is lost to the audit",
        "bulk.py",
        "            actions.retry(store, t.run_id, by=by, reason=reason, status=t.status)\n",
        "            if t.status != RunStatus.FAILED:\n"
        "                raise DurableAgentError(f'run {t.run_id} is {t.status}, not failed')\n"
        "            store.clear_failures(t.run_id)\n",
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
    "tests/contract",
    "tests/test_loop.py",
    "tests/test_leases.py",
    "tests/test_races.py",
    "tests/test_hostile_store.py",
    "tests/test_worker.py",
    "tests/test_idempotent.py",
    "tests/test_retry_after.py",
    "tests/test_models_openai.py",
    "tests/test_fork.py",
    "tests/test_audit.py",
    "tests/test_postgres.py",
    "tests/test_late_write.py",
    "tests/test_deploys.py",
]

# The tests of a file outside the core, run besides TESTS for its mutants.
MORE_TESTS = {
    "tui/durableagent_tui/web.py": ["tests/test_web_guard.py"],
    "copying.py": ["tests/test_store_commands.py"],
    "worker/retry.py": ["tests/test_demo_notices.py"],
    "cli/bulk.py": ["tests/test_bulk.py"],
    "bulk.py": ["tests/test_bulk.py"],
}
# An integration's mutants run its own tests only: the core's tests never load it.
INTEGRATION_TESTS = {
    "integrations/pydantic_ai/": ["tests/test_pydantic_ai.py"],
    "integrations/openai_agents/": ["tests/test_openai_agents.py"],
}
# A notice's, a hint's or the demo store's mutants run the tests that read what they say
# (the core's suite prints no notice and pastes no hint).
OWN_TESTS = {
    "notify/": [
        "tests/test_notices.py",
        "tests/test_notice_targets.py",
        "tests/test_demo_notices.py",
    ],
    "hints.py": ["tests/test_hints.py"],
    "demo/": ["tests/test_demo_notices.py"],
}
# The deploy rule's mutants (d..) run the rule's own tests, in this process and with real
# workers on both stores: the whole core list takes over 20 minutes per mutant.
RULE_TESTS = {"d": ["tests/test_deploys.py", "tests/test_deploys_workers.py"]}


def run_mutant(name: str, work: Path) -> list[str]:
    _pitfall, file, original, mutated = MUTANTS[name]
    core, tui = work / "core", work / "tui"
    for copy in (core, tui):
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(ROOT / copy.name, copy)
    target = work / file if file.startswith("tui/") else core / "durableagent" / file
    text = target.read_text()
    assert text.count(original) == 1, f"{name}: the original snippet is not in {file} once"
    target.write_text(text.replace(original, mutated))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(core), str(tui)])}
    tests = TESTS + MORE_TESTS.get(file, [])
    for folder, own in {**INTEGRATION_TESTS, **OWN_TESTS}.items():
        if file.startswith(folder):
            tests = own
    for prefix, own in RULE_TESTS.items():
        if name.startswith(prefix) and name[1:3].isdigit():
            tests = own
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", *tests],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    # A test id may hold spaces (its parameters): it runs up to the " - " of the message.
    return sorted(set(re.findall(r"^FAILED (.+?)(?: - .*)?$", out.stdout, re.M)))


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
