/*
 * healthledger-client — the reference C client of the HealthLedger RPC protocol (v1).
 *
 * Usage: healthledger-client HOST PORT CREDENTIAL
 *        healthledger-client ADDRESS[,ADDRESS...] CREDENTIAL
 *
 * An ADDRESS is HOST:PORT, or unix:PATH for the server's Unix domain socket on this host
 * (healthledgerd --unix-socket PATH).
 *
 * Over one connection it calls healthledger.v1.Ledger/Ping, saves one heart-rate
 * sample with healthledger.v1.Ledger/Save, reads the heart-rate samples back with
 * the streaming healthledger.v1.Ledger/QuerySamples, and follows the changes with
 * healthledger.v1.Ledger/QueryChanges: from the beginning (the saved sample is among the
 * added objects), then from the opaque anchor it returned (nothing new). See
 * docs/PROTOCOL.md.
 *
 * With several addresses (the members of a cluster, docs/PROTOCOL.md §7.18-§7.19) it starts
 * with the first that answers and carries on by itself: a call refused with a primary
 * named (CallStatus.primary: a write to a follower, or a read of a ledger the member keeps
 * no copy of) goes there; a server that cannot be reached, or answers
 * UNAVAILABLE, is set aside for the next address, for up to FAILOVER_PATIENCE_SECONDS; a
 * save sent again after an unknown outcome that is then refused ALREADY_EXISTS was saved
 * (its UUID makes resending safe). Calls that delivered part of a stream are not retried.
 *
 * Wire format: every frame is 1 flags byte (0), a 4-byte big-endian length, and a
 * serialized healthledger.v1.Frame of that length.
 *
 * Exit status: 0 when every call ended OK and the saved sample was read back;
 * 1 on a usage, connection or protocol error; 2 when a call ended with a non-OK status;
 * 3 when the calls succeeded but the saved sample was not among the query results (or
 * the anchored query did not behave as described).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "healthledger/v1/objects.pb-c.h"
#include "healthledger/v1/rpc.pb-c.h"

#define METHOD_PING "healthledger.v1.Ledger/Ping"
#define METHOD_SAVE "healthledger.v1.Ledger/Save"
#define METHOD_QUERY_SAMPLES "healthledger.v1.Ledger/QuerySamples"
#define METHOD_QUERY_CHANGES "healthledger.v1.Ledger/QueryChanges"
#define HEART_RATE_TYPE "HKQuantityTypeIdentifierHeartRate"

enum {
    FRAME_HEADER_SIZE = 5,
    MAX_FRAME_SIZE = 16 << 20,   /* frames larger than 16 MiB are rejected */
    STREAM_WINDOW = 16,          /* initial window of streaming calls, in messages */
    IO_TIMEOUT_SECONDS = 30,     /* a send or receive that stalls this long fails */
    UUID_SIZE = 16,
    UUID_STRING_SIZE = 37,       /* 8-4-4-4-12 hex digits plus the terminator */
    FAILOVER_PATIENCE_SECONDS = 30, /* how long a call keeps trying other servers */
    RETRY_PAUSE_MS = 200,        /* the pause after every address failed once */
    MAX_ADDRESSES = 16,
    ADDRESS_SIZE = 256,
};

enum {
    STATUS_ALREADY_EXISTS = 6,
    STATUS_FAILED_PRECONDITION = 9,
    STATUS_UNAVAILABLE = 14,
};

enum {
    EXIT_LOCAL_ERROR = 1,
    EXIT_CALL_FAILED = 2,
    EXIT_NOT_FOUND = 3,
};

/* Outcome of run_call() besides a status code >= 0 received from the server. */
#define CALL_LOCAL_FAILURE (-1)

/* One connection to the server. */
typedef struct {
    int fd;
    bool going_away; /* the server sent go_away: open no new calls */
} Connection;

/* How a call ended: its status (or CALL_LOCAL_FAILURE) and what the status said. */
typedef struct {
    int code;
    char message[512];
    char primary[ADDRESS_SIZE]; /* CallStatus.primary: where to send a refused write */
    bool unprocessed;           /* CallStatus.unprocessed: the server did nothing with it */
    size_t messages;            /* response messages delivered to the handler */
    const char *lost;           /* why the connection failed or closed before the status, or NULL */
} CallResult;

/* The servers a client may use, and its connection to one of them. */
typedef struct {
    char addresses[MAX_ADDRESSES][ADDRESS_SIZE]; /* HOST:PORT; a primary named is added */
    size_t count;
    size_t current;     /* the address `conn` is connected to, or is tried next */
    Connection conn;    /* fd -1: not connected */
    uint64_t next_call; /* call ids increase over the client's life */
} Client;

/* Receives one response message of a call; returns false if it cannot be used. */
typedef bool (*MessageHandler)(const ProtobufCBinaryData *message, void *context);

/* ---- formatting helpers ------------------------------------------------------------ */

/* Writes `bytes` as an 8-4-4-4-12 lowercase hex UUID, or "<invalid uuid>" if not 16 bytes. */
static void format_uuid(const ProtobufCBinaryData *bytes, char out[UUID_STRING_SIZE]) {
    if (bytes->len != UUID_SIZE) {
        snprintf(out, UUID_STRING_SIZE, "<invalid uuid>");
        return;
    }
    char *p = out;
    for (size_t i = 0; i < UUID_SIZE; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) *p++ = '-';
        p += sprintf(p, "%02x", bytes->data[i]);
    }
}

static const char *disposition_name(Healthledger__V1__SaveOutcome__Disposition disposition) {
    switch (disposition) {
    case HEALTHLEDGER__V1__SAVE_OUTCOME__DISPOSITION__DISPOSITION_SAVED: return "saved";
    case HEALTHLEDGER__V1__SAVE_OUTCOME__DISPOSITION__DISPOSITION_REPLACED: return "replaced";
    case HEALTHLEDGER__V1__SAVE_OUTCOME__DISPOSITION__DISPOSITION_IGNORED: return "ignored";
    default: return "unspecified";
    }
}

/* ---- sockets and frames ------------------------------------------------------------ */

/* Never wait forever on a silent server. */
static void set_io_timeouts(int fd) {
    struct timeval timeout = {.tv_sec = IO_TIMEOUT_SECONDS, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
}

/* Connects to the Unix domain socket at `path`; returns the socket, or -1 with the reason in `why`. */
static int connect_to_unix(const char *path, char *why, size_t why_size) {
    struct sockaddr_un address = {0};
    address.sun_family = AF_UNIX;
    if (path[0] == '\0' || strlen(path) >= sizeof address.sun_path) {
        snprintf(why, why_size, "'unix:%s' is not a Unix domain socket path (1 to %zu bytes)", path, sizeof address.sun_path - 1);
        return -1;
    }
    memcpy(address.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd >= 0) set_io_timeouts(fd); /* before connect: a server whose queue is full is not waited for forever */
    if (fd < 0 || connect(fd, (const struct sockaddr *)&address, sizeof address) != 0) {
        snprintf(why, why_size, "cannot connect to unix:%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

/* Connects to host:port over TCP; returns the socket, or -1 with the reason in `why`. */
static int connect_to(const char *host, const char *port, char *why, size_t why_size) {
    struct addrinfo hints = {0};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    struct addrinfo *addresses = NULL;
    int rc = getaddrinfo(host, port, &hints, &addresses);
    if (rc != 0) {
        snprintf(why, why_size, "cannot resolve %s:%s: %s", host, port, gai_strerror(rc));
        return -1;
    }
    int fd = -1;
    int last_errno = 0;
    for (struct addrinfo *a = addresses; a != NULL; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) {
            last_errno = errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
        last_errno = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(addresses);
    if (fd < 0) {
        snprintf(why, why_size, "cannot connect to %s:%s: %s", host, port, strerror(last_errno));
        return -1;
    }
    set_io_timeouts(fd);
    return fd;
}

/* Sends all `length` bytes; returns false on error. */
static bool send_all(int fd, const uint8_t *bytes, size_t length) {
    while (length > 0) {
        ssize_t sent = send(fd, bytes, length, MSG_NOSIGNAL);
        if (sent < 0) {
            if (errno == EINTR) continue;
            fprintf(stderr, "error: send: %s\n", strerror(errno));
            return false;
        }
        bytes += sent;
        length -= (size_t)sent;
    }
    return true;
}

/* Receives exactly `length` bytes. Returns the number received: `length` on success,
 * fewer if the connection closed first, or -1 on error (printed). */
static ssize_t recv_exact(int fd, uint8_t *bytes, size_t length) {
    size_t received = 0;
    while (received < length) {
        ssize_t n = recv(fd, bytes + received, length - received, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                fprintf(stderr, "error: no data from the server for %d s\n", IO_TIMEOUT_SECONDS);
            } else {
                fprintf(stderr, "error: recv: %s\n", strerror(errno));
            }
            return -1;
        }
        if (n == 0) break; /* the server closed the connection */
        received += (size_t)n;
    }
    return (ssize_t)received;
}

/* Serializes `frame` behind its 5-byte prefix and sends it. */
static bool send_frame(Connection *conn, const Healthledger__V1__Frame *frame) {
    size_t body_size = healthledger__v1__frame__get_packed_size(frame);
    if (body_size > MAX_FRAME_SIZE) {
        fprintf(stderr, "error: outgoing frame of %zu bytes is too large\n", body_size);
        return false;
    }
    uint8_t *buffer = malloc(FRAME_HEADER_SIZE + body_size);
    if (buffer == NULL) {
        fprintf(stderr, "error: out of memory\n");
        return false;
    }
    buffer[0] = 0; /* flags */
    buffer[1] = (uint8_t)(body_size >> 24);
    buffer[2] = (uint8_t)(body_size >> 16);
    buffer[3] = (uint8_t)(body_size >> 8);
    buffer[4] = (uint8_t)body_size;
    healthledger__v1__frame__pack(frame, buffer + FRAME_HEADER_SIZE);
    bool ok = send_all(conn->fd, buffer, FRAME_HEADER_SIZE + body_size);
    free(buffer);
    return ok;
}

/* Reads and decodes the next frame. Returns NULL (after printing why) if the connection
 * closed, failed, or delivered a frame that is oversize or not a valid Frame. The caller
 * frees the result with healthledger__v1__frame__free_unpacked(). */
static Healthledger__V1__Frame *read_frame(Connection *conn) {
    uint8_t header[FRAME_HEADER_SIZE];
    ssize_t n = recv_exact(conn->fd, header, sizeof header);
    if (n < 0) return NULL;
    if (n == 0) {
        fprintf(stderr, "error: the server closed the connection\n");
        return NULL;
    }
    if ((size_t)n < sizeof header) {
        fprintf(stderr, "error: the connection closed inside a frame header\n");
        return NULL;
    }
    if (header[0] != 0) {
        fprintf(stderr, "error: unsupported frame flags 0x%x\n", header[0]);
        return NULL;
    }
    uint32_t length = (uint32_t)header[1] << 24 | (uint32_t)header[2] << 16 |
                      (uint32_t)header[3] << 8 | (uint32_t)header[4];
    if (length > MAX_FRAME_SIZE) {
        fprintf(stderr, "error: frame of %" PRIu32 " bytes exceeds the limit of %d bytes\n",
                length, MAX_FRAME_SIZE);
        return NULL;
    }
    uint8_t *body = malloc(length > 0 ? length : 1);
    if (body == NULL) {
        fprintf(stderr, "error: out of memory\n");
        return NULL;
    }
    n = recv_exact(conn->fd, body, length);
    if (n < 0 || (size_t)n < length) {
        if (n >= 0) fprintf(stderr, "error: the connection closed inside a frame body\n");
        free(body);
        return NULL;
    }
    /* protobuf-c copies bytes fields, so the body can be freed right away. */
    Healthledger__V1__Frame *frame = healthledger__v1__frame__unpack(NULL, length, body);
    free(body);
    if (frame == NULL) fprintf(stderr, "error: received a frame that is not a valid healthledger.v1.Frame\n");
    return frame;
}

/* Handles a frame on call 0 (the connection itself). */
static void handle_connection_frame(Connection *conn, const Healthledger__V1__Frame *frame) {
    switch (frame->kind_case) {
    case HEALTHLEDGER__V1__FRAME__KIND_GO_AWAY:
        conn->going_away = true;
        fprintf(stderr, "go_away: %s (last call id %" PRIu64 ")\n",
                frame->go_away->reason, frame->go_away->last_call_id);
        break;
    case HEALTHLEDGER__V1__FRAME__KIND_STATUS:
        fprintf(stderr, "warning: connection status %d: %s\n",
                (int)frame->status->code, frame->status->message);
        break;
    default: /* pong and anything else: nothing to do */
        break;
    }
}

/* ---- calls ------------------------------------------------------------------------- */

/*
 * Runs one call to completion: sends the request (the serialized `request` message),
 * hands every response message to `on_message`, and, for streaming calls, grants the
 * server one more message after each one consumed. Returns the call's status code
 * (0 = OK; a non-OK status is printed), or CALL_LOCAL_FAILURE if the call could not be
 * completed or a response message was unusable.
 */
static int run_call(Connection *conn, uint64_t call_id, const char *method, const char *credential,
                    const ProtobufCMessage *request, bool streaming,
                    MessageHandler on_message, void *context, CallResult *result) {
    memset(result, 0, sizeof *result);
    result->code = CALL_LOCAL_FAILURE;
    if (conn->going_away) {
        result->lost = "the server is going away";
        return CALL_LOCAL_FAILURE;
    }

    size_t payload_size = protobuf_c_message_get_packed_size(request);
    uint8_t *payload = malloc(payload_size > 0 ? payload_size : 1);
    if (payload == NULL) {
        fprintf(stderr, "error: out of memory\n");
        return CALL_LOCAL_FAILURE;
    }
    protobuf_c_message_pack(request, payload);

    Healthledger__V1__CallRequest call_request = HEALTHLEDGER__V1__CALL_REQUEST__INIT;
    call_request.method = (char *)method;
    call_request.credential = (char *)credential;
    call_request.timeout_ms = 0; /* the server's default deadline */
    call_request.payload.data = payload;
    call_request.payload.len = payload_size;
    call_request.initial_window = streaming ? STREAM_WINDOW : 0;

    Healthledger__V1__Frame frame = HEALTHLEDGER__V1__FRAME__INIT;
    frame.call_id = call_id;
    frame.kind_case = HEALTHLEDGER__V1__FRAME__KIND_REQUEST;
    frame.request = &call_request;
    bool sent = send_frame(conn, &frame);
    free(payload);
    if (!sent) {
        result->lost = "the request could not be sent";
        return CALL_LOCAL_FAILURE;
    }

    /* Read until this call's status. Messages that cannot be used mark the call failed,
     * but reading goes on so the connection stays in step. */
    bool messages_ok = true;
    for (;;) {
        Healthledger__V1__Frame *in = read_frame(conn);
        if (in == NULL) {
            result->lost = "the call ended without a status";
            return CALL_LOCAL_FAILURE;
        }
        if (in->call_id == 0) {
            handle_connection_frame(conn, in);
        } else if (in->call_id != call_id) {
            /* A frame of another (finished) call: ignore it. */
        } else if (in->kind_case == HEALTHLEDGER__V1__FRAME__KIND_MESSAGE) {
            result->messages++;
            if (messages_ok && !on_message(&in->message, context)) messages_ok = false;
            if (streaming) {
                Healthledger__V1__WindowUpdate update = HEALTHLEDGER__V1__WINDOW_UPDATE__INIT;
                update.messages = 1;
                Healthledger__V1__Frame grant = HEALTHLEDGER__V1__FRAME__INIT;
                grant.call_id = call_id;
                grant.kind_case = HEALTHLEDGER__V1__FRAME__KIND_WINDOW_UPDATE;
                grant.window_update = &update;
                if (!send_frame(conn, &grant)) {
                    healthledger__v1__frame__free_unpacked(in, NULL);
                    result->lost = "a window update could not be sent";
                    return CALL_LOCAL_FAILURE;
                }
            }
        } else if (in->kind_case == HEALTHLEDGER__V1__FRAME__KIND_STATUS) {
            int code = (int)in->status->code;
            snprintf(result->message, sizeof result->message, "%s", in->status->message);
            snprintf(result->primary, sizeof result->primary, "%s", in->status->primary);
            result->unprocessed = in->status->unprocessed;
            healthledger__v1__frame__free_unpacked(in, NULL);
            if (code == 0 && !messages_ok) {
                snprintf(result->message, sizeof result->message, "a response message could not be used");
                code = CALL_LOCAL_FAILURE;
            }
            result->code = code;
            return code;
        }
        healthledger__v1__frame__free_unpacked(in, NULL);
    }
}

/* ---- several servers: following the primary, carrying on past a failover ----------- */

/* Connects `conn` to "HOST:PORT" ("[V6]:PORT" for an IPv6 address) or "unix:PATH"; false,
 * with the reason in `why`, on failure. */
static bool connect_address(Connection *conn, const char *address, char *why, size_t why_size) {
    if (strncmp(address, "unix:", 5) == 0) {
        conn->fd = connect_to_unix(address + 5, why, why_size);
        conn->going_away = false;
        return conn->fd >= 0;
    }
    const char *colon = strrchr(address, ':');
    if (colon == NULL || colon == address || colon[1] == '\0') {
        snprintf(why, why_size, "'%s' is not HOST:PORT or unix:PATH", address);
        return false;
    }
    const char *host_start = address;
    size_t length = (size_t)(colon - address);
    if (address[0] == '[' && length >= 2 && address[length - 1] == ']') {
        host_start++;
        length -= 2;
    }
    char host[ADDRESS_SIZE];
    if (length == 0 || length >= sizeof host) {
        snprintf(why, why_size, "'%s' is not HOST:PORT or unix:PATH", address);
        return false;
    }
    memcpy(host, host_start, length);
    host[length] = '\0';
    conn->fd = connect_to(host, colon + 1, why, why_size);
    conn->going_away = false;
    return conn->fd >= 0;
}

static void disconnect(Client *client) {
    if (client->conn.fd >= 0) close(client->conn.fd);
    client->conn.fd = -1;
}

/* Adds `address` to the client's list; false (printed) when it is not HOST:PORT or the list is full. */
static bool add_address(Client *client, const char *address, size_t length) {
    if (length == 0 || length >= ADDRESS_SIZE || memchr(address, ':', length) == NULL) {
        fprintf(stderr, "error: '%.*s' is not HOST:PORT or unix:PATH\n", (int)length, address);
        return false;
    }
    if (client->count == MAX_ADDRESSES) {
        fprintf(stderr, "error: more than %d server addresses\n", MAX_ADDRESSES);
        return false;
    }
    memcpy(client->addresses[client->count], address, length);
    client->addresses[client->count][length] = '\0';
    client->count++;
    return true;
}

/* The index of `address` in the client's list, added when absent; -1 when it cannot be. */
static int address_index(Client *client, const char *address) {
    for (size_t i = 0; i < client->count; i++) {
        if (strcmp(client->addresses[i], address) == 0) return (int)i;
    }
    return add_address(client, address, strlen(address)) ? (int)client->count - 1 : -1;
}

static int64_t monotonic_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

static void pause_ms(int milliseconds) {
    struct timespec pause = {.tv_sec = milliseconds / 1000, .tv_nsec = (long)(milliseconds % 1000) * 1000000};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {}
}

/*
 * Runs a call on one of the client's servers, the one it used last first. A call refused
 * with a primary named goes to that primary; a server that cannot be reached, loses the
 * connection or answers UNAVAILABLE is set aside for the next address, pausing
 * RETRY_PAUSE_MS whenever every address failed, for up to FAILOVER_PATIENCE_SECONDS (with
 * one address alone, a failure is final: no other server could take over). A
 * stream that delivered a message is not sent again. `is_save`: an ALREADY_EXISTS after an
 * attempt whose outcome is unknown means the save was done (its UUIDs make it safe to send
 * again). Returns 0, the last status code, or CALL_LOCAL_FAILURE (printed).
 */
static int client_call(Client *client, const char *method, const char *credential,
                       const ProtobufCMessage *request, bool streaming, bool is_save,
                       MessageHandler on_message, void *context) {
    int64_t deadline = monotonic_ms() + FAILOVER_PATIENCE_SECONDS * 1000;
    bool outcome_unknown = false;
    /* The addresses that failed since the last pause, a bit each: not sent to again before it. */
    uint32_t failed = 0;
    for (;;) {
        const char *address = client->addresses[client->current];
        CallResult result;
        if (client->conn.fd < 0) {
            memset(&result, 0, sizeof result);
            if (!connect_address(&client->conn, address, result.message, sizeof result.message)) {
                result.code = CALL_LOCAL_FAILURE;
                result.lost = result.message;
            }
        }
        if (client->conn.fd >= 0) {
            run_call(&client->conn, ++client->next_call, method, credential, request, streaming,
                     on_message, context, &result);
            if (result.lost != NULL) snprintf(result.message, sizeof result.message, "%s: %s", address, result.lost);
        }
        if (result.code == 0) return 0;
        if (result.code == STATUS_ALREADY_EXISTS && is_save && outcome_unknown) {
            printf("saved (by an earlier attempt, whose answer was lost)\n");
            return 0;
        }
        bool resendable = result.messages == 0;
        bool time_left = monotonic_ms() < deadline;
        /* One server alone is not waited for: there is no other to take over. */
        bool others = client->count > 1;
        /* The primary a server names just failed (it may know no better yet): the next address. */
        bool primary_failed = false;
        if (result.code == STATUS_FAILED_PRECONDITION && result.primary[0] != '\0' && resendable && time_left) {
            int primary = address_index(client, result.primary);
            if (primary >= 0 && (failed & (1u << primary)) != 0) {
                primary_failed = true;
            } else if (primary >= 0 && (size_t)primary != client->current) {
                fprintf(stderr, "note: %s: %s does not lead; sending it to the primary %s\n", method, address,
                        result.primary);
                disconnect(client);
                client->current = (size_t)primary;
                continue;
            }
        }
        if (resendable && time_left && others && (result.lost != NULL || result.code == STATUS_UNAVAILABLE || primary_failed)) {
            /* A write the server did not say it left undone may have been done. */
            if (!result.unprocessed) outcome_unknown = true;
            disconnect(client);
            failed |= 1u << client->current;
            client->current = (client->current + 1) % client->count;
            if (result.code == CALL_LOCAL_FAILURE) {
                fprintf(stderr, "note: %s: %s; trying %s\n", method, result.message, client->addresses[client->current]);
            } else if (primary_failed) {
                fprintf(stderr, "note: %s: %s names the primary %s, which just failed; trying %s\n", method, address,
                        result.primary, client->addresses[client->current]);
            } else {
                fprintf(stderr, "note: %s: %s: status %d: %s; trying %s\n", method, address, result.code, result.message,
                        client->addresses[client->current]);
            }
            if (failed == (1u << client->count) - 1) {
                failed = 0;
                pause_ms(RETRY_PAUSE_MS);
            }
            continue;
        }
        if (result.code == CALL_LOCAL_FAILURE) {
            fprintf(stderr, "error: %s: %s\n", method, result.message);
        } else {
            fprintf(stderr, "error: %s: status %d: %s\n", method, result.code, result.message);
        }
        return result.code;
    }
}

/* Ping: prints the ledger and the principal the credential stands for. */
static bool on_ping_response(const ProtobufCBinaryData *message, void *context) {
    (void)context;
    Healthledger__V1__PingResponse *response =
        healthledger__v1__ping_response__unpack(NULL, message->len, message->data);
    if (response == NULL) {
        fprintf(stderr, "error: invalid PingResponse\n");
        return false;
    }
    printf("ping: ledger %s as %s\n", response->ledger_id, response->principal);
    healthledger__v1__ping_response__free_unpacked(response, NULL);
    return true;
}

/* Save: prints one line per outcome. */
static bool on_save_response(const ProtobufCBinaryData *message, void *context) {
    (void)context;
    Healthledger__V1__SaveResponse *response =
        healthledger__v1__save_response__unpack(NULL, message->len, message->data);
    if (response == NULL) {
        fprintf(stderr, "error: invalid SaveResponse\n");
        return false;
    }
    for (size_t i = 0; i < response->n_outcomes; i++) {
        char uuid[UUID_STRING_SIZE];
        format_uuid(&response->outcomes[i]->uuid, uuid);
        printf("saved %s (%s)\n", uuid, disposition_name(response->outcomes[i]->disposition));
    }
    healthledger__v1__save_response__free_unpacked(response, NULL);
    return true;
}

/* State of a QuerySamples call: the UUID looked for and what was seen. */
typedef struct {
    const uint8_t *wanted_uuid;
    size_t count;
    bool found;
} QueryState;

/* QuerySamples: prints every object of a SampleBatch and looks for the wanted UUID. */
static bool on_sample_batch(const ProtobufCBinaryData *message, void *context) {
    QueryState *state = context;
    Healthledger__V1__SampleBatch *batch =
        healthledger__v1__sample_batch__unpack(NULL, message->len, message->data);
    if (batch == NULL) {
        fprintf(stderr, "error: invalid SampleBatch\n");
        return false;
    }
    for (size_t i = 0; i < batch->n_objects; i++) {
        const Healthledger__V1__HealthObject *object = batch->objects[i];
        char uuid[UUID_STRING_SIZE];
        format_uuid(&object->uuid, uuid);
        if (object->body_case == HEALTHLEDGER__V1__HEALTH_OBJECT__BODY_QUANTITY &&
            object->quantity->quantity != NULL) {
            const Healthledger__V1__Quantity *quantity = object->quantity->quantity;
            printf("sample %s %g %s %" PRId64 "\n", uuid, quantity->value, quantity->unit, object->start_us);
        } else {
            printf("sample %s - - %" PRId64 "\n", uuid, object->start_us);
        }
        state->count++;
        if (object->uuid.len == UUID_SIZE && memcmp(object->uuid.data, state->wanted_uuid, UUID_SIZE) == 0) {
            state->found = true;
        }
    }
    healthledger__v1__sample_batch__free_unpacked(batch, NULL);
    return true;
}

/* State of a QueryChanges call: the UUID looked for, what was seen, the last anchor. */
typedef struct {
    const uint8_t *wanted_uuid;
    size_t added;
    size_t deleted;
    bool found;
    uint8_t *anchor; /* malloc'ed copy of the last batch's anchor */
    size_t anchor_len;
} ChangesState;

/* QueryChanges: counts a ChangeBatch's changes and keeps its anchor, opaque bytes that are
 * only ever sent back. */
static bool on_change_batch(const ProtobufCBinaryData *message, void *context) {
    ChangesState *state = context;
    Healthledger__V1__ChangeBatch *batch =
        healthledger__v1__change_batch__unpack(NULL, message->len, message->data);
    if (batch == NULL) {
        fprintf(stderr, "error: invalid ChangeBatch\n");
        return false;
    }
    for (size_t i = 0; i < batch->n_added; i++) {
        const Healthledger__V1__HealthObject *object = batch->added[i];
        if (object->uuid.len == UUID_SIZE && memcmp(object->uuid.data, state->wanted_uuid, UUID_SIZE) == 0) {
            state->found = true;
        }
    }
    state->added += batch->n_added;
    state->deleted += batch->n_deleted;
    free(state->anchor);
    state->anchor = malloc(batch->anchor.len > 0 ? batch->anchor.len : 1);
    bool ok = state->anchor != NULL;
    if (ok) {
        memcpy(state->anchor, batch->anchor.data, batch->anchor.len);
        state->anchor_len = batch->anchor.len;
    } else {
        fprintf(stderr, "error: out of memory\n");
    }
    healthledger__v1__change_batch__free_unpacked(batch, NULL);
    return ok;
}

/* ---- main -------------------------------------------------------------------------- */

/* Fills `uuid` with a random (version 4, RFC 4122 variant) UUID. */
static bool random_uuid(uint8_t uuid[UUID_SIZE]) {
    FILE *source = fopen("/dev/urandom", "rb");
    if (source == NULL) {
        fprintf(stderr, "error: /dev/urandom: %s\n", strerror(errno));
        return false;
    }
    size_t got = fread(uuid, 1, UUID_SIZE, source);
    fclose(source);
    if (got != UUID_SIZE) {
        fprintf(stderr, "error: cannot read /dev/urandom\n");
        return false;
    }
    uuid[6] = (uint8_t)((uuid[6] & 0x0f) | 0x40); /* version 4 */
    uuid[8] = (uint8_t)((uuid[8] & 0x3f) | 0x80); /* variant 10xx */
    return true;
}

static int64_t now_microseconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;
}

/* Maps the result of run_call() to an exit status, or -1 to go on. */
static int exit_status_of(int call_result) {
    if (call_result == 0) return -1;
    return call_result == CALL_LOCAL_FAILURE ? EXIT_LOCAL_ERROR : EXIT_CALL_FAILED;
}

/* Runs the calls on the client's servers; returns the exit status. */
static int run(Client *client, const char *credential) {
    int status;

    /* 1. Ping */
    Healthledger__V1__PingRequest ping = HEALTHLEDGER__V1__PING_REQUEST__INIT;
    status = exit_status_of(client_call(client, METHOD_PING, credential, &ping.base, false, false,
                                        on_ping_response, NULL));
    if (status >= 0) return status;

    /* 2. Save one heart-rate sample. */
    uint8_t uuid[UUID_SIZE];
    if (!random_uuid(uuid)) return EXIT_LOCAL_ERROR;
    int64_t now = now_microseconds();

    Healthledger__V1__Source source = HEALTHLEDGER__V1__SOURCE__INIT;
    source.bundle_identifier = "org.example.cclient"; /* replaced by the credential's app */
    source.name = "C client";
    Healthledger__V1__SourceRevision revision = HEALTHLEDGER__V1__SOURCE_REVISION__INIT;
    revision.source = &source;
    Healthledger__V1__Quantity quantity = HEALTHLEDGER__V1__QUANTITY__INIT;
    quantity.value = 72;
    quantity.unit = "count/min";
    Healthledger__V1__QuantitySampleBody body = HEALTHLEDGER__V1__QUANTITY_SAMPLE_BODY__INIT;
    body.quantity = &quantity;
    Healthledger__V1__HealthObject object = HEALTHLEDGER__V1__HEALTH_OBJECT__INIT;
    object.uuid.data = uuid;
    object.uuid.len = UUID_SIZE;
    object.type = HEART_RATE_TYPE;
    object.source_revision = &revision;
    object.start_us = now;
    object.end_us = now;
    object.body_case = HEALTHLEDGER__V1__HEALTH_OBJECT__BODY_QUANTITY;
    object.quantity = &body;
    Healthledger__V1__HealthObject *objects[] = {&object};
    Healthledger__V1__SaveRequest save = HEALTHLEDGER__V1__SAVE_REQUEST__INIT;
    save.n_objects = 1;
    save.objects = objects;
    status = exit_status_of(client_call(client, METHOD_SAVE, credential, &save.base, false, true,
                                        on_save_response, NULL));
    if (status >= 0) return status;

    /* 3. Query all heart-rate samples, oldest first (no range, no limit). */
    Healthledger__V1__SampleQueryRequest query = HEALTHLEDGER__V1__SAMPLE_QUERY_REQUEST__INIT;
    query.type = HEART_RATE_TYPE;
    query.limit = 0;
    query.sort = HEALTHLEDGER__V1__SAMPLE_QUERY_REQUEST__SORT__SORT_START_ASCENDING;
    QueryState state = {.wanted_uuid = uuid, .count = 0, .found = false};
    status = exit_status_of(client_call(client, METHOD_QUERY_SAMPLES, credential, &query.base, true, false,
                                        on_sample_batch, &state));
    if (status >= 0) return status;

    printf("found %zu samples, including the saved one: %s\n", state.count, state.found ? "yes" : "no");
    if (!state.found) return EXIT_NOT_FOUND;

    /* 4. The changes from the beginning, then from the anchor they ended with. */
    Healthledger__V1__ChangeQueryRequest changes = HEALTHLEDGER__V1__CHANGE_QUERY_REQUEST__INIT;
    changes.type = HEART_RATE_TYPE;
    ChangesState first = {.wanted_uuid = uuid};
    status = exit_status_of(client_call(client, METHOD_QUERY_CHANGES, credential, &changes.base, true, false,
                                        on_change_batch, &first));
    if (status >= 0) {
        free(first.anchor);
        return status;
    }
    printf("changes: %zu added, %zu deleted, the saved one added: %s, anchor of %zu bytes\n", first.added,
           first.deleted, first.found ? "yes" : "no", first.anchor_len);
    changes.anchor.data = first.anchor;
    changes.anchor.len = first.anchor_len;
    ChangesState next = {.wanted_uuid = uuid};
    status = exit_status_of(client_call(client, METHOD_QUERY_CHANGES, credential, &changes.base, true, false,
                                        on_change_batch, &next));
    free(first.anchor);
    free(next.anchor);
    if (status >= 0) return status;
    printf("changes after the anchor: %zu added, %zu deleted\n", next.added, next.deleted);
    bool anchored = first.found && first.anchor_len > 0 && next.added == 0 && next.deleted == 0;
    return anchored ? EXIT_SUCCESS : EXIT_NOT_FOUND;
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        const char *name = argc > 0 ? argv[0] : "healthledger-client";
        fprintf(stderr, "usage: %s HOST PORT CREDENTIAL\n       %s ADDRESS[,ADDRESS...] CREDENTIAL   (ADDRESS: HOST:PORT or unix:PATH)\n", name, name);
        return EXIT_LOCAL_ERROR;
    }
    static Client client = {.conn = {.fd = -1}};
    if (argc == 4) {
        char address[ADDRESS_SIZE];
        /* An IPv6 address goes in brackets, so that its last colon is the port's. */
        const char *format = strchr(argv[1], ':') != NULL ? "[%s]:%s" : "%s:%s";
        int length = snprintf(address, sizeof address, format, argv[1], argv[2]);
        if (length < 0 || (size_t)length >= sizeof address || !add_address(&client, address, (size_t)length)) return EXIT_LOCAL_ERROR;
    } else {
        for (const char *start = argv[1];;) {
            const char *comma = strchr(start, ',');
            size_t length = comma != NULL ? (size_t)(comma - start) : strlen(start);
            if (!add_address(&client, start, length)) return EXIT_LOCAL_ERROR;
            if (comma == NULL) break;
            start = comma + 1;
        }
    }
    const char *credential = argv[argc - 1];
    int status = run(&client, credential);
    disconnect(&client);
    fflush(stdout);
    return status;
}
