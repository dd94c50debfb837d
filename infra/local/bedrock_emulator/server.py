"""The emulator's HTTP server: `POST /model/{modelId}/converse-stream` and `/converse`, and
`/model/{modelId}/invoke` for the embedding model (infra/local/bedrock_emulator/embeddings.py)."""

import json
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from infra.local.bedrock_emulator.coach import SUMMARY_PROMPT_PREFIX, CoachReply, Turn, coach_reply, summarize
from infra.local.bedrock_emulator.embeddings import EmbeddingRequestError, embed_request, is_embedding_model
from infra.local.bedrock_emulator.judge import is_judge_request, judge_reply
from infra.local.bedrock_emulator.recorded import Fault, RecordedRequest
from infra.local.bedrock_emulator.replies import STREAM_FAULTS, content_events, converse_answer, stop_reason, usage_of
from infra.local.bedrock_emulator.rules import ConverseValidationError, message_text, validate_converse_request
from infra.local.bedrock_emulator.tool_turns import _tool_turn, _tools
from infra.local.loopback import LoopbackService, StandInServer
from onboarding.llm.event_stream import encode_event, encode_exception

if TYPE_CHECKING:
    from infra.local.iam.gate import Gate

_ROUTE = re.compile(r"^/model/(?P<model>[^/]+)/(?P<operation>converse|converse-stream|invoke)$")
_OPERATIONS = {"converse": "Converse", "converse-stream": "ConverseStream", "invoke": "InvokeModel"}


def coach_respond(
    system: str, messages: Sequence[Mapping[str, Any]], tool_config: Mapping[str, Any] | None = None
) -> CoachReply:
    """The scripted coach's reply to a (validated) Converse request: the updated summary, a turn with
    the tools the request offers (tool_turns.py), or a text turn (coach.py, which both build on)."""
    if system.startswith(SUMMARY_PROMPT_PREFIX):
        last_user = next((message for message in reversed(messages) if message.get("role") == "user"), None)
        return CoachReply(summarize(message_text(last_user) if last_user is not None else ""))
    if tool_config:
        return _tool_turn(system, messages, _tools(tool_config))
    conversation = [Turn(str(message["role"]), message_text(message)) for message in messages]
    return CoachReply(coach_reply(system, conversation))


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
        self.server.stand_in.record(request)
        try:
            self._answer(request, model_id, operation, body)
        finally:
            # How long the "model" took, request read to last byte sent (benchmarks subtract it).
            self.server.stand_in.record_duration(time.monotonic() - started)

    def _embed(self, model_id: str, body: dict[str, Any]) -> None:
        """InvokeModel: only the embedding model is served (the coach talks through Converse)."""
        stand_in = self.server.stand_in
        fault = stand_in.take_embedding_fault()
        if fault is not None:
            self._error(fault[0], fault[1], "The embedding request failed (an emulator fault).")
            return
        if not is_embedding_model(model_id):
            self._error(400, "ValidationException", "The provided model identifier is invalid.")
            return
        try:
            answer = embed_request(body)
        except EmbeddingRequestError as error:
            self._error(400, "ValidationException", str(error))
            return
        if delay := stand_in.embedding_delay_s:
            time.sleep(delay)
        stand_in.record_embedding()
        payload = json.dumps(answer).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Amzn-Bedrock-Input-Token-Count", str(answer["inputTextTokenCount"]))
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

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
        scripted = self.server.stand_in.take_scripted()
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
        payload = json.dumps({"message": message}).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("x-amzn-ErrorType", f"{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/")
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _converse(self, reply: CoachReply, body: dict[str, Any]) -> None:
        if delay := self.server.stand_in.converse_delay_s:
            time.sleep(delay)
        usage = self.server.stand_in.record_usage(usage_of(reply, body))
        payload = json.dumps(converse_answer(reply, usage)).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

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
                self.server.stand_in.record_first_token(time.monotonic())
        self._send(encode_event("messageStop", {"stopReason": stop_reason(reply)}))
        latency_ms = int((time.monotonic() - started) * 1000)
        usage = self.server.stand_in.record_usage(usage_of(reply, body))
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
        self.gate: Gate | None = None  # the template's policies, when the local stack enforces them
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._durations: list[float] = []
        self._first_tokens: list[float] = []
        self._usages: list[dict[str, int]] = []
        self._faults: deque[Fault] = deque()
        self._scripted: deque[CoachReply] = deque()
        self.embedding_delay_s = 0.0  # how long an embedding takes (a slow model, for the deadline tests)
        self._embedding_faults: deque[tuple[int, str]] = deque()
        self._embeddings = 0
        super().__init__(host, port, _Handler, "bedrock-emulator")

    @property
    def embeddings(self) -> int:
        """How many embeddings were answered (the indexer's and the turns' together)."""
        with self._lock:
            return self._embeddings

    def record_embedding(self) -> None:
        with self._lock:
            self._embeddings += 1

    def fail_embeddings(self, count: int, status: int = 503, code: str = "ServiceUnavailableException") -> None:
        """The next `count` embedding requests fail with `status` and Bedrock's `code`."""
        with self._lock:
            self._embedding_faults.extend([(status, code)] * count)

    def take_embedding_fault(self) -> tuple[int, str] | None:
        with self._lock:
            return self._embedding_faults.popleft() if self._embedding_faults else None

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def last_body(self) -> dict[str, Any]:
        with self._lock:
            return self._requests[-1].body if self._requests else {}

    @property
    def model_seconds(self) -> float:
        """Total time spent answering requests so far (a turn's share is the difference)."""
        with self._lock:
            return sum(self._durations)

    @property
    def first_tokens(self) -> list[float]:
        """`time.monotonic()` when each streamed reply that began with text sent its first token."""
        with self._lock:
            return list(self._first_tokens)

    def record_first_token(self, at: float) -> None:
        with self._lock:
            self._first_tokens.append(at)

    @property
    def usages(self) -> list[dict[str, int]]:
        """The usage report (`inputTokens`, `outputTokens`) of each answer sent so far, in order: what
        Bedrock would bill (a turn's share is the new entries; infra.cost reads them)."""
        with self._lock:
            return list(self._usages)

    def record_usage(self, usage: dict[str, int]) -> dict[str, int]:
        with self._lock:
            self._usages.append(usage)
        return usage

    @property
    def answered(self) -> int:
        """Requests whose answer is complete (their time is in `model_seconds`)."""
        with self._lock:
            return len(self._durations)

    def record_duration(self, seconds: float) -> None:
        with self._lock:
            self._durations.append(seconds)

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def queue_fault(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def take_fault(self) -> Fault | None:
        with self._lock:
            return self._faults.popleft() if self._faults else None

    def script(self, reply: CoachReply) -> None:
        """The next valid request is answered with `reply` instead of the coach's own answer (for
        a model that behaves as the coach never does, e.g. one that keeps calling tools)."""
        with self._lock:
            self._scripted.append(reply)

    def take_scripted(self) -> CoachReply | None:
        with self._lock:
            return self._scripted.popleft() if self._scripted else None
