/* The load generator's shared parts (see common.h): kept apart so that the producer and the consumer parse, time
 * and report in exactly one way, which the Python side (bench/loadgen/__init__.py) reads. */
#define _GNU_SOURCE
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

void fail(const char *what, const char *why) {
    fprintf(stderr, "loadgen: %s: %s\n", what, why);
    exit(2);
}

rd_kafka_conf_t *parse_options(int argc, char **argv, struct options *opts, const char *usage) {
    char error[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    memset(opts, 0, sizeof *opts);
    opts->size = 100;
    opts->members = 1;
    opts->latency_warmup = -1;
    for (int i = 1; i < argc; i++) {
        const char *name = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (value == NULL) {
            fprintf(stderr, "%s", usage);
            fail(name, "needs a value");
        }
        i++;
        if (strcmp(name, "-X") == 0) {
            char *setting = strdup(value);
            char *equals = strchr(setting, '=');
            if (equals == NULL)
                fail(value, "-X takes name=value");
            *equals = '\0';
            if (rd_kafka_conf_set(conf, setting, equals + 1, error, sizeof error) != RD_KAFKA_CONF_OK)
                fail(value, error);
            free(setting);
        } else if (strcmp(name, "--bootstrap") == 0) {
            opts->bootstrap = value;
        } else if (strcmp(name, "--topic") == 0) {
            opts->topic = value;
        } else if (strcmp(name, "--records") == 0) {
            opts->records = atol(value);
        } else if (strcmp(name, "--size") == 0) {
            opts->size = atoi(value);
        } else if (strcmp(name, "--keys") == 0) {
            opts->keys = atoi(value);
        } else if (strcmp(name, "--member") == 0) {
            opts->member = atoi(value);
        } else if (strcmp(name, "--members") == 0) {
            opts->members = atoi(value);
        } else if (strcmp(name, "--rate") == 0) {
            opts->rate = atof(value);
        } else if (strcmp(name, "--latency") == 0) {
            opts->latency_warmup = atol(value);
        } else if (strcmp(name, "--partitions") == 0) {
            opts->partitions = atoi(value);
        } else {
            fprintf(stderr, "%s", usage);
            fail(name, "unknown option");
        }
    }
    if (opts->bootstrap == NULL || opts->topic == NULL) {
        fprintf(stderr, "%s", usage);
        fail("options", "--bootstrap and --topic are required");
    }
    if (opts->size < 16 || opts->members < 1 || opts->member < 0 || opts->member >= opts->members ||
        opts->records <= 0 || opts->keys < 0 || opts->rate < 0 || opts->partitions < 0)
        fail("options", "--size >= 16, --records > 0, --keys >= 0, --rate >= 0 and 0 <= --member < --members");
    if (rd_kafka_conf_set(conf, "bootstrap.servers", opts->bootstrap, error, sizeof error) != RD_KAFKA_CONF_OK)
        fail("bootstrap.servers", error);
    return conf;
}

double now_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec + now.tv_nsec / 1e9;
}

struct cpu_times cpu_now(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    struct cpu_times times = {usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6,
                              usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6};
    return times;
}

static void json_string(const char *text) {
    putchar('"');
    for (const char *c = text; *c; c++) {
        if (*c == '"' || *c == '\\')
            putchar('\\');
        putchar((unsigned char)*c < 0x20 ? ' ' : *c);
    }
    putchar('"');
}

void report(long records, long long bytes, double started, double ended, struct cpu_times before,
            struct cpu_times after, long errors, const char *first_error, const long *partition_records,
            int partitions, const char *extra) {
    double seconds = ended > started ? ended - started : 1e-9;
    double user = after.user - before.user, system = after.system - before.system;
    printf("{\"records\": %ld, \"bytes\": %lld, \"started\": %.6f, \"ended\": %.6f, \"seconds\": %.6f, "
           "\"records_per_s\": %.1f, \"mb_per_s\": %.3f, \"cpu_user\": %.4f, \"cpu_system\": %.4f, "
           "\"cpu_per_record_us\": %.4f, \"errors\": %ld, \"first_error\": ",
           records, bytes, started, ended, seconds, records / seconds, bytes / seconds / (1 << 20), user, system,
           records ? (user + system) / records * 1e6 : 0.0, errors);
    json_string(first_error ? first_error : "");
    printf(", \"librdkafka\": ");
    json_string(rd_kafka_version_str());
    printf(", \"partition_records\": [");
    for (int p = 0; p < partitions; p++)
        printf(p ? ", %ld" : "%ld", partition_records[p]);
    printf("]%s}\n", extra);
    fflush(stdout);
}
