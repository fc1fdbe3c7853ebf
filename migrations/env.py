"""Alembic environment: the target is ``app.db.metadata``; the URL comes from the caller
or from the settings (the embedded PostgreSQL when no URL is set)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from app.db import metadata, sqlalchemy_url


def _url() -> str:
    url = context.config.attributes.get("url") or context.config.get_main_option("sqlalchemy.url")
    if url:
        return str(url)
    from app.config import Settings
    from app.embedded import resolve_database_url

    settings = Settings()
    return resolve_database_url(settings.database_url, settings.data_dir)


def run_migrations_offline() -> None:
    context.configure(url=sqlalchemy_url(_url()), target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = create_engine(sqlalchemy_url(_url()), poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            # One migration at a time per database: concurrent `db upgrade`s wait here.
            connection.exec_driver_sql("SELECT pg_advisory_xact_lock(7461535310)")
            context.configure(connection=connection, target_metadata=metadata)
            with context.begin_transaction():
                context.run_migrations()
            connection.commit()  # the lock above began the transaction, so it is ours to commit
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
