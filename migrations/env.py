"""Alembic environment: the target is ``app.store.schema.metadata``; the URL comes from the caller
or from the settings (the embedded PostgreSQL when no URL is set)."""

from __future__ import annotations

import time

from alembic import context
from sqlalchemy import Connection, create_engine, pool

from app.store.schema import metadata, sqlalchemy_url

LOCK_KEY = 7461535310
LOCK_POLL_S = 0.1


def _url() -> str:
    url = context.config.attributes.get("url") or context.config.get_main_option("sqlalchemy.url")
    if url:
        return str(url)
    from app.config import Settings
    from app.store.embedded import resolve_database_url

    settings = Settings()
    return resolve_database_url(settings.database_url, settings.data_dir)


def run_migrations_offline() -> None:
    context.configure(url=sqlalchemy_url(_url()), target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def _take_migration_lock(connection: Connection) -> None:
    """One migration at a time per database: concurrent `db upgrade`s wait here.

    A session lock, so it outlives the commits of ``transaction_per_migration``
    and of a revision's autocommit block (``CREATE INDEX CONCURRENTLY``); it
    goes when the connection closes. The waiters poll with short transactions
    instead of blocking in one: a concurrent index build waits for every
    transaction older than itself to end, so a waiter blocked in a statement
    while the holder builds one would deadlock with it.
    """
    while not connection.exec_driver_sql(f"SELECT pg_try_advisory_lock({LOCK_KEY})").scalar():
        connection.commit()
        time.sleep(LOCK_POLL_S)
    connection.commit()


def run_migrations_online() -> None:
    engine = create_engine(sqlalchemy_url(_url()), poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            _take_migration_lock(connection)
            # Each revision commits on its own: a revision that must run outside a
            # transaction (an autocommit block) then leaves the others atomic.
            context.configure(
                connection=connection, target_metadata=metadata, transaction_per_migration=True
            )
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()  # closing the connection releases the migration lock


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
