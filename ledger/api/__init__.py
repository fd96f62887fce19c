"""The HTTP service (``ledger serve``): a thin FastAPI layer over the ops and the facade.

``create_app(settings)`` builds the application; see docs/http.md for the endpoints,
roles and error codes, and docs/operations.md for running it.
"""

from ledger.api.app import create_app
from ledger.api.settings import Settings

__all__ = ["Settings", "create_app"]
