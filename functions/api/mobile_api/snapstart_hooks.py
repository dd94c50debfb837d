"""Owns the routes Lambda Web Adapter POSTs to around a SnapStart snapshot (template.yaml names
them in AWS_LWA_SNAPSTART_*_PATH). No API Gateway route leads here, and the adapter answers 403 to
any outside request for them. What they do is onboarding.snapstart's `Primer`."""

from http import HTTPStatus

from fastapi import FastAPI
from fastapi.responses import Response

from onboarding.snapstart import Primer

BEFORE_CHECKPOINT_PATH = "/_snapstart/before-checkpoint"
AFTER_RESTORE_PATH = "/_snapstart/after-restore"


def install_snapstart_hooks(app: FastAPI, primer: Primer) -> None:
    @app.post(BEFORE_CHECKPOINT_PATH, include_in_schema=False)
    async def before_checkpoint() -> Response:
        await primer.prime()  # never raises: an unprimed snapshot is only slower on its first call
        return Response(status_code=HTTPStatus.NO_CONTENT)

    @app.post(AFTER_RESTORE_PATH, include_in_schema=False)
    async def after_restore() -> Response:
        primer.renew()  # a failure here fails the restore (the adapter's rule), rather than serve unrenewed
        return Response(status_code=HTTPStatus.NO_CONTENT)
