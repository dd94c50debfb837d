#!/bin/sh
# Regenerates the pinned requirements SAM builds each layer and function from, out of uv.lock.
set -eu
cd "$(dirname "$0")/.."
export_group() { uv export --locked --no-hashes --no-header --no-emit-project --no-annotate "$@"; }
export_group --no-default-groups > layers/onboarding/requirements.txt
# The Twilio layer and the API's own folder ship only what the onboarding layer, on the same path
# at the same pins, does not: a second copy would be megabytes more, and the function's own copy
# (first on the path) would be the one imported.
export_group --only-group sms | grep -v -x -F -f layers/onboarding/requirements.txt > layers/twilio/requirements.txt
export_group --only-group api | grep -v -x -F -f layers/onboarding/requirements.txt > functions/api/requirements.txt
