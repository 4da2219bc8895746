"""TLS settings shared by both transports: which CAs to trust, which name to verify, and the client certificate for
mutual TLS. Picklable (paths, not loaded keys): each process loads the files where it connects."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from rmq_spark.client.errors import RocketMQError


@dataclass(frozen=True)
class TlsConfig:
    """``ca_file``: PEM certificates to trust (default: the system's); ``server_name``: the name the server's
    certificate must carry (default: the host connected to); ``cert_file``/``key_file``: the client certificate
    chain and its key, PEM, for servers that require one (RocketMQ's mutual TLS)."""

    ca_file: str | None = None
    server_name: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("a client certificate needs both cert_file and key_file")

    @staticmethod
    def _read(path: str, option: str) -> bytes:
        try:
            return Path(path).read_bytes()
        except OSError as e:
            raise RocketMQError(f"cannot read {path!r} (option {option}): {e.strerror or e}") from None

    def ssl_context(self) -> ssl.SSLContext:
        """The context of the remoting transport's connections (certificates and names always verified)."""
        ctx = ssl.create_default_context()
        if self.ca_file:
            try:
                ctx.load_verify_locations(cadata=self._read(self.ca_file, "tlsCaFile").decode("ascii"))
            except (ssl.SSLError, ValueError) as e:
                raise RocketMQError(f"{self.ca_file!r} (option tlsCaFile) holds no PEM certificate: {e}") from None
        if self.cert_file and self.key_file:
            for path, option in ((self.cert_file, "tlsCertFile"), (self.key_file, "tlsKeyFile")):
                self._read(path, option)
            try:
                ctx.load_cert_chain(self.cert_file, self.key_file)
            except ssl.SSLError as e:
                raise RocketMQError(
                    f"the client certificate {self.cert_file!r} and key {self.key_file!r} (options "
                    f"tlsCertFile, tlsKeyFile) do not load: {e}"
                ) from None
        return ctx

    def grpc_parts(self) -> tuple[bytes | None, bytes | None, bytes | None]:
        """(root certificates, private key, certificate chain) for grpc.ssl_channel_credentials, checked as
        ``ssl_context`` checks them (gRPC core only logs why it cannot use them)."""
        if self.ca_file or self.cert_file:
            self.ssl_context()
        roots = self._read(self.ca_file, "tlsCaFile") if self.ca_file else None
        key = self._read(self.key_file, "tlsKeyFile") if self.key_file else None
        chain = self._read(self.cert_file, "tlsCertFile") if self.cert_file else None
        return roots, key, chain
