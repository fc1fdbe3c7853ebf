"""``leaseq worker``: its flags; ``leaseq.worker.runner`` does the work."""

from __future__ import annotations

import typer

from leaseq.cli.output import EXIT_USAGE, err, fail, one_line_errors
from leaseq.cli.root import ServiceUrl, Token, app
from leaseq.limits import MAX_THROTTLE_S, MAX_TTL_S, MAX_WAIT_S, MIN_TTL_S
from leaseq.timefmt import parse_duration
from leaseq.worker import runner
from leaseq.worker.job import HandlerUnusable
from leaseq.worker.metrics import MetricsUnavailable

DEFAULTS = runner.Options(url="")


def _throttle_for(text: str) -> float:
    """``--throttle-for``: a duration from 1 s to 1 h; a one-line usage error otherwise."""
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        fail(f"--throttle-for: {exc}", EXIT_USAGE)
    if not 1 <= seconds <= MAX_THROTTLE_S:
        fail(f"--throttle-for {text!r}: from 1s to 1h", EXIT_USAGE)
    return seconds


@app.command(
    context_settings={"allow_interspersed_args": False},
    epilog=(
        "A program per lead, payload as JSON on stdin, result as JSON on stdout:  "
        "leaseq worker --session crawl --concurrency 8 -- python handle.py\n\n"
        "A Python function (async or not) that takes a leaseq.Job:  "
        "leaseq worker --session crawl --handler handle:run\n\n"
        "One pool for several sessions, fair by their weights (leaseq sessions set):  "
        "leaseq worker -s tenant-a -s tenant-b -- python handle.py; or --any-session.\n\n"
        "The program sees LEASEQ_LEAD_ID, LEASEQ_ATTEMPT, LEASEQ_SESSION and "
        "LEASEQ_CHECKPOINT_FILE (the lead's checkpoint as JSON when it has one; write yours "
        "there and the next heartbeat stores it), and no other LEASEQ_* variable (the "
        "token stays with the worker). Exit 0: done; the code of --throttle-exit: throttled "
        "(its session pauses for --throttle-for, no attempt used: "
        "--throttle-exit 75 --throttle-for 60s); other non-zero: "
        "retried later while attempts remain, else failed. A lease lost or not renewed in "
        "time, or --max-runtime, kills the program's whole process tree (SIGTERM, then SIGKILL "
        "--kill-grace later) before the lease can end; so does the worker's own death, "
        "kill -9 included. SIGTERM or Ctrl-C: no new leases, --grace seconds for those in "
        "flight, then they are released; twice: released at once."
    ),
)
def worker(
    command: list[str] | None = typer.Argument(
        None,
        metavar="[-- COMMAND ...]",
        help="The program to run for each lead.",
        show_default=False,
    ),
    session: list[str] | None = typer.Option(
        None,
        "--session",
        "-s",
        metavar="NAME",
        help="The session to work; again for more, shared out by their weights.",
        show_default=False,
    ),
    any_session: bool = typer.Option(
        False, "--any-session", help="Work every session, shared out by their weights."
    ),
    handler: str | None = typer.Option(
        None, "--handler", metavar="MODULE:FUNCTION", help="A Python callable instead of a program."
    ),
    concurrency: int = typer.Option(
        DEFAULTS.concurrency, "--concurrency", "-c", min=1, help="Leads run at once."
    ),
    prefetch: int | None = typer.Option(
        None,
        "--prefetch",
        min=0,
        metavar="N",
        help="Leads held ready beyond those running (default 1, a quarter of -c above 4; 0: none).",
    ),
    owner: str | None = typer.Option(
        None, "--owner", metavar="NAME", help="The name leases are taken under (default host-pid)."
    ),
    ttl: float | None = typer.Option(
        None,
        "--ttl",
        metavar="SECONDS",
        help=f"Lease length ({MIN_TTL_S:g}-{MAX_TTL_S:g}); renewed every third of it. "
        "Default 30 (longer to fit a --kill-grace): a worker killed outright strands its "
        "leads for seconds, not the service's default.",
        show_default=False,
    ),
    wait: float = typer.Option(
        DEFAULTS.wait_s,
        "--wait",
        metavar="SECONDS",
        help=f"Long-poll wait for work (0-{MAX_WAIT_S:g}); empty after it: the queue is done.",
    ),
    max_runtime: float | None = typer.Option(
        None, "--max-runtime", metavar="SECONDS", help="Kill a lead's handler after this long."
    ),
    grace: float = typer.Option(
        DEFAULTS.grace_s,
        "--grace",
        metavar="SECONDS",
        help="On SIGTERM, time for leads in flight to finish.",
    ),
    kill_grace: float | None = typer.Option(
        None,
        "--kill-grace",
        metavar="SECONDS",
        help="Between SIGTERM and SIGKILL to a program told to stop. Default: 2, less for a "
        "short ttl (at most half the ttl goes to the stop).",
        show_default=False,
    ),
    retry_delay: float = typer.Option(
        DEFAULTS.retry_delay_s,
        "--retry-delay",
        metavar="SECONDS",
        help="First backoff after a failure (doubles).",
    ),
    give_up: float = typer.Option(
        DEFAULTS.give_up_s,
        "--give-up-after",
        metavar="SECONDS",
        help="Exit non-zero when the service cannot be reached for this long.",
    ),
    forever: bool = typer.Option(
        False,
        "--forever",
        help="Keep waiting when the queue is empty, and keep trying an unreachable service.",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Log lines only, no progress line."),
    throttle_exit: int | None = typer.Option(
        None,
        "--throttle-exit",
        metavar="CODE",
        min=1,
        max=255,
        help="The command's exit code that means throttled (the upstream said 429): the lead "
        "goes back without using up an attempt and its session pauses for --throttle-for.",
    ),
    throttle_for: str = typer.Option(
        "60s",
        "--throttle-for",
        metavar="60s",
        help="How long a throttle pauses the session (1s to 1h).",
    ),
    metrics_port: int | None = typer.Option(
        None, "--metrics-port", metavar="PORT", help="Serve Prometheus metrics on 127.0.0.1:PORT."
    ),
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """Lease leads and run a program (or a Python function) on each until the queue is empty."""
    options = runner.Options(
        url=url,
        sessions=tuple(session or ()),
        any_session=any_session,
        command=command or (),
        handler=handler,
        token=token,
        owner=owner,
        concurrency=concurrency,
        prefetch=prefetch,
        ttl_s=ttl,
        wait_s=wait,
        max_runtime_s=max_runtime,
        grace_s=grace,
        kill_grace_s=kill_grace,
        retry_delay_s=retry_delay,
        give_up_s=give_up,
        forever=forever,
        quiet=quiet,
        throttle_exit=throttle_exit,
        throttle_s=_throttle_for(throttle_for),
    )
    try:
        work = runner.build(options)
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    if metrics_port is not None:
        try:
            runner.serve_metrics(work, metrics_port)
        except MetricsUnavailable as exc:
            fail(str(exc))
        except OSError as exc:
            fail(f"--metrics-port {metrics_port}: {exc.strerror or exc}")
    with one_line_errors():
        try:
            runner.run(work, options, err)
        except HandlerUnusable as exc:
            fail(str(exc))
