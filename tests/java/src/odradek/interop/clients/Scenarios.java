/*
 * What the client and admin scenario programs share: the client properties from the command line (a bootstrap
 * address and an optional properties file), the scenarios asked for run side by side, each in its own thread, and
 * the run of one named scenario that becomes one JSON line on stdout
 * ({"name", "ok", "ms", "details"}, an exception's class and message when it throws), and the JSON those lines are.
 * The pytest side (tests/interop/test_java_clients*.py, test_java_admin*.py) runs a program once per module and
 * asserts on the lines.
 */
package odradek.interop.clients;

import java.io.FileReader;
import java.io.IOException;
import java.io.Reader;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

final class Scenarios {
    private Scenarios() {}

    interface Body {
        void run(Map<String, Object> details) throws Exception;
    }

    /** bootstrap.servers plus the file's properties ("-" for none). */
    static Properties clientProperties(String bootstrap, String file) throws IOException {
        Properties properties = new Properties();
        if (!file.equals("-")) {
            try (Reader reader = new FileReader(file)) {
                properties.load(reader);
            }
        }
        properties.put("bootstrap.servers", bootstrap);
        return properties;
    }

    static Properties with(Properties base, Object... keysAndValues) {
        Properties properties = new Properties();
        properties.putAll(base);
        for (int i = 0; i < keysAndValues.length; i += 2) {
            properties.put(keysAndValues[i], String.valueOf(keysAndValues[i + 1]));
        }
        return properties;
    }

    /** Run the named scenarios of `all` at once, each in its own thread (they use topics and groups of their own,
     * and mostly wait on the broker), printing each one's line as it ends. */
    static void runAll(Map<String, Body> all, String names) throws InterruptedException {
        List<Thread> threads = new ArrayList<>();
        for (String name : names.split(",")) {
            Body body = all.get(name);
            if (body == null) {
                throw new IllegalArgumentException("no scenario " + name + " (of " + all.keySet() + ")");
            }
            Thread thread = new Thread(() -> run(name, body), name);
            thread.start();
            threads.add(thread);
        }
        for (Thread thread : threads) {
            thread.join();
        }
    }

    /** Run one scenario and print its line; ok unless it throws or sets details "ok" false. */
    static void run(String name, Body body) {
        Map<String, Object> details = new LinkedHashMap<>();
        boolean ok;
        long began = System.nanoTime();
        try {
            body.run(details);
            ok = !Boolean.FALSE.equals(details.remove("ok"));
        } catch (Throwable error) {
            ok = false;
            details.put("error", describe(error));
        }
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("name", name);
        line.put("ok", ok);
        line.put("ms", (System.nanoTime() - began) / 1_000_000);
        line.put("details", details);
        synchronized (System.out) {
            System.out.println(json(line));
            System.out.flush();
        }
    }

    /** The class and message of an exception, unwrapped from ExecutionException (what a Future throws). */
    static String describe(Throwable error) {
        while (error instanceof ExecutionException && error.getCause() != null) {
            error = error.getCause();
        }
        return error.getClass().getName() + ": " + error.getMessage();
    }

    /** The class name of what `call` throws (unwrapped), or "none". */
    static String thrown(Body call) {
        try {
            call.run(new LinkedHashMap<>());
            return "none";
        } catch (Throwable error) {
            while (error instanceof ExecutionException && error.getCause() != null) {
                error = error.getCause();
            }
            return error.getClass().getName();
        }
    }

    static String json(Object value) {
        if (value == null) {
            return "null";
        }
        if (value instanceof Boolean || value instanceof Number) {
            return value.toString();
        }
        if (value instanceof Map) {
            List<String> parts = new ArrayList<>();
            for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
                parts.add(json(String.valueOf(entry.getKey())) + ":" + json(entry.getValue()));
            }
            return "{" + String.join(",", parts) + "}";
        }
        if (value instanceof Collection) {
            List<String> parts = new ArrayList<>();
            for (Object item : (Collection<?>) value) {
                parts.add(json(item));
            }
            return "[" + String.join(",", parts) + "]";
        }
        StringBuilder out = new StringBuilder("\"");
        for (char c : value.toString().toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
