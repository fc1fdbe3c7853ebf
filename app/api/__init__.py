"""The REST API: ``app.api.app.create_app`` builds it; routes stay thin over ``app.queue``."""
