"""Telling missing or expired AWS credentials apart from everything else an AWS call can fail with.

Without this, a command that finds no credentials reads as "stack not found ... deploy it first" or "no
price known": advice that sends the user the wrong way. Every caller that turns an AWS error into
advice asks :func:`credentials_problem` first.
"""

from __future__ import annotations

from trainsweep.errors import TrainsweepError

# Error codes AWS answers with when the request's credentials are wrong or no longer valid.
CREDENTIAL_ERROR_CODES = frozenset(
    {
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidClientTokenId",
        "InvalidAccessKeyId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "RequestExpired",
        "InvalidToken",
        "AuthFailure",
    }
)
HOW_TO_FIX = (
    "set them with `aws configure` (access keys) or `aws sso login --profile NAME` (IAM Identity Center), "
    "or refresh expired ones; `aws sts get-caller-identity` shows whether they work"
)


class AwsCredentialsError(TrainsweepError):
    """AWS refused the request's credentials, or there were none."""


def credentials_problem(exc: BaseException) -> bool:
    """Whether ``exc`` (a botocore error) says the credentials are missing, incomplete or expired."""
    from botocore.exceptions import (
        ClientError,
        CredentialRetrievalError,
        NoCredentialsError,
        PartialCredentialsError,
        SSOError,
        TokenRetrievalError,
    )

    missing = (NoCredentialsError, PartialCredentialsError, CredentialRetrievalError, TokenRetrievalError)
    if isinstance(exc, (*missing, SSOError)):
        return True
    if isinstance(exc, ClientError):
        return exc.response.get("Error", {}).get("Code") in CREDENTIAL_ERROR_CODES
    return False


def credentials_error(exc: BaseException) -> AwsCredentialsError:
    """The error to raise for a credentials problem: AWS's own words, then how to fix it."""
    return AwsCredentialsError(f"AWS credentials: {exc}; {HOW_TO_FIX}")


def raise_for_credentials(exc: BaseException) -> None:
    """Raise :class:`AwsCredentialsError` when ``exc`` is a credentials problem; else return."""
    if credentials_problem(exc):
        raise credentials_error(exc) from exc
