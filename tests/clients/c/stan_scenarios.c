/*
 * Interoperability scenarios for the official NATS C client (nats.c, streaming API)
 * against a stanpkg streaming server.
 *
 * Usage: stan_scenarios <scenario> <nats_url> <cluster_id>
 *
 * Runs one scenario and prints exactly one JSON object as the last line of stdout:
 *   {"ok": true, "result": {...}}     exit 0
 *   {"ok": false, "error": "..."}     exit 1 (2 when the watchdog fired)
 * Every wait has a deadline; a watchdog thread ends the process if a library call hangs.
 */
#define _POSIX_C_SOURCE 200809L
#define NATS_HAS_STREAMING

#include <nats/nats.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WAIT_MS 10000       /* a scenario gives up waiting for messages after this */
#define WATCHDOG_MS 30000   /* whole process, in case a library call blocks */
#define SETTLE_MS 300       /* quiet period used to check that nothing more arrives */
#define CONN_WAIT_MS 5000   /* connect, subscribe, unsubscribe and close requests */
#define PUB_ACK_WAIT_MS 10000
#define MAX_RECS 4096
#define MAX_ACKS 1024

static const char *g_url;
static const char *g_cluster;
static int64_t g_pub_ack_wait = PUB_ACK_WAIT_MS;
static pthread_mutex_t g_out_mu = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------------------------------ */
/* JSON output                                                                          */

static char *g_json;
static size_t g_json_len, g_json_cap;
static bool g_json_first[64];
static int g_json_depth;
static bool g_json_after_key;

static void j_raw(const char *s)
{
    size_t n = strlen(s);
    if (g_json_len + n + 1 > g_json_cap) {
        size_t cap = g_json_cap ? g_json_cap : 1024;
        while (g_json_len + n + 1 > cap)
            cap *= 2;
        char *grown = realloc(g_json, cap);
        if (grown == NULL)
            abort();
        g_json = grown;
        g_json_cap = cap;
    }
    memcpy(g_json + g_json_len, s, n + 1);
    g_json_len += n;
}

static void j_sep(void)
{
    if (g_json_after_key) {
        g_json_after_key = false;
        return;
    }
    if (g_json_depth > 0) {
        if (!g_json_first[g_json_depth])
            j_raw(", ");
        g_json_first[g_json_depth] = false;
    }
}

static void j_escaped(const char *s)
{
    char chunk[8];
    j_raw("\"");
    for (const unsigned char *p = (const unsigned char *) (s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') {
            chunk[0] = '\\';
            chunk[1] = (char) *p;
            chunk[2] = '\0';
        } else if (*p < 0x20) {
            snprintf(chunk, sizeof(chunk), "\\u%04x", (unsigned) *p);
        } else {
            chunk[0] = (char) *p;
            chunk[1] = '\0';
        }
        j_raw(chunk);
    }
    j_raw("\"");
}

static void j_open(const char *bracket)
{
    j_sep();
    j_raw(bracket);
    g_json_depth++;
    g_json_first[g_json_depth] = true;
}

static void j_close(const char *bracket)
{
    g_json_depth--;
    j_raw(bracket);
}

static void j_obj(void) { j_open("{"); }
static void j_obj_end(void) { j_close("}"); }
static void j_arr(void) { j_open("["); }
static void j_arr_end(void) { j_close("]"); }

static void j_key(const char *key)
{
    j_sep();
    j_escaped(key);
    j_raw(": ");
    g_json_after_key = true;
}

static void j_str(const char *s)
{
    j_sep();
    if (s == NULL)
        j_raw("null");
    else
        j_escaped(s);
}

static void j_int(long long v)
{
    char num[32];
    j_sep();
    snprintf(num, sizeof(num), "%lld", v);
    j_raw(num);
}

static void j_bool(bool v)
{
    j_sep();
    j_raw(v ? "true" : "false");
}

static void print_escaped(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", (unsigned) *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

/* Prints the failure report and ends the process (callable from any thread). */
static void fail_exit(int code, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&g_out_mu);
    fflush(stdout);
    printf("\n{\"ok\": false, \"error\": ");
    print_escaped(stdout, text);
    printf("}\n");
    fflush(stdout);
    _exit(code);
}

#define fail(...) fail_exit(1, __VA_ARGS__)

/* The text of the last error of this thread (the server's error string for STAN errors). */
static const char *last_error(natsStatus s)
{
    natsStatus ignored = NATS_OK;
    const char *text = nats_GetLastError(&ignored);
    if (text != NULL && text[0] != '\0')
        return text;
    return natsStatus_GetText(s);
}

#define CHECK(call, what)                                                                  \
    do {                                                                                   \
        natsStatus check_s_ = (call);                                                      \
        if (check_s_ != NATS_OK)                                                           \
            fail("%s: %s (%s)", (what), last_error(check_s_), natsStatus_GetText(check_s_)); \
    } while (0)

static void *watchdog(void *unused)
{
    (void) unused;
    nats_Sleep(WATCHDOG_MS);
    fail_exit(2, "watchdog: scenario did not finish within %d ms", WATCHDOG_MS);
    return NULL;
}

/* ------------------------------------------------------------------------------------ */
/* Received messages                                                                    */

typedef struct {
    int tag;
    uint64_t seq;
    int64_t timestamp;
    bool redelivered;
    int64_t at_ms;
    char data[64];
} Rec;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static Rec g_recs[MAX_RECS];
static int g_nrecs;
static char g_lost[512];

typedef enum {
    ACK_AUTO,        /* the library acks after the handler returns */
    ACK_ALL,         /* manual: ack every message */
    ACK_NONE,        /* manual: never ack */
    ACK_UPTO,        /* manual: ack sequences <= upto */
    ACK_REDELIVERED  /* manual: ack redeliveries only */
} AckPolicy;

typedef struct {
    int tag;
    AckPolicy policy;
    uint64_t upto;
    stanSubscription *sub;
} Sub;

static void on_msg(stanConnection *sc, stanSubscription *sub, const char *channel, stanMsg *msg,
                   void *closure)
{
    Sub *s = (Sub *) closure;
    bool ack = false;
    (void) sc;
    (void) channel;
    pthread_mutex_lock(&g_mu);
    if (g_nrecs < MAX_RECS) {
        Rec *r = &g_recs[g_nrecs++];
        int len = stanMsg_GetDataLength(msg);
        if (len > (int) sizeof(r->data) - 1)
            len = (int) sizeof(r->data) - 1;
        r->tag = s->tag;
        r->seq = stanMsg_GetSequence(msg);
        r->timestamp = stanMsg_GetTimestamp(msg);
        r->redelivered = stanMsg_IsRedelivered(msg);
        r->at_ms = nats_Now();
        if (len > 0)
            memcpy(r->data, stanMsg_GetData(msg), (size_t) len);
        r->data[len > 0 ? len : 0] = '\0';
    }
    pthread_mutex_unlock(&g_mu);
    switch (s->policy) {
    case ACK_ALL:
        ack = true;
        break;
    case ACK_UPTO:
        ack = stanMsg_GetSequence(msg) <= s->upto;
        break;
    case ACK_REDELIVERED:
        ack = stanMsg_IsRedelivered(msg);
        break;
    default:
        break;
    }
    if (ack)
        stanSubscription_AckMsg(sub, msg);
    stanMsg_Destroy(msg);
}

static int count_tag(int tag)
{
    int n = 0;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_nrecs; i++)
        if (tag < 0 || g_recs[i].tag == tag)
            n++;
    pthread_mutex_unlock(&g_mu);
    return n;
}

/* Waits until `tag` (any when < 0) got at least `n` messages, then SETTLE_MS more. */
static void wait_for(int tag, int n, const char *what)
{
    int64_t deadline = nats_Now() + WAIT_MS;
    int got = 0;
    while ((got = count_tag(tag)) < n) {
        if (nats_Now() > deadline)
            fail("%s: got %d of %d messages within %d ms", what, got, n, WAIT_MS);
        nats_Sleep(5);
    }
    nats_Sleep(SETTLE_MS);
}

/* A copy of the records of `tag` (any when < 0), in arrival order. */
static int snapshot(int tag, Rec *out, int max)
{
    int n = 0;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_nrecs && n < max; i++)
        if (tag < 0 || g_recs[i].tag == tag)
            out[n++] = g_recs[i];
    pthread_mutex_unlock(&g_mu);
    return n;
}

static Rec g_snap[MAX_RECS];

/* "key": [seq, ...] */
static void emit_seqs(const char *key, int tag)
{
    int n = snapshot(tag, g_snap, MAX_RECS);
    j_key(key);
    j_arr();
    for (int i = 0; i < n; i++)
        j_int((long long) g_snap[i].seq);
    j_arr_end();
}

/* "key": [{"seq", "data", "redelivered"}, ...] */
static void emit_msgs(const char *key, int tag)
{
    int n = snapshot(tag, g_snap, MAX_RECS);
    j_key(key);
    j_arr();
    for (int i = 0; i < n; i++) {
        j_obj();
        j_key("seq");
        j_int((long long) g_snap[i].seq);
        j_key("data");
        j_str(g_snap[i].data);
        j_key("redelivered");
        j_bool(g_snap[i].redelivered);
        j_obj_end();
    }
    j_arr_end();
}

/* ------------------------------------------------------------------------------------ */
/* Connections, subscriptions, publishing                                               */

static void on_lost(stanConnection *sc, const char *error, void *closure)
{
    (void) sc;
    (void) closure;
    pthread_mutex_lock(&g_mu);
    snprintf(g_lost, sizeof(g_lost), "%s", error ? error : "(null)");
    pthread_mutex_unlock(&g_mu);
}

static natsStatus try_connect(stanConnection **sc, const char *client_id, bool pings)
{
    stanConnOptions *opts = NULL;
    natsStatus s = stanConnOptions_Create(&opts);
    if (s == NATS_OK)
        s = stanConnOptions_SetURL(opts, g_url);
    if (s == NATS_OK)
        s = stanConnOptions_SetConnectionWait(opts, CONN_WAIT_MS);
    if (s == NATS_OK)
        s = stanConnOptions_SetPubAckWait(opts, g_pub_ack_wait);
    if (s == NATS_OK && pings)
        s = stanConnOptions_SetPings(opts, 1, 3);
    if (s == NATS_OK)
        s = stanConnOptions_SetConnectionLostHandler(opts, on_lost, NULL);
    if (s == NATS_OK)
        s = stanConnection_Connect(sc, g_cluster, client_id, opts);
    stanConnOptions_Destroy(opts);
    return s;
}

static stanConnection *connect_or_fail(const char *client_id, bool pings)
{
    stanConnection *sc = NULL;
    char what[128];
    snprintf(what, sizeof(what), "connect %s", client_id);
    CHECK(try_connect(&sc, client_id, pings), what);
    return sc;
}

static void close_conn(stanConnection *sc)
{
    CHECK(stanConnection_Close(sc), "close connection");
    stanConnection_Destroy(sc);
}

/* Closes the connection while `open` is still subscribed (no unsubscribe/close request is
 * sent for it: the server handles it as part of the connection close). */
static void close_conn_leaving(stanConnection *sc, stanSubscription *open)
{
    CHECK(stanConnection_Close(sc), "close connection");
    stanSubscription_Destroy(open);
    stanConnection_Destroy(sc);
}

typedef enum { START_NEW, START_ALL, START_LAST, START_SEQ, START_TIME, START_DELTA } Start;

typedef struct {
    const char *durable;
    const char *queue;
    Start start;
    int64_t arg;        /* sequence, time (ms since epoch) or delta (ms) */
    int max_inflight;   /* 0: library default */
    int64_t ack_wait;   /* ms, 0: library default */
} Spec;

static natsStatus try_subscribe(Sub *s, stanConnection *sc, const char *channel, Spec spec,
                                int tag, AckPolicy policy)
{
    stanSubOptions *o = NULL;
    natsStatus st = stanSubOptions_Create(&o);
    s->tag = tag;
    s->policy = policy;
    s->sub = NULL;
    if (st == NATS_OK && policy != ACK_AUTO)
        st = stanSubOptions_SetManualAckMode(o, true);
    if (st == NATS_OK && spec.durable != NULL)
        st = stanSubOptions_SetDurableName(o, spec.durable);
    if (st == NATS_OK && spec.max_inflight > 0)
        st = stanSubOptions_SetMaxInflight(o, spec.max_inflight);
    if (st == NATS_OK && spec.ack_wait > 0)
        st = stanSubOptions_SetAckWait(o, spec.ack_wait);
    if (st == NATS_OK) {
        switch (spec.start) {
        case START_ALL:
            st = stanSubOptions_DeliverAllAvailable(o);
            break;
        case START_LAST:
            st = stanSubOptions_StartWithLastReceived(o);
            break;
        case START_SEQ:
            st = stanSubOptions_StartAtSequence(o, (uint64_t) spec.arg);
            break;
        case START_TIME:
            st = stanSubOptions_StartAtTime(o, spec.arg);
            break;
        case START_DELTA:
            st = stanSubOptions_StartAtTimeDelta(o, spec.arg);
            break;
        default:
            break;
        }
    }
    if (st == NATS_OK) {
        if (spec.queue != NULL)
            st = stanConnection_QueueSubscribe(&s->sub, sc, channel, spec.queue, on_msg, s, o);
        else
            st = stanConnection_Subscribe(&s->sub, sc, channel, on_msg, s, o);
    }
    stanSubOptions_Destroy(o);
    return st;
}

static void subscribe(Sub *s, stanConnection *sc, const char *channel, Spec spec, int tag,
                      AckPolicy policy)
{
    char what[160];
    snprintf(what, sizeof(what), "subscribe to %s (tag %d)", channel, tag);
    CHECK(try_subscribe(s, sc, channel, spec, tag, policy), what);
}

static void unsubscribe(Sub *s)
{
    CHECK(stanSubscription_Unsubscribe(s->sub), "unsubscribe");
    stanSubscription_Destroy(s->sub);
    s->sub = NULL;
}

static void close_sub(Sub *s)
{
    CHECK(stanSubscription_Close(s->sub), "close subscription");
    stanSubscription_Destroy(s->sub);
    s->sub = NULL;
}

static void publish(stanConnection *sc, const char *channel, const char *data)
{
    char what[160];
    snprintf(what, sizeof(what), "publish %s to %s", data, channel);
    CHECK(stanConnection_Publish(sc, channel, data, (int) strlen(data)), what);
}

/* Publishes "<prefix><first>" .. "<prefix><last>". */
static void publish_numbered(stanConnection *sc, const char *channel, const char *prefix,
                             int first, int last)
{
    char data[32];
    for (int i = first; i <= last; i++) {
        snprintf(data, sizeof(data), "%s%d", prefix, i);
        publish(sc, channel, data);
    }
}

/* Async publish acknowledgements, one record per published message (the closure). */
typedef struct {
    int acks;
    char guid[64];
    char error[256];
    bool has_error;
} AckRec;

static AckRec g_acks[MAX_ACKS];

static void on_pub_ack(const char *guid, const char *error, void *closure)
{
    AckRec *r = (AckRec *) closure;
    pthread_mutex_lock(&g_mu);
    r->acks++;
    snprintf(r->guid, sizeof(r->guid), "%s", guid ? guid : "");
    if (error != NULL) {
        r->has_error = true;
        snprintf(r->error, sizeof(r->error), "%s", error);
    }
    pthread_mutex_unlock(&g_mu);
}

static int acks_received(int n)
{
    int got = 0;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < n; i++)
        got += g_acks[i].acks > 0;
    pthread_mutex_unlock(&g_mu);
    return got;
}

static void wait_acks(int n)
{
    int64_t deadline = nats_Now() + WAIT_MS;
    while (acks_received(n) < n) {
        if (nats_Now() > deadline)
            fail("publish acks: got %d of %d within %d ms", acks_received(n), n, WAIT_MS);
        nats_Sleep(5);
    }
}

static void reset_records(void)
{
    pthread_mutex_lock(&g_mu);
    g_nrecs = 0;
    pthread_mutex_unlock(&g_mu);
}

static const Spec NEW_ONLY = {NULL, NULL, START_NEW, 0, 0, 0};
static const Spec ALL = {NULL, NULL, START_ALL, 0, 0, 0};

/* ------------------------------------------------------------------------------------ */
/* Scenarios                                                                            */

#define PUBSUB_N 50

/* Pings on; N sync + N async publishes; a live subscriber and a DeliverAllAvailable one. */
static void sc_pubsub(void)
{
    char data[32];
    Sub live, all;
    int64_t t0 = nats_NowInNanoSeconds();
    stanConnection *sc = connect_or_fail("c-pubsub", true);
    subscribe(&live, sc, "pubsub", NEW_ONLY, 1, ACK_AUTO);
    publish_numbered(sc, "pubsub", "s", 0, PUBSUB_N - 1);
    for (int i = 0; i < PUBSUB_N; i++) {
        snprintf(data, sizeof(data), "a%d", i);
        CHECK(stanConnection_PublishAsync(sc, "pubsub", data, (int) strlen(data), on_pub_ack,
                                          &g_acks[i]),
              "publish async");
    }
    wait_acks(PUBSUB_N);
    subscribe(&all, sc, "pubsub", ALL, 2, ACK_AUTO);
    wait_for(2, 2 * PUBSUB_N, "deliver all");
    wait_for(1, 2 * PUBSUB_N, "live subscriber");
    int64_t t1 = nats_NowInNanoSeconds();

    j_key("acks");
    j_obj();
    {
        int errors = 0, multiple = 0, distinct = 0, bad_guid = 0;
        pthread_mutex_lock(&g_mu);
        for (int i = 0; i < PUBSUB_N; i++) {
            errors += g_acks[i].has_error;
            multiple += g_acks[i].acks != 1;
            bad_guid += strlen(g_acks[i].guid) == 0;
            bool seen = false;
            for (int k = 0; k < i; k++)
                seen = seen || strcmp(g_acks[k].guid, g_acks[i].guid) == 0;
            distinct += !seen;
        }
        pthread_mutex_unlock(&g_mu);
        j_key("count");
        j_int(acks_received(PUBSUB_N));
        j_key("errors");
        j_int(errors);
        j_key("not_exactly_once");
        j_int(multiple);
        j_key("empty_guids");
        j_int(bad_guid);
        j_key("distinct_guids");
        j_int(distinct);
    }
    j_obj_end();
    for (int tag = 1; tag <= 2; tag++) {
        int n = snapshot(tag, g_snap, MAX_RECS);
        int redelivered = 0, ts_in_range = 0, ts_ordered = 1;
        for (int i = 0; i < n; i++) {
            redelivered += g_snap[i].redelivered;
            ts_in_range += g_snap[i].timestamp >= t0 - 5000000000LL &&
                           g_snap[i].timestamp <= t1 + 5000000000LL;
            if (i > 0 && g_snap[i].timestamp < g_snap[i - 1].timestamp)
                ts_ordered = 0;
        }
        j_key(tag == 1 ? "live" : "all");
        j_obj();
        emit_seqs("seqs", tag);
        j_key("data");
        j_arr();
        for (int i = 0; i < n; i++)
            j_str(g_snap[i].data);
        j_arr_end();
        j_key("redelivered");
        j_int(redelivered);
        j_key("timestamps_in_range");
        j_int(ts_in_range);
        j_key("timestamps_ordered");
        j_bool(ts_ordered);
        j_obj_end();
    }
    unsubscribe(&all);
    unsubscribe(&live);
    close_conn(sc);
    j_key("lost");
    pthread_mutex_lock(&g_mu);
    j_str(g_lost[0] ? g_lost : NULL);
    pthread_mutex_unlock(&g_mu);
}

/* Stays connected with 1 s client PINGs (max out 3) for several intervals. */
static void sc_pings(void)
{
    stanConnection *sc = connect_or_fail("c-pings", true);
    nats_Sleep(4500);
    publish(sc, "pings", "still here");
    close_conn(sc);
    j_key("lost");
    pthread_mutex_lock(&g_mu);
    j_str(g_lost[0] ? g_lost : NULL);
    pthread_mutex_unlock(&g_mu);
}

/* One subscription per start position; waits for `expect` messages, unsubscribes. */
static void start_variant(stanConnection *sc, const char *key, Spec spec, int expect, int tag)
{
    Sub s;
    subscribe(&s, sc, "starts", spec, tag, ACK_AUTO);
    if (expect > 0)
        wait_for(tag, expect, key);
    else
        nats_Sleep(SETTLE_MS);
    emit_seqs(key, tag);
    unsubscribe(&s);
}

static void sc_starts(void)
{
    stanConnection *sc = connect_or_fail("c-starts", false);
    publish_numbered(sc, "starts", "m", 1, 3);
    nats_Sleep(1000);
    int64_t middle = nats_Now();
    nats_Sleep(1000);
    publish_numbered(sc, "starts", "m", 4, 5);
    Spec spec = ALL;
    start_variant(sc, "all", spec, 5, 1);
    spec.start = START_LAST;
    start_variant(sc, "last", spec, 1, 2);
    spec.start = START_SEQ;
    spec.arg = 3;
    start_variant(sc, "seq3", spec, 3, 3);
    spec.arg = 100;
    start_variant(sc, "seq100", spec, 0, 4);
    spec.start = START_DELTA;
    spec.arg = 60000;
    start_variant(sc, "delta60s", spec, 5, 5);
    spec.arg = nats_Now() - middle;
    start_variant(sc, "deltaMiddle", spec, 2, 6);
    spec.start = START_TIME;
    spec.arg = middle;
    start_variant(sc, "timeMiddle", spec, 2, 7);
    start_variant(sc, "newOnly", NEW_ONLY, 0, 8);

    /* Start positions beyond the end deliver what is published next. */
    Sub fresh, beyond;
    subscribe(&fresh, sc, "starts", NEW_ONLY, 9, ACK_AUTO);
    spec.start = START_SEQ;
    spec.arg = 100;
    subscribe(&beyond, sc, "starts", spec, 10, ACK_AUTO);
    publish(sc, "starts", "m6");
    wait_for(9, 1, "new only after publish");
    wait_for(10, 1, "sequence 100 after publish");
    emit_seqs("newOnlyThenPublish", 9);
    emit_seqs("seq100ThenPublish", 10);
    unsubscribe(&fresh);
    unsubscribe(&beyond);
    close_conn(sc);
}

/* Durable, manual acks, max in flight 3; connection closed without unsubscribing. */
static void sc_durable(void)
{
    Sub first, again;
    Spec spec = ALL;
    spec.durable = "dur";
    spec.max_inflight = 3;
    stanConnection *sc = connect_or_fail("c-durable", true);
    publish_numbered(sc, "durable", "d", 1, 6);
    first.upto = 2;
    subscribe(&first, sc, "durable", spec, 1, ACK_UPTO);
    wait_for(1, 5, "first delivery");
    emit_msgs("first", 1);
    close_conn_leaving(sc, first.sub); /* the durable goes offline */

    sc = connect_or_fail("c-durable", true);
    subscribe(&again, sc, "durable", spec, 2, ACK_ALL);
    wait_for(2, 4, "resumed delivery");
    publish(sc, "durable", "d7");
    wait_for(2, 5, "new message after resume");
    emit_msgs("resumed", 2);
    close_sub(&again);
    close_conn(sc);
}

/* Manual acks, ack wait 1 s: not acked the first time, redelivered, acked then. */
static void sc_ackwait(void)
{
    Sub s;
    Spec spec = NEW_ONLY;
    spec.ack_wait = 1000;
    stanConnection *sc = connect_or_fail("c-ackwait", false);
    subscribe(&s, sc, "ackwait", spec, 1, ACK_REDELIVERED);
    publish(sc, "ackwait", "once");
    wait_for(1, 2, "redelivery");
    nats_Sleep(1500); /* acked on the redelivery: nothing more may come */
    int n = snapshot(1, g_snap, MAX_RECS);
    emit_msgs("deliveries", 1);
    j_key("gap_ms");
    j_int(n >= 2 ? (long long) (g_snap[1].at_ms - g_snap[0].at_ms) : -1);
    unsubscribe(&s);
    close_conn(sc);
}

/* Queue groups: two connections share the messages, then a member with unacked messages
 * leaves and the remaining member gets them redelivered. */
static void sc_queue(void)
{
    Sub a, b, c, same1, same2;
    Spec spec = NEW_ONLY;
    spec.queue = "workers";
    stanConnection *qa = connect_or_fail("c-qa", false);
    stanConnection *qb = connect_or_fail("c-qb", false);
    subscribe(&a, qa, "queue", spec, 1, ACK_AUTO);
    subscribe(&b, qb, "queue", spec, 2, ACK_AUTO);
    publish_numbered(qa, "queue", "w", 0, 19);
    wait_for(-1, 20, "queue members");
    emit_seqs("a", 1);
    emit_seqs("b", 2);

    /* C holds its messages unacked, then its connection closes: B gets them. */
    unsubscribe(&a);
    reset_records();
    stanConnection *qc = connect_or_fail("c-qc", false);
    subscribe(&c, qc, "queue", spec, 3, ACK_NONE);
    publish_numbered(qa, "queue", "v", 0, 5);
    wait_for(-1, 6, "second round");
    emit_seqs("held", 3);
    close_conn_leaving(qc, c.sub);
    wait_for(2, 6, "moved to b");
    {
        int n = snapshot(2, g_snap, MAX_RECS);
        j_key("b_after");
        j_arr();
        for (int i = 0; i < n; i++) {
            j_arr();
            j_int((long long) g_snap[i].seq);
            j_bool(g_snap[i].redelivered);
            j_arr_end();
        }
        j_arr_end();
    }
    unsubscribe(&b);

    /* Two members of one group on a single connection. */
    reset_records();
    spec.queue = "pair";
    subscribe(&same1, qa, "queue2", spec, 4, ACK_AUTO);
    subscribe(&same2, qa, "queue2", spec, 5, ACK_AUTO);
    publish_numbered(qb, "queue2", "p", 0, 9);
    wait_for(-1, 10, "same connection members");
    emit_seqs("same1", 4);
    emit_seqs("same2", 5);
    unsubscribe(&same1);
    unsubscribe(&same2);
    close_conn(qa);
    close_conn(qb);
}

static void emit_sub_error(const char *key, stanConnection *sc, const char *channel, Spec spec)
{
    Sub s;
    natsStatus st = try_subscribe(&s, sc, channel, spec, 99, ACK_AUTO);
    j_key(key);
    if (st == NATS_OK) {
        j_str(NULL);
        unsubscribe(&s);
    } else {
        j_str(last_error(st));
    }
}

static void emit_pub_error(const char *key, stanConnection *sc, const char *channel)
{
    natsStatus st = stanConnection_Publish(sc, channel, "x", 1);
    j_key(key);
    j_str(st == NATS_OK ? NULL : last_error(st));
}

/* Errors the server sends, as the C client reports them. */
static void sc_errors(void)
{
    stanConnection *sc = connect_or_fail("c-errs", false);
    stanConnection *dup = NULL;
    natsStatus st = try_connect(&dup, "c-errs", false);
    j_key("duplicate");
    j_str(st == NATS_OK ? NULL : last_error(st));
    if (st == NATS_OK)
        close_conn(dup);
    dup = NULL;
    st = try_connect(&dup, "bad.client", false);
    j_key("invalidClientID");
    j_str(st == NATS_OK ? NULL : last_error(st));
    if (st == NATS_OK)
        close_conn(dup);

    emit_pub_error("publishWildcard", sc, "foo.*");
    emit_pub_error("publishFullWildcard", sc, "foo.>");
    emit_pub_error("publishSlash", sc, "foo/bar");
    /* The same error through an async publish's ack handler. */
    CHECK(stanConnection_PublishAsync(sc, "foo.*", "x", 1, on_pub_ack, &g_acks[0]),
          "async publish");
    wait_acks(1);
    j_key("publishAsyncWildcard");
    pthread_mutex_lock(&g_mu);
    j_str(g_acks[0].has_error ? g_acks[0].error : NULL);
    pthread_mutex_unlock(&g_mu);

    /* Empty tokens ("foo..bar", "foo.") make the NATS subject _STAN.pub.<id>.<channel>
     * invalid: nats-server drops such messages, so the publish can only time out. */
    g_pub_ack_wait = 1000;
    stanConnection *quick = connect_or_fail("c-errs-quick", false);
    emit_pub_error("publishDoubleDot", quick, "foo..bar");
    emit_pub_error("publishTrailingDot", quick, "foo.");
    emit_pub_error("publishAfterDropped", quick, "fine");
    close_conn(quick);

    publish(sc, "casing", "x");
    emit_pub_error("publishCase", sc, "Casing");
    emit_sub_error("subscribeCase", sc, "CASING", NEW_ONLY);

    emit_sub_error("subscribeWildcard", sc, "foo.*", NEW_ONLY);
    emit_sub_error("subscribeDoubleDot", sc, "foo..bar", NEW_ONLY);
    Spec spec = NEW_ONLY;
    spec.ack_wait = 500; /* the library sends ackWait/1000 = 0 seconds */
    emit_sub_error("ackWaitBelow1s", sc, "x", spec);
    spec = NEW_ONLY;
    spec.durable = "a:b";
    spec.queue = "g";
    emit_sub_error("durableQueueColon", sc, "x", spec);
    spec.queue = NULL;
    emit_sub_error("plainDurableColon", sc, "x", spec); /* allowed for plain durables */

    Sub held;
    spec = NEW_ONLY;
    spec.durable = "dup";
    subscribe(&held, sc, "x", spec, 1, ACK_AUTO);
    emit_sub_error("duplicateDurable", sc, "x", spec);
    close_sub(&held);
    close_conn(sc);
}

/* Unsubscribe removes a durable, close keeps it. */
static void sc_unsub_durable(void)
{
    Sub s;
    Spec spec = ALL;
    spec.durable = "keep";
    stanConnection *sc = connect_or_fail("c-unsub", false);
    publish(sc, "u", "u1");
    publish(sc, "u", "u2");
    subscribe(&s, sc, "u", spec, 1, ACK_AUTO);
    wait_for(1, 2, "first");
    emit_seqs("first", 1);
    close_sub(&s);
    publish(sc, "u", "u3");
    subscribe(&s, sc, "u", spec, 2, ACK_AUTO);
    wait_for(2, 1, "after close");
    emit_seqs("afterClose", 2);
    unsubscribe(&s);
    subscribe(&s, sc, "u", spec, 3, ACK_AUTO);
    wait_for(3, 3, "after unsubscribe");
    emit_seqs("afterUnsubscribe", 3);
    unsubscribe(&s);
    spec.start = START_NEW;
    subscribe(&s, sc, "u", spec, 4, ACK_AUTO);
    nats_Sleep(SETTLE_MS);
    emit_seqs("newOnlyAfterUnsubscribe", 4);
    unsubscribe(&s);
    close_conn(sc);
}

/* FILE store restart, first half: durable with 3 of 5 acked, connection closed. */
static void sc_restart_before(void)
{
    char data[16];
    Sub s;
    Spec spec = ALL;
    spec.durable = "fd";
    stanConnection *sc = connect_or_fail("c-restart", false);
    publish_numbered(sc, "restart", "f", 1, 3);
    for (int i = 4; i <= 5; i++) {
        snprintf(data, sizeof(data), "f%d", i);
        CHECK(stanConnection_PublishAsync(sc, "restart", data, (int) strlen(data), on_pub_ack,
                                          &g_acks[i - 4]),
              "publish async");
    }
    wait_acks(2);
    s.upto = 3;
    subscribe(&s, sc, "restart", spec, 1, ACK_UPTO);
    wait_for(1, 5, "before restart");
    emit_msgs("before", 1);
    close_conn_leaving(sc, s.sub);
}

/* FILE store restart, second half: the durable resumes with its unacked messages. */
static void sc_restart_after(void)
{
    Sub s, all;
    Spec spec = ALL;
    spec.durable = "fd";
    stanConnection *sc = connect_or_fail("c-restart", false);
    subscribe(&s, sc, "restart", spec, 1, ACK_ALL);
    wait_for(1, 2, "resumed");
    publish(sc, "restart", "f6");
    wait_for(1, 3, "new after resume");
    emit_msgs("resumed", 1);
    subscribe(&all, sc, "restart", ALL, 2, ACK_AUTO);
    wait_for(2, 6, "all after restart");
    emit_msgs("all", 2);
    unsubscribe(&all);
    unsubscribe(&s);
    close_conn(sc);
}

typedef struct {
    const char *name;
    void (*run)(void);
} Scenario;

static const Scenario SCENARIOS[] = {
    {"pubsub", sc_pubsub},
    {"pings", sc_pings},
    {"starts", sc_starts},
    {"durable", sc_durable},
    {"ackwait", sc_ackwait},
    {"queue", sc_queue},
    {"errors", sc_errors},
    {"unsub-durable", sc_unsub_durable},
    {"restart-before", sc_restart_before},
    {"restart-after", sc_restart_after},
};

int main(int argc, char **argv)
{
    pthread_t dog;
    const Scenario *found = NULL;
    if (argc != 4) {
        fprintf(stderr, "usage: %s <scenario> <nats_url> <cluster_id>\n", argv[0]);
        fail("usage: stan_scenarios <scenario> <nats_url> <cluster_id>");
    }
    g_url = argv[2];
    g_cluster = argv[3];
    for (size_t i = 0; i < sizeof(SCENARIOS) / sizeof(SCENARIOS[0]); i++)
        if (strcmp(SCENARIOS[i].name, argv[1]) == 0)
            found = &SCENARIOS[i];
    if (found == NULL)
        fail("unknown scenario %s", argv[1]);
    if (pthread_create(&dog, NULL, watchdog, NULL) != 0)
        fail("cannot start the watchdog thread");
    pthread_detach(dog);
    CHECK(nats_Open(-1), "nats_Open");

    j_obj();
    found->run();
    j_obj_end();

    pthread_mutex_lock(&g_out_mu);
    printf("{\"ok\": true, \"result\": %s}\n", g_json);
    fflush(stdout);
    _exit(0); /* the library's threads are not joined: nothing is left to flush */
}
