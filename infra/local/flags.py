"""The feature flags file of local runs (`--flags FILE` of infra.local_stack and infra.chat; docs/rollout.md).

The file holds what AppConfig holds deployed: Powertools' feature flags schema. The product reads
it through FEATURE_FLAGS_FILE (onboarding/flags/rollout.py FileStore) and reads it again after
FEATURE_FLAGS_MAX_AGE_S, so edits apply without a restart. The tools check it once at start, so a
typo is a clear error there rather than the documented defaults in force without notice.
"""

import json
from pathlib import Path

from aws_lambda_powertools.utilities.feature_flags.exceptions import SchemaValidationError
from aws_lambda_powertools.utilities.feature_flags.schema import SchemaValidator

from infra.local.errors import LocalToolError

FLAGS_FILE_VARIABLE = "FEATURE_FLAGS_FILE"


def checked_flags_file(path: Path) -> Path:
    """`path`, absolute, once it holds a valid feature flags configuration; LocalToolError if not."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise LocalToolError(f"--flags {path}: cannot read it ({error.strerror or error})") from error
    except ValueError as error:
        raise LocalToolError(f"--flags {path}: not JSON ({error})") from error
    if not isinstance(document, dict):
        raise LocalToolError(f"--flags {path}: not a JSON object of flags (docs/rollout.md)")
    try:
        SchemaValidator(schema=document).validate()
    except SchemaValidationError as error:
        raise LocalToolError(f"--flags {path}: not in the feature flags schema ({error})") from error
    return path.resolve()
