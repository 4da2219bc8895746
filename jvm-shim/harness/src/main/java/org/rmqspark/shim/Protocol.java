package org.rmqspark.shim;

import com.google.gson.Gson;
import com.google.gson.GsonBuilder;
import com.google.gson.JsonElement;
import com.google.gson.JsonNull;
import com.google.gson.JsonObject;

import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

/**
 * The protocol channel: the process's real stdout, captured before System.out is redirected to stderr so that no
 * stray print of a library can corrupt it. Every protocol message is one line.
 */
final class Protocol {
    static final Gson GSON = new GsonBuilder().serializeNulls().disableHtmlEscaping().create();

    private static PrintStream out;

    private Protocol() {
    }

    /** Captures stdout for the protocol and sends everything else printed to System.out to stderr. */
    static void install() {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
    }

    static synchronized void line(String kind, JsonElement payload) {
        out.print(kind);
        out.print(' ');
        out.print(GSON.toJson(payload));
        out.print('\n');
        out.flush();
    }

    static void ready(JsonObject info) {
        line("READY", info);
    }

    static void ok(JsonElement id, JsonElement result) {
        JsonObject o = new JsonObject();
        o.add("id", id == null ? JsonNull.INSTANCE : id);
        o.addProperty("ok", true);
        o.add("result", result == null ? JsonNull.INSTANCE : result);
        line("RESULT", o);
    }

    static void error(JsonElement id, Throwable t) {
        JsonObject o = new JsonObject();
        o.add("id", id == null ? JsonNull.INSTANCE : id);
        o.addProperty("ok", false);
        o.addProperty("error", describe(t));
        line("RESULT", o);
    }

    /** "Class: message" of the throwable and its causes (at most 4 levels). */
    static String describe(Throwable t) {
        StringBuilder sb = new StringBuilder();
        int depth = 0;
        for (Throwable c = t; c != null && depth < 4; c = c.getCause(), depth++) {
            if (depth > 0) {
                sb.append(" / caused by ");
            }
            sb.append(c.getClass().getName());
            if (c.getMessage() != null) {
                String m = c.getMessage().replace('\n', ' ').replace('\r', ' ');
                if (m.length() > 600) {
                    m = m.substring(0, 600) + "...";
                }
                sb.append(": ").append(m);
            }
            if (c.getCause() == c) {
                break;
            }
        }
        return sb.toString();
    }
}
