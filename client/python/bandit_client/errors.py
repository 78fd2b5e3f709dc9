"""Typed exceptions for banditd's gRPC status codes.

Every failed call raises a subclass of :class:`BanditError` carrying the gRPC status ``code``
(a :class:`grpc.StatusCode`), the server's ``message`` and the number of ``attempts`` made.
The common ones also derive from the matching built-in (``NotFoundError`` is a ``LookupError``,
``InvalidArgumentError`` a ``ValueError``, ``DeadlineExceededError`` a ``TimeoutError``,
``UnavailableError`` a ``ConnectionError``), so generic handlers keep working.
"""
import grpc

__all__ = [
    "BanditError", "InvalidArgumentError", "NotFoundError", "AlreadyExistsError",
    "FailedPreconditionError", "ResourceExhaustedError", "UnavailableError",
    "DeadlineExceededError", "PermissionDeniedError", "UnauthenticatedError",
    "CancelledError", "InternalError", "UnimplementedError", "error_for_code",
]


class BanditError(Exception):
    """A failed banditd call: ``code`` (grpc.StatusCode), ``message`` (str), ``attempts`` (int)."""

    code = grpc.StatusCode.UNKNOWN

    def __init__(self, message="", code=None, attempts=1):
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.attempts = attempts

    def __str__(self):
        return "%s: %s" % (self.code.name, self.message)


class InvalidArgumentError(BanditError, ValueError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFoundError(BanditError, LookupError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExistsError(BanditError):
    code = grpc.StatusCode.ALREADY_EXISTS


class FailedPreconditionError(BanditError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class ResourceExhaustedError(BanditError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class UnavailableError(BanditError, ConnectionError):
    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceededError(BanditError, TimeoutError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class PermissionDeniedError(BanditError):
    code = grpc.StatusCode.PERMISSION_DENIED


class UnauthenticatedError(BanditError):
    code = grpc.StatusCode.UNAUTHENTICATED


class CancelledError(BanditError):
    code = grpc.StatusCode.CANCELLED


class InternalError(BanditError):
    code = grpc.StatusCode.INTERNAL


class UnimplementedError(BanditError):
    code = grpc.StatusCode.UNIMPLEMENTED


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgumentError, NotFoundError, AlreadyExistsError, FailedPreconditionError,
    ResourceExhaustedError, UnavailableError, DeadlineExceededError, PermissionDeniedError,
    UnauthenticatedError, CancelledError, InternalError, UnimplementedError)}
_BY_NUMBER = {c.value[0]: c for c in grpc.StatusCode}


def error_for_code(code, message, attempts=1):
    """Builds the typed exception for ``code``: a grpc.StatusCode or its number (batch items)."""
    if isinstance(code, int):
        code = _BY_NUMBER.get(code, grpc.StatusCode.UNKNOWN)
    cls = _BY_CODE.get(code, BanditError)
    return cls(message, code=code, attempts=attempts)
