/* The floor under a broker's cost per small request on this machine: a server that does nothing but what any broker
 * must do for a request, so bench/request_cost.py can measure it beside the brokers with the same clients.
 *
 * One thread, epoll, non-blocking sockets. For each readable connection it receives once, and for every whole frame
 * in what it holds (a 4-byte big-endian size, then the request) it appends a fixed answer: a size, the request's
 * correlation id (bytes 4-7 of the request header) and ANSWER_BODY zero bytes, about a Produce v9 answer's length.
 * Everything answered in one receive goes out in one send. No request is decoded, nothing is stored: what it costs
 * per request is the kernel's loopback TCP, the scheduler's wake-ups and the loop, which no broker avoids.
 *
 * usage: floor-server PORT   (prints "ready" once listening; runs until killed) */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define ANSWER_BODY 52
#define BUFFER_BYTES (1 << 20)
#define MAX_EVENTS 64

struct connection {
    int fd;
    size_t held;           /* bytes of unanswered frames at the start of `in` */
    unsigned char in[BUFFER_BYTES];
    unsigned char out[BUFFER_BYTES];
};

static void fail(const char *what) {
    perror(what);
    exit(1);
}

static void put_u32(unsigned char *at, uint32_t value) {
    at[0] = value >> 24;
    at[1] = value >> 16;
    at[2] = value >> 8;
    at[3] = value;
}

static uint32_t get_u32(const unsigned char *at) {
    return (uint32_t)at[0] << 24 | (uint32_t)at[1] << 16 | (uint32_t)at[2] << 8 | at[3];
}

static int send_all(int fd, const unsigned char *data, size_t length) {
    while (length) {
        ssize_t sent = send(fd, data, length, MSG_NOSIGNAL);
        if (sent < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue; /* the clients keep few answers outstanding: the socket's buffer drains at once */
            return -1;
        }
        data += sent;
        length -= (size_t)sent;
    }
    return 0;
}

/* Receive once and answer every whole frame; -1 when the connection is done with. */
static int serve(struct connection *c) {
    ssize_t got = recv(c->fd, c->in + c->held, BUFFER_BYTES - c->held, 0);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR))
        return -1;
    if (got < 0)
        return 0;
    c->held += (size_t)got;
    size_t position = 0;
    for (;;) {
        size_t answered = 0;
        while (c->held - position >= 12 && answered + 8 + ANSWER_BODY <= BUFFER_BYTES) {
            uint32_t size = get_u32(c->in + position);
            if (size + 4 > BUFFER_BYTES || size < 8)
                return -1;
            if (c->held - position - 4 < size)
                break;
            put_u32(c->out + answered, 4 + ANSWER_BODY);
            memcpy(c->out + answered + 4, c->in + position + 8, 4); /* the correlation id */
            memset(c->out + answered + 8, 0, ANSWER_BODY);
            answered += 8 + ANSWER_BODY;
            position += 4 + size;
        }
        if (!answered)
            break;
        if (send_all(c->fd, c->out, answered))
            return -1;
    }
    memmove(c->in, c->in + position, c->held - position);
    c->held -= position;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: floor-server PORT\n");
        return 2;
    }
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(listener, (struct sockaddr *)&address, sizeof address) || listen(listener, 128))
        fail("listen");
    int poller = epoll_create1(0);
    struct epoll_event event = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(poller, EPOLL_CTL_ADD, listener, &event))
        fail("epoll_ctl");
    printf("ready\n");
    fflush(stdout);
    struct epoll_event events[MAX_EVENTS];
    for (;;) {
        int ready = epoll_wait(poller, events, MAX_EVENTS, -1);
        if (ready < 0 && errno != EINTR)
            fail("epoll_wait");
        for (int i = 0; i < ready; i++) {
            struct connection *c = events[i].data.ptr;
            if (c == NULL) {
                int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK);
                if (fd < 0)
                    continue;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                c = calloc(1, sizeof *c);
                if (c == NULL)
                    fail("calloc");
                c->fd = fd;
                struct epoll_event joined = {.events = EPOLLIN, .data.ptr = c};
                epoll_ctl(poller, EPOLL_CTL_ADD, fd, &joined);
            } else if (serve(c) < 0) {
                close(c->fd);
                free(c);
            }
        }
    }
}
