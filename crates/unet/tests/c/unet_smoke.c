/*
 * A smoke test of the C interface: an embedded engine, two endpoints, a
 * direct and an engine channel carrying messages of several sizes, the
 * descriptor level on an endpoint without managed buffers, and error
 * codes. Prints "ok" on success; on failure prints what failed and exits
 * with status 1.
 */
/* setenv */
#define _POSIX_C_SOURCE 200112L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unet.h"
#include "check.h"

#define TIMEOUT_NS 10000000000LL /* 10 s */

static void pattern(uint8_t *p, size_t len, unsigned seed) {
    for (size_t k = 0; k < len; k++)
        p[k] = (uint8_t)(seed * 31u + k * 7u);
}

/* unet_recv_many's callback: checks each message against the pattern of
 * its index and its channel, and stops after the fifth. */
struct batch_check {
    unsigned next;
    uint16_t channel;
    int bad;
};

static int check_batch(void *ctx, const void *data, size_t len,
                       uint16_t channel) {
    struct batch_check *c = ctx;
    uint8_t want[200];
    size_t n = 10 + c->next * 20;
    pattern(want, n, 100 + c->next);
    if (len != n || channel != c->channel || memcmp(data, want, n) != 0)
        c->bad = 1;
    c->next++;
    return c->next != 5;
}

/* Wait for the next event on ep. */
static unet_event next_event(unet_endpoint *ep) {
    unet_event ev;
    for (int i = 0; i < 1000; i++) {
        int rc = unet_poll_event(ep, &ev);
        if (rc == 1)
            return ev;
        if (rc != 0)
            fail("unet_poll_event", rc, __LINE__);
        unet_wait(ep, 10000000);
    }
    fail("no event arrived", 0, __LINE__);
    return ev;
}

static const size_t SIZES[] = {8, 56, 57, 5000};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

/* Send messages of every size from a on a_ch; b receives them on b_ch,
 * checks them and sends them back. */
static void exchange(unet_endpoint *a, uint16_t a_ch, unet_endpoint *b,
                     uint16_t b_ch, unsigned seed) {
    static uint8_t msg[8192], buf[8192];
    for (size_t i = 0; i < NSIZES; i++) {
        size_t len = SIZES[i], got = 0;
        uint16_t ch = 0xffff;
        pattern(msg, len, seed + (unsigned)i);
        CHECK_RC(unet_send(a, a_ch, msg, len), UNET_OK);
        CHECK_RC(unet_recv(b, buf, sizeof buf, TIMEOUT_NS, &got, &ch),
                 UNET_OK);
        CHECK(got == len);
        CHECK(ch == b_ch);
        CHECK(memcmp(buf, msg, len) == 0);
        CHECK_RC(unet_send(b, b_ch, buf, got), UNET_OK);
        memset(buf, 0, sizeof buf);
        CHECK_RC(unet_recv(a, buf, sizeof buf, TIMEOUT_NS, &got, &ch),
                 UNET_OK);
        CHECK(got == len);
        CHECK(ch == a_ch);
        CHECK(memcmp(buf, msg, len) == 0);
    }
}

int main(void) {
    unet_engine *engine = NULL;
    unet_session *session = NULL;
    unet_endpoint *a = NULL, *b = NULL, *c = NULL;
    char addr[32];
    uint16_t direct_ch = 0, engine_ch = 0;

    CHECK_RC(unet_engine_start(NULL, NULL, &engine), UNET_OK);
    CHECK_RC(unet_engine_udp_port(engine), 0);
    CHECK_RC(unet_session_embedded(engine, &session), UNET_OK);
    CHECK_RC(unet_endpoint_create(session, NULL, &a), UNET_OK);
    CHECK_RC(unet_endpoint_create(session, NULL, &b), UNET_OK);
    int64_t a_id = unet_endpoint_id(a), b_id = unet_endpoint_id(b);
    CHECK(a_id >= 0 && b_id >= 0 && a_id != b_id);

    /* A direct channel and an engine channel from a to b. */
    snprintf(addr, sizeof addr, "%" PRId64, b_id);
    CHECK_RC(unet_open_channel(a, addr, UNET_PATH_DIRECT, &direct_ch), UNET_OK);
    unet_event ev = next_event(b);
    CHECK(ev.kind == UNET_EVENT_CHANNEL_OPENED);
    CHECK(ev.direct == 1);
    CHECK(ev.peer_endpoint == (uint32_t)a_id);
    CHECK(ev.peer_family == 0);
    uint16_t b_direct = ev.channel;

    snprintf(addr, sizeof addr, "local/%" PRId64, b_id);
    CHECK_RC(unet_open_channel(a, addr, UNET_PATH_ENGINE, &engine_ch), UNET_OK);
    CHECK(engine_ch != direct_ch);
    ev = next_event(b);
    CHECK(ev.kind == UNET_EVENT_CHANNEL_OPENED);
    CHECK(ev.direct == 0);
    CHECK(ev.peer_endpoint == (uint32_t)a_id);
    uint16_t b_engine = ev.channel;

    exchange(a, direct_ch, b, b_direct, 1);
    exchange(a, engine_ch, b, b_engine, 100);

    /* A buffer too small: the needed size comes back, the message stays. */
    {
        static uint8_t msg[5000], buf[5000];
        size_t got = 0;
        uint16_t ch = 0;
        pattern(msg, sizeof msg, 7);
        CHECK_RC(unet_send(a, direct_ch, msg, sizeof msg), UNET_OK);
        CHECK_RC(unet_wait(b, TIMEOUT_NS), 1);
        CHECK_RC(unet_try_recv(b, buf, 100, &got, &ch), UNET_ETOOSMALL);
        CHECK(got == sizeof msg);
        CHECK_RC(unet_try_recv(b, buf, sizeof buf, &got, &ch), 1);
        CHECK(got == sizeof msg && ch == b_direct);
        CHECK(memcmp(buf, msg, sizeof msg) == 0);
        CHECK_RC(unet_try_recv(b, buf, sizeof buf, &got, &ch), 0);
    }

    /* Batches: eight messages in one call, taken five and three. */
    {
        static uint8_t data[8][200], buf[256];
        unet_msg msgs[8];
        size_t sent = 0, count = 0;
        struct batch_check c = {0, b_direct, 0};
        for (unsigned i = 0; i < 8; i++) {
            msgs[i].len = 10 + i * 20;
            msgs[i].data = data[i];
            pattern(data[i], msgs[i].len, 100 + i);
        }
        CHECK_RC(unet_send_many(a, direct_ch, msgs, 8, &sent), UNET_OK);
        CHECK(sent == 8);
        CHECK_RC(unet_recv_many(b, buf, sizeof buf, 100, check_batch, &c,
                                &count),
                 UNET_OK);
        CHECK(count == 5 && c.next == 5 && !c.bad);
        CHECK_RC(unet_recv_many(b, buf, sizeof buf, 100, check_batch, &c,
                                &count),
                 UNET_OK);
        CHECK(count == 3 && c.next == 8 && !c.bad);
        CHECK_RC(unet_recv_many(b, buf, sizeof buf, 100, check_batch, &c,
                                &count),
                 UNET_OK);
        CHECK(count == 0);
        /* Too large for the buffer: the batch ends before it. */
        CHECK_RC(unet_send_many(a, direct_ch, msgs + 7, 1, &sent), UNET_OK);
        CHECK_RC(unet_recv_many(b, buf, 100, 100, check_batch, &c, &count),
                 UNET_ETOOSMALL);
        CHECK(count == 0);
        c.next = 7;
        CHECK_RC(unet_recv_many(b, buf, sizeof buf, 100, check_batch, &c,
                                &count),
                 UNET_OK);
        CHECK(count == 1 && c.next == 8 && !c.bad);
        msgs[0].data = NULL;
        CHECK_RC(unet_send_many(a, direct_ch, msgs, 8, &sent), UNET_EINVAL);
        CHECK(sent == 0);
        CHECK_RC(unet_send_many(a, 999, msgs + 1, 1, &sent), UNET_EBADCHAN);
        CHECK_RC(unet_recv_many(b, buf, sizeof buf, 1, NULL, NULL, &count),
                 UNET_EINVAL);
    }

    /* Error codes. */
    CHECK_RC(unet_send(a, 999, "x", 1), UNET_EBADCHAN);
    CHECK(strcmp(unet_status_name(UNET_EBADCHAN), "UNET_EBADCHAN") == 0);
    CHECK(strlen(unet_last_error_message()) > 0);
    CHECK_RC(unet_send(NULL, direct_ch, "x", 1), UNET_EINVAL);
    CHECK_RC(unet_endpoint_set_accept(b, 1), UNET_OK);
    {
        unet_session *none = NULL;
        CHECK_RC(unet_session_connect("/nonexistent/unet.sock", &none),
                 UNET_EIO);
        CHECK(none == NULL);
        /* NULL: the socket UNET_SOCKET names (else /tmp/unet.sock). */
        CHECK(setenv("UNET_SOCKET", "/nonexistent/named-by-env.sock", 1) == 0);
        CHECK_RC(unet_session_connect(NULL, &none), UNET_EIO);
        CHECK(strstr(unet_last_error_message(), "named-by-env.sock") != NULL);
        CHECK_RC(unet_session_connect_timeout("/nonexistent/unet.sock", 100,
                                              &none),
                 UNET_EIO);
        CHECK_RC(unet_session_connect_timeout(NULL, -1, &none), UNET_EIO);
        CHECK(strstr(unet_last_error_message(), "named-by-env.sock") != NULL);
        CHECK(unsetenv("UNET_SOCKET") == 0);
        CHECK(none == NULL);
    }
    CHECK_RC(unet_send(a, direct_ch, NULL, 1), UNET_EINVAL);
    CHECK_RC(unet_open_channel(a, "9999", UNET_PATH_AUTO, &direct_ch),
             UNET_ENOENDPOINT);
    CHECK_RC(unet_open_channel(a, "not an address", UNET_PATH_AUTO,
                               &direct_ch),
             UNET_EINVAL);
    {
        size_t got = 0;
        uint8_t buf[8];
        CHECK_RC(unet_recv(b, buf, sizeof buf, 1000000, &got, NULL),
                 UNET_ETIMEDOUT);
    }

    /* A buffered endpoint (two-case delivery): 64 messages to a receive
     * queue of 4, read only after they were all sent, arrive in order. */
    {
        unet_endpoint_config bcfg;
        unet_endpoint *bu = NULL, *bad = NULL;
        CHECK_RC(unet_endpoint_config_init(&bcfg), UNET_OK);
        bcfg.recv_cap = 4;
        CHECK_RC(unet_endpoint_create_buffered(session, &bcfg,
                                               (uint64_t)2 << 30, &bad),
                 UNET_EINVAL);
        CHECK_RC(unet_endpoint_create_buffered(session, &bcfg, 0, &bu),
                 UNET_OK);
        snprintf(addr, sizeof addr, "%" PRId64, unet_endpoint_id(bu));
        uint16_t to_bu = 0;
        CHECK_RC(unet_open_channel(a, addr, UNET_PATH_ENGINE, &to_bu), UNET_OK);
        for (unsigned i = 0; i < 64; i++) {
            static uint8_t bmsg[300];
            pattern(bmsg, sizeof bmsg, 300 + i);
            CHECK_RC(unet_send(a, to_bu, bmsg, sizeof bmsg), UNET_OK);
        }
        for (unsigned i = 0; i < 64; i++) {
            static uint8_t bmsg[300], bbuf[512];
            size_t bgot = 0;
            uint16_t bch = 0;
            pattern(bmsg, sizeof bmsg, 300 + i);
            CHECK_RC(unet_recv(bu, bbuf, sizeof bbuf, TIMEOUT_NS, &bgot, &bch),
                     UNET_OK);
            CHECK(bgot == sizeof bmsg && memcmp(bbuf, bmsg, bgot) == 0);
        }
        unet_endpoint_close(bu);
    }

    /* The descriptor level, on an endpoint that manages its own buffers:
     * the lower half of its buffer area is posted as receive buffers, the
     * upper half holds outgoing messages. */
    unet_endpoint_config cfg;
    CHECK_RC(unet_endpoint_config_init(&cfg), UNET_OK);
    cfg.managed_buffers = 0;
    cfg.buffer_size = 4096;
    cfg.buffer_area_size = 64 * 4096;
    CHECK_RC(unet_endpoint_create(session, &cfg, &c), UNET_OK);
    unet_endpoint_config got_cfg;
    CHECK_RC(unet_endpoint_get_config(c, &got_cfg), UNET_OK);
    CHECK(got_cfg.buffer_size == 4096 && got_cfg.buffer_area_size == 64 * 4096);
    for (uint32_t i = 0; i < 32; i++)
        CHECK_RC(unet_post_free(c, i * 4096), UNET_OK);
    CHECK_RC(unet_post_free(c, 64 * 4096), UNET_EBADBUF);
    CHECK_RC(unet_write_buffer(c, 64 * 4096 - 4, "12345678", 8), UNET_EBADBUF);

    int64_t c_id = unet_endpoint_id(c);
    snprintf(addr, sizeof addr, "%" PRId64, c_id);
    uint16_t a_to_c = 0;
    CHECK_RC(unet_open_channel(a, addr, UNET_PATH_ENGINE, &a_to_c), UNET_OK);
    ev = next_event(c);
    CHECK(ev.kind == UNET_EVENT_CHANNEL_OPENED && ev.direct == 0);
    uint16_t c_from_a = ev.channel;

    for (size_t i = 0; i < NSIZES; i++) {
        static uint8_t msg[8192], buf[8192];
        size_t len = SIZES[i];
        pattern(msg, len, 200 + (unsigned)i);
        CHECK_RC(unet_send(a, a_to_c, msg, len), UNET_OK);
        unet_recv_desc d;
        int rc = 0;
        for (int k = 0; k < 1000 && rc == 0; k++) {
            rc = unet_poll_recv_desc(c, &d);
            if (rc == 0)
                unet_wait(c, 10000000);
        }
        CHECK_RC(rc, 1);
        CHECK(d.len == len);
        CHECK(d.channel == c_from_a);
        if (d.flags & UNET_RECV_INLINE) {
            CHECK(len <= UNET_INLINE_MAX);
            CHECK(memcmp(d.data, msg, len) == 0);
        } else {
            CHECK(d.nbufs == (len + 4095) / 4096);
            for (unsigned k = 0; k < d.nbufs; k++) {
                uint32_t off = unet_recv_desc_offset(&d, k);
                size_t n = len - k * 4096 < 4096 ? len - k * 4096 : 4096;
                CHECK(off < 32 * 4096 && off % 4096 == 0);
                CHECK_RC(unet_read_buffer(c, off, buf + k * 4096, n), UNET_OK);
                CHECK_RC(unet_post_free(c, off), UNET_OK);
            }
            CHECK(memcmp(buf, msg, len) == 0);
        }
    }

    /* Transmit from the buffer area: c to b over the engine. */
    snprintf(addr, sizeof addr, "%" PRId64, b_id);
    uint16_t c_to_b = 0;
    CHECK_RC(unet_open_channel(c, addr, UNET_PATH_ENGINE, &c_to_b), UNET_OK);
    ev = next_event(b);
    CHECK(ev.kind == UNET_EVENT_CHANNEL_OPENED &&
          ev.peer_endpoint == (uint32_t)c_id);
    uint16_t b_from_c = ev.channel;
    CHECK_RC(unet_send(c, c_to_b, "x", 1), UNET_EINVAL); /* unmanaged */
    for (size_t i = 0; i < NSIZES; i++) {
        static uint8_t msg[8192], buf[8192];
        size_t len = SIZES[i], got = 0;
        uint16_t ch = 0;
        uint32_t off = 32 * 4096 + (uint32_t)i * 8192;
        uint64_t pos = 0;
        pattern(msg, len, 300 + (unsigned)i);
        CHECK_RC(unet_write_buffer(c, off, msg, len), UNET_OK);
        CHECK_RC(unet_push_send(c, c_to_b, off, (uint32_t)len, &pos), UNET_OK);
        CHECK_RC(unet_recv(b, buf, sizeof buf, TIMEOUT_NS, &got, &ch), UNET_OK);
        CHECK(got == len && ch == b_from_c);
        CHECK(memcmp(buf, msg, len) == 0);
        int st = 0;
        for (int k = 0; k < 1000 && st == 0; k++) {
            st = unet_send_status(c, pos);
            if (st == 0)
                unet_wait(c, 1000000);
        }
        CHECK_RC(st, 1);
    }
    CHECK_RC(unet_push_send(c, c_to_b, 64 * 4096 - 8, 16, NULL), UNET_EBADBUF);

    /* Closing: the peer sees the channel gone. */
    CHECK_RC(unet_close_channel(a, engine_ch), UNET_OK);
    ev = next_event(b);
    CHECK(ev.kind == UNET_EVENT_PEER_GONE && ev.channel == b_engine);

    /* A process may hold a quarter of the engine's 256 endpoint slots:
     * beyond, UNET_EQUOTA (a limit of this process, not a shortage of the
     * engine). a, b and c are three of its 64. */
    {
        unet_endpoint *more[64];
        unet_endpoint_config small;
        CHECK_RC(unet_endpoint_config_init(&small), UNET_OK);
        small.managed_buffers = 0;
        small.buffer_size = 4096;
        small.buffer_area_size = 4096;
        small.send_cap = small.recv_cap = small.free_cap = small.event_cap = 2;
        int n = 0, rc = UNET_OK;
        while (n < 64 && (rc = unet_endpoint_create(session, &small,
                                                    &more[n])) == UNET_OK)
            n++;
        CHECK(n == 61);
        CHECK_RC(rc, UNET_EQUOTA);
        CHECK(strcmp(unet_status_name(UNET_EQUOTA), "UNET_EQUOTA") == 0);
        CHECK(strstr(unet_last_error_message(), "endpoints") != NULL);
        unet_endpoint_close(more[--n]);
        CHECK_RC(unet_endpoint_create(session, &small, &more[n]), UNET_OK);
        n++;
        while (n > 0)
            unet_endpoint_close(more[--n]);
    }

    unet_endpoint_close(c);
    unet_endpoint_close(b);
    unet_endpoint_close(a);
    unet_session_close(session);
    unet_engine_stop(engine);
    puts("ok");
    return 0;
}
