#!/bin/sh
# Regenerates the pinned requirements SAM builds each layer and function from, out of uv.lock.
set -eu
cd "$(dirname "$0")/.."
export_group() { uv export --locked --no-hashes --no-header --no-emit-project --no-annotate "$@"; }
export_group --no-default-groups > layers/onboarding/requirements.txt
export_group --only-group sms > layers/twilio/requirements.txt
export_group --only-group api > functions/api/requirements.txt
