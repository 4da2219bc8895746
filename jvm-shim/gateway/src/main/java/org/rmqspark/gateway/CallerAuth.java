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
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.Locale;
import java.util.Map;

/**
 * Authenticates callers by the v2 request metadata: {@code x-mq-date-time} and {@code authorization:
 * MQv2-HMAC-SHA1 Credential=<accessKey>, SignedHeaders=x-mq-date-time, Signature=<hex>}, where the signature is
 * HMAC-SHA1 of the date-time under the user's secret key. The signed date-time must be within
 * {@link #MAX_SKEW} of the gateway's clock, so a captured header stops working after a few minutes; an unknown
 * access key and a wrong signature get the same answer, so a caller cannot learn which keys exist. The verdict is
 * put in the call's context; each implemented method asks for it with {@link #require()} (UNAUTHORIZED in its
 * body when it failed) and checks the caller's permissions. Without configured users every call passes.
 */
final class CallerAuth implements ServerInterceptor {
    static final Metadata.Key<String> AUTHORIZATION = Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
    static final Metadata.Key<String> DATE_TIME = Metadata.Key.of("x-mq-date-time", Metadata.ASCII_STRING_MARSHALLER);
    static final String SCHEME = "MQv2-HMAC-SHA1";
    static final Duration MAX_SKEW = Duration.ofMinutes(5);
    static final String NOT_AUTHENTICATED = "authentication failed: unknown access key or wrong signature";
    private static final DateTimeFormatter DATE_TIME_FORMAT =
        DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'").withZone(ZoneOffset.UTC);
    private static final Context.Key<String> FAILURE = Context.key("rmq-gateway-auth-failure");
    private static final Context.Key<Caller> CALLER = Context.key("rmq-gateway-caller");

    private final Map<String, Caller> users;
    private final Clock clock;

    CallerAuth(Map<String, Caller> users, Clock clock) {
        this.users = users;
        this.clock = clock;
    }

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                       ServerCallHandler<Q, R> next) {
        if (users.isEmpty()) {
            return Contexts.interceptCall(Context.current().withValue(CALLER, Caller.ANYONE), call, headers, next);
        }
        Object verdict = verify(headers);
        Context context = verdict instanceof Caller ? Context.current().withValue(CALLER, (Caller) verdict)
            : Context.current().withValue(FAILURE, (String) verdict);
        return Contexts.interceptCall(context, call, headers, next);
    }

    /** The current call's caller; UNAUTHORIZED when it failed authentication. */
    static Caller require() {
        String failure = FAILURE.get();
        if (failure != null) {
            throw new GatewayException(apache.rocketmq.v2.Code.UNAUTHORIZED, failure);
        }
        Caller caller = CALLER.get();
        return caller != null ? caller : Caller.ANYONE;
    }

    /** The user the headers authenticate, else why not (never a secret, never whether a key exists). */
    Object verify(Metadata headers) {
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
        Instant signedAt;
        try {
            signedAt = Instant.from(DATE_TIME_FORMAT.parse(dateTime.trim()));
        } catch (DateTimeParseException e) {
            return "x-mq-date-time " + dateTime + " is not of the form yyyyMMdd'T'HHmmss'Z'";
        }
        Duration skew = Duration.between(signedAt, clock.instant()).abs();
        if (skew.compareTo(MAX_SKEW) > 0) {
            return "the signed x-mq-date-time " + dateTime + " is " + skew.getSeconds() + " s away from the gateway's "
                + "clock (at most " + MAX_SKEW.getSeconds() + " s): a replayed signature, or a clock out of sync";
        }
        Caller caller = users.get(accessKey);
        // an unknown key is checked against a made-up secret, so that both failures cost and read the same
        String secretKey = caller != null ? caller.secretKey : "unknown-" + accessKey;
        byte[] expected = hmacSha1Hex(secretKey, dateTime).getBytes(StandardCharsets.US_ASCII);
        byte[] given = signature.toLowerCase(Locale.ROOT).getBytes(StandardCharsets.US_ASCII);
        if (caller == null || !MessageDigest.isEqual(expected, given)) {
            return NOT_AUTHENTICATED;
        }
        return caller;
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
