"""No test waits on the clock: no sleep that waits for another task, no upper bound on time.

A test that sleeps "long enough" for another task to get somewhere passes on an idle
machine and fails on a loaded one (CI shares two cores), and an assertion that something
took less than N seconds of wall-clock time fails the same way. A test waits for an event,
moves the injected clock, or polls with a deadline that is its only failure
(``tests.support.worker_support.eventually``, ``tests.support.in_process.until``); timing
belongs in ``bench/``.

This walks every Python file under tests/ with ``ast`` and finds:

- a ``sleep(...)`` call (``time.sleep``, ``asyncio.sleep``, ``pg_sleep`` is SQL and not
  seen) whose duration is not the literal ``0`` (a yield to the loop) and which is not in
  the body of a ``while`` or ``for`` loop (a poll, or the pace of a loop whose condition
  decides when it ends);
- an ``assert`` comparing a value read off the clock (``time.monotonic()``,
  ``time.perf_counter()``, ``time.time()``, ``loop.time()``, or a name assigned from one in
  the same function) as smaller than something (``elapsed < 2``), outside a loop (a poll's
  ``assert time.monotonic() < deadline`` is its deadline). A lower bound (``elapsed >= 1``:
  it did wait) is fine.

Where a sleep is the scenario itself (a handler that runs past its lease's ttl, a lease
left to expire on the database's clock, a quiet interval in which nothing may happen), the
function is named in ``SCENARIO`` with its reason. An upper bound that stays separates the
contract's two outcomes far apart (woken at once, or at the end of a 20 s wait) and is named
in ``BOUNDS`` with both. Each entry must still match: a stale one fails too, so the lists
only shrink with the code.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
CLOCKS = {"monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns", "time_ns"}

# The longer names of the functions below.
SWEEP_ACROSS = "test_a_sweep_through_one_process_recovers_a_lease_taken_through_another"
BLOCKED_RENEWALS = "test_blocked_renewals_cancel_the_handler_and_nothing_is_sent"
CHECKPOINT = "test_a_checkpoint_outlives_its_holder_and_the_next_one_resumes_there"
HALF_A_LEASE = "test_a_service_stopped_for_half_a_lease_costs_nothing"
LOST_ANSWERS = "test_lost_answers_never_turn_one_intent_into_two_effects"
HUNG_RENEWAL = "test_a_hung_renewal_is_cut_off_and_the_handler_stopped_in_time"
STALLED_BODY = "test_when_full_a_stalled_body_goes_first_then_the_longest_idle_never_a_long_poll"
NODE_OUTAGE = "test_a_stopped_worker_node_costs_only_its_sessions.outage_of_one_node"
WOKEN_BY_ANOTHER = "test_a_waiter_wakes_when_another_process_completes_the_lead"
PGBOUNCER_NOTIFY = "test_a_wait_for_an_outcome_is_woken_by_notify_over_the_direct_listen_url"
GIVES_UP = "test_a_worker_that_cannot_reach_its_service_says_where_and_gives_up"

# (file under tests/, the function's qualified name) -> why its sleep is the scenario.
SCENARIO: dict[tuple[str, str], str] = {
    # Time that runs out on the database's clock: the contract's shortest is 1 s.
    ("api/test_fleets.py", "test_a_checkpoint_goes_to_the_next_holder"): (
        "a 1 s lease runs out on the database's clock"
    ),
    ("api/test_fleets.py", "test_the_scaling_signal_moves"): (
        "the oldest lead's age grows by a second of the database's clock"
    ),
    ("api/test_tokens.py", "test_a_cached_token_is_not_honoured_past_its_expiry"): (
        "a token made to expire in 1 s (the shortest) expires"
    ),
    ("deploy/test_processes.py", SWEEP_ACROSS): "a 1 s lease runs out on the database's clock",
    ("deploy/test_serve.py", "test_boot_recovery_requeues_a_lease_of_a_killed_server"): (
        "a 1 s lease runs out while no server runs"
    ),
    ("integration/test_cli.py", "test_sweep_requeues_expired_leases"): (
        "a 1 s lease runs out on the database's clock"
    ),
    ("integration/test_client.py", "test_every_endpoint"): (
        "a 1 s lease runs out before the sweep"
    ),
    ("integration/test_fleet.py", "test_work_pushed_later_is_found_without_a_notification"): (
        "the fleet's view of empty sessions is read again after EMPTY_REFRESH_S (0.1 s)"
    ),
    # Handlers and servers that take real time are what the test is about.
    ("chaos/chaos_worker.py", "handle"): "the chaos workers' handlers take 0.1 to 0.5 s",
    ("clients/workers/python_worker.py", "work.handler"): (
        "the conformance set's sleeping handler sleeps the milliseconds its lead asks"
    ),
    ("integration/test_worker.py", BLOCKED_RENEWALS + ".outlives_its_lease"): (
        "a handler that runs until the worker cancels it"
    ),
    ("integration/test_worker.py", CHECKPOINT + ".reads_forty_pages"): (
        "a handler that runs until its holder is killed"
    ),
    ("integration/test_worker.py", "test_the_worker_rides_out_a_service_restart.work"): (
        "each lead takes 50 ms of work, so some are in flight when the service stops"
    ),
    ("integration/test_worker_promise.py", HALF_A_LEASE + ".five_seconds"): (
        "a handler that works 5 s of a 6 s lease"
    ),
    ("integration/test_worker_promise.py", LOST_ANSWERS + ".a_second"): (
        "a handler that works past a third of its 3 s ttl, so a renewal is sent"
    ),
    ("integration/test_worker_promise.py", HALF_A_LEASE): (
        "the service is stopped (SIGSTOP) 0.5 s into the lease for 3 s of its 6 s"
    ),
    (
        "unit/test_transport.py",
        "test_an_answer_later_than_the_read_timeout_is_a_read_timeout.silent",
    ): ("a server that answers after the client's read timeout"),
    ("unit/test_worker_states.py", "Stalls.__call__"): "a handler that never returns",
    ("unit/test_worker_states.py", HUNG_RENEWAL): (
        "a call's timeout is real time: it runs out while the worker's injected clock stands"
    ),
    ("api/test_http_connections.py", STALLED_BODY): (
        "a request body that stalls past STALLED_READ_S (0.2 s)"
    ),
    ("citus/test_node_outage.py", NODE_OUTAGE): (
        "a node stays down 1.5 s while the other node's sessions go on"
    ),
    # A quiet interval in which something must NOT happen can only be waited out.
    ("api/test_long_poll.py", "test_a_push_wakes_only_as_many_waiters_as_it_brings_leads"): (
        "no other waiter queries in the 0.3 s after the woken ones did"
    ),
    ("api/test_schedules.py", "test_two_api_processes_running_their_schedulers_push_one_lead"): (
        "both services' schedule loops look again, and the tick is pushed once"
    ),
    ("integration/test_client.py", "test_connection_errors_are_retried_then_unavailable"): (
        "with the service away, the call is still retrying 0.3 s later"
    ),
    ("integration/test_worker.py", "test_the_worker_rides_out_a_service_restart"): (
        "with the service away, the worker is still running 0.5 s later"
    ),
}

# Upper bounds that stay: each separates the contract's two outcomes, the one under test
# (woken, answered at once) from the other (the end of a 20 s wait, a minute's lease), by a
# margin a loaded machine does not eat (4x and more). (file, function) -> the two outcomes.
BOUNDS: dict[tuple[str, str], str] = {
    ("api/test_wait_for_client.py", "test_async_wait_for_answers_when_the_lead_ends"): (
        "woken by the completion (ms) or at the end of the 20 s wait: 5 s between"
    ),
    ("api/test_wait_for_client.py", "test_sync_wait_for_answers_when_the_lead_ends"): (
        "woken by the completion (ms) or at the end of the 20 s wait: 5 s between"
    ),
    ("api/test_wait_for_outcome.py", "test_wait_s_0_answers_at_once"): (
        "wait_s 0 answers at once, not after 20 s: 5 s between"
    ),
    ("api/test_wait_for_outcome.py", "test_a_lead_already_ended_answers_at_once"): (
        "an ended lead answers at once, not after the 20 s wait: 5 s between"
    ),
    ("api/test_wait_for_outcome.py", WOKEN_BY_ANOTHER): (
        "woken by the NOTIFY, not at the end of the 20 s wait: 5 s between"
    ),
    ("api/test_wait_for_outcome.py", "test_each_way_a_lead_ends_wakes_its_waiter"): (
        "woken by the NOTIFY, not at the end of the 20 s wait: 5 s between"
    ),
    ("api/test_wait_for_outcome.py", "test_a_lost_notification_is_made_up_by_the_re_check"): (
        "the re-check (every 0.2 s) finds it, not the end of the 20 s wait: 5 s between"
    ),
    ("deploy/test_pgbouncer.py", PGBOUNCER_NOTIFY): (
        "woken by the NOTIFY, not at the end of the 20 s wait: 5 s between"
    ),
    ("integration/test_worker_cli.py", GIVES_UP): (
        "it gives up after its 6 s, not retrying forever: 15 s"
    ),
    (
        "integration/test_worker_promise.py",
        "test_kill_9_of_the_worker_takes_its_command_tree_with_it",
    ): ("back after the 2 s lease, not a minute: 10 s"),
}


@dataclass(frozen=True)
class Finding:
    path: str  # under tests/
    function: str  # qualified name ("" at module level)
    line: int
    what: str

    def __str__(self) -> str:
        return f"tests/{self.path}:{self.line} ({self.function or 'module'}): {self.what}"


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _is_clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call) or node.args:
        return False
    name = _called_name(node)
    if name in CLOCKS - {"time"}:
        return True
    # time.time(), loop.time(): an attribute named time on anything (a `time()` alone is not).
    return name == "time" and isinstance(node.func, ast.Attribute)


def _reads_clock(node: ast.AST, timed: set[str]) -> bool:
    return any(
        _is_clock_call(sub) or (isinstance(sub, ast.Name) and sub.id in timed)
        for sub in ast.walk(node)
    )


def _is_zero(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0


class _Walker(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.scope: list[str] = []
        self.loops = 0
        self.timed: list[set[str]] = [set()]
        self.findings: list[Finding] = []

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        name = getattr(node, "name", "<lambda>")
        self.scope.append(name)
        saved, self.loops = self.loops, 0
        timed: set[str] = set()
        for sub in ast.walk(node):
            assigned = isinstance(sub, ast.Assign | ast.AnnAssign | ast.AugAssign)
            if assigned and sub.value and _reads_clock(sub.value, set()):
                targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                timed |= {t.id for t in targets if isinstance(t, ast.Name)}
        # Names computed from those (elapsed = now - started) are timed too.
        for sub in ast.walk(node):
            if isinstance(sub, ast.Assign) and _reads_clock(sub.value, timed):
                timed |= {t.id for t in sub.targets if isinstance(t, ast.Name)}
        self.timed.append(timed)
        self.generic_visit(node)
        self.timed.pop()
        self.loops = saved
        self.scope.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    def _loop(self, node: ast.While | ast.For | ast.AsyncFor) -> None:
        self.loops += 1
        self.generic_visit(node)
        self.loops -= 1

    visit_While = _loop
    visit_For = _loop
    visit_AsyncFor = _loop

    def _found(self, node: ast.AST, what: str) -> None:
        line = getattr(node, "lineno", 0)
        self.findings.append(Finding(self.path, ".".join(self.scope), line, what))

    def visit_Call(self, node: ast.Call) -> None:
        if _called_name(node) == "sleep" and not self.loops:
            duration = node.args[0] if node.args else None
            if duration is None or not _is_zero(duration):
                self._found(node, f"sleep({ast.unparse(duration) if duration else ''})")
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        if not self.loops:
            timed = self.timed[-1]
            for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
                operands = [compare.left, *compare.comparators]
                for i, op in enumerate(compare.ops):
                    left, right = operands[i], operands[i + 1]
                    if (isinstance(op, ast.Lt | ast.LtE) and _reads_clock(left, timed)) or (
                        isinstance(op, ast.Gt | ast.GtE) and _reads_clock(right, timed)
                    ):
                        self._found(node, f"an upper bound on time: {ast.unparse(compare)}")
        self.generic_visit(node)


def findings() -> Iterator[Finding]:
    for file in sorted(TESTS.rglob("*.py")):
        walker = _Walker(file.relative_to(TESTS).as_posix())
        walker.visit(ast.parse(file.read_text(), filename=str(file)))
        yield from walker.findings


def _check(source: str) -> list[str]:
    walker = _Walker("example.py")
    walker.visit(ast.parse(source))
    return [f.what for f in walker.findings]


def test_no_test_waits_on_the_clock_but_where_the_scenario_is_time() -> None:
    found = list(findings())
    bounds = [f for f in found if f.what.startswith("an upper bound")]
    sleeps = [f for f in found if not f.what.startswith("an upper bound")]
    unbounded = [str(f) for f in bounds if (f.path, f.function) not in BOUNDS]
    assert unbounded == [], (
        "wait for the outcome itself, with a deadline as the only failure; a bound that "
        "separates two outcomes of the contract far apart goes in BOUNDS with both"
    )
    unexplained = [str(f) for f in sleeps if (f.path, f.function) not in SCENARIO]
    assert unexplained == [], (
        "wait for an event or poll with `eventually`; if the time is the scenario, "
        "name the function in SCENARIO with why"
    )
    stale = sorted(set(SCENARIO) - {(f.path, f.function) for f in sleeps})
    assert stale == [], "these sleep no more: take them off SCENARIO"
    stale = sorted(set(BOUNDS) - {(f.path, f.function) for f in bounds})
    assert stale == [], "these bound no time any more: take them off BOUNDS"


def test_the_checker_tells_a_wait_from_a_poll_and_a_bound_from_a_deadline() -> None:
    assert _check("async def t():\n    await asyncio.sleep(0.5)\n") == ["sleep(0.5)"]
    assert _check("def t():\n    time.sleep(1)\n") == ["sleep(1)"]
    assert _check("async def t():\n    await asyncio.sleep(0)\n") == []
    assert _check("async def t():\n    while not done:\n        await asyncio.sleep(0.05)\n") == []
    assert _check(
        "def t():\n    s = time.monotonic()\n    run()\n    e = time.monotonic() - s\n"
        "    assert 0.9 <= e < 2.5\n"
    ) == ["an upper bound on time: 0.9 <= e < 2.5"]
    assert _check("def t():\n    s = time.monotonic()\n    assert time.monotonic() - s < 2\n")
    assert _check("def t():\n    s = loop.time()\n    assert 2 > loop.time() - s\n")
    assert (
        _check("def t():\n    s = time.monotonic()\n    assert time.monotonic() - s >= 1\n") == []
    )
    poll = (
        "def t():\n    d = time.monotonic() + 5\n"
        "    while x():\n        assert time.monotonic() < d\n"
    )
    assert _check(poll) == []
    assert _check("def t():\n    assert time() < 3\n") == []  # not a clock: any time()
