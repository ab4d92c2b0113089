"""One exception hierarchy for the whole service, mapped to HTTP codes in one handler.

    ComplementError                      500 internal_error
    ├── ConfigError                      (CLI exit 2; never reaches HTTP)
    ├── BadRequest                       400 invalid_request_error
    │   └── PayloadTooLarge              413 invalid_request_error
    ├── Unauthorized                     401 authentication_error
    ├── Forbidden                        403 permission_error
    ├── NotFound                         404 not_found_error
    │   └── UnknownRoute                 404 model_not_found
    ├── Conflict                         409 conflict_error
    ├── Unavailable                      503 service_unavailable
    │   └── FrontierNotConfigured        503 (names the variable or key to set)
    ├── BudgetExceeded                   402 budget_exceeded
    └── FrontierError                    502 upstream_error
        ├── FrontierRateLimited          429 rate_limit_error
        ├── FrontierTimeout              504 timeout_error
        └── CircuitOpen                  503 circuit_open

Upstream (litellm) errors are translated once, in ``router.frontier``; every class here
carries the HTTP status and OpenAI error ``type`` so ``router.app`` needs a single handler.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BadRequest",
    "BudgetExceeded",
    "CircuitOpen",
    "ComplementError",
    "ConfigError",
    "Conflict",
    "Forbidden",
    "FrontierError",
    "FrontierNotConfigured",
    "FrontierRateLimited",
    "FrontierTimeout",
    "NotFound",
    "PayloadTooLarge",
    "Unauthorized",
    "Unavailable",
    "UnknownRoute",
]


class ComplementError(Exception):
    status_code = 500
    error_type = "internal_error"
    code: str | None = None

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        self.extra = extra or {}

    def to_openai(self) -> dict[str, Any]:
        """OpenAI's error shape: ``{"error": {"message", "type", "param", "code"}}``."""
        body: dict[str, Any] = {"message": self.message, "type": self.error_type,
                                "param": self.param, "code": self.code}
        body.update(self.extra)
        return {"error": body}


class ConfigError(ComplementError):
    error_type = "config_error"


class BadRequest(ComplementError):
    status_code = 400
    error_type = "invalid_request_error"


class PayloadTooLarge(BadRequest):
    status_code = 413
    code = "payload_too_large"


class Unauthorized(ComplementError):
    status_code = 401
    error_type = "authentication_error"
    code = "invalid_api_key"


class Forbidden(ComplementError):
    status_code = 403
    error_type = "permission_error"


class NotFound(ComplementError):
    status_code = 404
    error_type = "not_found_error"


class UnknownRoute(NotFound):
    code = "model_not_found"
    error_type = "invalid_request_error"


class Conflict(ComplementError):
    status_code = 409
    error_type = "conflict_error"


class Unavailable(ComplementError):
    status_code = 503
    error_type = "service_unavailable"


class FrontierNotConfigured(Unavailable):
    code = "frontier_not_configured"


class BudgetExceeded(ComplementError):
    status_code = 402
    error_type = "budget_exceeded"


class FrontierError(ComplementError):
    status_code = 502
    error_type = "upstream_error"


class FrontierRateLimited(FrontierError):
    status_code = 429
    error_type = "rate_limit_error"


class FrontierTimeout(FrontierError):
    status_code = 504
    error_type = "timeout_error"


class CircuitOpen(FrontierError):
    status_code = 503
    error_type = "circuit_open"
