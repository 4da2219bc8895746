"""A scripted peer on 127.0.0.1 for unit tests of connections: it runs a script for each connection it accepts;
``read_request`` reads one frame the client sent."""
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
