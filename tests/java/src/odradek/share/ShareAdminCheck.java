package odradek.share;

import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.common.TopicPartition;

/**
 * Kafka 4.3's Admin on share groups, as kafka-share-groups.sh calls it: args bootstrap, topic, group. It sets the
 * group's start offset of partition 0 to 2 (which makes the group), lists its offsets, describes it, deletes the
 * topic's offsets and then the group, and prints one line per step.
 */
public final class ShareAdminCheck {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        TopicPartition partition = new TopicPartition(topic, 0);
        try (Admin admin = Admin.create(props)) {
            admin.alterShareGroupOffsets(group, Map.of(partition, 2L)).all().get();
            System.out.println("altered");
            SharePartitionOffsetInfo info = admin.listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                    .partitionsToOffsetInfo(group).get().get(partition);
            System.out.println("offsets start=" + info.startOffset() + " lag=" + info.lag().orElse(-1L));
            ShareGroupDescription description = admin.describeShareGroups(List.of(group)).describedGroups()
                    .get(group).get();
            System.out.println("described state=" + description.groupState() + " members="
                    + description.members().size());
            admin.deleteShareGroupOffsets(group, Set.of(topic)).all().get();
            Map<TopicPartition, SharePartitionOffsetInfo> left = admin.listShareGroupOffsets(
                    Map.of(group, new ListShareGroupOffsetsSpec())).partitionsToOffsetInfo(group).get();
            System.out.println("offsets-deleted left=" + left.size());
            admin.deleteShareGroups(List.of(group)).all().get();
            System.out.println("deleted");
            try {
                admin.describeShareGroups(List.of(group)).describedGroups().get(group).get();
                System.out.println("after-delete described");
            } catch (java.util.concurrent.ExecutionException e) {
                System.out.println("after-delete " + e.getCause().getClass().getSimpleName());
            }
        }
    }
}
