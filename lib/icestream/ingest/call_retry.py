"""Which failed AWS calls are worth repeating: throttling, a 5xx answer, a connection or timeout error.

A read task repeats such a call with paced backoff (:mod:`icestream.ingest.reading.shard_reader`);
a batch that failed is judged by :mod:`icestream.ingest.batch_retry`, which counts these calls'
failures as transient too.
"""

from __future__ import annotations

RETRYABLE_CODES = frozenset(
    (
        "ProvisionedThroughputExceededException",
        "LimitExceededException",
        "InternalFailure",
        "ServiceUnavailable",
        "InternalServerError",
        "ThrottlingException",
        "KMSThrottlingException",
    )
)
THROTTLE_CODES = frozenset(("ProvisionedThroughputExceededException", "LimitExceededException", "ThrottlingException"))


def error_code(error: BaseException) -> str:
    """The AWS error code of a botocore ``ClientError`` ('' for anything else)."""
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def is_transient_call(error: BaseException) -> bool:
    """True for a failed AWS call worth repeating: throttling, a 5xx answer, a connection or timeout error."""
    from botocore.exceptions import ConnectionError as BotoConnectionError
    from botocore.exceptions import HTTPClientError, ReadTimeoutError

    if isinstance(error, BotoConnectionError | HTTPClientError | ReadTimeoutError | ConnectionError | TimeoutError):
        return True
    status = (getattr(error, "response", None) or {}).get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return error_code(error) in RETRYABLE_CODES or status >= 500
