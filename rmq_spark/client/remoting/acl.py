"""Request signing for RocketMQ ACL (1.0 and 2.0 share the wire scheme): HmacSHA1 over the sorted ext fields."""

from __future__ import annotations

import base64
import hashlib
import hmac

from rmq_spark.client.model import Credentials
from rmq_spark.client.remoting.frame import RemotingCommand

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"


def sign(credentials: Credentials, cmd: RemotingCommand) -> None:
    """Add AccessKey (and SecurityToken) and the Signature of the command's fields and body to ext_fields."""
    fields = cmd.ext_fields
    fields.pop(SIGNATURE, None)
    fields[ACCESS_KEY] = credentials.access_key
    if credentials.security_token:
        fields[SECURITY_TOKEN] = credentials.security_token
    content = "".join(fields[k] for k in sorted(fields)).encode("utf-8") + (cmd.body or b"")
    digest = hmac.new(credentials.secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    fields[SIGNATURE] = base64.b64encode(digest).decode("ascii")
