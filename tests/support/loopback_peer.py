"""A scripted peer on 127.0.0.1 for unit tests of connections: it runs a script for each connection it accepts;
``read_request`` reads one frame the client sent; ``Relay`` forwards to a real server until it is black-holed."""

from __future__ import annotations

import socket
import struct
import threading

from rmq_spark.client.remoting.frame import RemotingCommand, decode_frame


class Peer:
    """Accepts connections on 127.0.0.1 and runs ``script(sock)`` for each one."""

    def __init__(self, script):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.script = script
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                sock, _ = self.server.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._run, args=(sock,), daemon=True).start()

    def _run(self, sock):
        try:
            self.script(sock)
        except OSError:
            pass
        finally:
            sock.close()

    def close(self):
        self.server.close()


def read_request(sock) -> RemotingCommand:
    """The next frame from ``sock``; OSError when the client closed the connection."""

    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise OSError("closed")
            buf += chunk
        return buf

    (length,) = struct.unpack(">i", exact(4))
    return decode_frame(exact(length))


class Relay:
    """A TCP relay on 127.0.0.1 to ``upstream`` (host:port) that can be black-holed: from ``black_hole()`` on, it
    forwards nothing either way and answers no connection (each stays open, silent), as a host that drops packets."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self._upstream = (host, int(port))
        self._silent = threading.Event()
        self._peer = Peer(self._relay)
        self.address = self._peer.address

    def black_hole(self) -> None:
        self._silent.set()

    def close(self) -> None:
        self._peer.close()

    def _relay(self, sock) -> None:
        if self._silent.is_set():
            while sock.recv(65536):  # read and drop until the client gives up
                pass
            return
        upstream = socket.create_connection(self._upstream)
        threading.Thread(target=self._pump, args=(upstream, sock), daemon=True).start()
        try:
            self._pump(sock, upstream)
        finally:
            upstream.close()

    def _pump(self, source, target) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                return
            if not self._silent.is_set():
                try:
                    target.sendall(data)
                except OSError:
                    return
