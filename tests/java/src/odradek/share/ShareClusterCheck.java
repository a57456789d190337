package odradek.share;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Several KafkaShareConsumers of one share group in one JVM (a thread each, explicit acknowledgement, ACCEPT and
 * commitSync), with Kafka 4.3's Admin around them, for a cluster of brokers. Arguments are key=value:
 * bootstrap, topic, partitions, group, consumers, expect (distinct records to accept before it stops), produce
 * (records the program writes, value tag-i to partition i % partitions, once every consumer has an assignment),
 * from (when given, alterShareGroupOffsets sets every partition's start offset to it first, on the empty group),
 * pause (ms of work after each poll that returned records), poll (max.poll.records, 500 unless given), delete
 * (deleteShareGroups at the end, then a describe). The consumers stop once every record is accepted, or once every
 * one is accepted or uncertain and listShareGroupOffsets shows no lag (an uncertain acknowledgement was applied).
 *
 * One line per fact, in the order they happened in this JVM (println is synchronized):
 * {@code member <client-id> <partition,...>} from describeShareGroups once every consumer has an assignment;
 * {@code produced <n>}; {@code S <consumer> <partition> <offset> <value> <delivery count>} for a delivery;
 * {@code A ...} (or {@code U ...}) for the same record once commitSync said its partition's acknowledgement
 * succeeded (or failed, or never answered); {@code E <consumer> <exception>} for a poll that threw; after the
 * consumers closed, {@code offset <partition> <start offset> <lag>} from listShareGroupOffsets; with delete,
 * {@code deleted} and {@code after-delete <exception>}; last {@code done accepted=<n> ms=<elapsed>}.
 */
public final class ShareClusterCheck {
    private static final long DEADLINE_MS = 80_000;

    private static synchronized void say(String line) {
        System.out.println(line);
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> arg = new HashMap<>();
        for (String a : args) {
            arg.put(a.substring(0, a.indexOf('=')), a.substring(a.indexOf('=') + 1));
        }
        String bootstrap = arg.get("bootstrap"), topic = arg.get("topic"), group = arg.get("group");
        int partitions = Integer.parseInt(arg.get("partitions"));
        int consumers = Integer.parseInt(arg.get("consumers"));
        int expect = Integer.parseInt(arg.get("expect"));
        int produce = Integer.parseInt(arg.getOrDefault("produce", "0"));
        long pause = Long.parseLong(arg.getOrDefault("pause", "0"));
        String poll = arg.getOrDefault("poll", "500");
        long begun = System.currentTimeMillis();
        long deadline = begun + DEADLINE_MS;
        Properties adminProps = new Properties();
        adminProps.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(adminProps)) {
            if (arg.containsKey("from")) {
                Map<TopicPartition, Long> starts = new HashMap<>();
                for (int p = 0; p < partitions; p++) {
                    starts.put(new TopicPartition(topic, p), Long.parseLong(arg.get("from")));
                }
                admin.alterShareGroupOffsets(group, starts).all().get();
            }
            Set<String> accepted = ConcurrentHashMap.newKeySet(), settled = ConcurrentHashMap.newKeySet();
            AtomicBoolean stop = new AtomicBoolean();
            List<Thread> threads = new ArrayList<>();
            for (int c = 0; c < consumers; c++) {
                String name = "c" + c;
                Thread thread = new Thread(() -> consume(bootstrap, topic, group, name, pause, poll, accepted,
                        settled, stop));
                thread.start();
                threads.add(thread);
            }
            describeOnceAssigned(admin, group, consumers, deadline);
            if (produce > 0) {
                Properties producerProps = new Properties();
                producerProps.put("bootstrap.servers", bootstrap);
                producerProps.put("acks", "all");
                try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps,
                        new StringSerializer(), new StringSerializer())) {
                    for (int i = 0; i < produce; i++) {
                        producer.send(new ProducerRecord<>(topic, i % partitions, null, arg.get("tag") + "-" + i));
                    }
                    producer.flush();
                }
                say("produced " + produce);
            }
            // an uncertain acknowledgement (U) may have been applied, its record then never delivered again: the
            // consumers stop when every record is accepted, or every one settled and the group has no lag left
            while (accepted.size() < expect && System.currentTimeMillis() < deadline
                    && !(settled.size() >= expect && noLag(admin, group, topic, partitions))) {
                Thread.sleep(settled.size() >= expect ? 500 : 50);
            }
            stop.set(true);
            for (Thread thread : threads) {
                thread.join();
            }
            Map<TopicPartition, SharePartitionOffsetInfo> offsets = admin.listShareGroupOffsets(
                    Map.of(group, new ListShareGroupOffsetsSpec())).partitionsToOffsetInfo(group).get();
            for (int p = 0; p < partitions; p++) {
                SharePartitionOffsetInfo info = offsets.get(new TopicPartition(topic, p));
                say("offset " + p + " " + (info == null ? "none" : info.startOffset() + " " + info.lag().orElse(-1L)));
            }
            if (arg.containsKey("delete")) {
                admin.deleteShareGroups(List.of(group)).all().get();
                say("deleted");
                try {
                    admin.describeShareGroups(List.of(group)).describedGroups().get(group).get();
                    say("after-delete described");
                } catch (ExecutionException e) {
                    say("after-delete " + e.getCause().getClass().getSimpleName());
                }
            }
            say("done accepted=" + accepted.size() + " ms=" + (System.currentTimeMillis() - begun));
        }
    }

    /** Whether listShareGroupOffsets answers lag 0 for every partition (false while it cannot answer). */
    private static boolean noLag(Admin admin, String group, String topic, int partitions) {
        try {
            Map<TopicPartition, SharePartitionOffsetInfo> offsets = admin.listShareGroupOffsets(
                    Map.of(group, new ListShareGroupOffsetsSpec())).partitionsToOffsetInfo(group).get();
            for (int p = 0; p < partitions; p++) {
                SharePartitionOffsetInfo info = offsets.get(new TopicPartition(topic, p));
                if (info == null || info.lag().orElse(-1L) != 0) {
                    return false;
                }
            }
            return true;
        } catch (Exception e) {
            return false;
        }
    }

    /** describeShareGroups until the group has every consumer as a member with an assignment; then their lines. */
    private static void describeOnceAssigned(Admin admin, String group, int consumers, long deadline)
            throws Exception {
        while (System.currentTimeMillis() < deadline) {
            ShareGroupDescription description = admin.describeShareGroups(List.of(group)).describedGroups()
                    .get(group).get();
            List<ShareMemberDescription> members = new ArrayList<>(description.members());
            if (members.size() == consumers
                    && members.stream().noneMatch(m -> m.assignment().topicPartitions().isEmpty())) {
                for (ShareMemberDescription member : members) {
                    TreeSet<Integer> assigned = new TreeSet<>();
                    member.assignment().topicPartitions().forEach(tp -> assigned.add(tp.partition()));
                    say("member " + member.clientId() + " " + String.join(",",
                            assigned.stream().map(String::valueOf).toList()));
                }
                return;
            }
            Thread.sleep(200);
        }
        say("members never all assigned");
    }

    private static void consume(String bootstrap, String topic, String group, String name, long pause,
                                String maxPollRecords, Set<String> accepted, Set<String> settled,
                                AtomicBoolean stop) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("client.id", name);
        props.put("share.acknowledgement.mode", "explicit");
        props.put("max.poll.records", maxPollRecords);
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(props, new StringDeserializer(),
                new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            while (!stop.get()) {
                List<ConsumerRecord<String, String>> batch = new ArrayList<>();
                try {
                    consumer.poll(Duration.ofMillis(200)).forEach(batch::add);
                } catch (KafkaException e) {
                    say("E " + name + " " + e);
                    continue;
                }
                if (batch.isEmpty()) {
                    continue;
                }
                for (ConsumerRecord<String, String> record : batch) {
                    say("S " + name + " " + record.partition() + " " + record.offset() + " " + record.value() + " "
                            + record.deliveryCount().orElse((short) -1));
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                }
                if (pause > 0) {
                    try {
                        Thread.sleep(pause);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
                Map<TopicIdPartition, Optional<KafkaException>> results;
                try {
                    results = consumer.commitSync(Duration.ofSeconds(10));
                } catch (KafkaException e) {
                    say("E " + name + " " + e);
                    results = Map.of();
                }
                Set<Integer> succeeded = new HashSet<>();
                results.forEach((tp, error) -> {
                    if (error.isEmpty()) {
                        succeeded.add(tp.partition());
                    } else {
                        say("E " + name + " " + tp + " " + error.get());
                    }
                });
                for (ConsumerRecord<String, String> record : batch) {
                    boolean ok = succeeded.contains(record.partition());
                    say((ok ? "A " : "U ") + name + " " + record.partition() + " " + record.offset() + " "
                            + record.value());
                    if (ok) {
                        accepted.add(record.value());
                    }
                    settled.add(record.value());
                }
            }
        }
    }
}
