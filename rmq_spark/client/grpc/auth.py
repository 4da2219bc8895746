"""Request metadata of the v2 API: client identity, the namespace (``x-mq-namespace``) and, with credentials, the
MQv2-HMAC-SHA1 signature."""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
import time
import uuid

from rmq_spark.client.model import Credentials

ALGORITHM = "MQv2-HMAC-SHA1"
DATE_TIME = "x-mq-date-time"


def signature(secret_key: str, date_time: str) -> str:
    """Hex HMAC-SHA1 of the date-time under the secret key, as the v2 ``authorization`` header carries it."""
    return hmac.new(secret_key.encode("utf-8"), date_time.encode("utf-8"), hashlib.sha1).hexdigest().upper()


class Metadata:
    """Builds the metadata of each call; the signature is renewed once a second (it signs the date-time)."""

    def __init__(self, credentials: Credentials | None, client_version: str, namespace: str = "") -> None:
        self._credentials = credentials
        client_id = f"{socket.gethostname()}@{os.getpid()}@{uuid.uuid4().hex[:8]}"
        self._static: tuple[tuple[str, str], ...] = (
            ("x-mq-protocol", "v2"),
            ("x-mq-language", "PYTHON"),
            ("x-mq-client-version", client_version),
            ("x-mq-client-id", client_id),
        )
        if namespace:
            self._static += (("x-mq-namespace", namespace),)
        if credentials and credentials.security_token:
            self._static += (("x-mq-session-token", credentials.security_token),)
        self._second = -1
        self._signed: tuple[tuple[str, str], ...] = ()

    def __call__(self, *extra: tuple[str, str]) -> tuple[tuple[str, str], ...]:
        md = self._static + extra
        if self._credentials is None:
            return md
        now = int(time.time())
        if now != self._second:
            date_time = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
            auth = (
                f"{ALGORITHM} Credential={self._credentials.access_key}, SignedHeaders={DATE_TIME}, "
                f"Signature={signature(self._credentials.secret_key, date_time)}"
            )
            self._signed, self._second = ((DATE_TIME, date_time), ("authorization", auth)), now
        return md + self._signed
