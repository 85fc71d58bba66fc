/*
 * A smoke test of VIA through the C interface, on an embedded engine with
 * two sessions: a VI connected from another thread and accepted, memory
 * regions, messages of 0, 1, 1000 and 65536 bytes gathered from two
 * segments and scattered into two, completion ids and contents, a
 * completion queue reporting the receives, a region in use that cannot be
 * deregistered, a rejected connection, a connection answered through a
 * request, and a closed peer: the other side's posted receives complete
 * with UNET_VI_PEER_GONE. Prints "ok: N checks" when every check held; on
 * failure prints what failed and exits with status 1.
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unet.h"
#include "check.h"

#define TIMEOUT_US 10000000LL /* 10 s */
#define TAG 7
#define TAG_REQ 8
#define REGION_SIZE (1u << 20)

static void pattern(uint8_t *p, size_t len, unsigned seed) {
    for (size_t k = 0; k < len; k++)
        p[k] = (uint8_t)(seed * 31u + k * 7u + (k >> 8));
}

/* unet_vi_connect on a thread of its own, while the main thread accepts. */
struct connect_job {
    unet_session *session;
    uint64_t tag;
    unet_vi_attrs attrs;
    pthread_t thread;
    unet_vi *vi;
    int rc;
};

static void *connect_main(void *arg) {
    struct connect_job *j = arg;
    j->rc = unet_vi_connect(j->session, NULL, j->tag, &j->attrs, TIMEOUT_US,
                            &j->vi);
    return NULL;
}

static void start_connect(struct connect_job *j, unet_session *s,
                          uint64_t tag, const unet_vi_attrs *attrs) {
    j->session = s;
    j->tag = tag;
    j->attrs = *attrs;
    j->vi = NULL;
    j->rc = 1;
    CHECK_RC(pthread_create(&j->thread, NULL, connect_main, j), 0);
}

static int finish_connect(struct connect_job *j) {
    CHECK_RC(pthread_join(j->thread, NULL), 0);
    return j->rc;
}

int main(void) {
    unet_engine *engine = NULL;
    unet_session *sa = NULL, *sb = NULL;
    unet_vi_server *server = NULL;
    unet_cq *rcq = NULL, *scq = NULL;
    unet_vi *va = NULL, *vb = NULL;
    unet_region *ra = NULL, *rb = NULL;
    unet_vi_completion c;
    struct connect_job job;

    CHECK_RC(unet_engine_start(NULL, NULL, &engine), UNET_OK);
    CHECK_RC(unet_session_embedded(engine, &sa), UNET_OK);
    CHECK_RC(unet_session_embedded(engine, &sb), UNET_OK);

    /* Attributes: defaults, and the checks on them. */
    unet_vi_attrs attrs_a, attrs_b;
    CHECK_RC(unet_vi_attrs_init(&attrs_a), UNET_OK);
    CHECK(attrs_a.reliability == UNET_VI_RELIABLE_DELIVERY);
    CHECK(attrs_a.strict_rnr == 0 && attrs_a.send_queue == 1024 &&
          attrs_a.recv_queue == 1024 && attrs_a.spin_us == 50);
    CHECK(attrs_a.send_cq == NULL && attrs_a.recv_cq == NULL);
    CHECK_RC(unet_vi_attrs_init(NULL), UNET_EINVAL);
    CHECK_RC(unet_cq_create(&rcq), UNET_OK);
    CHECK_RC(unet_cq_create(&scq), UNET_OK);
    attrs_b = attrs_a;
    attrs_a.send_cq = scq;
    attrs_b.recv_cq = rcq;

    /* Nobody listens yet. */
    CHECK_RC(unet_vi_connect(sa, NULL, TAG, &attrs_a, TIMEOUT_US, &va),
             UNET_ENOENDPOINT);
    CHECK(va == NULL);

    /* Listen; a second listener on the same discriminator is refused. */
    CHECK_RC(unet_vi_listen(sb, TAG, &server), UNET_OK);
    {
        unet_vi_server *other = NULL;
        CHECK_RC(unet_vi_listen(sa, TAG, &other), UNET_EINUSE);
        CHECK(other == NULL);
    }
    {
        unet_vi_attrs bad = attrs_b;
        bad.reliability = 3;
        CHECK_RC(unet_vi_server_accept(server, &bad, 0, &vb), UNET_EINVAL);
        CHECK_RC(unet_vi_server_accept(server, NULL, 1000, &vb),
                 UNET_ETIMEDOUT);
    }

    /* Connect from a thread, accept here. */
    start_connect(&job, sa, TAG, &attrs_a);
    CHECK_RC(unet_vi_server_accept(server, &attrs_b, TIMEOUT_US, &vb), UNET_OK);
    CHECK_RC(finish_connect(&job), UNET_OK);
    va = job.vi;
    CHECK(va != NULL && vb != NULL);
    CHECK_RC(unet_vi_state(va), UNET_VI_OK);
    CHECK_RC(unet_vi_state(vb), UNET_VI_OK);
    CHECK_RC(unet_vi_is_direct(va), 1);
    CHECK_RC(unet_vi_is_direct(vb), 1);
    CHECK_RC(unet_vi_is_direct(NULL), UNET_EINVAL);
    int64_t va_id = unet_vi_id(va), vb_id = unet_vi_id(vb);
    CHECK(va_id >= 0 && vb_id >= 0 && va_id != vb_id);

    /* Memory regions. */
    CHECK_RC(unet_register_memory(sa, 0, &ra), UNET_EINVAL);
    CHECK_RC(unet_register_memory(sa, REGION_SIZE, &ra), UNET_OK);
    CHECK_RC(unet_register_memory(sb, REGION_SIZE, &rb), UNET_OK);
    CHECK(unet_region_len(ra) == REGION_SIZE);
    CHECK(unet_region_handle(ra) >= 0 && unet_region_handle(rb) >= 0);
    uint8_t *pa = unet_region_ptr(ra), *pb = unet_region_ptr(rb);
    CHECK(pa != NULL && pb != NULL);
    CHECK(pb[0] == 0 && pb[REGION_SIZE - 1] == 0); /* zeroed */

    /* Nothing posted yet: waits say so at once. */
    CHECK_RC(unet_vi_send_wait(va, TIMEOUT_US, &c), UNET_ENOTPOSTED);
    CHECK_RC(unet_vi_recv_wait(vb, TIMEOUT_US, &c), UNET_ENOTPOSTED);
    CHECK_RC(unet_vi_recv_done(vb, &c), 0);
    CHECK_RC(unet_cq_done(rcq, NULL, NULL), 0);

    /* Messages of every size: two pieces of ra gathered, scattered into
     * two pieces of rb (the first one byte longer than half). */
    static const size_t SIZES[] = {0, 1, 1000, 65536};
    static uint8_t want[65536], got[65536];
    for (unsigned i = 0; i < sizeof SIZES / sizeof SIZES[0]; i++) {
        size_t len = SIZES[i], p1 = len / 3, half = len / 2 + 1;
        pattern(want, len, i + 1);
        memcpy(pa + 100, want, p1);
        memcpy(pa + 300000, want + p1, len - p1);
        memset(pb, 0xee, REGION_SIZE);
        unet_vi_seg rsegs[2] = {{rb, 5, half}, {rb, 500000, len}};
        unet_vi_seg ssegs[2] = {{ra, 100, p1}, {ra, 300000, len - p1}};
        CHECK_RC(unet_vi_post_recv(vb, 1000 + i, rsegs, 2), UNET_OK);
        CHECK_RC(unet_vi_post_send(va, 2000 + i, ssegs, 2), UNET_OK);

        /* The completion queue names vb's receive queue... */
        uint32_t vi = 0;
        int queue = -1;
        CHECK_RC(unet_cq_wait(rcq, TIMEOUT_US, &vi, &queue), UNET_OK);
        CHECK(vi == (uint32_t)vb_id && queue == UNET_VI_QUEUE_RECV);
        /* ... which holds the completion. */
        CHECK_RC(unet_vi_recv_done(vb, &c), 1);
        CHECK(c.id == 1000 + i && c.status == 0 && c.len == len);
        CHECK_RC(unet_vi_recv_done(vb, &c), 0);
        CHECK_RC(unet_cq_done(rcq, &vi, &queue), 0);

        size_t first = half < len ? half : len;
        memcpy(got, pb + 5, first);
        memcpy(got + first, pb + 500000, len - first);
        CHECK(memcmp(got, want, len) == 0);
        /* Nothing written past the message. */
        CHECK(pb[5 + first] == 0xee);
        CHECK(pb[500000 + (len - first)] == 0xee);

        CHECK_RC(unet_vi_send_wait(va, TIMEOUT_US, &c), UNET_OK);
        CHECK(c.id == 2000 + i && c.status == 0 && c.len == len);
        CHECK_RC(unet_cq_wait(scq, TIMEOUT_US, &vi, &queue), UNET_OK);
        CHECK(vi == (uint32_t)va_id && queue == UNET_VI_QUEUE_SEND);
        CHECK_RC(unet_vi_send_done(va, &c), 0);
    }
    {
        unet_vi_stats st;
        CHECK_RC(unet_vi_get_stats(vb, &st), UNET_OK);
        CHECK(st.rx_msgs == 4 && st.rx_bytes == 0 + 1 + 1000 + 65536);
        CHECK(st.errors == 0);
        CHECK_RC(unet_vi_get_stats(va, &st), UNET_OK);
        CHECK(st.tx_msgs == 4);
    }

    /* Bad arguments post nothing. */
    {
        unet_vi_seg nul = {NULL, 0, 1};
        CHECK_RC(unet_vi_post_send(va, 1, &nul, 1), UNET_EINVAL);
        CHECK_RC(unet_vi_post_send(va, 1, NULL, 1), UNET_EINVAL);
        CHECK_RC(unet_vi_post_send(NULL, 1, NULL, 0), UNET_EINVAL);
        CHECK_RC(unet_vi_recv_wait(vb, -2, &c), UNET_EINVAL);
        CHECK_RC(unet_vi_send_wait(va, TIMEOUT_US, &c), UNET_ENOTPOSTED);
    }

    /* A region in use by a posted receive cannot be deregistered, and
     * stays valid; once the receive completed, it can. */
    {
        unet_region *small = NULL;
        CHECK_RC(unet_register_memory(sb, 4096, &small), UNET_OK);
        unet_vi_seg seg = {small, 0, 4096};
        CHECK_RC(unet_vi_post_recv(vb, 3000, &seg, 1), UNET_OK);
        CHECK_RC(unet_region_deregister(small), UNET_EINUSE);
        CHECK(strcmp(unet_status_name(UNET_EINUSE), "UNET_EINUSE") == 0);
        CHECK(strstr(unet_last_error_message(), "posted descriptor") != NULL);
        CHECK(unet_region_len(small) == 4096);
        CHECK(unet_region_ptr(small) != NULL);
        memcpy(pa, "hello", 5);
        unet_vi_seg s = {ra, 0, 5};
        CHECK_RC(unet_vi_post_send(va, 3001, &s, 1), UNET_OK);
        CHECK_RC(unet_vi_recv_wait(vb, TIMEOUT_US, &c), UNET_OK);
        CHECK(c.id == 3000 && c.status == 0 && c.len == 5);
        CHECK(memcmp(unet_region_ptr(small), "hello", 5) == 0);
        CHECK_RC(unet_cq_wait(rcq, TIMEOUT_US, NULL, NULL), UNET_OK);
        CHECK_RC(unet_vi_send_wait(va, TIMEOUT_US, &c), UNET_OK);
        CHECK(c.id == 3001 && c.status == 0);
        CHECK_RC(unet_cq_wait(scq, TIMEOUT_US, NULL, NULL), UNET_OK);
        CHECK_RC(unet_region_deregister(small), UNET_OK);
    }

    /* A send from ordinary memory, copied during the call (a local VI):
     * it completes as a posted one does, and the bytes arrive. */
    {
        char plain[6] = "world";
        unet_vi_seg seg = {rb, 0, 64};
        CHECK_RC(unet_vi_post_recv(vb, 3100, &seg, 1), UNET_OK);
        CHECK_RC(unet_vi_send_copied(va, 3101, plain, 5), UNET_OK);
        memset(plain, 0, sizeof plain); /* already sent */
        CHECK_RC(unet_vi_recv_wait(vb, TIMEOUT_US, &c), UNET_OK);
        CHECK(c.id == 3100 && c.status == 0 && c.len == 5);
        CHECK(memcmp(pb, "world", 5) == 0);
        CHECK_RC(unet_cq_wait(rcq, TIMEOUT_US, NULL, NULL), UNET_OK);
        CHECK_RC(unet_vi_send_wait(va, TIMEOUT_US, &c), UNET_OK);
        CHECK(c.id == 3101 && c.status == 0 && c.len == 5);
        CHECK_RC(unet_cq_wait(scq, TIMEOUT_US, NULL, NULL), UNET_OK);
        CHECK_RC(unet_vi_send_copied(va, 1, NULL, 5), UNET_EINVAL);
        CHECK_RC(unet_vi_send_copied(NULL, 1, plain, 5), UNET_EINVAL);
    }

    /* A rejected connection, answered through a request. */
    {
        unet_vi_request *req = NULL;
        unet_vi_attrs plain;
        CHECK_RC(unet_vi_attrs_init(&plain), UNET_OK);
        start_connect(&job, sa, TAG, &plain);
        CHECK_RC(unet_vi_server_wait_request(server, TIMEOUT_US, &req),
                 UNET_OK);
        CHECK(unet_vi_request_pid(req) == (int64_t)getpid());
        CHECK_RC(unet_vi_request_reliability(req), UNET_VI_RELIABLE_DELIVERY);
        {
            /* On this engine: no address, an empty string. */
            char host[64];
            memset(host, 'x', sizeof host);
            CHECK_RC(unet_vi_request_host(req, host, sizeof host), 0);
            CHECK(host[0] == '\0');
            CHECK_RC(unet_vi_request_host(req, host, 0), UNET_ETOOSMALL);
            CHECK_RC(unet_vi_request_host(NULL, host, sizeof host), UNET_EINVAL);
            CHECK_RC(unet_vi_request_host(req, NULL, 8), UNET_EINVAL);
        }
        CHECK_RC(unet_vi_request_reject(req), UNET_OK);
        CHECK_RC(finish_connect(&job), UNET_EREFUSED);
        CHECK(job.vi == NULL);
    }

    /* A connection accepted through a request, reliable reception; one
     * message, then its sender freed: the receiver's posted receives
     * complete with UNET_VI_PEER_GONE. */
    {
        unet_vi_server *s2 = NULL;
        unet_vi_request *req = NULL;
        unet_vi *vc = NULL, *vd = NULL;
        unet_vi_attrs rr;
        CHECK_RC(unet_vi_attrs_init(&rr), UNET_OK);
        rr.reliability = UNET_VI_RELIABLE_RECEPTION;
        CHECK_RC(unet_vi_listen(sb, TAG_REQ, &s2), UNET_OK);
        start_connect(&job, sa, TAG_REQ, &rr);
        CHECK_RC(unet_vi_server_wait_request(s2, TIMEOUT_US, &req), UNET_OK);
        CHECK_RC(unet_vi_request_reliability(req), UNET_VI_RELIABLE_RECEPTION);
        CHECK_RC(unet_vi_request_accept(req, &rr, &vd), UNET_OK);
        CHECK_RC(finish_connect(&job), UNET_OK);
        vc = job.vi;
        unet_vi_seg s = {ra, 0, 64}, r = {rb, 0, 64};
        CHECK_RC(unet_vi_post_send(vc, 1, &s, 1), UNET_OK);
        /* Reliable reception: not complete before the receive is posted. */
        CHECK_RC(unet_vi_send_wait(vc, 20000, &c), UNET_ETIMEDOUT);
        CHECK_RC(unet_vi_post_recv(vd, 1, &r, 1), UNET_OK);
        CHECK_RC(unet_vi_recv_wait(vd, TIMEOUT_US, &c), UNET_OK);
        CHECK(c.id == 1 && c.status == 0 && c.len == 64);
        CHECK_RC(unet_vi_send_wait(vc, TIMEOUT_US, &c), UNET_OK);
        CHECK(c.id == 1 && c.status == 0 && c.len == 64);
        CHECK_RC(unet_vi_post_recv(vd, 2, &r, 1), UNET_OK);
        CHECK_RC(unet_vi_recv_wait(vd, 1000, &c), UNET_ETIMEDOUT);
        unet_vi_free(vc);
        CHECK_RC(unet_vi_recv_wait(vd, TIMEOUT_US, &c), UNET_OK);
        CHECK(c.id == 2 && c.status == -UNET_VI_PEER_GONE && c.len == 0);
        CHECK_RC(unet_vi_state(vd), UNET_VI_PEER_GONE);
        unet_vi_free(vd);
        unet_vi_server_free(s2);
    }

    /* Close one side of the first pair: the other's posted receives
     * complete with UNET_VI_PEER_GONE, reported by its completion queue. */
    {
        unet_vi_seg r1 = {rb, 0, 64}, r2 = {rb, 64, 64};
        CHECK_RC(unet_vi_post_recv(vb, 4001, &r1, 1), UNET_OK);
        CHECK_RC(unet_vi_post_recv(vb, 4002, &r2, 1), UNET_OK);
        CHECK_RC(unet_vi_close(va), UNET_OK);
        va = NULL;
        for (uint64_t id = 4001; id <= 4002; id++) {
            uint32_t vi = 0;
            int queue = -1;
            CHECK_RC(unet_cq_wait(rcq, TIMEOUT_US, &vi, &queue), UNET_OK);
            CHECK(vi == (uint32_t)vb_id && queue == UNET_VI_QUEUE_RECV);
            CHECK_RC(unet_vi_recv_done(vb, &c), 1);
            CHECK(c.id == id && c.status == -UNET_VI_PEER_GONE);
            CHECK(strcmp(unet_vi_error_name(c.status), "UNET_VI_PEER_GONE") ==
                  0);
        }
        CHECK_RC(unet_vi_state(vb), UNET_VI_PEER_GONE);
        CHECK_RC(unet_vi_recv_wait(vb, TIMEOUT_US, &c), UNET_ENOTPOSTED);
        /* A broken VI completes what is posted at once, with the reason. */
        CHECK_RC(unet_vi_post_recv(vb, 4003, &r1, 1), UNET_OK);
        CHECK_RC(unet_vi_recv_wait(vb, TIMEOUT_US, &c), UNET_OK);
        CHECK(c.id == 4003 && c.status == -UNET_VI_PEER_GONE);
        unet_vi_stats st;
        CHECK_RC(unet_vi_get_stats(vb, &st), UNET_OK);
        CHECK(st.errors == 3);
    }

    CHECK_RC(unet_vi_close(vb), UNET_OK);
    unet_vi_server_free(server);
    unet_region_free(ra);
    unet_region_free(rb);
    unet_cq_free(rcq);
    unet_cq_free(scq);
    unet_session_close(sa);
    unet_session_close(sb);
    unet_engine_stop(engine);
    printf("ok: %u checks\n", checks);
    return 0;
}
