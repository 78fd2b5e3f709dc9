"""Python client for the Bandit Decision Service (banditd).

    from bandit_client import BanditClient
    with BanditClient("127.0.0.1:50051") as client:
        client.create_instance("ads", "policy { linucb { dimension: 3 } }")
        d = client.select("ads", candidates=[[1, 0, 0], [0, 1, 0]])
        client.update("ads", d.event_id, reward=1.0)

The generated messages are re-exported as ``bandit_client.pb`` (``pb.SelectRequest``, ...).
"""
from . import errors
from ._pb import service_pb2 as pb
from .client import BanditClient, BatchItem, RetryPolicy, RoundStream, round_error, round_result
from .errors import (AlreadyExistsError, BanditError, CancelledError, DeadlineExceededError,
                     FailedPreconditionError, InternalError, InvalidArgumentError, NotFoundError,
                     PermissionDeniedError, ResourceExhaustedError, UnauthenticatedError,
                     UnavailableError, UnimplementedError)

__version__ = "0.1.0"

__all__ = [
    "BanditClient", "BatchItem", "RetryPolicy", "RoundStream", "round_error", "round_result",
    "pb", "errors",
    "BanditError", "InvalidArgumentError", "NotFoundError", "AlreadyExistsError",
    "FailedPreconditionError", "ResourceExhaustedError", "UnavailableError",
    "DeadlineExceededError", "PermissionDeniedError", "UnauthenticatedError",
    "CancelledError", "InternalError", "UnimplementedError",
]
