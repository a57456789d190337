/*
 * Kafka's command-line tools run one after another in one JVM, so that a test module pays for one JVM start, not one
 * a tool: each line of stdin is {"main": a tool's class, "args": [...], "input": its stdin or null}, the class's main
 * is called with those arguments exactly as bin/kafka-*.sh would call it, and one JSON line {"rc", "stdout",
 * "stderr"} answers it. The exit code is the one the tool passed to Kafka's Exit (0 when main returns, 1 when it
 * throws, its trace then in "stderr" as the JVM would print it); its shutdown hooks are not kept, the JVM living on.
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
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.utils.Exit;

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
        ObjectMapper json = new ObjectMapper();
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        InputStream realIn = System.in;
        Exit.Procedure exit = (code, message) -> {
            if (exitCode == null) {
                exitCode = code;
            }
            throw new ToolExit(code);
        };
        Exit.setExitProcedure(exit);
        Exit.setHaltProcedure(exit);
        Exit.setShutdownHookAdder((name, hook) -> { });
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
}
