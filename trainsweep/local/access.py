"""Who may talk to the embedded AWS: the sweep's own processes only.

The embedded AWS listens on a loopback port that every process on the machine can reach. Each run makes
its own credentials (:class:`SweepCredentials`: an IAM user's access key in moto's IAM, with a secret from
:mod:`secrets`) and turns on moto's IAM access control, which checks every request's SigV4 signature
against the keys it issued and evaluates the user's policy (allow everything). The credentials reach the
sweep's own processes only: the CLI process, the Lambda handlers and the Step Functions interpreter in it,
and the training jobs it starts (through their environment, which other users cannot read).

:class:`AccessGuard` wraps the server's WSGI application and refuses, before moto sees them, the requests
that cannot be the sweep's: no signature, another access key, or moto's own control API (``/moto-api/``:
reset, configuration, a dump of every resource, switching authentication off). Each refused request is
logged (logger ``trainsweep.local.access``) and kept in :attr:`AccessGuard.refused` (a flood is counted
past :data:`MAX_REFUSALS_KEPT`, one log line per thousand); a signed request
with the sweep's key id but a wrong signature is refused by moto (403), and logged here too.

CloudFormation's custom-resource answers (``/cloudformation_<region>/cfnresponse``) are unsigned on AWS
too (a presigned URL): here they carry a per-run token in the URL instead (:attr:`SweepCredentials.token`).
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

log = logging.getLogger(__name__)

USER_NAME = "trainsweep-local-sweep"
POLICY_NAME = "everything-the-sweep-does"
_ALLOW_ALL = '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}'
MAX_REFUSALS_KEPT = 1000
"""Refused requests kept and logged one by one; beyond, a flood is counted (one log line per thousand)."""
CFN_RESPONSE_TOKEN = "trainsweep-token"
"""Query parameter of the custom-resource ResponseURL that carries :attr:`SweepCredentials.token`."""


@dataclass(frozen=True)
class SweepCredentials:
    """One run's access key (moto's IAM user key), its secret and the custom-resource answer token."""

    access_key_id: str
    secret_access_key: str
    token: str

    def as_env(self) -> dict[str, str]:
        """The variables boto3 reads them from."""
        return {"AWS_ACCESS_KEY_ID": self.access_key_id, "AWS_SECRET_ACCESS_KEY": self.secret_access_key}


def issue_credentials(account_id: str) -> SweepCredentials:
    """Create the sweep's IAM user in moto's IAM (in-process, before the server answers anyone), allowed
    every action, with one access key whose secret is 40 random characters from :mod:`secrets`."""
    from moto.iam.models import iam_backends

    iam = iam_backends[account_id]["aws"]
    iam.create_user(region_name="us-east-1", user_name=USER_NAME)
    iam.put_user_policy(USER_NAME, POLICY_NAME, _ALLOW_ALL)
    key = iam.create_access_key(USER_NAME)
    # moto draws secrets from a seedable generator (its /moto-api/seed): replace it by an unpredictable one.
    key.secret_access_key = secrets.token_urlsafe(30)
    return SweepCredentials(key.access_key_id, key.secret_access_key, secrets.token_urlsafe(24))


@dataclass(frozen=True)
class Refusal:
    """One refused request: who it claimed to be and why it was refused."""

    method: str
    path: str
    access_key_id: str | None
    reason: str
    client: str


def _access_key_id(environ: dict[str, Any]) -> str | None:
    """The access key id a request is signed with (header or presigned query), or None when unsigned."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    if "Credential=" in auth:
        return auth.partition("Credential=")[2].partition("/")[0].strip() or None
    query = parse_qs(environ.get("QUERY_STRING", ""))
    credential = query.get("X-Amz-Credential") or query.get("AWSAccessKeyId")
    return credential[0].partition("/")[0] if credential else None


class AccessGuard:
    """WSGI middleware in front of moto: only the sweep's signed requests get through (see the module)."""

    def __init__(self, app: Callable[..., Any], credentials: SweepCredentials) -> None:
        self._app = app
        self._credentials = credentials
        self._lock = threading.Lock()
        self.refused: list[Refusal] = []
        """The first :data:`MAX_REFUSALS_KEPT` refused requests."""
        self.refused_count = 0

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        key_id = _access_key_id(environ)
        reason = self._reason_to_refuse(environ, key_id)
        if reason is not None:
            self._refuse(environ, key_id, reason)
            body = f"<Error><Code>AccessDenied</Code><Message>{reason}</Message></Error>".encode()
            start_response(
                "403 Forbidden", [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))]
            )
            return [body]

        def watch(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
            if status.startswith(
                "403"
            ):  # moto refused the signature (the sweep's own requests never get 403)
                self._refuse(environ, key_id, f"refused by the embedded AWS's access control ({status})")
            return start_response(status, headers, *exc_info)

        return self._app(environ, watch)

    def _reason_to_refuse(self, environ: dict[str, Any], key_id: str | None) -> str | None:
        path = environ.get("PATH_INFO", "")
        if path.startswith("/moto-api"):
            return "the emulator's control API is closed during a sweep"
        if path.endswith("/cfnresponse"):
            given = parse_qs(environ.get("QUERY_STRING", "")).get(CFN_RESPONSE_TOKEN, [""])[0]
            if secrets.compare_digest(given, self._credentials.token):
                return None
            return "a custom-resource answer without this sweep's token"
        if key_id is None:
            return "an unsigned request (only the sweep that started this embedded AWS is served)"
        if not secrets.compare_digest(key_id, self._credentials.access_key_id):
            return f"access key {key_id} is not this sweep's (only the sweep that started it is served)"
        return None

    def _refuse(self, environ: dict[str, Any], key_id: str | None, reason: str) -> None:
        refusal = Refusal(
            method=environ.get("REQUEST_METHOD", ""),
            path=environ.get("PATH_INFO", ""),
            access_key_id=key_id,
            reason=reason,
            client=f"{environ.get('REMOTE_ADDR', '?')}:{environ.get('REMOTE_PORT', '?')}",
        )
        with self._lock:
            self.refused_count += 1
            count = self.refused_count
            if count <= MAX_REFUSALS_KEPT:
                self.refused.append(refusal)
        if count <= MAX_REFUSALS_KEPT:
            log.warning("refused %s %s from %s: %s", refusal.method, refusal.path, refusal.client, reason)
        elif count % MAX_REFUSALS_KEPT == 1:  # a flood: one line per thousand, not a line each
            log.warning(
                "refused %d requests so far (the first %d are logged one by one)", count, MAX_REFUSALS_KEPT
            )


class GuardedMotoServer(ThreadedMotoServer):
    """moto's threaded server whose WSGI application is an :class:`AccessGuard` in front of moto's."""

    def __init__(
        self, credentials: SweepCredentials, *, ip_address: str = "127.0.0.1", port: int = 0
    ) -> None:
        super().__init__(ip_address=ip_address, port=port, verbose=False)
        self.guard = AccessGuard(DomainDispatcherApplication(create_backend_app), credentials)

    def _server_entry(self) -> None:
        self._server = make_server(
            self._ip_address, self._port, self.guard, True, request_handler=MotoRequestHandler
        )
        self._server_ready_event.set()
        self._server.serve_forever()


def exempt_custom_resource_answers(patches: Any) -> None:
    """Let moto take the custom-resource answers unsigned, as CloudFormation takes them on AWS (through
    a presigned URL): :class:`AccessGuard` lets them through only with the run's token."""
    from moto.cloudformation.responses import CloudFormationResponse

    checked = CloudFormationResponse._authenticate_and_authorize_normal_action

    def authenticate(self: Any, resource: str = "*") -> None:
        if self.path.endswith("/cfnresponse"):
            return
        checked(self, resource)

    patches.set(CloudFormationResponse, "_authenticate_and_authorize_normal_action", authenticate)
