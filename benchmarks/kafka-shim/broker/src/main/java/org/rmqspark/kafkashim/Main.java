package org.rmqspark.kafkashim;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * One KRaft Kafka node for the benchmarks, driven by one command per line on stdin; answers one line each on stdout,
 * {@code RESULT <json>} or {@code ERROR <text>}. The node runs until stdin closes.
 *
 * <pre>
 *   java -jar rmq-bench-kafka.jar LOG_DIR
 *   → READY {"bootstrap":"127.0.0.1:PORT"}
 *   create TOPIC PARTITIONS          → RESULT {}
 *   produce TOPIC COUNT BODY_SIZE    → RESULT {"sent":COUNT,"seconds":S}
 *   count TOPIC                      → RESULT {"messages":N,"partitions":P}
 *   produceRate TOPIC RATE SECONDS BODY_SIZE → RESULT {"sent":N,"acked":N,"seconds":S}
 * </pre>
 */
public final class Main {
    private Main() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: java -jar rmq-bench-kafka.jar LOG_DIR");
            System.exit(2);
        }
        Path logDir = Files.createDirectories(Path.of(args[0]));
        KafkaNode node = KafkaNode.start(logDir, freePort(), freePort());
        try (Tools tools = new Tools(node.bootstrap())) {
            tools.awaitReady(60_000);
            System.out.println("READY {\"bootstrap\":\"" + node.bootstrap() + "\"}");
            System.out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                if (!line.isBlank()) {
                    System.out.println(answer(tools, line.trim().split("\\s+")));
                    System.out.flush();
                }
            }
        } finally {
            node.close();
        }
        System.exit(0);
    }

    private static String answer(Tools tools, String[] cmd) {
        try {
            switch (cmd[0]) {
                case "create":
                    tools.createTopic(cmd[1], Integer.parseInt(cmd[2]));
                    return "RESULT {}";
                case "produce":
                    long count = Long.parseLong(cmd[2]);
                    double seconds = tools.produce(cmd[1], count, Integer.parseInt(cmd[3]));
                    return "RESULT {\"sent\":" + count + ",\"seconds\":" + seconds + "}";
                case "produceRate":
                    double[] r = tools.produceRate(cmd[1], Integer.parseInt(cmd[2]), Double.parseDouble(cmd[3]),
                        Integer.parseInt(cmd[4]));
                    return "RESULT {\"sent\":" + (long) r[0] + ",\"acked\":" + (long) r[1] + ",\"seconds\":" + r[2]
                        + "}";
                case "count":
                    long[] held = tools.count(cmd[1]);
                    return "RESULT {\"messages\":" + held[0] + ",\"partitions\":" + held[1] + "}";
                default:
                    return "ERROR unknown command " + cmd[0];
            }
        } catch (Exception e) {
            return "ERROR " + (e + "").replace('\n', ' ');
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }
}
