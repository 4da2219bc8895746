package org.rmqspark.gateway;

import apache.rocketmq.v2.Code;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A caller of the gateway and what it may do: read topics (routes, offsets, pulls), write topics (sends), commit
 * groups (offset updates). Each is a list of names, where a trailing {@code *} matches any suffix and {@code *}
 * alone matches everything. Without users the gateway serves {@link #ANYONE}, who may do everything.
 *
 * <p>Users come from a JSON file ({@code --users-file}), never from the command line:
 * <pre>{"users": [{"accessKey": "spark", "secretKey": "...", "read": ["Orders", "Events-*"], "write": ["Results"],
 *                "commit": ["pipeline-*"]}]}</pre>
 */
final class Caller {
    enum Action {
        READ("read", "topic"), WRITE("write", "topic"), COMMIT("commit", "group");

        final String verb;
        final String resource;

        Action(String verb, String resource) {
            this.verb = verb;
            this.resource = resource;
        }
    }

    private static final List<String> EVERYTHING = List.of("*");
    static final Caller ANYONE = new Caller("(anyone)", null, EVERYTHING, EVERYTHING, EVERYTHING);

    final String accessKey;
    /** Never shown: not in toString, not in any message. */
    final String secretKey;
    private final Map<Action, List<String>> allowed = new LinkedHashMap<>();

    Caller(String accessKey, String secretKey, List<String> read, List<String> write, List<String> commit) {
        this.accessKey = accessKey;
        this.secretKey = secretKey;
        allowed.put(Action.READ, List.copyOf(read));
        allowed.put(Action.WRITE, List.copyOf(write));
        allowed.put(Action.COMMIT, List.copyOf(commit));
    }

    /** A user who may do everything (the embedded gateway's single user). */
    static Caller superUser(String accessKey, String secretKey) {
        return new Caller(accessKey, secretKey, EVERYTHING, EVERYTHING, EVERYTHING);
    }

    boolean allows(Action action, String name) {
        for (String pattern : allowed.get(action)) {
            if (pattern.equals("*") || pattern.equals(name)
                || (pattern.endsWith("*") && name.startsWith(pattern.substring(0, pattern.length() - 1)))) {
                return true;
            }
        }
        return false;
    }

    /** FORBIDDEN, naming the access key, the action and the resource, unless allowed. */
    void check(Action action, String name) {
        if (!allows(action, name)) {
            throw new GatewayException(Code.FORBIDDEN, "access key " + accessKey + " may not " + action.verb + " "
                + action.resource + " " + name + " (the gateway's users file grants it no such permission)");
        }
    }

    /** FORBIDDEN unless the caller may read or write {@code topic} (routes serve both). */
    void checkAny(String topic) {
        if (!allows(Action.READ, topic) && !allows(Action.WRITE, topic)) {
            check(Action.READ, topic);
        }
    }

    @Override
    public String toString() {
        return "Caller(" + accessKey + ")";
    }

    /** The users of a users file, by access key; IllegalArgumentException naming the problem (never a secret). */
    static Map<String, Caller> load(File file) {
        String text;
        try {
            text = Files.readString(file.toPath(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot read the users file " + file + ": " + e.getMessage());
        }
        Map<String, Caller> out = new LinkedHashMap<>();
        try {
            JsonArray users = JsonParser.parseString(text).getAsJsonObject().getAsJsonArray("users");
            if (users == null) {
                throw new IllegalArgumentException("no \"users\" list");
            }
            for (JsonElement e : users) {
                JsonObject u = e.getAsJsonObject();
                String ak = string(u, "accessKey");
                String sk = string(u, "secretKey");
                if (out.containsKey(ak)) {
                    throw new IllegalArgumentException("access key " + ak + " appears twice");
                }
                out.put(ak, new Caller(ak, sk, names(u, "read"), names(u, "write"), names(u, "commit")));
            }
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("users file " + file + ": " + e.getMessage());
        } catch (RuntimeException e) { // malformed JSON or wrong types
            throw new IllegalArgumentException("users file " + file + " is not of the form {\"users\": [{\"accessKey\": "
                + "..., \"secretKey\": ..., \"read\": [topics], \"write\": [topics], \"commit\": [groups]}]}");
        }
        if (out.isEmpty()) {
            throw new IllegalArgumentException("users file " + file + " names no user");
        }
        return out;
    }

    private static String string(JsonObject o, String key) {
        if (!o.has(key) || !o.get(key).isJsonPrimitive() || o.get(key).getAsString().isBlank()) {
            throw new IllegalArgumentException("a user lacks \"" + key + "\"");
        }
        return o.get(key).getAsString();
    }

    private static List<String> names(JsonObject o, String key) {
        List<String> out = new ArrayList<>();
        if (o.has(key)) {
            for (JsonElement e : o.getAsJsonArray(key)) {
                out.add(e.getAsString());
            }
        }
        return out;
    }
}
