package org.rmqspark.gateway;

import apache.rocketmq.v2.Code;
import apache.rocketmq.v2.Status;
import org.apache.rocketmq.client.common.ClientErrorCode;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.remoting.exception.RemotingConnectException;
import org.apache.rocketmq.remoting.exception.RemotingSendRequestException;
import org.apache.rocketmq.remoting.exception.RemotingTimeoutException;
import org.apache.rocketmq.remoting.exception.RemotingTooMuchRequestException;
import org.apache.rocketmq.remoting.protocol.RemotingSysResponseCode;
import org.apache.rocketmq.remoting.protocol.ResponseCode;

/**
 * Maps what went wrong to the v2 {@link Status} of a response body. One place for the whole gateway: a broker's
 * response code, a client-side RocketMQ failure, a broker that cannot be reached, or a request the gateway refuses.
 */
public final class Statuses {
    static final Status OK = of(Code.OK, "OK");

    private Statuses() {
    }

    static Status of(Code code, String message) {
        return Status.newBuilder().setCode(code).setMessage(message == null ? "" : message).build();
    }

    /** The status for a failure of {@code what} (e.g. "pull of topic T, broker-a queue 1, group G"). */
    static Status of(Throwable t, String what) {
        if (t instanceof GatewayException) {
            GatewayException g = (GatewayException) t;
            return of(g.code(), g.getMessage());
        }
        if (unreachable(t)) {
            return of(Code.PROXY_TIMEOUT, what + ": " + describe(t));
        }
        if (t instanceof MQBrokerException) {
            MQBrokerException b = (MQBrokerException) t;
            String at = b.getBrokerAddr() == null ? "the broker" : "broker " + b.getBrokerAddr();
            return of(brokerCode(b.getResponseCode(), b.getErrorMessage()),
                what + ": " + at + " answered code " + b.getResponseCode() + " (" + clean(b.getErrorMessage()) + ")");
        }
        if (t instanceof MQClientException) {
            MQClientException c = (MQClientException) t;
            String message = c.getErrorMessage() == null ? describe(t) : clean(c.getErrorMessage())
                + (c.getCause() == null ? "" : " / caused by " + describe(c.getCause()));
            return of(clientCode(c.getResponseCode(), c.getErrorMessage()), what + ": " + message);
        }
        if (t instanceof InterruptedException) {
            Thread.currentThread().interrupt();
            return of(Code.PROXY_TIMEOUT, what + ": interrupted");
        }
        System.err.println("rmq-shim gateway: internal error in " + what);
        t.printStackTrace(System.err);
        return of(Code.INTERNAL_SERVER_ERROR, what + ": " + describe(t));
    }

    /** True when a broker or the name server did not answer: the caller may retry (PROXY_TIMEOUT). */
    static boolean unreachable(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
            if (c instanceof RemotingConnectException || c instanceof RemotingTimeoutException
                || c instanceof RemotingSendRequestException || c instanceof RemotingTooMuchRequestException) {
                return true;
            }
            if (c instanceof MQClientException) {
                int code = ((MQClientException) c).getResponseCode();
                if (code == ClientErrorCode.CONNECT_BROKER_EXCEPTION || code == ClientErrorCode.ACCESS_BROKER_TIMEOUT
                    || code == ClientErrorCode.NO_NAME_SERVER_EXCEPTION
                    || code == ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION) {
                    return true;
                }
            }
            if (c instanceof MQBrokerException
                && ((MQBrokerException) c).getResponseCode() == ResponseCode.SERVICE_NOT_AVAILABLE) {
                return true; // a broker on its way down or not yet up
            }
        }
        return false;
    }

    /** The v2 code for a broker's remoting response code. */
    static Code brokerCode(int responseCode, String remark) {
        switch (responseCode) {
            case ResponseCode.TOPIC_NOT_EXIST:
                return Code.TOPIC_NOT_FOUND;
            case ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
                return Code.CONSUMER_GROUP_NOT_FOUND;
            case ResponseCode.QUERY_NOT_FOUND:
                return Code.OFFSET_NOT_FOUND;
            case ResponseCode.NO_PERMISSION:
                return Code.FORBIDDEN;
            case ResponseCode.SUBSCRIPTION_PARSE_FAILED:
            case ResponseCode.SUBSCRIPTION_NOT_EXIST:
            case ResponseCode.SUBSCRIPTION_NOT_LATEST:
            case ResponseCode.FILTER_DATA_NOT_EXIST:
            case ResponseCode.FILTER_DATA_NOT_LATEST:
                return Code.ILLEGAL_FILTER_EXPRESSION;
            case ResponseCode.INVALID_PARAMETER:
                return Code.BAD_REQUEST;
            case ResponseCode.MESSAGE_ILLEGAL:
                return messageIllegal(remark);
            case ResponseCode.FLUSH_DISK_TIMEOUT:
                return Code.MASTER_PERSISTENCE_TIMEOUT;
            case ResponseCode.FLUSH_SLAVE_TIMEOUT:
                return Code.SLAVE_PERSISTENCE_TIMEOUT;
            case ResponseCode.SLAVE_NOT_AVAILABLE:
                return Code.HA_NOT_AVAILABLE;
            case ResponseCode.SERVICE_NOT_AVAILABLE:
                return Code.PROXY_TIMEOUT;
            case RemotingSysResponseCode.SYSTEM_BUSY:
            case ResponseCode.FLOW_CONTROL:
                return Code.TOO_MANY_REQUESTS;
            default:
                return Code.INTERNAL_SERVER_ERROR;
        }
    }

    private static Code clientCode(int responseCode, String message) {
        switch (responseCode) {
            case ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION:
                return Code.TOPIC_NOT_FOUND;
            case ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION:
            case ClientErrorCode.CONNECT_BROKER_EXCEPTION:
            case ClientErrorCode.ACCESS_BROKER_TIMEOUT:
            case ClientErrorCode.NO_NAME_SERVER_EXCEPTION:
            case ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION:
                return Code.PROXY_TIMEOUT;
            case -1:
                return Code.INTERNAL_SERVER_ERROR;
            default:
                // the producer's own checks (Validators) and name server answers carry remoting codes
                return brokerCode(responseCode, message);
        }
    }

    /** MESSAGE_ILLEGAL (the producer's checks or the broker's) split by what its remark says. */
    private static Code messageIllegal(String remark) {
        String r = remark == null ? "" : remark;
        if (r.contains("body length is zero")) {
            return Code.MESSAGE_BODY_EMPTY;
        }
        if (r.contains("over max value") || r.contains("too large") || r.contains("exceeds the maximum")) {
            return Code.MESSAGE_BODY_TOO_LARGE;
        }
        return Code.BAD_REQUEST;
    }

    /** A RocketMQ message without its FAQ link, on one line. */
    static String clean(String message) {
        if (message == null) {
            return "";
        }
        int faq = message.indexOf("\nSee http");
        if (faq < 0) {
            faq = message.indexOf("\nFor more information");
        }
        String m = faq < 0 ? message : message.substring(0, faq);
        return m.replaceAll("\\s+", " ").trim();
    }

    /** "Class: message" of a throwable and its causes (at most 3), on one line. */
    public static String describe(Throwable t) {
        StringBuilder sb = new StringBuilder();
        int depth = 0;
        for (Throwable c = t; c != null && depth < 3; c = c.getCause() == c ? null : c.getCause(), depth++) {
            if (depth > 0) {
                sb.append(" / caused by ");
            }
            sb.append(c.getClass().getSimpleName());
            if (c.getMessage() != null) {
                String m = clean(c.getMessage());
                sb.append(": ").append(m.length() > 400 ? m.substring(0, 400) + "..." : m);
            }
        }
        return sb.toString();
    }
}
