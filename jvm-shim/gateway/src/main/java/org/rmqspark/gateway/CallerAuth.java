package org.rmqspark.gateway;

import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.Locale;
import java.util.Map;

/**
 * Authenticates callers by the v2 request metadata: {@code x-mq-date-time} and {@code authorization:
 * MQv2-HMAC-SHA1 Credential=<accessKey>, SignedHeaders=x-mq-date-time, Signature=<hex>}, where the signature is
 * HMAC-SHA1 of the date-time under the user's secret key. The verdict is put in the call's context; each
 * implemented method asks for it with {@link #require()} and answers UNAUTHORIZED in its body when it fails.
 * Without configured users every call passes.
 */
final class CallerAuth implements ServerInterceptor {
    static final Metadata.Key<String> AUTHORIZATION = Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
    static final Metadata.Key<String> DATE_TIME = Metadata.Key.of("x-mq-date-time", Metadata.ASCII_STRING_MARSHALLER);
    static final String SCHEME = "MQv2-HMAC-SHA1";
    private static final Context.Key<String> FAILURE = Context.key("rmq-gateway-auth-failure");

    private final Map<String, String> users;

    CallerAuth(Map<String, String> users) {
        this.users = users;
    }

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                       ServerCallHandler<Q, R> next) {
        String failure = users.isEmpty() ? null : verify(headers);
        if (failure == null) {
            return next.startCall(call, headers);
        }
        return Contexts.interceptCall(Context.current().withValue(FAILURE, failure), call, headers, next);
    }

    /** Throws UNAUTHORIZED when the current call's caller failed authentication. */
    static void require() {
        String failure = FAILURE.get();
        if (failure != null) {
            throw new GatewayException(apache.rocketmq.v2.Code.UNAUTHORIZED, failure);
        }
    }

    /** Null when the headers authenticate a known user, else why not (never containing a secret). */
    String verify(Metadata headers) {
        String authorization = headers.get(AUTHORIZATION);
        String dateTime = headers.get(DATE_TIME);
        if (authorization == null || authorization.isBlank()) {
            return "authentication required: no authorization metadata";
        }
        if (dateTime == null || dateTime.isBlank()) {
            return "authentication required: no x-mq-date-time metadata";
        }
        String[] schemeAndRest = authorization.trim().split(" ", 2);
        if (schemeAndRest.length != 2 || !SCHEME.equals(schemeAndRest[0])) {
            return "authorization metadata is not of the " + SCHEME + " scheme";
        }
        String accessKey = null;
        String signature = null;
        for (String item : schemeAndRest[1].split(",")) {
            String[] kv = item.trim().split("=", 2);
            if (kv.length != 2) {
                return "authorization metadata is malformed";
            }
            if (kv[0].equals("Credential")) {
                accessKey = kv[1].split("/", 2)[0];
            } else if (kv[0].equals("Signature")) {
                signature = kv[1];
            }
        }
        if (accessKey == null || accessKey.isEmpty() || signature == null || signature.isEmpty()) {
            return "authorization metadata lacks Credential or Signature";
        }
        String secretKey = users.get(accessKey);
        if (secretKey == null) {
            return "unknown access key " + accessKey;
        }
        byte[] expected = hmacSha1Hex(secretKey, dateTime).getBytes(StandardCharsets.US_ASCII);
        byte[] given = signature.toLowerCase(Locale.ROOT).getBytes(StandardCharsets.US_ASCII);
        if (!MessageDigest.isEqual(expected, given)) {
            return "signature mismatch for access key " + accessKey;
        }
        return null;
    }

    /** Lower-case hex of HMAC-SHA1(secretKey, content). */
    static String hmacSha1Hex(String secretKey, String content) {
        try {
            Mac mac = Mac.getInstance("HmacSHA1");
            mac.init(new SecretKeySpec(secretKey.getBytes(StandardCharsets.UTF_8), "HmacSHA1"));
            byte[] sig = mac.doFinal(content.getBytes(StandardCharsets.UTF_8));
            StringBuilder sb = new StringBuilder(sig.length * 2);
            for (byte b : sig) {
                sb.append(Character.forDigit((b >> 4) & 0xF, 16)).append(Character.forDigit(b & 0xF, 16));
            }
            return sb.toString();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA1 unavailable", e);
        }
    }
}
