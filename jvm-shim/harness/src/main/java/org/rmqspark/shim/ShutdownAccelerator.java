package org.rmqspark.shim;

import org.apache.rocketmq.common.ServiceThread;

import java.lang.reflect.Field;
import java.util.Collection;
import java.util.Collections;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * Cuts idle waits out of RocketMQ's shutdown while a stop is in progress:
 * <ul>
 *   <li>a stopped "NettyEventExecutor" service thread only notices its stop flag when its 3-second queue poll times
 *   out (it is joined without interrupt), once per remoting server and client: it is interrupted instead;</li>
 *   <li>DefaultMessageStore.shutdown() sleeps 3 s unconditionally (for in-flight puts; the remoting servers are
 *   already closed by then): the stopping thread is interrupted out of that sleep, which the store tolerates;</li>
 *   <li>a stopped PopBufferMergeService sleeps 2 s before its final scan (it is joined): interrupted likewise (the
 *   shim uses no pop consumption).</li>
 * </ul>
 * Nothing else is touched: store threads doing I/O are never interrupted.
 */
final class ShutdownAccelerator implements AutoCloseable {
    private static final Field THREAD_TARGET = threadTargetField();

    private final Collection<Thread> stoppers = new CopyOnWriteArrayList<>();
    private final Set<Thread> interruptedSleepers = Collections.synchronizedSet(new HashSet<>());
    private final Thread worker;
    private volatile boolean closed;

    private ShutdownAccelerator() {
        worker = new Thread(this::loop, "shim-shutdown-accelerator");
        worker.setDaemon(true);
    }

    /** Starts accelerating the shutdown work done by the given threads (more can be added). */
    static ShutdownAccelerator start(Thread... stoppingThreads) {
        ShutdownAccelerator a = new ShutdownAccelerator();
        for (Thread t : stoppingThreads) {
            a.stoppers.add(t);
        }
        a.worker.start();
        return a;
    }

    void watch(Thread stoppingThread) {
        stoppers.add(stoppingThread);
    }

    @Override
    public void close() {
        closed = true;
        worker.interrupt();
    }

    private void loop() {
        while (!closed) {
            try {
                Thread.sleep(25);
            } catch (InterruptedException e) {
                return;
            }
            for (Thread t : stoppers) {
                if (t.isAlive() && !interruptedSleepers.contains(t)
                    && sleepsIn(t, "org.apache.rocketmq.store.DefaultMessageStore", "shutdown")) {
                    interruptedSleepers.add(t);
                    t.interrupt();
                }
            }
            if (THREAD_TARGET != null) {
                Thread[] all = new Thread[Thread.activeCount() + 64];
                int n = Thread.enumerate(all);
                for (int i = 0; i < n; i++) {
                    Thread t = all[i];
                    if ("NettyEventExecutor".equals(t.getName()) && isStoppedServiceThread(t)) {
                        t.interrupt();
                    } else if ("PopBufferMergeService".equals(t.getName()) && isStoppedServiceThread(t)
                        && sleepsIn(t, "org.apache.rocketmq.broker.processor.PopBufferMergeService", "run")) {
                        t.interrupt();
                    }
                }
            }
        }
    }

    /** True when t is in Thread.sleep called (within 3 frames) from className.method. */
    private static boolean sleepsIn(Thread t, String className, String method) {
        StackTraceElement[] st = t.getStackTrace();
        if (st.length < 2 || !"sleep".equals(st[0].getMethodName()) || !"java.lang.Thread".equals(st[0].getClassName())) {
            return false;
        }
        for (int i = 1; i < Math.min(st.length, 4); i++) {
            if (className.equals(st[i].getClassName()) && method.equals(st[i].getMethodName())) {
                return true;
            }
        }
        return false;
    }

    private static boolean isStoppedServiceThread(Thread t) {
        try {
            Object target = THREAD_TARGET.get(t);
            return target instanceof ServiceThread && ((ServiceThread) target).isStopped();
        } catch (IllegalAccessException e) {
            return false;
        }
    }

    /** Thread.target (needs java.base/java.lang opened to the class path, as the jar's manifest does). */
    private static Field threadTargetField() {
        try {
            Field f = Thread.class.getDeclaredField("target");
            f.setAccessible(true);
            return f;
        } catch (Exception | LinkageError e) {
            System.err.println("rmq-shim: shutdown acceleration of event threads unavailable: " + e);
            return null;
        }
    }
}
