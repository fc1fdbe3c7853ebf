"""The operator's dashboard: the page and its JSON (``page``), over
``app.domain.overview``.

The page is a static shell: no data and no secret in it, so a browser can load
it without a token. Its script polls ``GET /dashboard/data`` (bearer auth like
every other route; a lead's page ``GET /leads/{id}/events``, a session's its
stats) and redraws; it asks for the token once and keeps it in
``sessionStorage``. Everything ships in the package: no CDN, no build step.
"""
