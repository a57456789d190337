/*
 * Kafka's command-line tools run one after another in one JVM, so that a test module pays for one JVM start, not one
 * a tool: each line of stdin is {"main": a tool's class, "args": [...], "input": its stdin or null}, the class's main
 * is called with those arguments exactly as bin/kafka-*.sh would call it, and one JSON line {"rc", "stdout",
 * "stderr"} answers it. The exit code is the one the tool passed to Kafka's Exit (0 when main returns, 1 when it
 * throws, its trace then in "stderr" as the JVM would print it), and what it prints after calling Exit is dropped, as
 * the JVM would have ended there; the shutdown hooks it added to Exit then run (a console producer's closes its
 * producer, sending what it still holds), one after another, before the answer.
 * The pytest side is tests/interop/kafka_tools.py's ToolShell.
 */
package odradek.interop.tools;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.common.utils.Exit;
import org.slf4j.LoggerFactory;

public final class ToolShell {
    private ToolShell() {}

    /** What Exit.exit and Exit.halt throw instead of ending the JVM. */
    static final class ToolExit extends Error {
        final int code;

        ToolExit(int code) {
            super(null, null, false, false);
            this.code = code;
        }
    }

    private static volatile Integer exitCode;

    public static void main(String[] args) throws Exception {
        // log4j's console appender takes System.err when logging starts: start it now, before a tool's stderr is
        // swapped in, so that what the tools log goes to this JVM's own stderr
        LoggerFactory.getLogger(ToolShell.class).debug("tool shell started");
        ObjectMapper json = new ObjectMapper();
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        InputStream realIn = System.in;
        PrintStream discarded = new PrintStream(OutputStream.nullOutputStream());
        Exit.Procedure exit = (code, message) -> {
            if (exitCode == null) {
                exitCode = code;
            }
            // the JVM would end here: what the tool's own catch blocks make of ToolExit is not its output
            System.setOut(discarded);
            System.setErr(discarded);
            throw new ToolExit(code);
        };
        Exit.setExitProcedure(exit);
        Exit.setHaltProcedure(exit);
        List<Runnable> hooks = new ArrayList<>();
        Exit.setShutdownHookAdder((name, hook) -> hooks.add(hook));
        BufferedReader requests = new BufferedReader(new InputStreamReader(realIn, StandardCharsets.UTF_8));
        String line;
        while ((line = requests.readLine()) != null) {
            JsonNode request = json.readTree(line);
            String[] toolArgs = new String[request.get("args").size()];
            for (int i = 0; i < toolArgs.length; i++) {
                toolArgs[i] = request.get("args").get(i).asText();
            }
            JsonNode input = request.get("input");
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            PrintStream toolOut = new PrintStream(out, true, StandardCharsets.UTF_8);
            PrintStream toolErr = new PrintStream(err, true, StandardCharsets.UTF_8);
            System.setOut(toolOut);
            System.setErr(toolErr);
            System.setIn(new ByteArrayInputStream(
                input == null || input.isNull() ? new byte[0] : input.asText().getBytes(StandardCharsets.UTF_8)));
            exitCode = null;
            hooks.clear();
            int rc;
            try {
                Class.forName(request.get("main").asText()).getMethod("main", String[].class)
                    .invoke(null, (Object) toolArgs);
                rc = exitCode == null ? 0 : exitCode;
            } catch (InvocationTargetException thrown) {
                Throwable cause = thrown.getCause();
                if (exitCode != null) {
                    rc = exitCode;
                } else {
                    toolErr.print("Exception in thread \"main\" ");
                    cause.printStackTrace(toolErr);
                    rc = 1;
                }
            } finally {
                System.setOut(toolOut);
                System.setErr(toolErr);
                for (Runnable hook : hooks) {
                    runHook(hook);
                }
                toolOut.flush();
                toolErr.flush();
                System.setOut(realOut);
                System.setErr(realErr);
                System.setIn(realIn);
            }
            ObjectNode answer = json.createObjectNode();
            answer.put("rc", rc);
            answer.put("stdout", out.toString(StandardCharsets.UTF_8));
            answer.put("stderr", err.toString(StandardCharsets.UTF_8));
            realOut.println(json.writeValueAsString(answer));
            realOut.flush();
        }
    }

    /** One shutdown hook in a thread of its own, as the JVM runs it, given a minute. */
    private static void runHook(Runnable hook) throws InterruptedException {
        Thread thread = new Thread(() -> {
            try {
                hook.run();
            } catch (ToolExit exit) {
                // a hook that calls Exit: the JVM is ending anyway
            }
        }, "shutdown-hook");
        thread.start();
        thread.join(60_000);
    }
}
