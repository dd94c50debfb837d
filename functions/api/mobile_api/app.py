"""The mobile API as Lambda Web Adapter serves it: the app for the settings in the environment.

Built at import, in the function's init (before a SnapStart snapshot), never per request.
"""

from onboarding.composition import build_api
from onboarding.config import Settings

from .routes import create_app

_parts = build_api(Settings.from_env())
app = create_app(_parts.service, _parts.account, _parts.primer)
