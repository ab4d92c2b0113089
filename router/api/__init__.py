"""The HTTP endpoints, one module per area, each an APIRouter named ``router`` (``router.app``
includes them). They call the service layer (``router.service``), never the app or the CLI."""
