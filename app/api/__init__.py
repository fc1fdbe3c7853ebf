"""The REST API: ``app.api.app.create_app`` builds it; routes stay thin over the domain and
leasing. With the HTTP serving of ``leaseq serve`` (``serve``, ``http_connections``)."""
