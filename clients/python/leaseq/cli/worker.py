"""``leaseq worker``: its flags; ``leaseq.worker.runner`` does the work."""

from __future__ import annotations

import typer

from leaseq.cli.output import EXIT_USAGE, err, fail, one_line_errors
from leaseq.cli.root import ServiceUrl, Token, app
from leaseq.limits import MAX_WAIT_S
from leaseq.worker import runner
from leaseq.worker.metrics import MetricsUnavailable

DEFAULTS = runner.Options(url="", session="")


@app.command(
    context_settings={"allow_interspersed_args": False},
    epilog=(
        "A program per lead, payload as JSON on stdin, result as JSON on stdout:  "
        "leaseq worker --session crawl --concurrency 8 -- python handle.py\n\n"
        "A Python function (async or not) that takes a leaseq.Job:  "
        "leaseq worker --session crawl --handler handle:run\n\n"
        "The program sees LEASEQ_LEAD_ID, LEASEQ_ATTEMPT and LEASEQ_SESSION. Exit 0: done; "
        "non-zero: retried later while attempts remain, else failed. A lost lease or "
        "--max-runtime kills its process group. SIGTERM or Ctrl-C: no new leases, --grace "
        "seconds for those in flight, then they are released; twice: released at once."
    ),
)
def worker(
    command: list[str] | None = typer.Argument(
        None,
        metavar="[-- COMMAND ...]",
        help="The program to run for each lead.",
        show_default=False,
    ),
    session: str = typer.Option(
        ..., "--session", "-s", metavar="NAME", help="The session to work."
    ),
    handler: str | None = typer.Option(
        None, "--handler", metavar="MODULE:FUNCTION", help="A Python callable instead of a program."
    ),
    concurrency: int = typer.Option(
        DEFAULTS.concurrency, "--concurrency", "-c", min=1, help="Leads run at once."
    ),
    owner: str | None = typer.Option(
        None, "--owner", metavar="NAME", help="The name leases are taken under (default host-pid)."
    ),
    ttl: float = typer.Option(
        DEFAULTS.ttl_s, "--ttl", metavar="SECONDS", help="Lease length; renewed every third of it."
    ),
    wait: float = typer.Option(
        DEFAULTS.wait_s,
        "--wait",
        metavar="SECONDS",
        help=f"Long-poll wait for work (0-{MAX_WAIT_S:g}).",
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
    retry_delay: float = typer.Option(
        DEFAULTS.retry_delay_s,
        "--retry-delay",
        metavar="SECONDS",
        help="First backoff after a failure (doubles).",
    ),
    forever: bool = typer.Option(False, "--forever", help="Keep waiting when the queue is empty."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Log lines only, no progress line."),
    metrics_port: int | None = typer.Option(
        None, "--metrics-port", metavar="PORT", help="Serve Prometheus metrics on 127.0.0.1:PORT."
    ),
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """Lease leads and run a program (or a Python function) on each until the queue is empty."""
    options = runner.Options(
        url=url,
        session=session,
        command=command or (),
        handler=handler,
        token=token,
        owner=owner,
        concurrency=concurrency,
        ttl_s=ttl,
        wait_s=wait,
        max_runtime_s=max_runtime,
        grace_s=grace,
        retry_delay_s=retry_delay,
        forever=forever,
        quiet=quiet,
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
        runner.run(work, options, err)
