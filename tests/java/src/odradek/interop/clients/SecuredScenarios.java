/*
 * Kafka 4.3's clients over SASL_SSL with ACLs enforced: what user alice is refused while no ACL names her (each
 * refusal's exception class), then what she may do once the super user admin grants her ACLs through the
 * AdminClient. One JSON line per scenario (Scenarios.run): "denied", "granted".
 *
 * Usage: SecuredScenarios <bootstrap> <admin properties file> <alice properties file> <topic prefix> <scenario,...>
 */
package odradek.interop.clients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class SecuredScenarios {
    private final Properties admin;
    private final Properties alice;
    private final String topic;
    private final String group;

    private SecuredScenarios(Properties admin, Properties alice, String prefix) {
        this.admin = admin;
        this.alice = alice;
        this.topic = prefix + "-secured";
        this.group = prefix + "-secured-group";
    }

    public static void main(String[] args) throws Exception {
        SecuredScenarios scenarios = new SecuredScenarios(Scenarios.clientProperties(args[0], args[1]),
                Scenarios.clientProperties(args[0], args[2]), args[3]);
        Map<String, Scenarios.Body> all = new LinkedHashMap<>();
        all.put("denied", scenarios::denied);
        all.put("granted", scenarios::granted);
        for (String name : args[4].split(",")) {
            Scenarios.run(name, all.get(name));
        }
    }

    private KafkaProducer<String, String> producer(Object... settings) {
        return new KafkaProducer<>(Scenarios.with(alice, settings), new StringSerializer(), new StringSerializer());
    }

    private KafkaConsumer<String, String> consumer(Object... settings) {
        Properties properties = Scenarios.with(alice, ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest",
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false", "default.api.timeout.ms", 20000);
        return new KafkaConsumer<>(Scenarios.with(properties, settings), new StringDeserializer(),
                new StringDeserializer());
    }

    /** The topic made by admin; what alice is refused with no ACL naming her. */
    private void denied(Map<String, Object> d) throws Exception {
        try (Admin superUser = Admin.create(admin)) {
            superUser.createTopics(List.of(new NewTopic(topic, Optional.of(1), Optional.empty()))).all().get();
        }
        TopicPartition partition = new TopicPartition(topic, 0);
        try (KafkaProducer<String, String> producer = producer("max.block.ms", 20000, "delivery.timeout.ms", 20000,
                "request.timeout.ms", 10000)) {
            d.put("produce", Scenarios.thrown(x -> producer.send(new ProducerRecord<>(topic, "v")).get()));
        }
        try (KafkaProducer<String, String> producer = producer("transactional.id", topic + "-txn",
                "max.block.ms", 20000)) {
            d.put("init_transactions", Scenarios.thrown(x -> producer.initTransactions()));
        }
        try (KafkaConsumer<String, String> consumer = consumer()) {
            consumer.assign(List.of(partition));
            d.put("fetch", Scenarios.thrown(x -> {
                long deadline = System.currentTimeMillis() + 20000;
                while (System.currentTimeMillis() < deadline) {
                    consumer.poll(Duration.ofMillis(200));
                }
            }));
        }
        try (KafkaConsumer<String, String> consumer = consumer(ConsumerConfig.GROUP_ID_CONFIG, group)) {
            d.put("group_commit", Scenarios.thrown(x -> consumer.commitSync(Map.of(partition,
                    new OffsetAndMetadata(0)))));
        }
        try (Admin admin = Admin.create(Scenarios.with(alice, "default.api.timeout.ms", 20000,
                "request.timeout.ms", 15000))) {
            d.put("list_topics_sees_topic", admin.listTopics().names().get().contains(topic));
            d.put("describe_acls", Scenarios.thrown(x -> admin.describeAcls(AclBindingFilter.ANY).values().get()));
            d.put("create_topic", Scenarios.thrown(x -> admin.createTopics(List.of(new NewTopic(topic + "-alice",
                    Optional.of(1), Optional.empty()))).all().get()));
            d.put("describe_group", Scenarios.thrown(x -> admin.describeConsumerGroups(List.of(group)).all().get()));
        }
    }

    /** admin grants alice the topic (write, read, describe) and the group (read): she produces, consumes in the
     * group and commits. */
    private void granted(Map<String, Object> d) throws Exception {
        List<AclBinding> acls = new ArrayList<>();
        for (AclOperation operation : List.of(AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)) {
            acls.add(new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                    new AccessControlEntry("User:alice", "*", operation, AclPermissionType.ALLOW)));
        }
        acls.add(new AclBinding(new ResourcePattern(ResourceType.GROUP, group, PatternType.LITERAL),
                new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)));
        try (Admin superUser = Admin.create(admin)) {
            superUser.createAcls(acls).all().get();
            d.put("acls_described", superUser.describeAcls(new AclBindingFilter(
                    new org.apache.kafka.common.resource.ResourcePatternFilter(ResourceType.ANY, null,
                            PatternType.ANY), new org.apache.kafka.common.acl.AccessControlEntryFilter("User:alice",
                    null, AclOperation.ANY, AclPermissionType.ANY))).values().get().size());
        }
        try (KafkaProducer<String, String> producer = producer()) {
            for (int i = 0; i < 10; i++) {
                producer.send(new ProducerRecord<>(topic, "v" + i)).get();
            }
        }
        TopicPartition partition = new TopicPartition(topic, 0);
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = consumer(ConsumerConfig.GROUP_ID_CONFIG, group)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60000;
            while (values.size() < 10 && System.currentTimeMillis() < deadline) {
                consumer.poll(Duration.ofMillis(200)).forEach(record -> values.add(record.value()));
            }
            consumer.commitSync();
            d.put("committed", consumer.committed(java.util.Set.of(partition)).get(partition).offset());
        }
        d.put("consumed", values);
        try (Admin admin = Admin.create(Scenarios.with(alice, "default.api.timeout.ms", 20000,
                "request.timeout.ms", 15000))) {
            d.put("list_topics_sees_topic", admin.listTopics().names().get().contains(topic));
            d.put("describe_group_state", admin.describeConsumerGroups(List.of(group)).all().get().get(group)
                    .groupState().toString());
        }
    }
}
