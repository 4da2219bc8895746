package org.rmqspark.shim;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;

/** Typed access to the fields of one command object. */
final class Args {
    private final JsonObject o;

    Args(JsonObject o) {
        this.o = o;
    }

    boolean has(String k) {
        return o.has(k) && !o.get(k).isJsonNull();
    }

    JsonElement get(String k) {
        return has(k) ? o.get(k) : null;
    }

    String str(String k) {
        if (!has(k)) {
            throw new IllegalArgumentException("missing argument: " + k);
        }
        return o.get(k).getAsString();
    }

    String str(String k, String dflt) {
        return has(k) ? o.get(k).getAsString() : dflt;
    }

    int integer(String k) {
        if (!has(k)) {
            throw new IllegalArgumentException("missing argument: " + k);
        }
        return o.get(k).getAsInt();
    }

    Integer integer(String k, Integer dflt) {
        return has(k) ? Integer.valueOf(o.get(k).getAsInt()) : dflt;
    }

    long lng(String k) {
        if (!has(k)) {
            throw new IllegalArgumentException("missing argument: " + k);
        }
        return o.get(k).getAsLong();
    }

    Long lng(String k, Long dflt) {
        return has(k) ? Long.valueOf(o.get(k).getAsLong()) : dflt;
    }

    boolean bool(String k, boolean dflt) {
        return has(k) ? o.get(k).getAsBoolean() : dflt;
    }

    JsonArray array(String k) {
        if (!has(k) || !o.get(k).isJsonArray()) {
            throw new IllegalArgumentException("argument " + k + " must be a list");
        }
        return o.getAsJsonArray(k);
    }
}
