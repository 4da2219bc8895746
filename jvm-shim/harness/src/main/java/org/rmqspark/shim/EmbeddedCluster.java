package org.rmqspark.shim;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider;
import org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider;
import org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider;
import org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider;
import org.apache.rocketmq.auth.config.AuthConfig;
import org.apache.rocketmq.broker.BrokerController;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.namesrv.NamesrvConfig;
import org.apache.rocketmq.namesrv.NamesrvController;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.store.config.BrokerRole;
import org.apache.rocketmq.store.config.MessageStoreConfig;

import java.io.File;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Name server plus N broker groups (broker-a, broker-b, ...) of cluster "DefaultCluster" on 127.0.0.1: a master
 * each and, with --slaves, that many slaves replicating it (RocketMQ's classic master-slave HA, ASYNC_MASTER), all
 * with slaveReadEnable so that a slave serves reads while its master is away; with --acting-master, in
 * slave-acting-master mode (the route lists a group's first slave at brokerId 0 while its master is away).
 */
final class EmbeddedCluster {
    static final String CLUSTER = "DefaultCluster";
    static final String HOST = "127.0.0.1";
    private static final long REGISTER_TIMEOUT_MS = 30_000;

    /** One broker: fixed name, id (0 the master), port and store; the controller changes across stop/start. */
    static final class Broker {
        final String name;
        final long id;
        final int port;
        final File storeDir;
        final Broker master; // null for a master
        volatile BrokerController controller;
        int incarnation;

        Broker(String name, long id, int port, File storeDir, Broker master) {
            this.name = name;
            this.id = id;
            this.port = port;
            this.storeDir = storeDir;
            this.master = master;
        }

        String address() {
            return HOST + ":" + port;
        }

        /** The HA port a master listens on for its slaves (the port after its listen port, kept free by Ports). */
        int haPort() {
            return port + 1;
        }

        String key() {
            return key(name, id);
        }

        static String key(String name, long id) {
            return id == MixAll.MASTER_ID ? name : name + ":" + id;
        }

        boolean running() {
            return controller != null;
        }
    }

    private final Options options;
    private final File root;
    private final Map<String, Broker> brokers = new LinkedHashMap<>();
    private final Map<String, TopicRouteData> lastRoutes = new java.util.concurrent.ConcurrentHashMap<>();
    private NamesrvController namesrv;
    private int namesrvPort;

    EmbeddedCluster(Options options, File root) {
        this.options = options;
        this.root = root;
    }

    String nameServerAddress() {
        return HOST + ":" + namesrvPort;
    }

    File root() {
        return root;
    }

    Collection<Broker> brokers() {
        return brokers.values();
    }

    /** The master of broker group {@code name}. */
    Broker broker(String name) {
        return broker(name, MixAll.MASTER_ID);
    }

    Broker broker(String name, long id) {
        Broker b = brokers.get(Broker.key(name, id));
        if (b == null) {
            throw new IllegalArgumentException("unknown broker: " + Broker.key(name, id) + " (known: "
                + brokers.keySet() + ")");
        }
        return b;
    }

    BrokerController runningController(String name) {
        BrokerController c = broker(name).controller;
        if (c == null) {
            throw new IllegalStateException("broker " + name + " is stopped");
        }
        return c;
    }

    /**
     * Waits (up to {@code timeoutMs}) until every running broker has dispatched all it has stored into its consume
     * queues: a send is answered once its message is in the commit log, and the consume queue, which reads and
     * max offsets answer from, follows a moment later (later still on a loaded machine).
     */
    void awaitDispatched(long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        for (Broker b : brokers.values()) {
            BrokerController c = b.controller;
            while (c != null && c.getMessageStore().dispatchBehindBytes() > 0
                && System.currentTimeMillis() < deadline) {
                Thread.sleep(2);
            }
        }
    }

    /** The running slaves of broker group {@code name}. */
    List<Broker> runningSlaves(String name) {
        List<Broker> out = new ArrayList<>();
        for (Broker b : brokers.values()) {
            if (b.name.equals(name) && b.id != MixAll.MASTER_ID && b.running()) {
                out.add(b);
            }
        }
        return out;
    }

    /**
     * Makes the running slaves of a group take their master's configuration (topics, groups, consumer offsets) now
     * and register it, rather than at their next periodic sync (every 60 s).
     */
    void syncSlaves(String name) {
        for (Broker s : runningSlaves(name)) {
            s.controller.getSlaveSynchronize().syncAll();
            s.controller.registerBrokerAll(true, false, true);
        }
    }

    void start() throws Exception {
        startNamesrv();
        for (int i = 0; i < options.brokers; i++) {
            String name = "broker-" + (char) ('a' + i);
            int port;
            if (i < options.brokerPorts.size() && options.brokerPorts.get(i) > 0) {
                port = options.brokerPorts.get(i);
                Ports.reserve(port, -2, 1);
            } else {
                // listen port p, "fast remoting" port p-2, and p+1 the HA port (a master's slaves connect to it)
                port = Ports.pick(-2, 1);
            }
            Broker master = new Broker(name, MixAll.MASTER_ID, port, new File(root, name), null);
            brokers.put(master.key(), master);
            for (int id = 1; id <= options.slaves; id++) {
                Broker slave = new Broker(name, id, Ports.pick(-2, 1), new File(root, name + "-s" + id), master);
                brokers.put(slave.key(), slave);
            }
        }
        // Sequentially: two brokers initializing at once in one JVM failed now and then inside RocketMQ ("zip file
        // closed", from the class-path scan each broker runs at start); one broker starts in ~0.4 s anyway.
        for (Broker b : brokers.values()) {
            startBroker(b, false);
        }
        for (Broker b : brokers.values()) {
            waitRegistered(b, true);
        }
    }

    /** Stops the name server; the brokers keep running and register again once it is back. */
    synchronized void stopNamesrv() {
        NamesrvController c = namesrv;
        if (c == null) {
            throw new IllegalStateException("the name server is already stopped");
        }
        namesrv = null;
        c.shutdown();
    }

    /** Starts the name server again on its old port and waits until every running broker has registered. */
    void restartNamesrv() throws Exception {
        synchronized (this) {
            if (namesrv != null) {
                throw new IllegalStateException("the name server is already running");
            }
            Exception last = null;
            for (int attempt = 0; attempt < 20 && namesrv == null; attempt++) {
                try {
                    startNamesrv(namesrvPort);
                } catch (Exception e) {
                    last = e;
                    Thread.sleep(250); // the port may still be held for a moment
                }
            }
            if (namesrv == null) {
                throw last;
            }
        }
        for (Broker b : brokers.values()) {
            if (b.running()) {
                waitRegistered(b, true);
            }
        }
    }

    private void startNamesrv() throws Exception {
        startNamesrv(options.namesrvPort > 0 ? options.namesrvPort : Ports.pick());
    }

    private void startNamesrv(int port) throws Exception {
        File dir = new File(root, "namesrv");
        NamesrvConfig cfg = new NamesrvConfig();
        cfg.setSupportActingMaster(options.actingMaster);
        cfg.setKvConfigPath(new File(dir, "kvConfig.json").getPath());
        cfg.setConfigStorePath(new File(dir, "namesrv.properties").getPath());
        NettyServerConfig server = new NettyServerConfig();
        server.setListenPort(port);
        server.setBindAddress(HOST);
        server.setServerWorkerThreads(4);
        NamesrvController c = new NamesrvController(cfg, server, new NettyClientConfig());
        if (!c.initialize()) {
            c.shutdown();
            throw new IllegalStateException("name server failed to initialize (port " + port + ")");
        }
        c.start();
        namesrv = c;
        namesrvPort = c.getRemotingServer().localListenPort();
    }

    /** Starts (or restarts) a broker on its fixed port and store. Retries while the port is still taken. */
    void startBroker(Broker b, boolean waitForRegistration) throws Exception {
        if (b.controller != null) {
            throw new IllegalStateException("broker " + b.name + " is already running");
        }
        Exception last = null;
        for (int attempt = 0; attempt < 20; attempt++) {
            BrokerController c = newController(b);
            try {
                if (!c.initialize()) {
                    throw new IllegalStateException("broker " + b.name + " failed to initialize");
                }
                QuietTransactionService.install(c);
                c.registerServerRPCHook(RequestCounter.INSTANCE);
                c.start();
                b.controller = c;
                last = null;
                break;
            } catch (Exception e) {
                last = e;
                System.err.println("rmq-shim: start of " + b.name + " failed (attempt " + (attempt + 1) + "): "
                    + Protocol.describe(e));
                try {
                    c.shutdown();
                } catch (Throwable ignored) {
                    // half-started controller
                }
                Thread.sleep(500);
            }
        }
        if (last != null) {
            throw last;
        }
        if (waitForRegistration) {
            waitRegistered(b, true);
        }
    }

    void stopBroker(Broker b) throws InterruptedException {
        BrokerController c = b.controller;
        if (c == null) {
            throw new IllegalStateException("broker " + b.name + " is already stopped");
        }
        b.controller = null;
        try (ShutdownAccelerator ignored = ShutdownAccelerator.start(Thread.currentThread())) {
            c.shutdown();
        }
        // The broker unregisters itself on shutdown; wait (briefly) until the name server agrees.
        try {
            waitRegistered(b, false);
        } catch (IllegalStateException ignored) {
            // the name server also drops it when the channel closes
        }
    }

    private BrokerController newController(Broker b) {
        b.incarnation++;
        String store = b.storeDir.getPath();

        BrokerConfig bc = new BrokerConfig();
        bc.setBrokerName(b.name);
        bc.setBrokerClusterName(CLUSTER);
        bc.setBrokerId(b.id);
        // by default a slave serves pulls (and the master suggests it when a consumer falls far behind), as
        // RocketMQ's read-from-slave deployments configure it; --no-slave-read keeps RocketMQ's own default (a slave
        // refuses pulls)
        bc.setSlaveReadEnable(options.slaveRead);
        bc.setEnableSlaveActingMaster(options.actingMaster);
        bc.setBrokerIP1(HOST);
        bc.setBrokerIP2(HOST);
        bc.setNamesrvAddr(nameServerAddress());
        bc.setAutoCreateTopicEnable(true);
        bc.setAutoCreateSubscriptionGroup(true);
        // SQL92 filters (subExpression with expressionType=SQL92) need the broker to evaluate properties.
        bc.setEnablePropertyFilter(true);
        // Topics may have message.type=MIXED (RocketMQ 5's default refuses it), as managed clusters allow.
        bc.setEnableMixedMessageType(true);
        bc.setRegisterNameServerPeriod(10_000);
        // Every thread that writes to the commit log keeps its own direct encoder buffer of maxMessageSize (4 MiB).
        // The default END_TRANSACTION pool (8 + 2 x cores threads per broker) alone can fill the JVM's direct
        // memory with several brokers in one process: an exactly-once commit ran it out ("Cannot reserve ...
        // direct buffer memory"). A loopback test cluster needs few writer threads.
        bc.setEndTransactionThreadPoolNums(2);
        bc.setSendMessageThreadPoolNums(2);
        // RocketMQ 5.5's transaction-metrics flusher spins without sleeping for its first interval (10 s by default)
        // after a broker starts: a whole core for 10 s at each broker start. Half a second bounds that spin; a
        // flush writes one small file.
        bc.setTransactionMetricFlushInterval(500);

        NettyServerConfig server = new NettyServerConfig();
        server.setListenPort(b.port);
        server.setBindAddress(HOST);
        server.setServerWorkerThreads(4);

        MessageStoreConfig sc = new MessageStoreConfig();
        sc.setStorePathRootDir(store);
        sc.setStorePathCommitLog(new File(b.storeDir, "commitlog").getPath());
        sc.setMappedFileSizeCommitLog(options.commitLogFileSize);
        if (options.cqFileEntries > 0) {
            sc.setMappedFileSizeConsumeQueue(options.cqFileEntries * 20); // 20 bytes per consume-queue entry
        }
        sc.setMaxHashSlotNum(5000);
        sc.setMaxIndexNum(20000);
        // Timer messages (the sink's deliverTimeMs) need the timer wheel; its log shrinks from 100 MiB to 4 MiB
        // (the wheel file is sparse).
        sc.setTimerWheelEnable(true);
        sc.setMappedFileSizeTimerLog(4 * 1024 * 1024);
        sc.setTimerPutMessageThreadNum(1); // writer threads, each with an encoder buffer (see above)
        sc.setTimerGetMessageThreadNum(1);
        // Each flush copies the whole wheel (7 days of slots, 38 MiB) into its mapped file and forces it to disk:
        // every second by default, which kept a quarter of a core busy per idle broker; every 30 s it still cost
        // each idle broker 0.4 s of CPU a flush (a byte-by-byte compare). A restarted broker rebuilds the wheel
        // from its timer log since the last flush (TimerMessageStore.recover), and a test's timer log is small, so
        // a longer interval only means a longer replay.
        sc.setTimerFlushIntervalMs(300_000);
        if (b.master == null) {
            sc.setBrokerRole(BrokerRole.ASYNC_MASTER);
            sc.setHaListenPort(b.haPort());
        } else {
            sc.setBrokerRole(BrokerRole.SLAVE);
            sc.setHaListenPort(b.haPort()); // unused by a slave, but must not collide
            // No explicit haMasterAddress: the broker applies one before its HA client exists (and then stops
            // taking the master's HA address from its registrations). It learns it when it registers.
        }
        sc.setDiskMaxUsedSpaceRatio(95);

        AuthConfig auth = null;
        if (options.authEnabled()) {
            auth = new AuthConfig();
            // The auth factories cache providers by config name for the JVM's lifetime and a stopped broker closes
            // its providers: a restarted broker needs a fresh name.
            auth.setConfigName(b.name + "#" + b.incarnation);
            auth.setClusterName(CLUSTER);
            auth.setAuthConfigPath(new File(b.storeDir, "config").getPath());
            auth.setAuthenticationEnabled(true);
            auth.setAuthorizationEnabled(true);
            auth.setAuthenticationProvider(DefaultAuthenticationProvider.class.getName());
            auth.setAuthenticationMetadataProvider(LocalAuthenticationMetadataProvider.class.getName());
            auth.setAuthorizationProvider(DefaultAuthorizationProvider.class.getName());
            auth.setAuthorizationMetadataProvider(LocalAuthorizationMetadataProvider.class.getName());
            JsonObject user = new JsonObject();
            user.addProperty("username", options.authAccessKey);
            user.addProperty("password", options.authSecretKey); // made a SUPER user by the broker
            auth.setInitAuthenticationUser(Protocol.GSON.toJson(user));
            JsonObject cred = new JsonObject();
            cred.addProperty("accessKey", options.authAccessKey);
            cred.addProperty("secretKey", options.authSecretKey);
            auth.setInnerClientAuthenticationCredentials(Protocol.GSON.toJson(cred));
        }
        return new BrokerController(bc, server, new NettyClientConfig(), sc, auth);
    }

    /** Waits until the name server lists (present=true) or no longer lists (false) the broker at its address. */
    void waitRegistered(Broker b, boolean present) {
        long deadline = System.currentTimeMillis() + (present ? REGISTER_TIMEOUT_MS : 5_000);
        long nextPush = 0;
        while (System.currentTimeMillis() < deadline) {
            if (isRegistered(b) == present) {
                return;
            }
            BrokerController c = b.controller;
            if (present && c != null && System.currentTimeMillis() >= nextPush) {
                // A broker registers right at start, but only with name servers its client has already found
                // "available" (a periodic scan); the next regular registration would be 10 s later. Push it.
                c.registerBrokerAll(true, false, true);
                nextPush = System.currentTimeMillis() + 250;
            }
            sleep(20);
        }
        throw new IllegalStateException("broker " + b.name + (present ? " did not register" : " did not unregister")
            + " with the name server in time");
    }

    private boolean isRegistered(Broker b) {
        NamesrvController n = namesrv;
        if (n == null) {
            throw new IllegalStateException("the name server is stopped");
        }
        ClusterInfo info = n.getRouteInfoManager().getAllClusterInfo();
        BrokerData data = info.getBrokerAddrTable().get(b.name);
        if (data == null) {
            return false;
        }
        return b.address().equals(data.getBrokerAddrs().get(b.id));
    }

    /**
     * Route of a topic straight from the in-process name server (null if none); while the name server is stopped,
     * the last route it gave (as a client would keep it).
     */
    TopicRouteData route(String topic) {
        NamesrvController n = namesrv;
        if (n == null) {
            return lastRoutes.get(topic);
        }
        TopicRouteData r = n.getRouteInfoManager().pickupTopicRouteData(topic);
        if (r != null) {
            lastRoutes.put(topic, r);
        }
        return r;
    }

    /** True when the name server's route shows the topic on every given broker with the given queue counts. */
    boolean routeShows(String topic, Collection<String> brokerNames, int queues) {
        TopicRouteData r = route(topic);
        if (r == null || r.getQueueDatas() == null) {
            return false;
        }
        for (String name : brokerNames) {
            boolean found = false;
            for (QueueData q : r.getQueueDatas()) {
                if (name.equals(q.getBrokerName()) && q.getReadQueueNums() == queues && q.getWriteQueueNums() == queues) {
                    found = true;
                    break;
                }
            }
            if (!found) {
                return false;
            }
        }
        return true;
    }

    /**
     * Waits (at most timeoutMs) until every running broker has dispatched its whole commit log to the consume
     * queues. A send is acknowledged once it is in the commit log; its queue offset becomes visible to offset
     * queries and pulls a moment later, when the store's reput service has dispatched it.
     */
    void waitDispatched(long timeoutMs) {
        long deadline = System.currentTimeMillis() + timeoutMs;
        for (Broker b : brokers.values()) {
            BrokerController c = b.controller;
            if (c == null) {
                continue;
            }
            while (c.getMessageStore().dispatchBehindBytes() > 0 && System.currentTimeMillis() < deadline) {
                sleep(1);
            }
            if (b.master != null && b.master.controller != null) {
                // a slave: until it has replicated its master's commit log (and dispatched it)
                long target = b.master.controller.getMessageStore().getMaxPhyOffset();
                while ((c.getMessageStore().getMaxPhyOffset() < target || c.getMessageStore().dispatchBehindBytes() > 0)
                    && System.currentTimeMillis() < deadline) {
                    sleep(1);
                }
            }
        }
    }

    JsonObject readyInfo() {
        JsonObject o = new JsonObject();
        o.addProperty("nameServer", nameServerAddress());
        JsonArray arr = new JsonArray();
        JsonArray slaves = new JsonArray();
        for (Broker b : brokers.values()) {
            JsonObject jb = new JsonObject();
            jb.addProperty("name", b.name);
            jb.addProperty("address", b.address());
            if (b.master == null) {
                arr.add(jb);
            } else {
                jb.addProperty("id", b.id);
                slaves.add(jb);
            }
        }
        o.add("brokers", arr);
        o.add("slaves", slaves);
        o.addProperty("storeDir", root.getAbsolutePath());
        o.addProperty("auth", options.authEnabled());
        return o;
    }

    /** Stops every running broker (in parallel), then the name server. */
    void shutdown() {
        try (ShutdownAccelerator acc = ShutdownAccelerator.start(Thread.currentThread())) {
            List<Thread> stoppers = new ArrayList<>();
            for (Broker b : brokers.values()) {
                BrokerController c = b.controller;
                if (c == null) {
                    continue;
                }
                b.controller = null;
                Thread t = new Thread(() -> {
                    long t0 = System.nanoTime();
                    try {
                        c.shutdown();
                        System.err.printf("rmq-shim: %s stopped in %.2f s%n", b.name, (System.nanoTime() - t0) / 1e9);
                    } catch (Throwable e) {
                        System.err.println("broker " + b.name + " shutdown failed: " + e);
                    }
                }, "shim-stop-" + b.name);
                acc.watch(t);
                t.start();
                stoppers.add(t);
            }
            for (Thread t : stoppers) {
                try {
                    t.join(30_000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            long t = System.nanoTime();
            NamesrvController n = namesrv;
            if (n != null) {
                try {
                    n.shutdown();
                } catch (Throwable e) {
                    System.err.println("name server shutdown failed: " + e);
                }
                namesrv = null;
            }
            System.err.printf("rmq-shim: name server stopped in %.2f s%n", (System.nanoTime() - t) / 1e9);
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
    }
}
