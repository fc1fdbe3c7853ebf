"""The schema as the PostgreSQL catalogs describe it, for comparing two databases.

Everything a migration decides is here: tables and their storage
parameters, columns (type, nullability, default, identity), constraints,
indexes (with predicates, storage parameters and validity), sequences,
triggers, functions, types and comments. Definitions come from
``pg_get_*def``, so two schemas built by different statements compare equal
exactly when PostgreSQL sees the same schema.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, text

IGNORED = ("alembic_version", "alembic_version_pkc")

_QUERIES = {
    "tables": """
SELECT c.relname AS name, c.relpersistence AS persistence,
       coalesce(array_to_string(c.reloptions, ','), '') AS options,
       coalesce(obj_description(c.oid, 'pg_class'), '') AS comment
FROM pg_class c
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
ORDER BY 1
""",
    "columns": """
SELECT c.relname AS "table", a.attnum AS position, a.attname AS name,
       format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS not_null,
       coalesce(pg_get_expr(d.adbin, d.adrelid), '') AS default,
       a.attidentity AS identity, a.attgenerated AS generated,
       coalesce(col.collname, '') AS collation,
       coalesce(col_description(c.oid, a.attnum), '') AS comment
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
LEFT JOIN pg_collation col ON col.oid = a.attcollation AND a.attcollation <> 100
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
  AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY 1, 2
""",
    "constraints": """
SELECT c.relname AS "table", k.conname AS name, k.contype AS kind,
       pg_get_constraintdef(k.oid) AS definition, k.condeferrable AS deferrable,
       coalesce(obj_description(k.oid, 'pg_constraint'), '') AS comment
FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
WHERE c.relnamespace = 'public'::regnamespace
  AND k.contype <> 'n'  -- NOT NULL, a constraint of its own from PostgreSQL 18: see columns
ORDER BY 1, 2
""",
    "indexes": """
SELECT t.relname AS "table", i.relname AS name, pg_get_indexdef(i.oid) AS definition,
       x.indisvalid AS valid,
       coalesce(array_to_string(i.reloptions, ','), '') AS options,
       coalesce(obj_description(i.oid, 'pg_class'), '') AS comment
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
WHERE t.relnamespace = 'public'::regnamespace
ORDER BY 2
""",
    "sequences": """
SELECT c.relname AS name, s.seqtypid::regtype::text AS type, s.seqstart AS start,
       s.seqincrement AS increment, s.seqmin AS min, s.seqmax AS max,
       s.seqcache AS cache, s.seqcycle AS cycle,
       coalesce(owner.relname || '.' || a.attname, '') AS owned_by,
       coalesce(d.deptype::text, '') AS dependency
FROM pg_sequence s
JOIN pg_class c ON c.oid = s.seqrelid
LEFT JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
     AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
LEFT JOIN pg_class owner ON owner.oid = d.refobjid
LEFT JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
WHERE c.relnamespace = 'public'::regnamespace
ORDER BY 1
""",
    "triggers": """
SELECT c.relname AS "table", t.tgname AS name, pg_get_triggerdef(t.oid) AS definition
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal
ORDER BY 1, 2
""",
    "functions": """
SELECT p.proname AS name, pg_get_functiondef(p.oid) AS definition
FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
ORDER BY 1
""",
    "types": """
SELECT t.typname AS name, t.typtype AS kind
FROM pg_type t
WHERE t.typnamespace = 'public'::regnamespace AND t.typtype IN ('e', 'd', 'c')
  AND NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.reltype = t.oid)
ORDER BY 1
""",
}


def _kept(row: dict[str, Any]) -> bool:
    return not any(row.get(key) in IGNORED for key in ("name", "table"))


def fingerprint(conn: Connection) -> dict[str, list[dict[str, Any]]]:
    """The schema of ``public``, leaving out Alembic's own version table."""
    return {
        kind: [row for row in (dict(r._mapping) for r in conn.execute(text(query))) if _kept(row)]
        for kind, query in _QUERIES.items()
    }
