# leaseq's image: the service, its CLI and its migrations, run as a non-root user.
#
#   docker build -t leaseq .                     # the service (the last stage)
#   docker build --target pgbouncer -t leaseq-pgbouncer .
#   docker compose up                            # PostgreSQL, migrations, two API replicas
#
# The entrypoint (deploy/entrypoint.sh) runs a leaseq verb (`serve`, `worker`,
# `push`, `db upgrade`, ...) or any other program given (`alembic upgrade head`).
# Configuration is the LEASEQ_* environment (README, "Configuration").

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# -- build: both distributions and their dependencies in a virtualenv ----------
# The client (clients/python: distribution "leaseq", the `leaseq` command) and
# the server (the root: "leaseq-server", which pins the client's version).
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/leaseq
WORKDIR /src
COPY clients/python ./clients/python
COPY pyproject.toml README.md ./
COPY app ./app
COPY migrations ./migrations
RUN /opt/leaseq/bin/pip install ./clients/python .

# -- pgbouncer: Debian's PgBouncer with leaseq's pooling rules ----------------
# The `pgbouncer` profile of docker-compose.yml; the tests run the same
# deploy/pgbouncer/pooling.ini with the same Debian package.
FROM debian:bookworm-slim AS pgbouncer
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends pgbouncer \
    && rm -rf /var/lib/apt/lists/*
COPY deploy/pgbouncer/ /etc/pgbouncer/leaseq/
USER postgres
EXPOSE 6432
ENTRYPOINT ["pgbouncer", "/etc/pgbouncer/leaseq/pgbouncer.ini"]

# -- the service ---------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS leaseq
ENV PATH=/opt/leaseq/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LEASEQ_HOST=0.0.0.0 \
    LEASEQ_PORT=8000
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/leaseq leaseq
COPY --from=build /opt/leaseq /opt/leaseq
WORKDIR /app
# `alembic upgrade head` runs from here, as from the repo root.
COPY alembic.ini ./
COPY migrations ./migrations
COPY deploy/entrypoint.sh deploy/healthcheck.py ./deploy/
COPY deploy/demo ./deploy/demo
COPY examples/handle.py ./examples/handle.py
USER leaseq
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "/app/deploy/healthcheck.py"]
ENTRYPOINT ["/app/deploy/entrypoint.sh"]
CMD ["serve"]
