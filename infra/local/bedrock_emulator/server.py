"""The emulator's HTTP server: `POST /model/{modelId}/converse-stream` and `/converse`, and
`/model/{modelId}/invoke` for the embedding model (infra/local/bedrock_emulator/embeddings.py)."""

import json
import re
import threading
import time
import uuid
from collections import deque
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import unquote

from infra.local.bedrock_emulator.coach import CoachReply, coach_respond
from infra.local.bedrock_emulator.embeddings import (
    MAX_INPUT_TOKENS,
    EmbeddingRequestError,
    embed_request,
    is_embedding_model,
)
from infra.local.bedrock_emulator.judge import is_judge_request, judge_reply
from infra.local.bedrock_emulator.recorded import Fault, RecordedRequest
from infra.local.bedrock_emulator.replies import STREAM_FAULTS, content_events, converse_answer, stop_reason, usage_of
from infra.local.bedrock_emulator.rules import ConverseValidationError, validate_converse_request
from infra.local.loopback import LoopbackService, StandInServer
from onboarding.llm.event_stream import encode_event, encode_exception

if TYPE_CHECKING:
    from infra.local.iam.gate import Gate

_ROUTE = re.compile(r"^/model/(?P<model>[^/]+)/(?P<operation>converse|converse-stream|invoke)$")
_OPERATIONS = {"converse": "Converse", "converse-stream": "ConverseStream", "invoke": "InvokeModel"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Each event goes out as its own small write; with Nagle's algorithm on, a write waits for the
    # ACK of the one before, which the client may delay ~40 ms: a stall of the emulator, not ours.
    disable_nagle_algorithm = True
    server: StandInServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Silence per-request logging (it would print message text)."""

    def do_POST(self) -> None:
        started = time.monotonic()
        body_bytes = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        route = _ROUTE.match(self.path.split("?", 1)[0])
        if route is None:
            self._error(404, "UnknownOperationException", f"No operation at {self.path}")
            return
        model_id, operation = unquote(route["model"]), route["operation"]
        try:
            body = json.loads(body_bytes or b"{}")
            if not isinstance(body, dict):
                raise ValueError("body must be a JSON object")
        except ValueError:
            self._error(400, "SerializationException", "Request body is not valid JSON")
            return
        gate = self.server.stand_in.gate
        refused = (
            None
            if gate is None
            else gate.check(
                "bedrock-runtime", _OPERATIONS[operation], {"modelId": model_id}, self.headers.get("Authorization")
            )
        )
        if refused is not None:  # as Bedrock: refused before the model is invoked
            self._error(refused.status, refused.code, refused.message)
            return
        if operation == "invoke":
            self._embed(model_id, body)
            return
        request = RecordedRequest(model_id, operation, body)
        self.server.stand_in.note("requests", request)
        try:
            self._answer(request, model_id, operation, body)
        finally:
            # How long the "model" took, request read to last byte sent (benchmarks subtract it).
            self.server.stand_in.note("durations", time.monotonic() - started)

    def _embed(self, model_id: str, body: dict[str, Any]) -> None:
        """InvokeModel: only the embedding model is served (the coach talks through Converse)."""
        stand_in = self.server.stand_in
        fault = stand_in.take("embedding_faults")
        if fault is not None:
            self._error(fault[0], fault[1], "The embedding request failed (an emulator fault).")
            return
        if not is_embedding_model(model_id):
            self._error(400, "ValidationException", "The provided model identifier is invalid.")
            return
        try:
            answer = embed_request(body, stand_in.embedding_max_tokens)
        except EmbeddingRequestError as error:
            self._error(400, "ValidationException", str(error))
            return
        if delay := stand_in.embedding_delay_s:
            time.sleep(delay)
        stand_in.note("embeddings", len(body["inputText"]))
        self._json(200, answer, {"X-Amzn-Bedrock-Input-Token-Count": str(answer["inputTextTokenCount"])})

    def _answer(self, request: "RecordedRequest", model_id: str, operation: str, body: dict[str, Any]) -> None:
        try:
            validate_converse_request(model_id, body)
        except ConverseValidationError as error:
            self._error(400, "ValidationException", str(error))
            return
        fault = self.server.stand_in.take_fault()
        if fault is not None and fault.kind == "throttle":
            self._error(429, "ThrottlingException", "Too many requests, please wait before trying again.")
            return
        if fault is not None and fault.kind == "unavailable":
            self._error(503, "ServiceUnavailableException", "Bedrock is unable to process your request.")
            return
        scripted = self.server.stand_in.take("scripted")
        if scripted is not None:
            reply = scripted
        elif fault is not None and fault.kind == "empty_reply":
            reply = CoachReply("")
        elif is_judge_request(request.system_text):  # the memory benchmark's judge (a test double)
            reply = judge_reply(body["messages"])
        else:
            reply = coach_respond(request.system_text, body["messages"], body.get("toolConfig"))
        if operation == "converse":
            self._converse(reply, body)
        else:
            self._converse_stream(reply, fault, body)

    def _error(self, status: int, error_type: str, message: str) -> None:
        error = f"{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/"
        self._json(status, {"message": message}, {"x-amzn-ErrorType": error, "x-amzn-RequestId": str(uuid.uuid4())})

    def _json(self, status: int, answer: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(answer).encode("utf-8")
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _converse(self, reply: CoachReply, body: dict[str, Any]) -> None:
        if delay := self.server.stand_in.converse_delay_s:
            time.sleep(delay)
        self._json(200, converse_answer(reply, self.server.stand_in.note("usages", usage_of(reply, body))))

    def _converse_stream(self, reply: CoachReply, fault: Fault | None, body: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.amazon.eventstream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        self.end_headers()
        started = time.monotonic()
        self._send(encode_event("messageStart", {"role": "assistant"}))
        delay = self.server.stand_in.chunk_delay_s
        deltas = 0
        for event_type, payload in content_events(reply):
            if event_type == "contentBlockDelta":
                # A stream fault counts every delta, text or tool input, as a chunk.
                if fault is not None and fault.kind in STREAM_FAULTS and deltas == fault.after_chunks:
                    self._send(encode_exception(*STREAM_FAULTS[fault.kind]))
                    self._finish()
                    return
                deltas += 1
                if delay:
                    time.sleep(delay)
            self._send(encode_event(event_type, payload))
            if deltas == 1 and event_type == "contentBlockDelta" and "text" in payload["delta"]:
                self.server.stand_in.note("first_tokens", time.monotonic())
        self._send(encode_event("messageStop", {"stopReason": stop_reason(reply)}))
        latency_ms = int((time.monotonic() - started) * 1000)
        usage = self.server.stand_in.note("usages", usage_of(reply, body))
        self._send(encode_event("metadata", {"usage": usage, "metrics": {"latencyMs": latency_ms}}))
        self._finish()

    def _send(self, frame: bytes) -> None:
        self.wfile.write(f"{len(frame):X}\r\n".encode("ascii") + frame + b"\r\n")
        self.wfile.flush()

    def _finish(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class BedrockEmulator(LoopbackService):
    """Run with `with BedrockEmulator() as emulator:` and point
    `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` at `emulator.url`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, chunk_delay_s: float = 0.0) -> None:
        self.chunk_delay_s = chunk_delay_s
        self.converse_delay_s = 0.0  # how long a (non-streamed) Converse answer takes, e.g. a summary
        self.embedding_delay_s = 0.0  # how long an embedding takes (a slow model, for the deadline tests)
        # Titan's token limit; a test lowers it for a Titan that counts a text longer than estimated.
        self.embedding_max_tokens = MAX_INPUT_TOKENS
        self.gate: Gate | None = None  # the template's policies, when the local stack enforces them
        self._lock = threading.Lock()
        # What was asked and answered, in order (read through the properties below).
        self._requests: list[RecordedRequest] = []
        self._durations: list[float] = []
        self._first_tokens: list[float] = []
        self._usages: list[dict[str, int]] = []
        self._embeddings: list[int] = []  # the characters of each answered embedding's input
        # What the next requests meet, first queued first.
        self._faults: deque[Fault] = deque()
        self._scripted: deque[CoachReply] = deque()
        self._embedding_faults: deque[tuple[int, str]] = deque()
        super().__init__(host, port, _Handler, "bedrock-emulator")

    def note(self, kind: str, value: Any) -> Any:
        """Add `value` to what the emulator records of `kind` (`requests`, `durations`, ...)."""
        with self._lock:
            getattr(self, f"_{kind}").append(value)
        return value

    def _copy(self, kind: str) -> list[Any]:
        with self._lock:
            return list(getattr(self, f"_{kind}"))

    def take(self, kind: str) -> Any:
        """The next queued `faults`, `scripted` reply or `embedding_faults`, if any."""
        with self._lock:
            queue: deque[Any] = getattr(self, f"_{kind}")
            return queue.popleft() if queue else None

    def take_fault(self) -> Fault | None:
        return cast(Fault | None, self.take("faults"))

    @property
    def requests(self) -> list[RecordedRequest]:
        return self._copy("requests")

    @property
    def model_seconds(self) -> float:
        """Total time spent answering requests so far (a turn's share is the difference)."""
        return float(sum(self._copy("durations")))

    @property
    def answered(self) -> int:
        """Requests whose answer is complete (their time is in `model_seconds`)."""
        return len(self._copy("durations"))

    @property
    def first_tokens(self) -> list[float]:
        """`time.monotonic()` when each streamed reply that began with text sent its first token."""
        return self._copy("first_tokens")

    @property
    def usages(self) -> list[dict[str, int]]:
        """The usage report (`inputTokens`, `outputTokens`) of each answer sent so far, in order: what
        Bedrock would bill (a turn's share is the new entries; infra.cost reads them)."""
        return self._copy("usages")

    @property
    def embeddings(self) -> int:
        """How many embeddings were answered (the indexer's and the turns' together)."""
        return len(self._copy("embeddings"))

    @property
    def embedded_chars(self) -> list[int]:
        """The characters of each answered embedding's input, oldest first."""
        return self._copy("embeddings")

    def queue_fault(self, fault: Fault) -> None:
        self.note("faults", fault)

    def script(self, reply: CoachReply) -> None:
        """The next valid request is answered with `reply` instead of the coach's own answer (for
        a model that behaves as the coach never does, e.g. one that keeps calling tools)."""
        self.note("scripted", reply)

    def fail_embeddings(self, count: int, status: int = 503, code: str = "ServiceUnavailableException") -> None:
        """The next `count` embedding requests fail with `status` and Bedrock's `code`."""
        for _ in range(count):
            self.note("embedding_faults", (status, code))
