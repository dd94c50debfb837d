"""A local stand-in for Amazon Bedrock Runtime's Converse and ConverseStream operations.

It speaks the real wire protocol (REST JSON requests, binary AWS event-stream responses), so
botocore and langchain-aws run against it unchanged, and it rejects what Bedrock rejects.
"""

from infra.local.bedrock_emulator.server import BedrockEmulator

__all__ = ["BedrockEmulator"]
