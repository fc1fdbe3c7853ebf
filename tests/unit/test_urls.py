"""Database URLs as libpq reads them and as messages show them (``app.store.pool``), and the
CLI's rule."""

from __future__ import annotations

import pytest

from app.api.serve import ServeError, check_database_url
from app.store.pool import libpq_url, redacted


@pytest.mark.parametrize(
    ("given", "libpq"),
    [
        ("postgresql://u:p@h:5432/db", "postgresql://u:p@h:5432/db"),
        ("postgres://h/db", "postgresql://h/db"),
        ("postgresql+psycopg://u@h/db?sslmode=require", "postgresql://u@h/db?sslmode=require"),
        ("postgresql+psycopg2://u@h/db", "postgresql://u@h/db"),
        ("postgresql://u@/db?host=/run/pg", "postgresql://u@/db?host=/run/pg"),
    ],
)
def test_libpq_reads_the_url_whatever_driver_it_names(given: str, libpq: str) -> None:
    assert libpq_url(given) == libpq


def test_a_shown_url_never_holds_its_password() -> None:
    assert (
        redacted("postgresql://app:s3cret@db:5432/leaseq") == "postgresql://app:***@db:5432/leaseq"
    )
    assert redacted("postgresql://app:p@ss@db/leaseq") == "postgresql://app:***@db/leaseq"
    assert redacted("postgresql://app@db/leaseq") == "postgresql://app@db/leaseq"


@pytest.mark.parametrize(
    ("url", "said"),
    [("not a url", "not a URL"), ("mysql://u@h/db", "must be a postgresql:// URL, not mysql://")],
)
def test_serve_refuses_what_is_not_a_postgresql_url(url: str, said: str) -> None:
    with pytest.raises(ServeError, match=said):
        check_database_url(url)
    check_database_url("postgresql+psycopg://u@h/db")
