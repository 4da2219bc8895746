package org.rmqspark.gateway;

import com.google.common.net.InetAddresses;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;

/** Host/port strings: parsing "host:port" ("[v6]:port" too) and rendering socket addresses as "ip:port". */
final class HostPort {
    final String host;
    final int port;

    private HostPort(String host, int port) {
        this.host = host;
        this.port = port;
    }

    static HostPort of(String host, int port) {
        return new HostPort(host, port);
    }

    static HostPort parse(String s) {
        String host;
        String port;
        if (s.startsWith("[")) {
            int end = s.indexOf("]:");
            if (end < 0) {
                throw new IllegalArgumentException("not [host]:port: " + s);
            }
            host = s.substring(1, end);
            port = s.substring(end + 2);
        } else {
            int colon = s.lastIndexOf(':');
            if (colon <= 0) {
                throw new IllegalArgumentException("not host:port: " + s);
            }
            host = s.substring(0, colon);
            port = s.substring(colon + 1);
        }
        int p;
        try {
            p = Integer.parseInt(port);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("bad port in " + s);
        }
        if (p <= 0 || p > 65535 || host.isEmpty()) {
            throw new IllegalArgumentException("bad host:port: " + s);
        }
        return new HostPort(host, p);
    }

    /**
     * "ip:port" of a stored born/store host: IPv4 dotted, IPv6 in RFC 5952 form without brackets (an IPv4-mapped
     * IPv6 address is already an Inet4Address when RocketMQ decodes it). Null for null.
     */
    static String render(SocketAddress a) {
        if (a == null) {
            return null;
        }
        if (!(a instanceof InetSocketAddress)) {
            return a.toString();
        }
        InetSocketAddress i = (InetSocketAddress) a;
        InetAddress ip = i.getAddress();
        String host = ip == null ? i.getHostString() : InetAddresses.toAddrString(ip);
        return host + ":" + i.getPort();
    }

    boolean isIp() {
        return InetAddresses.isInetAddress(host);
    }

    boolean isIpv6() {
        return isIp() && host.contains(":");
    }

    @Override
    public String toString() {
        return (host.contains(":") ? "[" + host + "]" : host) + ":" + port;
    }
}
