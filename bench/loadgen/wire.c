/* The wire programs' connection, framing and CRC-32C (wire.h). */
#define _GNU_SOURCE
#include "wire.h"

#include "common.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int wire_connect(const char *bootstrap) {
    char host[256];
    const char *colon = strrchr(bootstrap, ':');
    if (colon == NULL || (size_t)(colon - bootstrap) >= sizeof host)
        fail(bootstrap, "--bootstrap must be HOST:PORT");
    memcpy(host, bootstrap, colon - bootstrap);
    host[colon - bootstrap] = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *found;
    int err = getaddrinfo(host, colon + 1, &hints, &found);
    if (err)
        fail(bootstrap, gai_strerror(err));
    int fd = socket(found->ai_family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, found->ai_addr, found->ai_addrlen) < 0)
        fail(bootstrap, strerror(errno));
    freeaddrinfo(found);
    int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    return fd;
}

void wire_send(int fd, const void *data, size_t size) {
    const char *p = data;
    while (size) {
        ssize_t sent = send(fd, p, size, MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR)
            continue;
        if (sent <= 0)
            fail("send", sent < 0 ? strerror(errno) : "connection closed");
        p += sent, size -= (size_t)sent;
    }
}

static void receive_exactly(int fd, unsigned char *p, size_t size) {
    while (size) {
        ssize_t got = recv(fd, p, size, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            fail("receive", got < 0 ? strerror(errno) : "the broker closed the connection");
        p += got, size -= (size_t)got;
    }
}

void wire_receive(int fd, struct frame *frame) {
    unsigned char prefix[4];
    receive_exactly(fd, prefix, 4);
    int32_t size = get32(prefix);
    if (size < 4)
        fail("receive", "an answer shorter than its correlation id");
    if ((size_t)size > frame->capacity) {
        frame->data = realloc(frame->data, (size_t)size);
        if (frame->data == NULL)
            fail("receive", "out of memory");
        frame->capacity = (size_t)size;
    }
    receive_exactly(fd, frame->data, (size_t)size);
    frame->size = (size_t)size;
}

uint32_t crc32c(const unsigned char *data, size_t size) {
    static uint32_t table[256];
    if (table[1] == 0)
        for (uint32_t n = 0; n < 256; n++) {
            uint32_t c = n;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0x82F63B78 ^ (c >> 1) : c >> 1;
            table[n] = c;
        }
    uint32_t crc = 0xFFFFFFFF;
    for (size_t i = 0; i < size; i++)
        crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFF;
}

void wire_setting(rd_kafka_conf_t *conf, const char *name, const char *otherwise, char *value, size_t size) {
    size_t room = size;
    if (rd_kafka_conf_get(conf, name, value, &room) == RD_KAFKA_CONF_OK)
        return;
    rd_kafka_topic_conf_t *topic_conf = rd_kafka_conf_get_default_topic_conf(conf);
    room = size;
    if (topic_conf != NULL && rd_kafka_topic_conf_get(topic_conf, name, value, &room) == RD_KAFKA_CONF_OK)
        return;
    snprintf(value, size, "%s", otherwise);
}
