/*
 * A smoke test of UDM through the C interface, on an embedded engine: a
 * job of two nodes made from its ticket string, inject / injectc /
 * extract / peek / dispose / the flag / wait and their errors, then node 1
 * with a handler that answers every message (run on its handler thread)
 * while node 1's main code, on a thread of its own, makes atomic sections
 * that no handler may overlap; then a dispose-failure and a message for no
 * handler (reported, the message kept), atomicity-extend (the deferred
 * work done at endatom), the counters, and leaving; then a job across two
 * engines, its rank 1 joined through the second (unet_udm_join_at). Prints "ok: N checks"
 * when every check held; on failure prints what failed and exits with
 * status 1.
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "unet.h"
#include "check.h"

#define TIMEOUT_US 10000000LL /* 10 s */
#define ECHO 3
#define REPLY 4
#define LAZY 5
#define EXTEND 6
#define ROUNDS 2000

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Shared by node 1's main code and its handlers. */
static atomic_int in_atomic;   /* node 1's main code is in an atomic section */
static atomic_int in_handler;  /* a handler runs */
static atomic_int overlaps;    /* a handler saw either of the above set */
static atomic_int handled;     /* echo handlers run */
static atomic_int stop_main;
static atomic_int extended;

/* Answer with the first word plus one. */
static void echo(unet_udm_upcall *up, void *user) {
    uint64_t w[UNET_UDM_MAX_WORDS];
    unet_udm_header h, first;
    if (atomic_fetch_add(&in_handler, 1) != 0 || atomic_load(&in_atomic))
        atomic_fetch_add(&overlaps, 1);
    if (user != (void *)&handled)
        atomic_fetch_add(&overlaps, 1000);
    if (unet_udm_upcall_header(up, &first) != UNET_OK ||
        unet_udm_upcall_extract(up, w, UNET_UDM_MAX_WORDS, &h) != UNET_OK ||
        h.handler != ECHO || first.src != h.src || h.len != 2) {
        atomic_fetch_add(&overlaps, 1000);
    } else {
        w[0] += 1;
        while (unet_udm_upcall_inject(up, h.src, REPLY, w, 2) != UNET_OK)
            ;
    }
    atomic_fetch_add(&handled, 1);
    atomic_fetch_sub(&in_handler, 1);
}

/* Takes nothing: a dispose-failure. */
static void lazy(unet_udm_upcall *up, void *user) {
    uint64_t w[UNET_UDM_MAX_WORDS];
    unet_udm_header h;
    (void)user;
    if (unet_udm_upcall_peek(up, w, UNET_UDM_MAX_WORDS, &h) != UNET_OK)
        atomic_fetch_add(&overlaps, 1000);
}

/* Disposes, and extends its atomic section into the main code. */
static void extend(unet_udm_upcall *up, void *user) {
    (void)user;
    if (unet_udm_upcall_dispose(up) != UNET_OK ||
        unet_udm_upcall_dispose(up) != UNET_EEMPTY ||
        unet_udm_upcall_extend_atomicity(up) != UNET_OK)
        atomic_fetch_add(&overlaps, 1000);
    atomic_store(&extended, 1);
}

/* Node 1's main code: atomic sections while the handlers run. */
static void *node1_main(void *arg) {
    unet_udm_node *b = arg;
    unsigned sections = 0;
    /* At least one section, however late this thread first runs. */
    do {
        if (unet_udm_beginatom(b, UNET_UDM_ATOM_DISABLE) != UNET_OK)
            atomic_fetch_add(&overlaps, 1000);
        atomic_store(&in_atomic, 1);
        if (atomic_load(&in_handler) != 0)
            atomic_fetch_add(&overlaps, 1);
        for (volatile int k = 0; k < 2000; k++)
            ;
        if (atomic_load(&in_handler) != 0)
            atomic_fetch_add(&overlaps, 1);
        atomic_store(&in_atomic, 0);
        if (unet_udm_endatom(b, UNET_UDM_ATOM_DISABLE) != UNET_OK)
            atomic_fetch_add(&overlaps, 1000);
        sections++;
        for (volatile int k = 0; k < 2000; k++)
            ;
    } while (!atomic_load(&stop_main));
    return (void *)(uintptr_t)sections;
}

/* Node 0 takes its next message, waiting for it. */
static void take(unet_udm_node *a, uint64_t *w, unet_udm_header *h) {
    CHECK_RC(unet_udm_wait(a, TIMEOUT_US), 1);
    CHECK_RC(unet_udm_extract(a, w, UNET_UDM_MAX_WORDS, h), UNET_OK);
}

/* A job across two engines: created on a home engine, rank 0 joined
 * there, rank 1 joined through a second engine (unet_udm_join_at), with
 * its errors; messages both ways, in order, over the engines' link. */
static void across_engines(void) {
    unet_engine *home, *other;
    unet_session *sh, *so;
    unet_udm_node *a, *b, *c;
    char ticket[UNET_UDM_TICKET_MAX], forged[UNET_UDM_TICKET_MAX];
    char addr[64], bad_port[64];
    uint64_t w[UNET_UDM_MAX_WORDS];
    unet_udm_header h;
    unet_udm_job_config cfg;

    CHECK_RC(unet_engine_start(NULL, "127.0.0.1:0", &home), UNET_OK);
    CHECK_RC(unet_engine_start(NULL, "127.0.0.1:0", &other), UNET_OK);
    CHECK(unet_engine_udp_port(home) > 0);
    CHECK_RC(unet_session_embedded(home, &sh), UNET_OK);
    CHECK_RC(unet_session_embedded(other, &so), UNET_OK);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", unet_engine_udp_port(home));
    snprintf(bad_port, sizeof bad_port, "127.0.0.1:%d",
             unet_engine_udp_port(home) + 70000);

    memset(&cfg, 0, sizeof cfg);
    cfg.nodes = 2;
    cfg.atomicity_timeout_us = 5000000;
    CHECK_RC(unet_udm_job_create(sh, &cfg, ticket, sizeof ticket), UNET_OK);
    /* NULL and "" name this session's engine, as unet_udm_join does. */
    CHECK_RC(unet_udm_join_at(sh, ticket, "", 0, &a), UNET_OK);
    CHECK_RC(unet_udm_join_at(so, ticket, "not an address", 1, &b),
             UNET_EINVAL);
    CHECK_RC(unet_udm_join_at(so, ticket, bad_port, 1, &b), UNET_EINVAL);
    CHECK_RC(unet_udm_join_at(so, ticket, addr, 1, NULL), UNET_EINVAL);
    CHECK_RC(unet_udm_join_at(NULL, ticket, addr, 1, &b), UNET_EINVAL);
    /* A ticket with another key: no such job at the home. */
    {
        unsigned job, nodes;
        unsigned long long key;
        CHECK(sscanf(ticket, "%u:%llx:%u", &job, &key, &nodes) == 3);
        snprintf(forged, sizeof forged, "%u:%llx:%u", job, key ^ 1ULL, nodes);
    }
    CHECK_RC(unet_udm_join_at(so, forged, addr, 1, &b), UNET_EENGINE);
    /* Rank 0 is taken at the home. */
    CHECK_RC(unet_udm_join_at(so, ticket, addr, 0, &b), UNET_EENGINE);
    CHECK_RC(unet_udm_join_at(so, ticket, addr, 1, &b), UNET_OK);
    CHECK(unet_udm_rank(b) == 1 && unet_udm_nodes(b) == 2);
    CHECK_RC(unet_udm_join_at(sh, ticket, NULL, 1, &c), UNET_EENGINE);

    /* Round trips over the link, in order. */
    for (uint64_t i = 0; i < 200; i++) {
        uint64_t msg[3] = {i, i * 7, 0xC0DE};
        CHECK_RC(unet_udm_inject(a, 1, 11, msg, 3), UNET_OK);
        CHECK_RC(unet_udm_wait(b, TIMEOUT_US), 1);
        CHECK_RC(unet_udm_extract(b, w, UNET_UDM_MAX_WORDS, &h), UNET_OK);
        CHECK(h.src == 0 && h.handler == 11 && h.len == 3);
        CHECK(w[0] == i && w[1] == i * 7 && w[2] == 0xC0DE);
        w[0] += 1000;
        CHECK_RC(unet_udm_inject(b, 0, 12, w, 1), UNET_OK);
        CHECK_RC(unet_udm_wait(a, TIMEOUT_US), 1);
        CHECK_RC(unet_udm_extract(a, w, UNET_UDM_MAX_WORDS, &h), UNET_OK);
        CHECK(h.src == 1 && h.handler == 12 && h.len == 1 && w[0] == i + 1000);
    }

    CHECK_RC(unet_udm_leave(b), UNET_OK);
    CHECK_RC(unet_udm_leave(a), UNET_OK);
    unet_session_close(so);
    unet_session_close(sh);
    unet_engine_stop(other);
    unet_engine_stop(home);
}

int main(void) {
    unet_engine *engine;
    unet_session *session;
    unet_udm_node *a, *b, *c;
    char ticket[UNET_UDM_TICKET_MAX], small[4];
    uint64_t w[UNET_UDM_MAX_WORDS], big[UNET_UDM_MAX_WORDS + 1];
    unet_udm_header h;
    unet_udm_stats st;
    unet_udm_upcall_error err;
    unet_udm_job_config cfg;

    CHECK_RC(unet_engine_start(NULL, NULL, &engine), UNET_OK);
    CHECK_RC(unet_session_embedded(engine, &session), UNET_OK);

    /* A job from its ticket. */
    memset(&cfg, 0, sizeof cfg);
    cfg.nodes = 2;
    cfg.atomicity_timeout_us = 5000000; /* the sections below are short */
    CHECK_RC(unet_udm_job_create(session, &cfg, small, sizeof small),
             UNET_ETOOSMALL);
    CHECK_RC(unet_udm_job_create(session, &cfg, ticket, sizeof ticket),
             UNET_OK);
    CHECK(strchr(ticket, ':') != NULL);
    CHECK_RC(unet_udm_join(session, "not a ticket", 0, &a), UNET_EINVAL);
    CHECK_RC(unet_udm_join(session, ticket, 0, &a), UNET_OK);
    CHECK_RC(unet_udm_join(session, ticket, 1, &b), UNET_OK);
    CHECK_RC(unet_udm_join(session, ticket, 1, &c), UNET_EENGINE);
    CHECK(unet_udm_rank(a) == 0 && unet_udm_rank(b) == 1);
    CHECK(unet_udm_nodes(b) == 2);

    /* Polling. */
    CHECK_RC(unet_udm_message_available(b), 0);
    CHECK_RC(unet_udm_extract(b, w, UNET_UDM_MAX_WORDS, &h), UNET_EEMPTY);
    CHECK_RC(unet_udm_dispose(b), UNET_EEMPTY);
    CHECK_RC(unet_udm_wait(b, 1000), UNET_ETIMEDOUT);
    uint64_t three[3] = {1, 2, 3};
    CHECK_RC(unet_udm_inject(a, 1, 7, three, 3), UNET_OK);
    CHECK_RC(unet_udm_message_available(b), 1);
    memset(w, 0, sizeof w);
    CHECK_RC(unet_udm_peek(b, w, UNET_UDM_MAX_WORDS, &h), UNET_OK);
    CHECK(h.src == 0 && h.handler == 7 && h.len == 3 && w[2] == 3);
    CHECK_RC(unet_udm_extract(b, w, 2, &h), UNET_ETOOSMALL);
    CHECK(h.len == 3);
    CHECK_RC(unet_udm_extract(b, w, UNET_UDM_MAX_WORDS, &h), UNET_OK);
    CHECK(h.src == 0 && h.handler == 7 && h.len == 3);
    CHECK(w[0] == 1 && w[1] == 2 && w[2] == 3);
    for (int k = 0; k <= UNET_UDM_MAX_WORDS; k++)
        big[k] = 100 + (uint64_t)k;
    CHECK_RC(unet_udm_injectc(a, 1, 8, big, UNET_UDM_MAX_WORDS), UNET_OK);
    CHECK_RC(unet_udm_extract(b, w, UNET_UDM_MAX_WORDS, &h), UNET_OK);
    CHECK(h.len == UNET_UDM_MAX_WORDS && w[13] == 113);
    CHECK_RC(unet_udm_inject(a, 1, 8, big, UNET_UDM_MAX_WORDS + 1),
             UNET_ETOOLARGE);
    CHECK_RC(unet_udm_inject(a, 2, 8, big, 1), UNET_EINVAL);
    CHECK_RC(unet_udm_inject(a, 1, 9, NULL, 0), UNET_OK);
    CHECK_RC(unet_udm_wait(b, TIMEOUT_US), 1);
    CHECK_RC(unet_udm_dispose(b), UNET_OK);
    CHECK_RC(unet_udm_beginatom(a, UNET_UDM_ATOM_DISABLE), UNET_OK);
    CHECK_RC(unet_udm_endatom(a, UNET_UDM_ATOM_DISABLE), UNET_OK);

    /* Handlers: node 1 answers from its handler thread while its main code
     * makes atomic sections on another thread. */
    CHECK_RC(unet_udm_set_handler(b, ECHO, echo, &handled), UNET_OK);
    pthread_t t;
    CHECK_RC(pthread_create(&t, NULL, node1_main, b), 0);
    for (uint64_t i = 0; i < ROUNDS; i++) {
        uint64_t msg[2] = {i * 10, 0xABCD};
        CHECK_RC(unet_udm_inject(a, 1, ECHO, msg, 2), UNET_OK);
        take(a, w, &h);
        CHECK(h.src == 1 && h.handler == REPLY && h.len == 2);
        CHECK(w[0] == i * 10 + 1 && w[1] == 0xABCD);
    }
    atomic_store(&stop_main, 1);
    void *sections;
    CHECK_RC(pthread_join(t, &sections), 0);
    CHECK((uintptr_t)sections > 0);
    CHECK(atomic_load(&handled) == ROUNDS);
    CHECK(atomic_load(&overlaps) == 0);

    /* dispose-failure: reported once, the message kept, upcalls suspended
     * until the error is taken. */
    CHECK_RC(unet_udm_set_handler(b, LAZY, lazy, NULL), UNET_OK);
    CHECK_RC(unet_udm_inject(a, 1, LAZY, three, 1), UNET_OK);
    uint64_t again[2] = {5, 0xABCD};
    CHECK_RC(unet_udm_inject(a, 1, ECHO, again, 2), UNET_OK);
    for (int k = 0; k < 10000; k++) {
        CHECK_RC(unet_udm_get_stats(b, &st), UNET_OK);
        if (st.dispose_failures == 1)
            break;
        sleep_ms(1);
    }
    CHECK(st.dispose_failures == 1);
    sleep_ms(20);
    CHECK(atomic_load(&handled) == ROUNDS); /* suspended */
    CHECK_RC(unet_udm_extract(b, w, UNET_UDM_MAX_WORDS, &h), UNET_OK);
    CHECK(h.handler == LAZY && w[0] == 1);
    CHECK_RC(unet_udm_take_error(b, &err), 1);
    CHECK(err.kind == UNET_UDM_DISPOSE_FAILURE && err.handler == LAZY &&
          err.src == 0);
    CHECK_RC(unet_udm_take_error(b, &err), 0);
    take(a, w, &h); /* the echo resumed */
    CHECK(w[0] == 6);

    /* A message for no handler. */
    CHECK_RC(unet_udm_inject(a, 1, 99, three, 2), UNET_OK);
    for (int k = 0; k < 10000; k++) {
        CHECK_RC(unet_udm_get_stats(b, &st), UNET_OK);
        if (st.no_handler == 1)
            break;
        sleep_ms(1);
    }
    CHECK(st.no_handler == 1);
    /* Take the message first: taking the error resumes upcalls. */
    CHECK_RC(unet_udm_extract(b, w, UNET_UDM_MAX_WORDS, &h), UNET_OK);
    CHECK(h.handler == 99 && h.len == 2);
    CHECK_RC(unet_udm_take_error(b, &err), 1);
    CHECK(err.kind == UNET_UDM_NO_HANDLER && err.handler == 99);

    /* atomicity-extend: the next message waits for node 1's endatom. */
    CHECK_RC(unet_udm_set_handler(b, EXTEND, extend, NULL), UNET_OK);
    CHECK_RC(unet_udm_inject(a, 1, EXTEND, NULL, 0), UNET_OK);
    for (int k = 0; k < 10000 && !atomic_load(&extended); k++)
        sleep_ms(1);
    CHECK(atomic_load(&extended));
    uint64_t later[2] = {40, 0xABCD};
    CHECK_RC(unet_udm_inject(a, 1, ECHO, later, 2), UNET_OK);
    CHECK_RC(unet_udm_wait(a, 30000), UNET_ETIMEDOUT);
    CHECK_RC(unet_udm_endatom(b, UNET_UDM_ATOM_DISABLE), UNET_OK);
    take(a, w, &h);
    CHECK(w[0] == 41);

    /* Counters; removing a handler. */
    CHECK_RC(unet_udm_get_stats(b, &st), UNET_OK);
    CHECK(st.upcalls == ROUNDS + 4);
    CHECK(st.dispose_failures == 1 && st.no_handler == 1);
    CHECK(st.fast_msgs + st.buffered_taken == ROUNDS + 8);
    CHECK_RC(unet_udm_set_handler(b, ECHO, NULL, NULL), UNET_OK);
    CHECK_RC(unet_udm_inject(a, 1, ECHO, later, 2), UNET_OK);
    for (int k = 0; k < 10000 && unet_udm_take_error(b, &err) == 0; k++)
        sleep_ms(1);
    CHECK(err.kind == UNET_UDM_NO_HANDLER && err.handler == ECHO);

    /* Leaving. */
    CHECK_RC(unet_udm_leave(b), UNET_OK);
    CHECK_RC(unet_udm_inject(a, 1, ECHO, later, 2), UNET_EPEERGONE);
    CHECK_RC(unet_udm_leave(a), UNET_OK);
    CHECK_RC(unet_udm_leave(NULL), UNET_EINVAL);
    unet_udm_node_free(NULL);
    unet_session_close(session);
    unet_engine_stop(engine);
    across_engines();
    printf("ok: %u checks\n", checks);
    return 0;
}
