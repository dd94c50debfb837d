"""Owns who a local request is from: one set of credentials per function, as each function's
execution role gives it in Lambda, and the operator's for everything else.

In Lambda every function runs in its own environment with its role's credentials. Locally the
functions share one process (infra/local/lambda_runner.py), so the credentials are chosen per
invocation: `acting_as(logical_id)` marks the code that runs as that function (a context
variable, so each thread and task of an invocation carries its own), and every request signed
meanwhile carries that function's access key. The local servers look the key up and check the
request against that function's statements in template.yaml (infra/local/iam/gate.py).

Outside an invocation the operator signs: the developer at the keyboard, or CloudFormation making
the stack. The operator may do anything, as an administrator may.

Clients take their credentials from their session when they are made, so the local stack makes
boto3's default session, from which every client of the product is made (onboarding/composition.py),
with `new_session`.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from botocore.credentials import CredentialProvider, Credentials, ReadOnlyCredentials

OPERATOR_ACCESS_KEY = "local"  # the local stack's own; infra/local/stack.py's LOCAL_AWS_ENVIRONMENT
LOCAL_SECRET = "local"  # noqa: S105 - the local servers' dummy secret (signatures are not checked)
_FUNCTION_KEY_PREFIX = "LOCALFN"

_running: ContextVar[str | None] = ContextVar("local_function", default=None)


def access_key_of(logical_id: str) -> str:
    """The access key a function's requests carry on the local stack."""
    return f"{_FUNCTION_KEY_PREFIX}{logical_id}"


def function_of(access_key: str) -> str | None:
    """The function an access key belongs to, or None (the operator's, or a key nobody was given)."""
    return access_key.removeprefix(_FUNCTION_KEY_PREFIX) if access_key.startswith(_FUNCTION_KEY_PREFIX) else None


def running_function() -> str | None:
    return _running.get()


@contextmanager
def acting_as(logical_id: str | None) -> Iterator[None]:
    """Within the block, requests are signed as `logical_id` (None: as the operator)."""
    token = _running.set(logical_id)
    try:
        yield
    finally:
        _running.reset(token)


class InvocationCredentials(Credentials):
    """The running function's credentials, or the operator's outside any invocation."""

    def __init__(self) -> None:
        super().__init__(OPERATOR_ACCESS_KEY, LOCAL_SECRET, LOCAL_SECRET, method="local-invocation")

    @property
    def access_key(self) -> str:
        logical_id = _running.get()
        return OPERATOR_ACCESS_KEY if logical_id is None else access_key_of(logical_id)

    @access_key.setter
    def access_key(self, value: str) -> None:
        """Set by botocore's constructor; the key is always the running function's."""

    def get_frozen_credentials(self) -> ReadOnlyCredentials:
        return ReadOnlyCredentials(self.access_key, self.secret_key, self.token, None)


class _InvocationProvider(CredentialProvider):
    METHOD = "local-invocation"

    def load(self) -> Credentials:
        return InvocationCredentials()


def new_session(region: str) -> Any:
    """A boto3 Session whose clients sign with InvocationCredentials (botocore's public
    credential-provider component, on a botocore session of its own)."""
    import boto3
    import botocore.session
    from botocore.credentials import CredentialResolver

    core = botocore.session.get_session()
    core.register_component("credential_provider", CredentialResolver([_InvocationProvider()]))
    return boto3.Session(botocore_session=core, region_name=region)
