package org.rmqspark.gateway;

import apache.rocketmq.v2.Code;

/** A failure the gateway answers as a {@code Status} in the response body: a v2 code and a message. */
final class GatewayException extends RuntimeException {
    private final Code code;

    GatewayException(Code code, String message) {
        super(message, null, false, false);
        this.code = code;
    }

    Code code() {
        return code;
    }

    static GatewayException badRequest(String message) {
        return new GatewayException(Code.BAD_REQUEST, message);
    }
}
