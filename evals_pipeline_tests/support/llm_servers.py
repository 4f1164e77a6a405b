"""Real loopback HTTP servers speaking the Anthropic Messages and OpenAI chat-completions wire
protocols.

Tests of the live backends point the official ``anthropic`` SDK and ``httpx`` at these servers
instead of monkeypatching, so every byte crosses a real socket (127.0.0.1 TCP or a Unix domain
socket) and the clients' own retry, timeout and parsing code runs unmodified. Replies are scripted
with :class:`Reply`, which can also inject faults (delays, truncated bodies, connection resets,
malformed JSON). :class:`TripwireListener` takes over an address after a server stopped to prove
that a replay run opens no connections at all.

Stdlib only, so the support code cannot drift with the clients under test.
"""

from __future__ import annotations

import contextlib
import json as _json
import secrets
import select
import socket
import socketserver
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, cast
from urllib.parse import urlsplit

__all__ = [
    "LoopbackLLMServer",
    "ReceivedRequest",
    "Reply",
    "Responder",
    "TripwireListener",
    "WireProtocol",
    "anthropic_error",
    "anthropic_message",
    "openai_completion",
    "openai_error",
]

WireProtocol = Literal["anthropic", "openai"]

LOOPBACK_HOST = "127.0.0.1"
# Host used in URLs for Unix-socket servers: the transport ignores it, but the URL must parse.
UDS_URL_HOST = "localhost"
DEFAULT_REPLY_TEXT = '{"entities": []}'

_ENDPOINTS: dict[WireProtocol, str] = {
    "anthropic": "/v1/messages",
    "openai": "/v1/chat/completions",
}
# How often serve_forever/the tripwire check for shutdown; keeps stop() fast in tests.
_POLL_INTERVAL_S = 0.05
_STOP_DRAIN_TIMEOUT_S = 1.0
# SO_LINGER {on, 0s}: close() discards buffers and sends RST instead of FIN.
_LINGER_RST = struct.pack("ii", 1, 0)
# Listen backlog of the servers (the kernel caps it at net.core.somaxconn).
_LISTEN_BACKLOG = 1024


# --------------------------------------------------------------------------------------------
# Requests and replies
# --------------------------------------------------------------------------------------------


def _text_of(content: Any) -> str | None:
    """Text of a message ``content``: a plain string or a list of ``{"type": "text"}`` blocks.

    Several text blocks are joined with ``"\\n"``; non-text blocks are ignored.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            block["text"]
            for block in content
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        )
    return None


@dataclass(frozen=True)
class ReceivedRequest:
    """One HTTP request as the server saw it, so tests can assert on what really went out."""

    protocol: WireProtocol
    method: str
    path: str
    headers: dict[str, str]
    """Header names lower-cased; repeated headers joined with ``", "``."""
    body: bytes
    json: Any
    """Parsed body, or ``None`` when the body was empty or not valid JSON."""
    received_at: float
    """``time.monotonic()`` when the request was fully read."""

    def _object(self) -> dict[str, Any]:
        return self.json if isinstance(self.json, dict) else {}

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The ``messages`` array (dict entries only), or ``[]``."""
        messages = self._object().get("messages")
        if not isinstance(messages, list):
            return []
        return [m for m in messages if isinstance(m, dict)]

    @property
    def api_key(self) -> str | None:
        """The credential sent: ``x-api-key``, else the token of ``Authorization: Bearer``.

        anthropic SDK 2.x sends ``api_key`` as ``Authorization: Bearer``, not ``x-api-key``.
        """
        if "x-api-key" in self.headers:
            return self.headers["x-api-key"]
        scheme, _, token = self.headers.get("authorization", "").partition(" ")
        return token if scheme.lower() == "bearer" and token else None

    @property
    def model(self) -> str | None:
        model = self._object().get("model")
        return model if isinstance(model, str) else None

    @property
    def system_prompt(self) -> str | None:
        """Anthropic: the top-level ``system`` field; OpenAI: the first ``system`` message."""
        if self.protocol == "anthropic":
            return _text_of(self._object().get("system"))
        for message in self.messages:
            if message.get("role") == "system":
                return _text_of(message.get("content"))
        return None

    @property
    def user_prompt(self) -> str | None:
        """Text of the last ``user`` message."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return _text_of(message.get("content"))
        return None

    @property
    def max_tokens(self) -> int | None:
        """``max_tokens`` (OpenAI also accepts the newer ``max_completion_tokens``)."""
        data = self._object()
        value = data.get("max_tokens")
        if value is None and self.protocol == "openai":
            value = data.get("max_completion_tokens")
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        return None


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP response, optionally with an injected fault.

    Frozen; derive variants with :func:`dataclasses.replace`.
    """

    status: int = 200
    json: Any = None
    """Serialised as the body unless ``raw`` is given."""
    raw: bytes | None = None
    """Sent verbatim as the body (e.g. malformed JSON); excludes ``json``."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra response headers (e.g. ``retry-after``); override the defaults case-insensitively."""
    delay_s: float = 0.0
    """Sleep before responding (client timeouts, latency benchmarks). Interrupted by stop()."""
    truncate_body_at: int | None = None
    """Announce the full Content-Length but send only this many body bytes, then close."""
    reset: bool = False
    """Close the connection without any response (TCP: a real RST via SO_LINGER 0)."""

    def __post_init__(self) -> None:
        if self.json is not None and self.raw is not None:
            raise ValueError("Reply takes either json or raw, not both")
        if self.delay_s < 0:
            raise ValueError("delay_s must be >= 0")
        if self.truncate_body_at is not None and self.truncate_body_at < 0:
            raise ValueError("truncate_body_at must be >= 0")

    @property
    def body(self) -> bytes:
        """The complete body bytes (before any truncation)."""
        if self.raw is not None:
            return self.raw
        if self.json is None:
            return b""
        return _json.dumps(self.json, ensure_ascii=False).encode("utf-8")


Responder = Callable[[ReceivedRequest], Reply]


def _format_retry_after(seconds: float) -> str:
    seconds = float(seconds)
    return str(int(seconds)) if seconds.is_integer() else repr(seconds)


def _with_retry_after(headers: dict[str, str] | None, retry_after: float | None) -> dict[str, str]:
    merged = dict(headers or {})
    if retry_after is not None:
        merged["retry-after"] = _format_retry_after(retry_after)
    return merged


def anthropic_message(
    text: str,
    *,
    stop_reason: str = "end_turn",
    input_tokens: int = 10,
    output_tokens: int = 20,
    model: str = "claude-test",
) -> Reply:
    """A successful Messages API response with a single text block."""
    return Reply(
        json={
            "id": f"msg_{secrets.token_hex(12)}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        }
    )


_ANTHROPIC_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_DEFAULT_ERROR_MESSAGES: dict[str, str] = {
    "invalid_request_error": "Invalid request.",
    "authentication_error": "Invalid API key.",
    "permission_error": "Permission denied.",
    "not_found_error": "Not found.",
    "request_too_large": "Request exceeds the maximum allowed size.",
    "rate_limit_error": "Rate limit exceeded.",
    "api_error": "Internal server error.",
    "overloaded_error": "Overloaded.",
    "server_error": "Internal server error.",
}


def anthropic_error(
    status: int,
    *,
    error_type: str | None = None,
    message: str | None = None,
    retry_after: float | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    """A Messages API error body; ``error_type`` defaults from the status (529: overloaded)."""
    if error_type is None:
        error_type = _ANTHROPIC_ERROR_TYPES.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
    if message is None:
        message = _DEFAULT_ERROR_MESSAGES.get(error_type, f"HTTP {status}")
    return Reply(
        status=status,
        json={"type": "error", "error": {"type": error_type, "message": message}},
        headers=_with_retry_after(headers, retry_after),
    )


def openai_completion(
    text: str,
    *,
    finish_reason: str = "stop",
    prompt_tokens: int = 10,
    completion_tokens: int = 20,
    model: str = "local",
) -> Reply:
    """A successful (non-streaming) chat-completions response with one choice."""
    return Reply(
        json={
            "id": f"chatcmpl-{secrets.token_hex(12)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    )


_OPENAI_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def openai_error(
    status: int,
    *,
    message: str | None = None,
    error_type: str | None = None,
    retry_after: float | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    """An OpenAI-style error body ``{"error": {"message", "type", "param", "code"}}``."""
    if error_type is None:
        error_type = _OPENAI_ERROR_TYPES.get(
            status, "server_error" if status >= 500 else "invalid_request_error"
        )
    if message is None:
        message = _DEFAULT_ERROR_MESSAGES.get(error_type, f"HTTP {status}")
    return Reply(
        status=status,
        json={"error": {"message": message, "type": error_type, "param": None, "code": None}},
        headers=_with_retry_after(headers, retry_after),
    )


def _protocol_error(protocol: WireProtocol, status: int, message: str) -> Reply:
    if protocol == "anthropic":
        return anthropic_error(status, message=message)
    return openai_error(status, message=message)


# --------------------------------------------------------------------------------------------
# HTTP plumbing
# --------------------------------------------------------------------------------------------


class _TrackingServer(socketserver.BaseServer):
    """Mixin: counts accepted connections and tracks open ones so stop() can close them."""

    owner: LoopbackLLMServer
    # socketserver listens with a backlog of 5. When a client opens tens of connections at once
    # (concurrency 32 in the live benchmark), the kernel's accept and SYN queues overflow: it
    # falls back to SYN cookies and drops handshake ACKs, so connections the client believes
    # open are reset on first read (httpx ReadError). Real model servers listen with
    # SOMAXCONN-sized backlogs (uvicorn: 2048), so the loopback server must too.
    request_queue_size = _LISTEN_BACKLOG

    def process_request(self, request: Any, client_address: Any) -> None:
        # Runs in the serve_forever thread once per accepted connection.
        self.owner._connection_opened(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        self.owner._connection_closed(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            # The peer went away (timeouts, resets): expected in fault-injection tests.
            return
        if exc is not None:
            self.owner._record_error(exc)
        super().handle_error(request, client_address)


class _TCPServer(_TrackingServer, ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def server_bind(self) -> None:
        # Skip HTTPServer's socket.getfqdn(), a reverse-DNS lookup that can stall offline.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)


class _UnixServer(_TrackingServer, socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    allow_reuse_address = True


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive handler; every response carries a Content-Length."""

    protocol_version = "HTTP/1.1"
    server_version = "LoopbackLLM/1.0"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        """Silenced: the server's request log is the record, stderr noise is not."""

    @property
    def _owner(self) -> LoopbackLLMServer:
        return cast(_TrackingServer, self.server).owner

    def do_POST(self) -> None:
        self._handle()

    def do_GET(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _handle(self) -> None:
        owner = self._owner
        body = self._read_body()
        if body is None:
            self.close_connection = True
            return
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        try:
            parsed: Any = _json.loads(body) if body else None
        except ValueError:
            parsed = None
        request = ReceivedRequest(
            protocol=owner.protocol,
            method=self.command,
            path=self.path,
            headers=headers,
            body=body,
            json=parsed,
            received_at=time.monotonic(),
        )
        owner._record_request(request)
        self._send(owner._reply_for(request))

    def _read_body(self) -> bytes | None:
        """The full request body, or ``None`` if the client vanished mid-body."""
        try:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                return self._read_chunked()
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length > 0 else b""
            return body if len(body) == length else None
        except (OSError, ValueError):
            return None

    def _read_chunked(self) -> bytes | None:
        chunks: list[bytes] = []
        while True:
            line = self.rfile.readline(65537)
            if not line:
                return None
            size = int(line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                # Discard trailers up to the terminating blank line.
                while (trailer := self.rfile.readline(65537)) not in (b"\r\n", b"\n"):
                    if not trailer:
                        return None
                return b"".join(chunks)
            chunk = self.rfile.read(size)
            if len(chunk) != size:
                return None
            chunks.append(chunk)
            self.rfile.readline(65537)  # CRLF after the chunk data

    def _send(self, reply: Reply) -> None:
        owner = self._owner
        if reply.delay_s > 0 and owner._stopping.wait(reply.delay_s):
            # Server stopping: drop the connection rather than keep the client waiting.
            self.close_connection = True
            return
        if reply.reset:
            self._reset_connection()
            return
        body = reply.body
        headers: dict[str, tuple[str, str]] = {
            "content-type": ("Content-Type", "application/json"),
            "content-length": ("Content-Length", str(len(body))),
        }
        if owner.protocol == "anthropic":
            headers["request-id"] = ("request-id", f"req_{secrets.token_hex(12)}")
        for name, value in reply.headers.items():
            headers[name.lower()] = (name, value)
        payload = body if reply.truncate_body_at is None else body[: reply.truncate_body_at]
        try:
            self.send_response(reply.status)
            for name, value in headers.values():
                self.send_header(name, value)
            self.end_headers()
            if payload:
                self.wfile.write(payload)
        except OSError:
            self.close_connection = True
            return
        if reply.truncate_body_at is not None:
            # Closing with a short body is exactly the fault: the client expected more bytes.
            self.close_connection = True

    def _reset_connection(self) -> None:
        sock = self.connection
        self.close_connection = True
        try:
            if sock.family != socket.AF_UNIX:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
            # rfile holds a reference to the socket; the fd only closes once both are closed.
            self.rfile.close()
            sock.close()
        except OSError:
            pass


class _TCPHandler(_Handler):
    # Headers and body go out in separate writes; without TCP_NODELAY, Nagle plus delayed
    # ACKs would add ~40 ms per keep-alive request and distort latency benchmarks.
    disable_nagle_algorithm = True


class _UnixHandler(_Handler):
    pass


# --------------------------------------------------------------------------------------------
# Public servers
# --------------------------------------------------------------------------------------------


class LoopbackLLMServer:
    """A real HTTP server on 127.0.0.1 (ephemeral port) or a Unix socket, scripted per test.

    Replies come from the FIFO filled by :meth:`enqueue`, then from ``responder``, then a default
    success whose text is ``{"entities": []}``. Requests to paths other than the protocol's
    endpoint get a protocol-shaped 404 (405 for a non-POST method) and do not consume the queue.
    """

    def __init__(
        self,
        protocol: WireProtocol,
        *,
        uds_path: str | Path | None = None,
        responder: Responder | None = None,
        port: int = 0,
    ) -> None:
        if protocol not in _ENDPOINTS:
            raise ValueError(f"unknown protocol {protocol!r}; expected 'anthropic' or 'openai'")
        self.protocol: WireProtocol = protocol
        self.uds_path: Path | None = Path(uds_path) if uds_path is not None else None
        self.responder: Responder | None = responder
        self._requested_port = port
        self._port: int | None = None
        self._lock = threading.Lock()
        self._requests: list[ReceivedRequest] = []
        self._queue: deque[Reply] = deque()
        self._errors: list[BaseException] = []
        self._connections = 0
        self._open: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._server: _TrackingServer | None = None
        self._thread: threading.Thread | None = None
        self._ever_started = False

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> LoopbackLLMServer:
        """Bind and serve in a daemon thread. Returns ``self`` for chaining."""
        if self._server is not None:
            raise RuntimeError("server already running")
        self._stopping.clear()
        server: _TrackingServer
        if self.uds_path is not None:
            server = _UnixServer(str(self.uds_path), _UnixHandler)
        else:
            tcp = _TCPServer((LOOPBACK_HOST, self._requested_port), _TCPHandler)
            self._port = tcp.server_port
            server = tcp
        server.owner = self
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": _POLL_INTERVAL_S},
            name=f"loopback-{self.protocol}-server",
            daemon=True,
        )
        self._server, self._thread, self._ever_started = server, thread, True
        thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, close the listening socket and open connections, unlink the UDS.

        Idempotent. The address (port or path) stays available for :class:`TripwireListener`.
        """
        server, thread = self._server, self._thread
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        with self._lock:
            still_open = list(self._open)
        for sock in still_open:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + _STOP_DRAIN_TIMEOUT_S
        while time.monotonic() < deadline:
            with self._lock:
                if not self._open:
                    break
            time.sleep(0.005)
        if thread is not None:
            thread.join(timeout=_STOP_DRAIN_TIMEOUT_S)
        if self.uds_path is not None:
            self.uds_path.unlink(missing_ok=True)
        self._server = self._thread = None

    def __enter__(self) -> LoopbackLLMServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._server is not None

    # -- addressing --------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound TCP port (kept after stop() so a tripwire can take it over)."""
        if self.uds_path is not None:
            raise RuntimeError("Unix-socket server has no TCP port")
        if self._port is None:
            raise RuntimeError("server not started")
        return self._port

    @property
    def endpoint_path(self) -> str:
        return _ENDPOINTS[self.protocol]

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:PORT``, or ``http://localhost`` for a Unix-socket server."""
        if not self._ever_started:
            raise RuntimeError("server not started")
        if self.uds_path is not None:
            return f"http://{UDS_URL_HOST}"
        return f"http://{LOOPBACK_HOST}:{self.port}"

    @property
    def url(self) -> str:
        """Full URL of the protocol endpoint."""
        return self.origin + self.endpoint_path

    @property
    def base_url(self) -> str:
        """What a client is configured with.

        Anthropic: the origin (the SDK appends ``/v1/messages``). OpenAI-compatible: the full
        ``/v1/chat/completions`` URL.
        """
        return self.origin if self.protocol == "anthropic" else self.url

    # -- scripting and inspection ------------------------------------------------------------

    def enqueue(self, *replies: Reply) -> None:
        """Append replies to the FIFO served before the responder/default."""
        for reply in replies:
            if not isinstance(reply, Reply):
                raise TypeError(f"expected Reply, got {type(reply).__name__}")
        with self._lock:
            self._queue.extend(replies)

    @property
    def queued(self) -> int:
        """Scripted replies not yet served."""
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[ReceivedRequest]:
        """Snapshot of every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def connections(self) -> int:
        """Connections accepted so far (keep-alive reuse does not add to this)."""
        with self._lock:
            return self._connections

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised by the responder or handler (each was answered with a 500)."""
        with self._lock:
            return list(self._errors)

    # -- called from server threads ----------------------------------------------------------

    def _connection_opened(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections += 1
            self._open.add(sock)

    def _connection_closed(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)

    def _record_request(self, request: ReceivedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _record_error(self, exc: BaseException) -> None:
        with self._lock:
            self._errors.append(exc)

    def _reply_for(self, request: ReceivedRequest) -> Reply:
        route = urlsplit(request.path).path
        if route != self.endpoint_path:
            return _protocol_error(
                self.protocol, 404, f"Not found: {request.method} {request.path}"
            )
        if request.method != "POST":
            return _protocol_error(
                self.protocol, 405, f"Method not allowed: {request.method} {request.path}"
            )
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is None:
            return self._default_reply(request)
        try:
            reply = self.responder(request)
            if not isinstance(reply, Reply):
                raise TypeError(f"responder returned {type(reply).__name__}, expected Reply")
        except Exception as exc:
            self._record_error(exc)
            return _protocol_error(self.protocol, 500, f"responder failed: {exc!r}")
        return reply

    def _default_reply(self, request: ReceivedRequest) -> Reply:
        """Success echoing the requested model, with an empty-extraction text."""
        if self.protocol == "anthropic":
            return anthropic_message(DEFAULT_REPLY_TEXT, model=request.model or "claude-test")
        return openai_completion(DEFAULT_REPLY_TEXT, model=request.model or "local")


class TripwireListener:
    """Listens where a real server used to be and counts every connection attempt.

    Each connection is accepted and closed at once (TCP: with RST), so a client fails fast
    instead of hanging. Used to prove that a replay run attempts zero connections.
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        host: str = LOOPBACK_HOST,
        uds_path: str | Path | None = None,
    ) -> None:
        if (port is None) == (uds_path is None):
            raise ValueError("give exactly one of port or uds_path")
        self.host = host
        self._port = port
        self.uds_path: Path | None = Path(uds_path) if uds_path is not None else None
        self._lock = threading.Lock()
        self._connections = 0
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    @classmethod
    def replacing(cls, server: LoopbackLLMServer) -> TripwireListener:
        """A tripwire on the (stopped) server's port or Unix-socket path."""
        if server.running:
            raise RuntimeError("stop the server before placing a tripwire on its address")
        if server.uds_path is not None:
            return cls(uds_path=server.uds_path)
        return cls(server.port)

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("Unix-socket tripwire has no TCP port")
        return self._port

    @property
    def connections(self) -> int:
        """Connection attempts accepted so far (a client's failure implies it was counted)."""
        with self._lock:
            return self._connections

    def start(self) -> TripwireListener:
        if self._sock is not None:
            raise RuntimeError("tripwire already running")
        if self.uds_path is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            bind_to: Any = str(self.uds_path)
        else:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            # The stopped server's port may still have TIME_WAIT connections.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            bind_to = (self.host, self.port)
        try:
            sock.bind(bind_to)
            sock.listen(_LISTEN_BACKLOG)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        if self.uds_path is None:
            self._port = sock.getsockname()[1]
        self._sock = sock
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="tripwire-listener", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop, count anything still in the accept backlog, close, unlink the UDS."""
        sock, thread = self._sock, self._thread
        if sock is None:
            return
        self._stopping.set()
        if thread is not None:
            thread.join(timeout=_STOP_DRAIN_TIMEOUT_S)
        self._accept_pending(sock)
        sock.close()
        if self.uds_path is not None:
            self.uds_path.unlink(missing_ok=True)
        self._sock = self._thread = None

    def __enter__(self) -> TripwireListener:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        sock = self._sock
        assert sock is not None
        while not self._stopping.is_set():
            readable, _, _ = select.select([sock], [], [], _POLL_INTERVAL_S)
            if readable:
                self._accept_pending(sock)

    def _accept_pending(self, sock: socket.socket) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:  # BlockingIOError when the backlog is empty
                return
            # Count before closing, so a client that saw the close can rely on the count.
            with self._lock:
                self._connections += 1
            try:
                if self.uds_path is None:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
            except OSError:
                pass
            finally:
                conn.close()


@contextlib.contextmanager
def raw_http_server(answer: Callable[[socket.socket, bytes], None]) -> Iterator[str]:
    """A bare TCP server on 127.0.0.1 that reads each request's head and lets `answer(conn,
    head)` reply: for replies no HTTP server library would send (a trickled body, not HTTP)."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.05)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(1.0)
                head = b""
                while b"\r\n\r\n" not in head and (chunk := conn.recv(65536)):
                    head += chunk
                with contextlib.suppress(OSError):  # the client may give up first
                    answer(conn, head)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        listener.close()


def trickled_json(body: bytes, *, per_byte_s: float) -> Callable[[socket.socket, bytes], None]:
    """An answer for `raw_http_server`: a 200 JSON reply whose body is sent a byte at a time,
    `per_byte_s` apart (each read well within a timeout, the whole past it)."""

    def answer(conn: socket.socket, _head: bytes) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            + f"content-length: {len(body)}\r\n\r\n".encode()
        )
        for byte in body:
            conn.sendall(bytes([byte]))
            time.sleep(per_byte_s)

    return answer
