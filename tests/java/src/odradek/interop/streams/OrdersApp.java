package odradek.interop.streams;

import java.io.FileInputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;

/**
 * A stateful Kafka Streams application the interop tests run against Odradek, exactly_once_v2 by default.
 *
 * Input: "orders" (key an order id, value "customer:amount", timestamps set by the producer) and "customers" (key a
 * customer, value its region), read as a GlobalKTable. Topology, every state store persistent (RocksDB) with its
 * changelog:
 *   orders -> groupBy(customer) [repartition] -> sum of amounts in "totals-store"        -> "totals"
 *   the same grouped stream -> 10 s tumbling windows (1 day grace) -> count              -> "windowed-counts"
 *   orders -> join(customers, stream-GlobalKTable) -> groupBy(region) [repartition] -> count -> "region-counts"
 * Outputs are strings: "totals" customer -> sum, "windowed-counts" "customer@windowStartMs" -> count,
 * "region-counts" region -> count.
 *
 * Usage: OrdersApp <properties file> <prefix>; topics are "<prefix>-orders" etc. The properties (bootstrap.servers,
 * application.id, state.dir, ...) go to StreamsConfig as they are. Every second it prints one JSON line to stdout:
 * {"state": ..., "totals": {customer: sum, ...} (an interactive query of totals-store through KafkaStreams.store,
 * while RUNNING), "active": [...], "standby": [...] (the task ids this instance's threads run, active and standby)}. A
 * failure of the application prints {"error": "<class>: <message>"} with the root cause and exits 1.
 */
public final class OrdersApp {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        String prefix = args[1];
        props.putIfAbsent(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);

        KafkaStreams streams = new KafkaStreams(topology(prefix).build(props), props);
        CountDownLatch failed = new CountDownLatch(1);
        String[] error = new String[1];
        streams.setUncaughtExceptionHandler(exception -> {
            Throwable root = exception;
            while (root.getCause() != null) {
                root = root.getCause();
            }
            error[0] = root.getClass().getName() + ": " + root.getMessage();
            failed.countDown();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
                    .SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> streams.close(Duration.ofSeconds(10))));
        try {
            streams.start();
        } catch (RuntimeException e) {
            System.out.println("{\"error\": " + quote(e.getClass().getName() + ": " + e.getMessage()) + "}");
            System.exit(1);
        }
        while (!failed.await(1, java.util.concurrent.TimeUnit.SECONDS)) {
            System.out.println(report(streams));
            System.out.flush();
        }
        System.out.println("{\"error\": " + quote(error[0]) + "}");
        System.out.flush();
        streams.close(Duration.ofSeconds(5));
        System.exit(1);
    }

    static StreamsBuilder topology(String prefix) {
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> orders = builder.stream(prefix + "-orders", Consumed.with(Serdes.String(), Serdes.String()));
        GlobalKTable<String, String> customers = builder.globalTable(prefix + "-customers",
                Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("customers-store"));

        KGroupedStream<String, Long> byCustomer = orders
                .map((id, value) -> KeyValue.pair(value.split(":")[0], Long.parseLong(value.split(":")[1])))
                .groupByKey(Grouped.with("by-customer", Serdes.String(), Serdes.Long()));
        byCustomer.reduce(Long::sum, Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("totals-store")
                        .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
                .toStream().mapValues(String::valueOf).to(prefix + "-totals", Produced.with(Serdes.String(), Serdes.String()));
        byCustomer.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofDays(1)))
                .count(Materialized.as("windowed-store"))
                .toStream((window, count) -> window.key() + "@" + window.window().start())
                .mapValues(String::valueOf).to(prefix + "-windowed-counts", Produced.with(Serdes.String(), Serdes.String()));
        orders.join(customers, (id, value) -> value.split(":")[0], (value, region) -> region)
                .groupBy((id, region) -> region, Grouped.with("by-region", Serdes.String(), Serdes.String()))
                .count(Materialized.as("region-store"))
                .toStream().mapValues(String::valueOf).to(prefix + "-region-counts", Produced.with(Serdes.String(), Serdes.String()));
        return builder;
    }

    static String report(KafkaStreams streams) {
        StringBuilder out = new StringBuilder("{\"state\": ").append(quote(streams.state().name()));
        if (streams.state() == KafkaStreams.State.RUNNING) {
            try {
                ReadOnlyKeyValueStore<String, Long> store = streams.store(
                        StoreQueryParameters.fromNameAndType("totals-store", QueryableStoreTypes.keyValueStore()));
                Map<String, Long> totals = new TreeMap<>();
                try (KeyValueIterator<String, Long> all = store.all()) {
                    all.forEachRemaining(entry -> totals.put(entry.key, entry.value));
                }
                out.append(", \"totals\": {");
                String separator = "";
                for (Map.Entry<String, Long> entry : totals.entrySet()) {
                    out.append(separator).append(quote(entry.getKey())).append(": ").append(entry.getValue());
                    separator = ", ";
                }
                out.append("}");
            } catch (org.apache.kafka.streams.errors.InvalidStateStoreException e) {
                // a rebalance under way: the next line will have it
            }
        }
        List<String> active = new ArrayList<>();
        List<String> standby = new ArrayList<>();
        for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
            thread.activeTasks().forEach(task -> active.add(task.taskId().toString()));
            thread.standbyTasks().forEach(task -> standby.add(task.taskId().toString()));
        }
        out.append(", \"active\": ").append(list(active)).append(", \"standby\": ").append(list(standby));
        return out.append("}").toString();
    }

    private static String list(List<String> items) {
        StringBuilder out = new StringBuilder("[");
        for (int i = 0; i < items.size(); i++) {
            out.append(i == 0 ? "" : ", ").append(quote(items.get(i)));
        }
        return out.append("]").toString();
    }

    private static String quote(String text) {
        return "\"" + String.valueOf(text).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
    }
}
