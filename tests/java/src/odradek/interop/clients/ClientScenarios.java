/*
 * Kafka 4.3's producer and consumer against one broker or cluster, one JSON line per scenario (Scenarios.runAll,
 * side by side): the idempotent producer, transactions (commit, abort, read_committed, the transaction version the
 * client runs), exactly-once read-process-write with sendOffsetsToTransaction, the classic group protocol with the
 * range and cooperative-sticky assignors, KIP-848's consumer protocol (and its regex subscription, static member and
 * offsets), static membership, seeks, offsetsForTimes and committed offsets, every codec and acks setting, the size
 * limits; and acks_all_through_restart, which produces with acks=all until stdin says stop (the test stops and
 * restarts a broker meanwhile) and then reads back every acknowledged record.
 *
 * Usage: ClientScenarios <bootstrap> <client properties file | -> <topic prefix> <scenario,...>
 */
package odradek.interop.clients;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Field;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class ClientScenarios {
    private static final Duration WAIT = Duration.ofSeconds(60);
    private final Properties base;
    private final String prefix;

    private ClientScenarios(Properties base, String prefix) {
        this.base = base;
        this.prefix = prefix;
    }

    public static void main(String[] args) throws Exception {
        ClientScenarios scenarios = new ClientScenarios(Scenarios.clientProperties(args[0], args[1]), args[2]);
        Map<String, Scenarios.Body> all = new java.util.LinkedHashMap<>();
        all.put("idempotent_producer", scenarios::idempotentProducer);
        all.put("transactions", scenarios::transactions);
        all.put("exactly_once", scenarios::exactlyOnce);
        all.put("classic_range", d -> scenarios.twoMembers(d, "range", "classic"));
        all.put("classic_cooperative_sticky", d -> scenarios.twoMembers(d, "cooperative-sticky", "classic"));
        all.put("consumer_protocol", d -> scenarios.twoMembers(d, null, "consumer"));
        all.put("static_membership", scenarios::staticMembership);
        all.put("seek_and_offsets", scenarios::seekAndOffsets);
        all.put("codecs_and_limits", scenarios::codecsAndLimits);
        all.put("consumer_protocol_features", scenarios::consumerProtocolFeatures);
        all.put("acks_all_through_restart", scenarios::acksAllThroughRestart);
        Scenarios.runAll(all, args[3]);
    }

    private String topic(String name, int partitions) throws Exception {
        return topic(name, partitions, Map.of());
    }

    private String topic(String name, int partitions, Map<String, String> configs) throws Exception {
        String topic = prefix + "-" + name;
        try (Admin admin = Admin.create(base)) {
            admin.createTopics(List.of(new NewTopic(topic, java.util.Optional.of(partitions),
                    java.util.Optional.empty()).configs(configs))).all().get();
        }
        return topic;
    }

    private KafkaProducer<String, String> producer(Object... settings) {
        return new KafkaProducer<>(Scenarios.with(base, settings), new StringSerializer(), new StringSerializer());
    }

    private KafkaConsumer<String, String> consumer(Object... settings) {
        Properties properties = Scenarios.with(base, ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest",
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        return new KafkaConsumer<>(Scenarios.with(properties, settings), new StringDeserializer(),
                new StringDeserializer());
    }

    /** The values of `partitions` from their beginning until `count` arrived or nothing came for a while. */
    private List<String> readAll(Collection<TopicPartition> partitions, String isolation, int count) {
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = consumer(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation)) {
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            long deadline = System.currentTimeMillis() + WAIT.toMillis();
            int idle = 0;
            while (System.currentTimeMillis() < deadline && (values.size() < count || idle < 1)) {
                var records = consumer.poll(Duration.ofMillis(500));
                idle = records.isEmpty() ? idle + 1 : 0;
                records.forEach(record -> values.add(record.value()));
            }
        }
        return values;
    }

    private static List<String> numbered(String stem, int from, int to) {
        List<String> values = new ArrayList<>();
        for (int i = from; i < to; i++) {
            values.add(stem + i);
        }
        return values;
    }

    private void idempotentProducer(Map<String, Object> details) throws Exception {
        String topic = topic("idempotent", 1);
        TopicPartition partition = new TopicPartition(topic, 0);
        List<String> sent = numbered("v", 0, 2000);
        long began = System.currentTimeMillis();
        try (KafkaProducer<String, String> producer = producer("linger.ms", 5, "batch.size", 2048,
                "max.in.flight.requests.per.connection", 5)) {
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            for (String value : sent) {
                acks.add(producer.send(new ProducerRecord<>(topic, 0, null, value)));
            }
            long last = -1;
            for (Future<RecordMetadata> ack : acks) {
                long offset = ack.get().offset();
                details.putIfAbsent("offsets_in_order", true);
                if (offset != last + 1) {
                    details.put("offsets_in_order", false);
                }
                last = offset;
            }
            details.put("idempotent", transactionManager(producer) != null);
        }
        details.put("produce_ms", System.currentTimeMillis() - began);
        List<String> read = readAll(List.of(partition), "read_uncommitted", sent.size());
        details.put("sent", sent.size());
        details.put("read", read.size());
        details.put("read_equals_sent", read.equals(sent));
    }

    /** The producer's TransactionManager (idempotent and transactional producers have one), by reflection. */
    private static Object transactionManager(KafkaProducer<?, ?> producer) throws Exception {
        Field field = KafkaProducer.class.getDeclaredField("transactionManager");
        field.setAccessible(true);
        return field.get(producer);
    }

    private static boolean transactionV2(KafkaProducer<?, ?> producer) throws Exception {
        Object manager = transactionManager(producer);
        return (Boolean) manager.getClass().getMethod("isTransactionV2Enabled").invoke(manager);
    }

    private void transactions(Map<String, Object> details) throws Exception {
        String topic = topic("transactions", 2);
        List<TopicPartition> partitions = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
        try (KafkaProducer<String, String> producer = producer("transactional.id", prefix + "-txn")) {
            producer.initTransactions();
            for (String[] round : new String[][] {{"a", "commit"}, {"b", "abort"}, {"c", "commit"}}) {
                producer.beginTransaction();
                for (String value : numbered(round[0], 0, 10)) {
                    producer.send(new ProducerRecord<>(topic, value.hashCode() & 1, null, value));
                }
                if (round[1].equals("commit")) {
                    producer.commitTransaction();
                } else {
                    producer.flush();
                    producer.abortTransaction();
                }
            }
            details.put("transaction_v2", transactionV2(producer));
        }
        List<String> committed = readAll(partitions, "read_committed", 20);
        List<String> uncommitted = readAll(partitions, "read_uncommitted", 30);
        details.put("read_committed", new TreeSet<>(committed));
        details.put("read_committed_count", committed.size());
        details.put("read_uncommitted_count", uncommitted.size());
    }

    private void exactlyOnce(Map<String, Object> details) throws Exception {
        String input = topic("eos-in", 1);
        String output = topic("eos-out", 1);
        String group = prefix + "-eos";
        try (KafkaProducer<String, String> plain = producer()) {
            for (String value : numbered("in", 0, 50)) {
                plain.send(new ProducerRecord<>(input, value));
            }
        }
        TopicPartition in = new TopicPartition(input, 0);
        try (KafkaConsumer<String, String> consumer = consumer(ConsumerConfig.GROUP_ID_CONFIG, group,
                ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
             KafkaProducer<String, String> producer = producer("transactional.id", prefix + "-eos-txn")) {
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            int processed = 0;
            boolean abortedOnce = false;
            long deadline = System.currentTimeMillis() + WAIT.toMillis();
            while (processed < 50 && System.currentTimeMillis() < deadline) {
                var records = consumer.poll(Duration.ofMillis(500));
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                long next = -1;
                for (ConsumerRecord<String, String> record : records) {
                    producer.send(new ProducerRecord<>(output, record.value().replace("in", "out")));
                    next = record.offset() + 1;
                }
                producer.sendOffsetsToTransaction(Map.of(in, new OffsetAndMetadata(next)), consumer.groupMetadata());
                if (!abortedOnce) {  // the first round is aborted: its output and its offsets must both vanish
                    abortedOnce = true;
                    producer.abortTransaction();
                    consumer.seek(in, records.records(in).get(0).offset());
                    continue;
                }
                producer.commitTransaction();
                processed += records.count();
            }
            details.put("processed", processed);
        }
        try (Admin admin = Admin.create(base)) {
            var offsets = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            details.put("committed_offset", offsets.containsKey(in) ? offsets.get(in).offset() : null);
        }
        List<String> out = readAll(List.of(new TopicPartition(output, 0)), "read_committed", 50);
        details.put("output_equals_input", out.equals(numbered("out", 0, 50)));
        details.put("output_count", out.size());
    }

    /** A rebalance listener that records what it was told, for one member. */
    private static final class Moves implements ConsumerRebalanceListener {
        final List<List<String>> revoked = new ArrayList<>();
        final List<List<String>> assigned = new ArrayList<>();

        private static List<String> names(Collection<TopicPartition> partitions) {
            return partitions.stream().map(TopicPartition::toString).sorted().collect(Collectors.toList());
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            revoked.add(names(partitions));
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            assigned.add(names(partitions));
        }
    }

    private static Set<String> assignment(KafkaConsumer<?, ?> consumer) {
        return consumer.assignment().stream().map(TopicPartition::toString)
                .collect(Collectors.toCollection(TreeSet::new));
    }

    /** Poll every consumer in turn until `done` holds (or the wait ends); true if it held. */
    private static boolean pollUntil(List<KafkaConsumer<String, String>> consumers,
                                     java.util.function.BooleanSupplier done) {
        long deadline = System.currentTimeMillis() + WAIT.toMillis();
        while (System.currentTimeMillis() < deadline) {
            for (KafkaConsumer<String, String> consumer : consumers) {
                consumer.poll(Duration.ofMillis(100));
            }
            if (done.getAsBoolean()) {
                return true;
            }
        }
        return false;
    }

    /** One member takes all four partitions, a second joins and they end with two each. */
    private void twoMembers(Map<String, Object> details, String assignor, String protocol) throws Exception {
        String topic = topic("group-" + protocol + "-" + (assignor == null ? "server" : assignor), 4);
        String group = topic + "-group";
        List<Object> settings = new ArrayList<>(List.of(ConsumerConfig.GROUP_ID_CONFIG, group,
                ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol));
        if (assignor != null) {
            settings.addAll(List.of(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor.equals("range")
                    ? "org.apache.kafka.clients.consumer.RangeAssignor"
                    : "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"));
        }
        Moves firstMoves = new Moves();
        Moves secondMoves = new Moves();
        try (KafkaConsumer<String, String> first = consumer(settings.toArray());
             KafkaConsumer<String, String> second = consumer(settings.toArray())) {
            first.subscribe(List.of(topic), firstMoves);
            details.put("first_alone", pollUntil(List.of(first), () -> first.assignment().size() == 4));
            second.subscribe(List.of(topic), secondMoves);
            details.put("split", pollUntil(List.of(first, second),
                    () -> first.assignment().size() == 2 && second.assignment().size() == 2));
            details.put("first", assignment(first));
            details.put("second", assignment(second));
            Set<String> union = new TreeSet<>(assignment(first));
            union.addAll(assignment(second));
            details.put("union_size", union.size());
            details.put("first_revoked", firstMoves.revoked);
            details.put("first_assigned", firstMoves.assigned);
            details.put("second_assigned", secondMoves.assigned);
        }
    }

    /** Two static members split four partitions; one restarts within the session timeout and gets its partitions
     * back while the other is never told of a rebalance. */
    private void staticMembership(Map<String, Object> details) throws Exception {
        String topic = topic("static", 4);
        String group = topic + "-group";
        Object[] common = {ConsumerConfig.GROUP_ID_CONFIG, group, ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 45000,
                ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, "org.apache.kafka.clients.consumer.RangeAssignor"};
        Moves stayingMoves = new Moves();
        List<Object> a = new ArrayList<>(Arrays.asList(common));
        a.addAll(List.of(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "a"));
        List<Object> b = new ArrayList<>(Arrays.asList(common));
        b.addAll(List.of(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "b"));
        try (KafkaConsumer<String, String> staying = consumer(a.toArray())) {
            staying.subscribe(List.of(topic), stayingMoves);
            Set<String> before;
            try (KafkaConsumer<String, String> restarting = consumer(b.toArray())) {
                restarting.subscribe(List.of(topic));
                details.put("split", pollUntil(List.of(staying, restarting),
                        () -> staying.assignment().size() == 2 && restarting.assignment().size() == 2));
                before = assignment(restarting);
            }
            int stayingRebalances = stayingMoves.assigned.size();
            try (KafkaConsumer<String, String> restarted = consumer(b.toArray())) {
                restarted.subscribe(List.of(topic));
                details.put("rejoined", pollUntil(List.of(staying, restarted),
                        () -> restarted.assignment().size() == 2));
                details.put("same_assignment", assignment(restarted).equals(before));
                for (int i = 0; i < 10; i++) {  // a while longer, in which a rebalance would reach the staying member
                    staying.poll(Duration.ofMillis(100));
                    restarted.poll(Duration.ofMillis(100));
                }
                details.put("staying_rebalanced", stayingMoves.assigned.size() != stayingRebalances);
                details.put("before", before);
                details.put("after", assignment(restarted));
            }
        }
    }

    private void seekAndOffsets(Map<String, Object> details) throws Exception {
        String topic = topic("seek", 1);
        TopicPartition partition = new TopicPartition(topic, 0);
        long start = System.currentTimeMillis() - 100_000;
        try (KafkaProducer<String, String> producer = producer()) {
            for (int i = 0; i < 100; i++) {  // record i has timestamp start + 1000 i
                producer.send(new ProducerRecord<>(topic, 0, start + 1000L * i, null, "v" + i));
            }
        }
        String group = topic + "-group";
        try (KafkaConsumer<String, String> consumer = consumer(ConsumerConfig.GROUP_ID_CONFIG, group)) {
            consumer.assign(List.of(partition));
            consumer.seek(partition, 50);
            details.put("after_seek_50", firstOffset(consumer));
            consumer.seekToBeginning(List.of(partition));
            details.put("after_seek_to_beginning", firstOffset(consumer));
            consumer.seekToEnd(List.of(partition));
            details.put("position_at_end", consumer.position(partition));
            Map<TopicPartition, OffsetAndTimestamp> times = consumer.offsetsForTimes(Map.of(partition, start + 30_500));
            details.put("offset_for_time", times.get(partition).offset());
            details.put("offset_for_time_timestamp", times.get(partition).timestamp() - start);
            details.put("offset_for_future", String.valueOf(
                    consumer.offsetsForTimes(Map.of(partition, System.currentTimeMillis() + 3_600_000))
                            .get(partition)));
            details.put("beginning", consumer.beginningOffsets(List.of(partition)).get(partition));
            details.put("end", consumer.endOffsets(List.of(partition)).get(partition));
            consumer.commitSync(Map.of(partition, new OffsetAndMetadata(42, "checkpoint")));
            OffsetAndMetadata committed = consumer.committed(Set.of(partition)).get(partition);
            details.put("committed", committed.offset());
            details.put("committed_metadata", committed.metadata());
        }
        try (KafkaConsumer<String, String> again = consumer(ConsumerConfig.GROUP_ID_CONFIG, group)) {
            again.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + WAIT.toMillis();
            List<ConsumerRecord<String, String>> records = new ArrayList<>();
            while (records.isEmpty() && System.currentTimeMillis() < deadline) {
                again.poll(Duration.ofMillis(200)).forEach(records::add);
            }
            details.put("group_resumes_at", records.isEmpty() ? null : records.get(0).offset());
        }
    }

    private static Long firstOffset(KafkaConsumer<String, String> consumer) {
        long deadline = System.currentTimeMillis() + WAIT.toMillis();
        while (System.currentTimeMillis() < deadline) {
            var records = consumer.poll(Duration.ofMillis(200));
            if (!records.isEmpty()) {
                return records.iterator().next().offset();
            }
        }
        return null;
    }

    /** KIP-848 beyond the split: a regex subscription (the broker resolves it), a static member's restart, offsets
     * committed under the member epoch and exactly-once with the group's metadata. */
    private void consumerProtocolFeatures(Map<String, Object> details) throws Exception {
        String topicA = topic("kip848-regex-a", 1);
        String topicB = topic("kip848-regex-b", 1);
        String group = prefix + "-kip848-features";
        try (KafkaProducer<String, String> producer = producer()) {
            producer.send(new ProducerRecord<>(topicA, 0, null, "a"));
            producer.send(new ProducerRecord<>(topicB, 0, null, "b"));
        }
        Object[] settings = {ConsumerConfig.GROUP_ID_CONFIG, group, ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer",
                ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "static-1"};
        Set<String> before;
        try (KafkaConsumer<String, String> consumer = consumer(settings)) {
            consumer.subscribe(java.util.regex.Pattern.compile(java.util.regex.Pattern.quote(prefix)
                    + "-kip848-regex-.*"));
            List<String> values = new ArrayList<>();
            long deadline = System.currentTimeMillis() + WAIT.toMillis();
            while (values.size() < 2 && System.currentTimeMillis() < deadline) {
                consumer.poll(Duration.ofMillis(200)).forEach(record -> values.add(record.value()));
            }
            details.put("regex_values", new TreeSet<>(values));
            before = assignment(consumer);
            details.put("regex_assignment", before);
            consumer.commitSync();
            TopicPartition a = new TopicPartition(topicA, 0);
            details.put("committed_a", consumer.committed(Set.of(a)).get(a).offset());
            try (KafkaProducer<String, String> producer = producer("transactional.id", group + "-txn")) {
                producer.initTransactions();
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(topicB, 0, null, "txn"));
                producer.sendOffsetsToTransaction(Map.of(a, new OffsetAndMetadata(1, "eos")),
                        consumer.groupMetadata());
                producer.commitTransaction();
            }
            OffsetAndMetadata committed = consumer.committed(Set.of(a)).get(a);
            details.put("txn_committed_a", committed.offset() + "/" + committed.metadata());
        }
        try (KafkaConsumer<String, String> again = consumer(settings)) {
            again.subscribe(java.util.regex.Pattern.compile(java.util.regex.Pattern.quote(prefix)
                    + "-kip848-regex-.*"));
            pollUntil(List.of(again), () -> again.assignment().size() == 2);
            details.put("static_rejoined_assignment", assignment(again));
        }
    }

    /** Every codec the Java client compresses with, each under one of acks 0, 1 and all, headers; a record over
     * message.max.bytes. */
    private void codecsAndLimits(Map<String, Object> details) throws Exception {
        String topic = topic("codecs", 1, Map.of());
        TopicPartition partition = new TopicPartition(topic, 0);
        List<String> sent = new ArrayList<>();
        String[][] settings = {{"none", "0"}, {"gzip", "1"}, {"snappy", "all"}, {"lz4", "1"}, {"zstd", "all"}};
        for (String[] codecAndAcks : settings) {
            String codec = codecAndAcks[0];
            String acks = codecAndAcks[1];
            try (KafkaProducer<String, String> producer = producer("compression.type", codec, "acks", acks,
                    "enable.idempotence", acks.equals("all"), "linger.ms", 20)) {
                for (int i = 0; i < 50; i++) {
                    String value = codec + "-" + acks + "-" + i + "-" + "x".repeat(100);
                    ProducerRecord<String, String> record = new ProducerRecord<>(topic, 0, "k" + i, value);
                    record.headers().add("codec", codec.getBytes());
                    producer.send(record);
                    sent.add(value);
                }
            }
        }
        List<String> read = readAll(List.of(partition), "read_uncommitted", sent.size());
        details.put("sent", sent.size());
        details.put("read_equals_sent", read.equals(sent));
        try (KafkaConsumer<String, String> consumer = consumer()) {
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            var records = consumer.poll(Duration.ofSeconds(10));
            var header = records.isEmpty() ? null : records.iterator().next().headers().lastHeader("codec");
            details.put("first_header", header == null ? null : new String(header.value()));
        }
        try (KafkaProducer<String, String> producer = producer("max.request.size", 4_000_000)) {
            details.put("over_message_max_bytes", Scenarios.thrown(x -> producer.send(new ProducerRecord<>(topic, 0,
                    null, "y".repeat(1_200_000))).get()));
        }
        try (KafkaProducer<String, String> producer = producer("max.block.ms", 3000)) {
            details.put("over_max_request_size", Scenarios.thrown(x -> producer.send(new ProducerRecord<>(topic, 0,
                    null, "y".repeat(1_200_000))).get()));
            details.put("unknown_partition", Scenarios.thrown(x -> producer.send(new ProducerRecord<>(topic, 5,
                    null, "z")).get()));
            details.put("partitions_for", producer.partitionsFor(topic).size());
        }
    }

    /** acks=all sends, each record its own value, until stdin says stop; then every acknowledged value read back. */
    private void acksAllThroughRestart(Map<String, Object> details) throws Exception {
        String topic = topic("through-restart", 3);
        ConcurrentLinkedQueue<String> acknowledged = new ConcurrentLinkedQueue<>();
        ConcurrentLinkedQueue<String> failures = new ConcurrentLinkedQueue<>();
        AtomicBoolean stop = new AtomicBoolean();
        AtomicReference<Throwable> stdinError = new AtomicReference<>();
        Thread stdin = new Thread(() -> {
            try (BufferedReader reader = new BufferedReader(new InputStreamReader(System.in))) {
                reader.readLine();
            } catch (Exception error) {
                stdinError.set(error);
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        int sent = 0;
        try (KafkaProducer<String, String> producer = producer("acks", "all", "linger.ms", 5,
                "delivery.timeout.ms", 120000, "request.timeout.ms", 10000)) {
            boolean announced = false;
            while (!stop.get()) {
                List<Future<RecordMetadata>> window = new ArrayList<>();
                for (int i = 0; i < 50; i++, sent++) {
                    String value = "r" + sent;
                    window.add(producer.send(new ProducerRecord<>(topic, value, value), (metadata, error) -> {
                        if (error == null) {
                            acknowledged.add(value);
                        } else {
                            failures.add(Scenarios.describe(error));
                        }
                    }));
                }
                producer.flush();
                if (!announced && !acknowledged.isEmpty()) {
                    announced = true;
                    System.out.println("{\"producing\":true}");
                    System.out.flush();
                }
                Thread.sleep(20);
            }
        }
        List<TopicPartition> partitions = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1),
                new TopicPartition(topic, 2));
        List<String> read = readAll(partitions, "read_uncommitted", acknowledged.size());
        Set<String> readSet = new HashSet<>(read);
        List<String> lost = acknowledged.stream().filter(v -> !readSet.contains(v)).limit(20)
                .collect(Collectors.toList());
        details.put("sent", sent);
        details.put("acknowledged", acknowledged.size());
        details.put("read", read.size());
        details.put("duplicates", read.size() - readSet.size());
        details.put("lost", lost);
        details.put("failures", new ArrayList<>(new TreeSet<>(failures)));
        details.put("stdin_error", stdinError.get() == null ? null : stdinError.get().toString());
    }
}
