/*
 * unet.h: the C interface of the unet client library.
 *
 * unet gives applications protected, user-level endpoints in the manner of
 * U-Net: an endpoint is a buffer area plus send, receive and free queues in
 * memory shared with the engine (the trusted software network interface).
 * Two local endpoints may talk over a direct path; everything else goes
 * through the engine, locally or over its UDP wire.
 *
 * Conventions
 *  - Objects are opaque handles, released by the matching *_stop, *_close
 *    or *_free function (which accept NULL). unet_region_deregister and
 *    unet_vi_close are checked releases that report a status.
 *  - Functions return an int: 0 on success (1 for "got one" where said),
 *    a negative enum unet_status value on failure.
 *    unet_last_error_message() describes the calling thread's last failure.
 *  - NULL where a pointer is required gives UNET_EINVAL.
 *  - An endpoint or a VI must be used by one thread at a time (it may
 *    move between threads); sessions, engines, memory regions, completion
 *    queues and VI servers may be shared between threads.
 *
 * Link with the static library (libunet.a) and -lpthread -ldl -lm, or with
 * the shared library (libunet.so).
 */
#ifndef UNET_H
#define UNET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Status codes
 * ---------------------------------------------------------------------- */

/* What a call returns: 0 (or 1, where documented) on success, one of these
 * negative values on failure. */
enum unet_status {
    UNET_OK = 0,
    UNET_EFULL = -1,       /* a queue or ring is full: retry later */
    UNET_EBADCHAN = -2,    /* not a channel this endpoint holds */
    UNET_EPEERGONE = -3,   /* the channel's peer is gone (or broke the
                              direct connection) */
    UNET_ETOOLARGE = -4,   /* message empty or too large for the path */
    UNET_EBADBUF = -5,     /* offset or length outside the buffer area */
    UNET_ETIMEDOUT = -6,   /* nothing arrived in time, or the engine did
                              not answer a control request in time */
    UNET_ETOOSMALL = -7,   /* receive buffer too small; the needed size is
                              returned through the length out-parameter */
    UNET_EREFUSED = -8,    /* the destination refused the channel */
    UNET_ENOENDPOINT = -9, /* no endpoint with that id, or nobody listens
                              on that VI discriminator */
    UNET_EENGINE = -10,    /* another refusal by the engine (see message) */
    UNET_EIO = -11,        /* operating-system, protocol or internal error */
    UNET_EINVAL = -12,     /* NULL pointer or invalid argument */
    UNET_EREJECTED = -13,  /* the applet was refused (see the message) */
    UNET_ENOTSUP = -14,    /* this build of the library leaves it out: the
                              embedded engine or the inline placement
                              (Cargo features `embedded`, `inline`) */
    UNET_EQUOTA = -15,     /* a limit the engine sets each process or user
                              is reached: its shared memory, its
                              endpoints, or its memory regions, VIs,
                              discriminators, connection requests, UDM
                              jobs or nodes (see message); close
                              something */
    UNET_EINUSE = -16,     /* in use: a memory region a posted descriptor
                              uses, or a VI discriminator another session
                              listens on */
    UNET_ENOTPOSTED = -17, /* a VI wait found no descriptor outstanding on
                              that queue: nothing can complete */
    UNET_EEMPTY = -18      /* no message is available: a UDM extract, peek
                              or dispose with the message-available flag
                              clear (UDM's bad-dispose) */
};

/* The calling thread's last failure, in words. Never NULL; empty when
 * nothing has failed. Valid until the next failing call on this thread. */
const char *unet_last_error_message(void);

/* A static name for a status code, e.g. "UNET_EFULL". Never NULL. */
const char *unet_status_name(int status);

/* ------------------------------------------------------------------------
 * Opaque handles
 * ---------------------------------------------------------------------- */

typedef struct unet_engine unet_engine;     /* an engine in this process */
typedef struct unet_session unet_session;   /* a connection to an engine */
typedef struct unet_endpoint unet_endpoint; /* an endpoint */
typedef struct unet_region unet_region;     /* registered memory (VIA) */
typedef struct unet_cq unet_cq;             /* a completion queue (VIA) */
typedef struct unet_vi_server unet_vi_server; /* a VI discriminator
                                                 listened on */
typedef struct unet_vi_request unet_vi_request; /* a VI connection request
                                                   to answer */
typedef struct unet_vi unet_vi;             /* one end of a VI connection */
typedef struct unet_udm_node unet_udm_node; /* a node of a UDM job */
typedef struct unet_udm_upcall unet_udm_upcall; /* what a UDM handler works
                                                   with, during its call */

/* ------------------------------------------------------------------------
 * Engine
 * ---------------------------------------------------------------------- */

/* Start an engine on its own thread in this process. control_socket (or
 * NULL): a Unix socket path other processes can connect to. udp_bind (or
 * NULL for no wire): "HOST:PORT" for the UDP wire (port 0: any). */
int unet_engine_start(const char *control_socket, const char *udp_bind,
                      unet_engine **out);

/* Stop the engine and release the handle (NULL is ignored). Close the
 * sessions and endpoints on it first. */
void unet_engine_stop(unet_engine *engine);

/* The engine's UDP port, 0 when it has no wire, UNET_EINVAL for NULL. */
int unet_engine_udp_port(const unet_engine *engine);

/* ------------------------------------------------------------------------
 * Sessions
 * ---------------------------------------------------------------------- */

/* Connect to an engine's control socket (a daemon, or an engine started
 * with a control socket) at path; NULL names the socket in the environment
 * variable UNET_SOCKET, or "/tmp/unet.sock" when it is not set (the
 * daemon's default). Each control request on the session (connecting
 * included) waits for the engine's answer at most 5 s, or the number of
 * milliseconds in the environment variable UNET_TIMEOUT_MS (0: forever),
 * then fails with UNET_ETIMEDOUT. */
int unet_session_connect(const char *path, unet_session **out);

/* unet_session_connect with that limit given: timeout_ms milliseconds, 0
 * for forever, negative for the default. */
int unet_session_connect_timeout(const char *path, int64_t timeout_ms,
                                 unet_session **out);

/* A session on an engine started in this process. */
int unet_session_embedded(const unet_engine *engine, unet_session **out);

/* Release the session handle (NULL is ignored). Endpoints created on it
 * keep the connection until they are closed. */
void unet_session_close(unet_session *session);

/* ------------------------------------------------------------------------
 * Endpoints
 * ---------------------------------------------------------------------- */

/* Options of a new endpoint. Numeric fields that are 0 take their default;
 * accept and managed_buffers are taken as given (non-zero is true).
 * unet_endpoint_config_init() fills in all the defaults. */
typedef struct unet_endpoint_config {
    uint64_t buffer_area_size; /* bytes, a multiple of 4096 (4 MiB) */
    uint32_t buffer_size;      /* each receive buffer, a multiple of 64
                                  (8192) */
    uint32_t send_cap;         /* send queue entries, power of two (1024) */
    uint32_t recv_cap;         /* receive queue entries (1024) */
    uint32_t free_cap;         /* free queue entries (1024) */
    uint32_t event_cap;        /* event queue entries (256) */
    int accept;                /* accept channels opened by others (1) */
    int managed_buffers;       /* the library manages the buffer area and
                                  unet_send works on engine channels (1);
                                  0: drive the queues yourself with
                                  unet_push_send, unet_poll_recv_desc and
                                  unet_post_free */
} unet_endpoint_config;

/* Fill *cfg with the defaults. */
int unet_endpoint_config_init(unet_endpoint_config *cfg);

/* Create an endpoint; cfg may be NULL for the defaults. */
int unet_endpoint_create(const unet_session *session,
                         const unet_endpoint_config *cfg,
                         unet_endpoint **out);

/* Create a buffered endpoint: two-case delivery, as UDM's (docs/udm.md,
 * "U-Net endpoints with two-case delivery"). A message that finds no room
 * in the receive queue or no free buffer waits, in order, in a virtual
 * buffer of buffer_limit bytes in the engine (0: the default, 16 MiB)
 * instead of being dropped; at the limit local senders are held back and
 * arrivals from the wire are dropped (counted as rx_drop_buffer_limit).
 * The receive calls are unchanged. UNET_EINVAL for a limit above 1 GiB. */
int unet_endpoint_create_buffered(const unet_session *session,
                                  const unet_endpoint_config *cfg,
                                  uint64_t buffer_limit,
                                  unet_endpoint **out);

/* Close the endpoint (its peers see its channels gone) and release the
 * handle (NULL is ignored). */
void unet_endpoint_close(unet_endpoint *ep);

/* The endpoint's id in its engine (>= 0), or UNET_EINVAL for NULL. Peers
 * name the endpoint by it in unet_open_channel. */
int64_t unet_endpoint_id(const unet_endpoint *ep);

/* The geometry the endpoint was created with (accept and managed_buffers
 * are reported as -1: unknown). */
int unet_endpoint_get_config(unet_endpoint *ep, unet_endpoint_config *out);

/* Accept (non-zero) or refuse (0) channels opened to this endpoint. */
int unet_endpoint_set_accept(unet_endpoint *ep, int accept);

/* ------------------------------------------------------------------------
 * Channels
 * ---------------------------------------------------------------------- */

/* Path choices of unet_open_channel. */
enum unet_path {
    UNET_PATH_AUTO = 0,   /* direct when possible, else the engine */
    UNET_PATH_DIRECT = 1, /* the direct path or an error */
    UNET_PATH_ENGINE = 2  /* always through the engine */
};

/* Open a channel to addr: "ID" or "local/ID" (same engine), or
 * "HOST:PORT/ID" (an endpoint behind another engine's UDP wire). path is an
 * enum unet_path. Stores the channel tag in *out_channel. */
int unet_open_channel(unet_endpoint *ep, const char *addr, int path,
                      uint16_t *out_channel);

/* Close a channel; its peer sees it gone. */
int unet_close_channel(unet_endpoint *ep, uint16_t channel);

/* ------------------------------------------------------------------------
 * Messages
 * ---------------------------------------------------------------------- */

/* Send a copy of len bytes on channel (managed buffers, or any direct
 * channel). UNET_EFULL: retry later. */
int unet_send(unet_endpoint *ep, uint16_t channel, const void *data,
              size_t len);

/* One message of a batch: len bytes at data (NULL when len is 0). */
typedef struct unet_msg {
    const void *data;
    size_t len;
} unet_msg;

/* Send a copy of each of the n messages at msgs on channel, in order,
 * until one does not go; *out_sent = how many went. Returns 0 when at
 * least one went (or n is 0), else the first one's status (UNET_EFULL:
 * retry later). On a direct channel cheaper per message than unet_send. */
int unet_send_many(unet_endpoint *ep, uint16_t channel, const unet_msg *msgs,
                   size_t n, size_t *out_sent);

/* Called by unet_recv_many for each message (its bytes are in the buffer
 * given to unet_recv_many): nonzero to go on, 0 to stop after this one. */
typedef int (*unet_recv_fn)(void *ctx, const void *data, size_t len,
                            uint16_t channel);

/* Take up to limit messages already waiting, without waiting: each is
 * copied into buf and handed to f with ctx; *out_count = how many f got.
 * Returns 0, or a status as for unet_try_recv (a message too large for
 * buf ends the batch before it; the next call returns UNET_ETOOSMALL). */
int unet_recv_many(unet_endpoint *ep, void *buf, size_t cap, size_t limit,
                   unet_recv_fn f, void *ctx, size_t *out_count);

/* Take the next message if one is waiting. Returns 1 with *out_len and
 * *out_channel set, 0 when nothing is waiting, UNET_ETOOSMALL with the
 * needed size in *out_len (the message stays queued), UNET_EPEERGONE with
 * the channel in *out_channel when a direct peer broke the connection.
 * out_channel may be NULL. */
int unet_try_recv(unet_endpoint *ep, void *buf, size_t cap, size_t *out_len,
                  uint16_t *out_channel);

/* Receive the next message, waiting at most timeout_ns nanoseconds (-1:
 * forever, 0: no wait). Returns 0 with *out_len and *out_channel set,
 * UNET_ETIMEDOUT, or another status as for unet_try_recv. */
int unet_recv(unet_endpoint *ep, void *buf, size_t cap, int64_t timeout_ns,
              size_t *out_len, uint16_t *out_channel);

/* Wait until a message or event is waiting, at most timeout_ns (-1:
 * forever). Returns 1 when something is waiting, 0 on timeout. */
int unet_wait(unet_endpoint *ep, int64_t timeout_ns);

/* ------------------------------------------------------------------------
 * The descriptor level (U-Net's queues), for managed_buffers = 0
 * ---------------------------------------------------------------------- */

/* unet_recv_desc.flags: the payload is inline in data. */
#define UNET_RECV_INLINE 1
/* Largest inline payload; also the size of unet_recv_desc.data. */
#define UNET_INLINE_MAX 56
/* Most buffers one received message spans. */
#define UNET_MAX_RX_BUFFERS 14
/* unet_push_send's position for a direct channel (sent at once). */
#define UNET_POS_SENT UINT64_MAX

/* A receive descriptor, exactly as in the shared receive queue: 64 bytes,
 * aligned to 64.
 *
 *   offset 0  len      message length in bytes
 *   offset 4  channel  source channel tag (assigned by the engine)
 *   offset 6  flags    UNET_RECV_INLINE, or 0
 *   offset 7  nbufs    buffers used (0 when inline, else 1..14)
 *   offset 8  data     the payload when inline (len <= 56 bytes), else
 *                      nbufs little-endian uint32 offsets into the buffer
 *                      area; buffer i holds bytes [i*buffer_size,
 *                      min(len, (i+1)*buffer_size)) of the message
 */
#ifdef __cplusplus
#define UNET_ALIGN64 alignas(64)
#define UNET_STATIC_ASSERT static_assert
#define UNET_ALIGNOF alignof
#else
#define UNET_ALIGN64 _Alignas(64)
#define UNET_STATIC_ASSERT _Static_assert
#define UNET_ALIGNOF _Alignof
#endif

typedef struct unet_recv_desc {
    UNET_ALIGN64 uint32_t len;
    uint16_t channel;
    uint8_t flags;
    uint8_t nbufs;
    uint8_t data[UNET_INLINE_MAX];
} unet_recv_desc;

UNET_STATIC_ASSERT(sizeof(unet_recv_desc) == 64,
                   "unet_recv_desc is 64 bytes");
UNET_STATIC_ASSERT(UNET_ALIGNOF(unet_recv_desc) == 64,
                   "unet_recv_desc aligns to 64");
UNET_STATIC_ASSERT(sizeof(unet_endpoint_config) == 40,
                   "unet_endpoint_config is 40 bytes");

/* Buffer offset number i (< nbufs) of a non-inline descriptor. */
static inline uint32_t unet_recv_desc_offset(const unet_recv_desc *d,
                                             unsigned i) {
    const uint8_t *b = d->data + 4 * i;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
           (uint32_t)b[3] << 24;
}

/* U-Net's transmit: send len bytes at offset of the buffer area. On an
 * engine channel this pushes a send descriptor and stores its position in
 * *out_pos (for unet_send_status); leave the bytes untouched until it is no
 * longer pending. On a direct channel the bytes are copied at once and the
 * position is UNET_POS_SENT. out_pos may be NULL. */
int unet_push_send(unet_endpoint *ep, uint16_t channel, uint32_t offset,
                   uint32_t len, uint64_t *out_pos);

/* Completion of the send descriptor at pos: 1 sent, 0 pending, or the
 * negative status the engine gave it (UNET_EBADCHAN, UNET_EBADBUF,
 * UNET_ETOOLARGE, UNET_EPEERGONE, UNET_EINVAL for reserved flags). */
int unet_send_status(unet_endpoint *ep, uint64_t pos);

/* U-Net's receive: copy the next receive descriptor to *out and return 1,
 * or return 0 when none is waiting. The buffers it names belong to the
 * application until posted again with unet_post_free. */
int unet_poll_recv_desc(unet_endpoint *ep, unet_recv_desc *out);

/* Post a free receive buffer at offset of the buffer area (a whole buffer
 * must fit: UNET_EBADBUF otherwise; UNET_EFULL when the queue is full). */
int unet_post_free(unet_endpoint *ep, uint32_t offset);

/* Copy len bytes into / out of the buffer area at offset (UNET_EBADBUF when
 * the range is outside the area). */
int unet_write_buffer(unet_endpoint *ep, uint32_t offset, const void *data,
                      size_t len);
int unet_read_buffer(unet_endpoint *ep, uint32_t offset, void *buf,
                     size_t len);

/* ------------------------------------------------------------------------
 * U-Net/SLE applets
 * ---------------------------------------------------------------------- */

/* Attach an applet (len bytes of a Java class file) to the endpoint; it runs
 * doTx on every send and doRx on every arrival. fuel and heap set the work
 * budget per invocation and the heap quota (0: defaults); placement 0 runs
 * it in the engine, 1 in this process on the direct path. UNET_EREJECTED
 * when the class is refused: unet_last_error_message() says why (method and
 * bytecode offset). Fault classes in applet events: 0 work budget, 1 memory
 * (bounds, null, negative size), 2 division by zero, 3 call depth, 4 heap
 * quota, 5 a native refused its arguments, 6 other, 7 the invocation ran
 * past the engine's time limit. */
int unet_attach_applet(unet_endpoint *ep, const void *class_file, size_t len,
                       uint64_t fuel, uint32_t heap, int placement);

/* Detach the endpoint's applet. */
int unet_detach_applet(unet_endpoint *ep);

/* ------------------------------------------------------------------------
 * Events
 * ---------------------------------------------------------------------- */

/* unet_event.kind */
enum unet_event_kind {
    UNET_EVENT_CHANNEL_OPENED = 1, /* a peer opened a channel to us */
    UNET_EVENT_PEER_GONE = 2,      /* the peer of a channel is gone */
    UNET_EVENT_APPLET_FAULT = 5,   /* an applet invocation faulted
                                      (peer_endpoint: fault class) */
    UNET_EVENT_APPLET_DETACHED = 6 /* the applet was detached after
                                      repeated faults */
};

/* Something that happened to the endpoint's channels: 32 bytes. */
typedef struct unet_event {
    uint32_t kind;          /* enum unet_event_kind */
    uint16_t channel;       /* our tag for the channel */
    uint8_t direct;         /* 1 when the channel uses the direct path */
    uint8_t peer_family;    /* peer's engine: 0 local, 4 IPv4, 6 IPv6 */
    uint32_t peer_endpoint; /* the peer's endpoint id (opened events) */
    uint16_t peer_port;     /* the peer engine's UDP port (0 when local) */
    uint16_t reserved;      /* zero */
    uint8_t peer_addr[16];  /* the peer engine's IP (IPv4: first 4 bytes) */
} unet_event;

/* The next channel event: copies it to *out and returns 1, or returns 0
 * when there is none. */
int unet_poll_event(unet_endpoint *ep, unet_event *out);

UNET_STATIC_ASSERT(sizeof(unet_event) == 32, "unet_event is 32 bytes");

/* ------------------------------------------------------------------------
 * VIA: virtual interfaces, memory regions and completion queues
 *
 * A VI is one end of a connection with a send queue and a receive queue of
 * descriptors. One process listens on a discriminator (unet_vi_listen),
 * another connects to it (unet_vi_connect), the first accepts or rejects.
 * Data lives in memory regions registered with the engine
 * (unet_register_memory); a descriptor names it as segments (region,
 * offset, length), gathered into one message on send and scattered on
 * receive. Every posted descriptor completes, with a status: 0, or minus a
 * UNET_VI_* error. Any error puts the VI in VIA's error state: it stays
 * broken, every outstanding descriptor completes with the reason, and the
 * peer's VI breaks too. Timeouts are in microseconds, -1 for forever.
 * ---------------------------------------------------------------------- */

/* Reliability levels (unet_vi_attrs.reliability); both ends of a
 * connection must ask for the same one. */
enum unet_vi_reliability {
    UNET_VI_UNRELIABLE = 0,        /* a message may be lost (counted); a
                                      send completes once it has left */
    UNET_VI_RELIABLE_DELIVERY = 1, /* every message arrives once, in order,
                                      or the VI breaks; a send completes
                                      once it reached the peer (default) */
    UNET_VI_RELIABLE_RECEPTION = 2 /* as delivery, and a send completes only
                                      once the message is in a buffer the
                                      receiver posted */
};

/* Why a VI is broken (unet_vi_state), and minus the status of a descriptor
 * that completed with an error (unet_vi_completion.status). */
enum unet_vi_error {
    UNET_VI_OK = 0,                 /* connected; the descriptor succeeded */
    UNET_VI_PEER_GONE = 1,          /* the peer closed its VI or died */
    UNET_VI_RECEIVER_NOT_READY = 2, /* a message found no receive posted, on
                                       a VI with strict_rnr */
    UNET_VI_TOO_LONG = 3,           /* a message did not fit its receive
                                       descriptor */
    UNET_VI_BAD_DESCRIPTOR = 4,     /* a descriptor named bytes outside its
                                       region, a region of another session,
                                       too many segments or bytes */
    UNET_VI_TIMEOUT = 5,            /* the peer did not acknowledge in time */
    UNET_VI_BROKEN = 6,             /* the peer corrupted the connection */
    UNET_VI_CLOSED = 7              /* the VI was closed with descriptors
                                       outstanding */
};

/* The queue a completion queue entry names (unet_cq_done). */
enum unet_vi_queue {
    UNET_VI_QUEUE_SEND = 0, /* the VI's send queue */
    UNET_VI_QUEUE_RECV = 1  /* the VI's receive queue */
};

/* Most segments one descriptor may gather or scatter. */
#define UNET_VI_MAX_SEGMENTS 8
/* Largest message a VI carries, in bytes. */
#define UNET_VI_MAX_TRANSFER 262144

/* A static name for a VI error code or a completion status (its negation),
 * e.g. "UNET_VI_PEER_GONE". Never NULL. */
const char *unet_vi_error_name(int error);

/* Memory regions ------------------------------------------------------- */

/* Register len bytes of fresh, zeroed shared memory with the engine (VIA's
 * VipRegisterMem). It counts against the process's memory quota
 * (UNET_EQUOTA); 0 bytes is UNET_EINVAL. */
int unet_register_memory(const unet_session *session, size_t len,
                         unet_region **out);

/* The start of the region's memory (NULL for a NULL handle), valid until
 * the handle is released. Bytes a posted send descriptor names must stay
 * untouched, and bytes a posted receive descriptor names unread, until the
 * descriptor completes. */
void *unet_region_ptr(const unet_region *region);

/* The region's length in bytes; 0 for a NULL handle. */
size_t unet_region_len(const unet_region *region);

/* The handle the engine gave the region (>= 0), UNET_EINVAL for NULL. */
int64_t unet_region_handle(const unet_region *region);

/* Deregister the region and release its handle. UNET_EINUSE while a posted
 * descriptor still uses it: then nothing happens and the handle stays
 * valid. */
int unet_region_deregister(unet_region *region);

/* Release the region handle (NULL is ignored). The engine forgets the
 * region once no posted descriptor uses it any more. */
void unet_region_free(unet_region *region);

/* Attributes and completion queues ------------------------------------- */

/* How a VI is made. unet_vi_attrs_init() fills in the defaults; NULL where
 * a const unet_vi_attrs * is taken means the defaults. */
typedef struct unet_vi_attrs {
    int reliability;     /* enum unet_vi_reliability
                            (UNET_VI_RELIABLE_DELIVERY) */
    int strict_rnr;      /* non-zero: VIA's strict behaviour, a message
                            that finds no receive posted breaks the VI
                            (UNET_VI_RECEIVER_NOT_READY) instead of waiting
                            for one (0) */
    uint32_t send_queue; /* most send descriptors outstanding, posted and
                            not yet taken back; 0: the default (1024) */
    uint32_t recv_queue; /* most receive descriptors outstanding; 0: the
                            default (1024) */
    uint32_t spin_us;    /* microseconds a wait spins before it sleeps,
                            taken as given (50) */
    uint32_t break_timeout_ms; /* milliseconds the peer of a VI carried
                            between engines may stay silent while the VI
                            waits for it (reliable levels) before the VI
                            breaks (UNET_VI_TIMEOUT); 0: the engine's
                            setting, 5 s unless its daemon says (0) */
    unet_cq *send_cq;    /* the completion queue the send queue reports
                            to, or NULL (NULL) */
    unet_cq *recv_cq;    /* the completion queue the receive queue reports
                            to, or NULL (NULL) */
} unet_vi_attrs;

UNET_STATIC_ASSERT(sizeof(void *) != 8 || sizeof(unet_vi_attrs) == 40,
                   "unet_vi_attrs is 40 bytes on 64-bit targets");

/* Fill *attrs with the defaults. */
int unet_vi_attrs_init(unet_vi_attrs *attrs);

/* A new, empty completion queue: the send or receive queues of several VIs
 * report to it (unet_vi_attrs.send_cq, recv_cq) in the order their
 * descriptors complete. */
int unet_cq_create(unet_cq **out);

/* Release the completion queue handle (NULL is ignored). VIs made with it
 * keep reporting to it, unseen. */
void unet_cq_free(unet_cq *cq);

/* The next entry of the queue (VIA's VipCQDone): returns 1 with the VI's
 * id (unet_vi_id) in *out_vi and an enum unet_vi_queue in *out_queue, or 0
 * when there is none. Take the completion itself from that VI with
 * unet_vi_send_done or unet_vi_recv_done. out_vi and out_queue may be
 * NULL. */
int unet_cq_done(const unet_cq *cq, uint32_t *out_vi, int *out_queue);

/* Wait at most timeout_us (-1: forever) for the next entry (VipCQWait):
 * 0 with it stored as by unet_cq_done, or UNET_ETIMEDOUT. */
int unet_cq_wait(const unet_cq *cq, int64_t timeout_us, uint32_t *out_vi,
                 int *out_queue);

/* Connection set-up ----------------------------------------------------- */

/* Accept VI connections on discriminator tag of this engine. UNET_EINUSE
 * when another session listens on it. */
int unet_vi_listen(const unet_session *session, uint64_t tag,
                   unet_vi_server **out);

/* Stop listening and release the handle (NULL is ignored). VIs accepted
 * through it live on. */
void unet_vi_server_free(unet_vi_server *server);

/* Wait at most timeout_us (-1: forever) for the next connection request and
 * accept it with a VI of attrs (NULL: the defaults). UNET_ETIMEDOUT when
 * none came; UNET_EENGINE when the reliability levels differ (both sides
 * are refused) or the connecting side gave up. */
int unet_vi_server_accept(const unet_vi_server *server,
                          const unet_vi_attrs *attrs, int64_t timeout_us,
                          unet_vi **out);

/* Wait at most timeout_us (-1: forever) for the next connection request
 * (VIA's VipConnectWait), to be answered with unet_vi_request_accept or
 * unet_vi_request_reject. UNET_ETIMEDOUT when none came. */
int unet_vi_server_wait_request(const unet_vi_server *server,
                                int64_t timeout_us, unet_vi_request **out);

/* The connecting process's id (0 when remote or unknown), UNET_EINVAL for
 * NULL. */
int64_t unet_vi_request_pid(const unet_vi_request *request);

/* The connecting engine's address as "IP:PORT", written NUL-terminated
 * into buf (cap bytes): returns its length without the NUL, 0 (and "")
 * when the connecting side is on this engine; UNET_ETOOSMALL when cap
 * cannot hold it, UNET_EINVAL for NULL. */
int unet_vi_request_host(const unet_vi_request *request, char *buf,
                         size_t cap);

/* The reliability level the connecting side asked for (enum
 * unet_vi_reliability), UNET_EINVAL for NULL. */
int unet_vi_request_reliability(const unet_vi_request *request);

/* Accept the request with a VI of attrs (NULL: the defaults; its
 * reliability must be the connecting side's, else both are refused with
 * UNET_EENGINE). The request handle is released in every case: a request
 * not accepted (a bad argument included) is rejected. */
int unet_vi_request_accept(unet_vi_request *request,
                           const unet_vi_attrs *attrs, unet_vi **out);

/* Reject the request (the connecting side gets UNET_EREFUSED) and release
 * its handle. */
int unet_vi_request_reject(unet_vi_request *request);

/* Connect a VI of attrs (NULL: the defaults) to whoever listens on
 * discriminator tag at host ("HOST:PORT" of another engine's UDP wire; NULL
 * or "local" for this engine), waiting at most timeout_us for it to accept
 * (-1: the engine's longest, 60 s). UNET_EREFUSED when it rejects,
 * UNET_ENOENDPOINT when nobody listens on tag, UNET_ETIMEDOUT when nobody
 * answered in time, UNET_EENGINE when the reliability levels differ. */
int unet_vi_connect(const unet_session *session, const char *host,
                    uint64_t tag, const unet_vi_attrs *attrs,
                    int64_t timeout_us, unet_vi **out);

/* Descriptors ------------------------------------------------------------ */

/* One segment of a descriptor: len bytes at offset in region (a region of
 * the VI's session). */
typedef struct unet_vi_seg {
    unet_region *region;
    uint64_t offset;
    uint64_t len;
} unet_vi_seg;

/* The completion of a descriptor: 16 bytes. */
typedef struct unet_vi_completion {
    uint64_t id;    /* the number the descriptor was posted with */
    int32_t status; /* 0, or minus an enum unet_vi_error
                       (-UNET_VI_PEER_GONE, ...) */
    uint32_t len;   /* the message length (for a send, the bytes sent);
                       0 on error */
} unet_vi_completion;

/* What a VI has counted: 64 bytes. */
typedef struct unet_vi_stats {
    uint64_t tx_msgs;       /* messages sent */
    uint64_t tx_bytes;      /* bytes sent */
    uint64_t rx_msgs;       /* messages received into posted buffers */
    uint64_t rx_bytes;      /* bytes received */
    uint64_t rx_not_posted; /* messages that arrived before a receive was
                               posted for them, and waited */
    uint64_t tx_full;       /* times a send waited for room in the ring */
    uint64_t errors;        /* descriptors completed with an error */
    uint64_t rx_dropped;    /* messages dropped on an unreliable VI (too
                               long for their receive) */
} unet_vi_stats;

UNET_STATIC_ASSERT(sizeof(void *) != 8 || sizeof(unet_vi_seg) == 24,
                   "unet_vi_seg is 24 bytes on 64-bit targets");
UNET_STATIC_ASSERT(sizeof(unet_vi_completion) == 16,
                   "unet_vi_completion is 16 bytes");
UNET_STATIC_ASSERT(sizeof(unet_vi_stats) == 64, "unet_vi_stats is 64 bytes");

/* Post a send descriptor: the bytes of the nsegs segments at segs, gathered
 * in order into one message, completing with number id (0 segments: an
 * empty message). Leave the bytes untouched until it completes. Returns 0,
 * or UNET_EFULL when send_queue descriptors are outstanding (take
 * completions first). A descriptor that names bytes outside its region, a
 * region of another session, more than UNET_VI_MAX_SEGMENTS segments or
 * more than UNET_VI_MAX_TRANSFER bytes is posted, breaks the VI and
 * completes with -UNET_VI_BAD_DESCRIPTOR; a NULL region is UNET_EINVAL
 * (nothing is posted). The region handles may be released once posted: the
 * memory stays registered until the descriptor completes. */
int unet_vi_post_send(unet_vi *vi, uint64_t id, const unet_vi_seg *segs,
                      size_t nsegs);

/* Send the len bytes at data from ordinary (unregistered) memory, copied
 * once during the call, when that can be done now: on a local VI whose
 * direct ring has room, with no send posted before it and room for its
 * completion. The send completes with number id as a posted one does.
 * Returns 0 when sent; UNET_EFULL when it could not be sent now (nothing
 * was), which is always the case for a VI between engines (their engines
 * read registered memory only): copy the bytes into a region and post them
 * with unet_vi_post_send. UNET_EINVAL for a NULL vi, or NULL data with
 * len > 0. */
int unet_vi_send_copied(unet_vi *vi, uint64_t id, const void *data,
                        size_t len);

/* Post a receive descriptor: the next message is scattered into the nsegs
 * segments at segs in order, completing with number id and its length
 * (-UNET_VI_TOO_LONG if it does not fit). As unet_vi_post_send otherwise
 * (UNET_EFULL past recv_queue descriptors). */
int unet_vi_post_recv(unet_vi *vi, uint64_t id, const unet_vi_seg *segs,
                      size_t nsegs);

/* The next completed send descriptor (VIA's VipSendDone): 1 with it in
 * *out, 0 when none has completed. */
int unet_vi_send_done(unet_vi *vi, unet_vi_completion *out);

/* The next completed receive descriptor (VipRecvDone): 1 with it in *out,
 * 0 when none has completed. */
int unet_vi_recv_done(unet_vi *vi, unet_vi_completion *out);

/* Wait at most timeout_us (-1: forever) for the next completed send
 * descriptor (VipSendWait): 0 with it in *out, UNET_ETIMEDOUT, or
 * UNET_ENOTPOSTED when no send descriptor is outstanding (unet_vi_state
 * says whether the VI is broken). */
int unet_vi_send_wait(unet_vi *vi, int64_t timeout_us,
                      unet_vi_completion *out);

/* Wait at most timeout_us (-1: forever) for the next completed receive
 * descriptor (VipRecvWait), as unet_vi_send_wait: it spins spin_us, then
 * sleeps until a message or the peer's going wakes it. */
int unet_vi_recv_wait(unet_vi *vi, int64_t timeout_us,
                      unet_vi_completion *out);

/* VIs --------------------------------------------------------------------- */

/* The VI's state: UNET_VI_OK (0) while connected, else the enum
 * unet_vi_error it broke with (positive); UNET_EINVAL for NULL. */
int unet_vi_state(unet_vi *vi);

/* The VI's id in its engine (>= 0; what completion queues report),
 * UNET_EINVAL for NULL. */
int64_t unet_vi_id(const unet_vi *vi);

/* 1 when the VI's messages go straight between the two processes (a local
 * VI on the direct path), 0 when they go through the engines; UNET_EINVAL
 * for NULL. */
int unet_vi_is_direct(unet_vi *vi);

/* Copy what the VI has counted into *out. */
int unet_vi_get_stats(unet_vi *vi, unet_vi_stats *out);

/* Close the VI and release its handle, whatever the outcome: descriptors
 * still outstanding complete with UNET_VI_CLOSED and are dropped with it;
 * the peer's VI breaks with UNET_VI_PEER_GONE. Returns 0, or a status when
 * the engine could not be told. */
int unet_vi_close(unet_vi *vi);

/* Release the VI handle (NULL is ignored), closing it as unet_vi_close
 * does. */
void unet_vi_free(unet_vi *vi);

/* A local VI's data path lent out (unet_vi_direct_lend): for language
 * bindings whose calls into the library cost more than the ring's own
 * work, so that they read and write the two rings themselves. The rings
 * follow the direct path's layout: records of an 8-byte little-endian
 * header (low 32 bits: tag (position >> 3) + 1; high 32 bits: payload
 * length, bit 31 padding to the end of the ring, bit 30 a reference to
 * the sender's region), each starting 32-byte aligned. What the peer
 * writes is untrusted. 240 bytes on 64-bit targets. */
typedef struct unet_vi_unplaced unet_vi_unplaced;
typedef struct unet_vi_direct {
    uint8_t *tx;             /* the ring this side sends on */
    const uint8_t *rx;       /* the ring this side receives from */
    uint64_t ring_size;      /* bytes in each ring (a power of two) */
    uint64_t max_len;        /* largest payload of one record */
    uint64_t pull_min;       /* messages this large go as references: the
                                library's to send */
    const uint64_t *tx_consumed; /* the peer's consumer position of tx
                                    (read with acquire) */
    const uint32_t *tx_sleeping; /* the peer's sleeping flag: read after a
                                    full fence that follows publishing;
                                    set: call unet_vi_direct_wake */
    uint64_t *rx_consumed;   /* this side's consumer position of rx
                                (written with release) */
    const uint32_t *peer_closed; /* non-zero once the peer closed */
    uint64_t *tx_counters;   /* messages, bytes sent (unet stat reads them) */
    uint64_t *rx_counters;   /* messages, bytes received */
    uint64_t tx_pos;         /* next position to write in tx (moved on) */
    uint64_t rx_pos;         /* next position to read in rx (moved on) */
    uint64_t rx_published;   /* the position last written to rx_consumed */
    uint64_t sent;           /* messages the borrower sent (from 0) */
    uint64_t sent_bytes;
    uint64_t received;       /* messages it placed into its receives */
    uint64_t received_bytes;
    uint64_t tx_full;        /* times a send found the ring full */
    const uint64_t *tx_placed; /* the peer's count of this side's messages
                                  it placed (read with acquire): a message
                                  sent by reference completes once it
                                  reaches the message's number */
    uint64_t *rx_placed;     /* this side's count of messages placed:
                                written with release once a reference's
                                data is copied (then wake a sleeping peer) */
    uint64_t sent_base;      /* messages sent before the lending: the
                                borrower's first is number sent_base + 1 */
    uint64_t placed_base;    /* messages placed before the lending */
    uint64_t wait_placed;    /* unet_vi_direct_sleep: wake once *tx_placed
                                reaches this too (0: not waited for) */
    const unet_vi_unplaced *unplaced; /* unet_vi_direct_return: sends the
                                peer has not placed yet, oldest first,
                                which the library then completes */
    uint64_t nunplaced;
    uint64_t asymmetric;     /* 1: this process takes part in asymmetric
                                fences (a sleeping peer makes every such
                                thread execute a full barrier first), so a
                                compiler barrier between publishing and
                                reading tx_sleeping is enough; 0: a full
                                fence is needed there */
    uint64_t *recv_ids;      /* unet_vi_direct_lend, set by the caller:
                                where the numbers of the receives posted
                                go (they become the borrower's, in order) */
    uint64_t recv_cap;       /* room there (NULL and 0: lend only with none
                                posted) */
    uint64_t nrecv;          /* how many receives were posted */
} unet_vi_direct;

/* A send the peer has not placed yet (unet_vi_direct.unplaced). */
struct unet_vi_unplaced {
    uint64_t id;   /* the descriptor's number */
    uint64_t len;  /* its length */
    uint64_t seq;  /* completes once the peer placed as many messages */
};

UNET_STATIC_ASSERT(sizeof(void *) != 8 || sizeof(unet_vi_direct) == 240,
                   "unet_vi_direct is 240 bytes on 64-bit targets");
UNET_STATIC_ASSERT(sizeof(unet_vi_unplaced) == 24, "unet_vi_unplaced is 24 bytes");

/* Lend the VI's data path to the caller: 0 with *out filled. Receives
 * posted become the borrower's: their numbers, in order, in out->recv_ids
 * (room for out->recv_cap, set by the caller), how many in out->nrecv
 * (their memory is the borrower's to keep registered from then on).
 * UNET_EINUSE while sends are posted or completions untaken (take them,
 * then try again), or more receives are posted than recv_cap; UNET_ENOTSUP for a VI that can never lend it (between engines,
 * with a completion queue, of reliable reception, strict about receives
 * not posted, or broken). Until unet_vi_direct_return every call on the
 * VI but unet_vi_direct_sleep, unet_vi_direct_wake, unet_vi_direct_grant,
 * unet_vi_direct_peer_region, unet_vi_id, unet_vi_is_direct,
 * unet_vi_close and unet_vi_free fails with UNET_EINUSE. The pointers
 * stay valid until the VI is closed. */
int unet_vi_direct_lend(unet_vi *vi, unet_vi_direct *out);

/* Hand a lent data path back: the positions and counts in *d become the
 * VI's, and the library completes the sends in d->unplaced once the peer
 * placed them (their memory stays untouched and registered until then).
 * Positions the ring's rules cannot produce break the VI (UNET_VI_BROKEN).
 * 0, or UNET_EINVAL when the VI is not lent. */
int unet_vi_direct_return(unet_vi *vi, const unet_vi_direct *d);

/* Sleep, for the borrower of a lent data path, until a record is at
 * d->rx_pos in the receiving ring, the peer placed d->wait_placed of this
 * side's messages (when not 0), the peer closes, or timeout_us
 * microseconds pass (at most a second; a wake-up may be spurious: look at
 * the ring again). d->rx_pos is published to the peer first (and becomes
 * d->rx_published). 0, or UNET_EINVAL when the VI is not lent or d->rx_pos
 * is not a position the borrower can have reached. */
int unet_vi_direct_sleep(unet_vi *vi, unet_vi_direct *d, int64_t timeout_us);

/* Wake the peer of a lent data path, found asleep after publishing a
 * record. 0, or UNET_EINVAL when the VI is not lent. */
int unet_vi_direct_wake(unet_vi *vi);

/* Grant region to the peer of a lent data path, for the borrower's sends
 * by reference (once per region and VI; later calls answer at once). 0;
 * UNET_EREFUSED when the engine refused (send by copy then) or the region
 * belongs to another session; UNET_EINVAL when the VI is not lent. */
int unet_vi_direct_grant(unet_vi *vi, const unet_region *region);

/* The peer's region handle (from a reference record), mapped for reading,
 * for the borrower of a lent data path: 0 with its address in *ptr, its
 * length in *len, and in *evicted the handle of a region the library
 * unmapped to make room for it (it keeps a bounded number: forget that
 * one's memory), or -1. A region stays mapped until it is unmapped so or
 * the path is returned. UNET_EREFUSED when the engine refuses it (the
 * record is then the library's to report); UNET_EINVAL when the VI is not
 * lent. */
int unet_vi_direct_peer_region(unet_vi *vi, uint32_t handle,
                               const uint8_t **ptr, uint64_t *len,
                               int64_t *evicted);

/* ------------------------------------------------------------------------
 * UDM: User Direct Messaging (docs/udm.md)
 *
 * The nodes of a job send each other small messages (a handler index and
 * at most UNET_UDM_MAX_WORDS words of 64 bits) with inject, and take them
 * with extract, at user level, with user-controlled atomicity; a node
 * that cannot keep up gets its messages through a virtual buffer, in the
 * same order and with the same calls. One process creates a job and
 * hands its ticket (a string) to the processes that join it, each as one
 * rank. A node is used by one thread at a time; its handlers run on a
 * thread of their own.
 * ---------------------------------------------------------------------- */

#define UNET_UDM_MAX_WORDS 14
#define UNET_UDM_TICKET_MAX 48      /* bytes of a ticket, with its NUL */
#define UNET_UDM_ATOM_DISABLE 1     /* beginatom: no handler runs */
#define UNET_UDM_ATOM_TIMER_FORCE 2 /* beginatom: the atomicity timer runs
                                       even with nothing waiting */

/* unet_udm_upcall_error.kind */
#define UNET_UDM_NO_HANDLER 1       /* a message for a handler index with no
                                       handler */
#define UNET_UDM_DISPOSE_FAILURE 2  /* a handler returned without extracting
                                       or disposing of a message */
#define UNET_UDM_HANDLER_PANICKED 3 /* (Rust handlers only) */

/* How a job is made; a zero field takes its default. 24 bytes. */
typedef struct unet_udm_job_config {
    uint32_t nodes;                /* 1 to 64 (0: 2) */
    uint32_t fast_queue;           /* messages in each fast ring, a power
                                      of two in 2..=1024 (0: 8) */
    uint64_t buffer_size;          /* bytes of each node's virtual buffer,
                                      a power of two (0: 1 MiB) */
    uint32_t atomicity_timeout_us; /* (0: 2000) */
    uint32_t reserved;             /* zero */
} unet_udm_job_config;

/* What extract and peek say of a message. 8 bytes. */
typedef struct unet_udm_header {
    uint32_t src;     /* the sender's rank */
    uint16_t handler; /* the handler index */
    uint16_t len;     /* words */
} unet_udm_header;

/* A node's counters (docs/udm.md, Counters). 192 bytes. */
typedef struct unet_udm_stats {
    uint64_t fast_msgs;         /* taken from the fast rings */
    uint64_t buffered_taken;    /* taken from the virtual buffer */
    uint64_t switch_queue_full; /* always 0: a full ring makes its sender wait */
    uint64_t overflow_holds;    /* injects held back by overflow control */
    uint64_t upcalls;           /* handlers run */
    uint64_t no_handler;        /* messages for no handler */
    uint64_t dispose_failures;  /* handlers that took no message */
    uint64_t handler_panics;    /* (Rust handlers only) */
    uint64_t engine[16];        /* the engine's counters, in the order of
                                   `unet stat` */
} unet_udm_stats;

/* The error that suspended a node's upcalls. 12 bytes. */
typedef struct unet_udm_upcall_error {
    int kind;         /* UNET_UDM_NO_HANDLER, ... */
    uint16_t handler; /* the message's handler index */
    uint16_t reserved;
    uint32_t src;     /* the message's sender */
} unet_udm_upcall_error;

UNET_STATIC_ASSERT(sizeof(unet_udm_job_config) == 24,
                   "unet_udm_job_config is 24 bytes");
UNET_STATIC_ASSERT(sizeof(unet_udm_header) == 8, "unet_udm_header is 8 bytes");
UNET_STATIC_ASSERT(sizeof(unet_udm_stats) == 192,
                   "unet_udm_stats is 192 bytes");
UNET_STATIC_ASSERT(sizeof(unet_udm_upcall_error) == 12,
                   "unet_udm_upcall_error is 12 bytes");

/* A handler: called on the node's handler thread, inside an atomic
 * section, with the message that raised the upcall current. It must take
 * (unet_udm_upcall_extract or _dispose) at least one message. up is valid
 * for this call only. */
typedef void (*unet_udm_handler_fn)(unet_udm_upcall *up, void *user);

/* Jobs and nodes ----------------------------------------------------------- */

/* Create a job (cfg NULL: the defaults) and write its ticket, a
 * NUL-terminated "JOB:KEY:NODES", into ticket (ticket_len bytes, at least
 * UNET_UDM_TICKET_MAX). The job ends when the session closes and every
 * node has left. */
int unet_udm_job_create(const unet_session *session,
                        const unet_udm_job_config *cfg, char *ticket,
                        size_t ticket_len);

/* Join the job of ticket as node rank (each rank once; a taken rank or a
 * wrong ticket is UNET_EENGINE, see the message). */
int unet_udm_join(const unet_session *session, const char *ticket,
                  uint32_t rank, unet_udm_node **out);

/* Join the job of ticket as node rank through this session's engine, the
 * job being the engine's at home ("HOST:PORT", its UDP address; NULL or ""
 * is this engine's, as unet_udm_join): the job then spans both engines
 * (docs/udm.md, "Across engines"). A taken rank or a wrong ticket is
 * UNET_EENGINE, a home that does not answer UNET_ETIMEDOUT or UNET_EENGINE
 * (see the message), a home that does not parse UNET_EINVAL. */
int unet_udm_join_at(const unet_session *session, const char *ticket,
                     const char *home, uint32_t rank, unet_udm_node **out);

/* The node's rank / the nodes of its job (UNET_EINVAL for NULL). */
int64_t unet_udm_rank(const unet_udm_node *node);
int64_t unet_udm_nodes(const unet_udm_node *node);

/* Leave the job and release the handle (the handler thread stops first,
 * after the handler it runs): senders to the node get UNET_EPEERGONE. */
int unet_udm_leave(unet_udm_node *node);

/* Release the handle (NULL is ignored), leaving as unet_udm_leave does. */
void unet_udm_node_free(unet_udm_node *node);

/* Messages ------------------------------------------------------------------- */

/* Send nwords words to node dest's handler `handler`: the whole message or
 * nothing, waiting while it cannot go (dest's fast ring full until dest
 * takes a message or is switched to buffered mode; overflow control). UNET_EINVAL no
 * such node, UNET_ETOOLARGE more than UNET_UDM_MAX_WORDS words,
 * UNET_EPEERGONE the node left or died. */
int unet_udm_inject(unet_udm_node *node, uint32_t dest, uint16_t handler,
                    const uint64_t *words, size_t nwords);

/* unet_udm_inject that never waits: UNET_EFULL when the message cannot go
 * now (nothing was sent). */
int unet_udm_injectc(unet_udm_node *node, uint32_t dest, uint16_t handler,
                     const uint64_t *words, size_t nwords);

/* Read the next message's words into words (room for cap) and its header
 * into *out (NULL: not wanted), and dispose of it. UNET_EEMPTY: no message;
 * UNET_ETOOSMALL: more words than cap (out->len says how many; the message
 * stays). */
int unet_udm_extract(unet_udm_node *node, uint64_t *words, size_t cap,
                     unet_udm_header *out);

/* Copy the next message as unet_udm_extract does; it stays. */
int unet_udm_peek(unet_udm_node *node, uint64_t *words, size_t cap,
                  unet_udm_header *out);

/* Free the next message; UNET_EEMPTY when there is none. */
int unet_udm_dispose(unet_udm_node *node);

/* The message-available flag: 1 or 0. */
int unet_udm_message_available(unet_udm_node *node);

/* Wait at most timeout_us (-1: forever) for a message: 1 when one is
 * available, UNET_ETIMEDOUT otherwise. With handlers it waits in an atomic
 * section (no handler takes the message). */
int unet_udm_wait(unet_udm_node *node, int64_t timeout_us);

/* Atomicity and handlers ----------------------------------------------------- */

/* Set the bits of mask (UNET_UDM_ATOM_DISABLE, UNET_UDM_ATOM_TIMER_FORCE):
 * with UNET_UDM_ATOM_DISABLE no handler runs until unet_udm_endatom (one
 * running is waited for). No system call. */
int unet_udm_beginatom(unet_udm_node *node, uint32_t mask);

/* Clear the bits of mask; the messages that waited run their handlers
 * (the deferred work of a handler's atomicity-extend included). */
int unet_udm_endatom(unet_udm_node *node, uint32_t mask);

/* The node's counters into *out. */
int unet_udm_get_stats(unet_udm_node *node, unet_udm_stats *out);

/* Register fn (with user) as the handler of index `index` (NULL removes
 * it). The first registration starts the node's handler thread: a message
 * that arrives outside an atomic section then calls its handler there, one
 * at a time. fn and user are used from that thread. A message with no
 * handler, or a handler that takes no message, suspends upcalls (the
 * message stays) until unet_udm_take_error. */
int unet_udm_set_handler(unet_udm_node *node, uint16_t index,
                         unet_udm_handler_fn fn, void *user);

/* The error that suspended upcalls: 1 with it in *out (NULL: not wanted),
 * which resumes upcalls; 0 when none. Extract or dispose of the message
 * first, or its handler runs again. */
int unet_udm_take_error(unet_udm_node *node, unet_udm_upcall_error *out);

/* In a handler: the message that raised the upcall. */
int unet_udm_upcall_header(unet_udm_upcall *up, unet_udm_header *out);

/* In a handler: as unet_udm_extract, _peek, _dispose, _message_available,
 * _inject (which may wait while the handler holds the node: prefer
 * _injectc) and _injectc. */
int unet_udm_upcall_extract(unet_udm_upcall *up, uint64_t *words, size_t cap,
                            unet_udm_header *out);
int unet_udm_upcall_peek(unet_udm_upcall *up, uint64_t *words, size_t cap,
                         unet_udm_header *out);
int unet_udm_upcall_dispose(unet_udm_upcall *up);
int unet_udm_upcall_message_available(unet_udm_upcall *up);
int unet_udm_upcall_inject(unet_udm_upcall *up, uint32_t dest,
                           uint16_t handler, const uint64_t *words,
                           size_t nwords);
int unet_udm_upcall_injectc(unet_udm_upcall *up, uint32_t dest,
                            uint16_t handler, const uint64_t *words,
                            size_t nwords);

/* In a handler: atomicity-extend. The atomic section goes on after the
 * handler returns, until the main code's unet_udm_endatom(node,
 * UNET_UDM_ATOM_DISABLE), which runs the handlers of the messages that
 * waited. */
int unet_udm_upcall_extend_atomicity(unet_udm_upcall *up);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* UNET_H */
