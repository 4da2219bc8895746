package org.rmqspark.shim;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Picks free loopback ports. Ports are chosen below the kernel's ephemeral range, so that neither outgoing
 * connections nor listeners on port 0 (the brokers' HA sockets) can take a port the shim means to reuse when a
 * broker restarts.
 */
final class Ports {
    private static final Set<Integer> RESERVED = new HashSet<>();

    private Ports() {
    }

    static boolean isFree(int port) {
        if (port <= 0 || port > 65535) {
            return false;
        }
        try (ServerSocket s = new ServerSocket()) {
            s.setReuseAddress(true); // like Netty's server socket: TIME_WAIT leftovers do not block a bind
            s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    /**
     * A port p such that every p + d for d in {@code offsets} is free and not yet handed out by this process.
     */
    static synchronized int pick(int... offsets) {
        int[] range = candidateRange();
        ThreadLocalRandom rnd = ThreadLocalRandom.current();
        for (int attempt = 0; attempt < 2000; attempt++) {
            int p = range[0] + rnd.nextInt(range[1] - range[0]);
            if (allFree(p, offsets)) {
                reserve(p, offsets);
                return p;
            }
        }
        // Fallback: let the kernel choose.
        for (int attempt = 0; attempt < 200; attempt++) {
            int p;
            try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                p = s.getLocalPort();
            } catch (IOException e) {
                continue;
            }
            if (allFree(p, offsets)) {
                reserve(p, offsets);
                return p;
            }
        }
        throw new IllegalStateException("no free port found");
    }

    static synchronized void reserve(int port, int... offsets) {
        RESERVED.add(port);
        for (int d : offsets) {
            RESERVED.add(port + d);
        }
    }

    private static boolean allFree(int p, int[] offsets) {
        if (RESERVED.contains(p) || !isFree(p)) {
            return false;
        }
        for (int d : offsets) {
            if (RESERVED.contains(p + d) || !isFree(p + d)) {
                return false;
            }
        }
        return true;
    }

    /** [low, high) of candidate ports: below the ephemeral range when it leaves room, else above 10000. */
    private static int[] candidateRange() {
        int ephemeralLow = 32768;
        try {
            // (Files.readString truncates /proc files, which report a size of 0: read line-wise)
            String s;
            try (java.io.BufferedReader r = Files.newBufferedReader(Path.of("/proc/sys/net/ipv4/ip_local_port_range"))) {
                s = r.readLine().trim();
            }
            ephemeralLow = Integer.parseInt(s.split("\\s+")[0]);
        } catch (Exception ignored) {
            // not Linux: keep the default
        }
        if (ephemeralLow - 10000 >= 2000) {
            return new int[] {10000, ephemeralLow - 4};
        }
        return new int[] {10000, 65000};
    }
}
