"""Encoder for the binary AWS event-stream framing (`application/vnd.amazon.eventstream`).

botocore ships only the decoder (`botocore.eventstream`); a server has to write the frames:

    total length (4) | headers length (4) | prelude CRC32 (4) | headers | payload | message CRC32 (4)

Each header is: name length (1) | name | value type (1, 7 = string) | value length (2) | value.
"""

import json
import struct
import zlib
from collections.abc import Mapping
from typing import Any

_STRING_HEADER = 7


def _encode_headers(headers: Mapping[str, str]) -> bytes:
    encoded = bytearray()
    for name, value in headers.items():
        name_bytes, value_bytes = name.encode("utf-8"), value.encode("utf-8")
        encoded += struct.pack(">B", len(name_bytes)) + name_bytes
        encoded += struct.pack(">BH", _STRING_HEADER, len(value_bytes)) + value_bytes
    return bytes(encoded)


def encode_message(headers: Mapping[str, str], payload: bytes) -> bytes:
    header_bytes = _encode_headers(headers)
    total_length = 12 + len(header_bytes) + len(payload) + 4
    prelude = struct.pack(">II", total_length, len(header_bytes))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + header_bytes + payload
    return body + struct.pack(">I", zlib.crc32(body))


def encode_event(event_type: str, payload: Mapping[str, Any]) -> bytes:
    """One ConverseStream event, e.g. `contentBlockDelta` with `{"delta": {"text": ...}}`."""
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    return encode_message(headers, json.dumps(payload).encode("utf-8"))


def encode_exception(exception_type: str, message: str) -> bytes:
    """An error event inside the stream, e.g. `throttlingException` or `modelStreamErrorException`."""
    headers = {
        ":exception-type": exception_type,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return encode_message(headers, json.dumps({"message": message}).encode("utf-8"))
