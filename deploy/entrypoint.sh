#!/bin/sh
# The image's entrypoint; runs the same outside a container (tests/deploy).
#
#   entrypoint.sh                       leaseq serve
#   entrypoint.sh serve --workers 2     leaseq serve --workers 2
#   entrypoint.sh worker --session s -- python handle.py
#   entrypoint.sh alembic upgrade head  any other program, as given
#
# It runs from the folder above this script (the image's /app, the repo root),
# where alembic.ini is, and execs, so the program gets the signals (SIGTERM
# from `docker stop`) itself.
set -eu

cd "$(dirname "$0")/.."

if [ "$#" -eq 0 ]; then
    set -- serve
fi

case "$1" in
    serve | db | push | stats | report | sweep | worker | sessions | schedules | tokens | prune | leads | docs | --help)
        exec leaseq "$@"
        ;;
    *)
        exec "$@"
        ;;
esac
