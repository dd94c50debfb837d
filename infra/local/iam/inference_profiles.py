"""Where Bedrock's cross-region inference profiles route, so a call through one is authorised on the
foundation model in every region it may reach (infra/local/iam/actions.py)."""

# The regions a cross-region inference profile of each geography may route to (Bedrock user guide,
# "Supported Regions and models for inference profiles"; the list differs a little per model, so a
# policy should cover the foundation model in every region with `bedrock:*::foundation-model/...`).
PROFILE_DESTINATIONS = {
    "us": ("us-east-1", "us-east-2", "us-west-2"),
    "us-gov": ("us-gov-east-1", "us-gov-west-1"),
    "eu": ("eu-central-1", "eu-west-1", "eu-west-3", "eu-north-1"),
    "apac": ("ap-northeast-1", "ap-northeast-2", "ap-south-1", "ap-southeast-1", "ap-southeast-2"),
    "jp": ("ap-northeast-1", "ap-northeast-3"),
    "au": ("ap-southeast-2", "ap-southeast-4"),
    "ca": ("ca-central-1", "ca-west-1"),
    "global": ("us-east-1", "us-west-2", "eu-west-1", "ap-northeast-1"),
}
