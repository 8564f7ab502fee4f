"""A small HTTP endpoint for ``/metrics`` that no client can exhaust (metrics layer).

prometheus_client's own ``start_http_server`` (a ``ThreadingWSGIServer``) listens with a backlog
of 5 and gives every connection a thread that waits for the request as long as the client likes:
a handful of idle clients (a *slowloris*) hold threads forever and queue every other scrape,
which matters once the endpoint listens on every interface (``--metrics-addr 0.0.0.0``). Here one
asyncio event loop in one thread serves every connection instead
(https://docs.python.org/3/library/asyncio-stream.html), so an idle client costs a file
descriptor and no thread, and three bounds hold whatever clients do:

* the request head (request line and headers, at most ``MAX_HEAD_BYTES``) must arrive within
  ``read_timeout_s`` of the connection, however slowly its bytes trickle in, and the answer must
  be taken within the same time; otherwise the connection is closed;
* at most ``max_connections`` are open at once; a connection beyond them pushes out the one that
  has waited longest for its request head (a scraper sends its head within a millisecond, so an
  idle client is what goes), or, when every open connection is being answered, is closed at once;
* the listen backlog is ``BACKLOG`` (Linux's ``somaxconn`` caps it further).

Only ``GET`` (and ``HEAD``) of ``/metrics`` or ``/`` is served, one request per connection
(``Connection: close``); the body comes from *render* (the exposition text of the official client
library, chosen by the request's ``Accept`` header) and is built in the loop's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable

#: Pending connections the kernel queues before accept (Python's own default for listen()).
BACKLOG = 128
#: Open connections at once: a fleet's Prometheus servers need one or two each.
MAX_CONNECTIONS = 64
#: Seconds a client has to send its request head and take the answer (Prometheus: milliseconds).
READ_TIMEOUT_S = 5.0
MAX_HEAD_BYTES = 16 * 1024

Render = Callable[[str], tuple[bytes, str]]  # Accept header -> (body, content type)


def bind(addr: str, port: int) -> socket.socket:
    """A listening TCP socket on *addr*:*port* (OSError when taken or not this machine's)."""
    infos = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, where = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        if hasattr(socket, "SO_EXCLUSIVEADDRUSE"):  # Windows, where SO_REUSEADDR would let others take the port
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_EXCLUSIVEADDRUSE, 1)
        else:  # a restart right after a run finds the port free (its old connections in TIME_WAIT)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(where)
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


class BoundedHttp:
    """Serve ``/metrics`` from *sock* in a thread of its own until :meth:`close`."""

    def __init__(
        self,
        sock: socket.socket,
        render: Render,
        *,
        read_timeout_s: float = READ_TIMEOUT_S,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self._sock, self._render = sock, render
        self.read_timeout_s, self.max_connections = float(read_timeout_s), int(max_connections)
        self._open: set[asyncio.StreamWriter] = set()  # connections open (an evicted one leaves at once)
        self.refused = 0  # connections closed at once: max_connections open, all being answered
        self.evicted = 0  # connections still waiting for their head, pushed out by a newer one
        self.timed_out = 0  # connections closed because the head or the answer took too long
        self._waiting: dict[asyncio.StreamWriter, None] = {}  # no complete head yet, oldest first
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="softrt-metrics", daemon=True)
        self._thread.start()
        self._ready.wait()

    @property
    def open(self) -> int:
        """Connections open now (read by tests and the benchmark)."""
        return len(self._open)

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, sock=self._sock, limit=MAX_HEAD_BYTES, backlog=BACKLOG)
        )
        self._ready.set()
        self._loop.run_forever()
        self._server.close()  # no new connections; the open ones are dropped with their tasks
        tasks = asyncio.all_tasks(self._loop)
        for task in tasks:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.run_until_complete(self._server.wait_closed())
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.open >= self.max_connections:
            if not self._waiting:
                self.refused += 1
                writer.transport.abort()
                return
            oldest = next(iter(self._waiting))
            del self._waiting[oldest]
            self._open.discard(oldest)
            self.evicted += 1
            oldest.transport.abort()  # its readuntil() ends with an error; its task cleans up
        self._open.add(writer)
        self._waiting[writer] = None
        try:
            await asyncio.wait_for(self._answer(reader, writer), self.read_timeout_s)
        except asyncio.TimeoutError:
            self.timed_out += 1
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass  # the client went away, was pushed out, or sent something that is not a request head
        finally:
            self._open.discard(writer)
            self._waiting.pop(writer, None)
            writer.transport.abort()  # no lingering close: the answer was flushed by drain()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        self._waiting.pop(writer, None)  # being answered: never pushed out
        request, *lines = head.split("\r\n")
        method, target, _version = [*request.split(" "), "", "", ""][:3]
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines if ln)}
        path = target.split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            status, body, ctype = "405 Method Not Allowed", b"only GET\n", "text/plain; charset=utf-8"
        elif path not in ("/metrics", "/"):
            status, body, ctype = "404 Not Found", b"softrt serves /metrics\n", "text/plain; charset=utf-8"
        else:
            try:
                body, ctype = self._render(headers.get("accept", ""))
                status = "200 OK"
            except Exception as err:  # noqa: BLE001 - a collector's bug: said to the scraper, never a dead endpoint
                status, body, ctype = "500 Internal Server Error", f"{err!r}\n".encode(), "text/plain; charset=utf-8"
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode("latin-1")
            + (b"" if method == "HEAD" else body)
        )
        await writer.drain()

    def close(self) -> None:
        """Stop accepting, drop every open connection, end the thread."""
        if self._loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop already stopped
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5.0)
