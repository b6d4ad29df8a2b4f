// SPDX-License-Identifier: GPL-2.0
/*
 * lite-verbs-bench: the native verbs baseline of LITE's benchmark. It does
 * on plain libibverbs exactly what LITE does for each operation it is
 * compared with, so that the ratio of the two is LITE's own overhead:
 *
 *   write, read     one signaled RDMA write (read) of SIZE bytes from a
 *                   registered buffer to a remote MR, then a wait for its
 *                   completion (LITE's synchronous lite_rdma_write/read);
 *   fetch_add,      one signaled 8-byte atomic on a remote MR, then a wait
 *   compare_swp     for its completion (lite_fetch_add, lite_compare_swp);
 *   rpc             a SEND of SIZE bytes answered by a SEND of SIZE bytes
 *                   from a server thread that waits for each request
 *                   (lite_send_reply_imm against an echo port).
 *
 * Waits follow --wait: "event" arms the completion queue and sleeps on its
 * completion channel until the device signals (what LITE does on a
 * software device such as rxe, on both the calling and the serving side);
 * "poll" spins on ibv_poll_cq (what perftest does).
 *
 * Usage:
 *   lite-verbs-bench --server [--port P] [--gid-index I] [--wait event|poll]
 *   lite-verbs-bench --client HOST [--port P] [--gid-index I]
 *       [--wait event|poll] [--iters N] [--sizes A,B,..] [--ops LIST]
 *       [--turns]
 *
 * The client measures and prints one line per series, lite-bench's
 * latency record (lite-tools' bench_record) after the tag "LITE-VERBS ",
 * times in microseconds:
 *
 *   LITE-VERBS {"latency":{"op":"write","size":64,"wait":"event","iters":N,
 *       "median":..,"p10":..,"p90":..,"p99":..,"min":..,"max":..,"stdev":..,
 *       "cpu_us_per_op":..}}
 *
 * where cpu_us_per_op is this process's user and system time per
 * operation. A time that is not a number prints as nan, which no JSON
 * reader accepts: the series is dropped rather than misread.
 *
 * With --turns the client takes turns with another program that measures
 * the same series (lite-bench, which starts it): it runs a series' timed
 * operations in blocks, each when a line "GO OP SIZE COUNT" on its standard
 * input names that series and how many operations to time, and ends each
 * block with the line "LITE-VERBS-TURN" on its standard output, so that the
 * two programs' series interleave in time and drift of the emulator moves
 * both alike. A block that names another series than the next one, or the
 * end of the input before every series is done, ends the program with a
 * failure.
 *
 * The two sides exchange their queue pair and memory region
 * over one TCP connection, which also tells the server each RPC series'
 * size and length. Every wait is bounded (WAIT_TIMEOUT_MS, PROCESS_WAIT_MS
 * in the process curve); the program
 * ends with status 0 exactly when every series completed successfully.
 *
 * With --regions COUNTS the client measures the memory region curve
 * instead, LITE's with live LMRs being lite-bench --series regions:
 *
 *   region_write,   for each count N, the server registers N memory regions
 *   region_read     of one page each (ibv_reg_mr, one per page) and sends
 *                   their addresses and keys; the client then times 64-byte
 *                   writes (reads), each to a region picked at random, in
 *                   blocks alternating with blocks to the first region
 *                   (region_write_first, region_read_first), so that the
 *                   cost of many regions is a ratio taken in one window:
 *     LITE-VERBS {"latency":{"op":"region_write","size":64,"regions":N,..}}
 *     LITE-VERBS {"latency":{"op":"region_write_first","size":64,"regions":N,..}}
 *   region_create,  for each --create-sizes size, the client times mapping
 *   region_free     that many bytes and registering them (ibv_reg_mr), then
 *                   deregistering and unmapping them:
 *     LITE-VERBS {"latency":{"op":"region_create","size":S,..}}
 *
 * With --processes COUNTS the client measures the process curve instead,
 * LITE's being lite-bench --series processes: for each count N and each of
 * write and rpc (of --ops), N processes each open their own queue pair and
 * memory regions to a server process of their own (the server runs with
 * --fork, serving every connection in a child process), warm up, start
 * together and make --iters 64-byte operations each:
 *
 *     LITE-VERBS {"process":{"workload":"write","size":64,"processes":N,
 *         "iters":..,"elapsed_us":..,"slowest_us":..,"ops_per_s":..,"qps":..,"mrs":..}}
 *
 * where ops_per_s is all processes' operations over the time from the start
 * until the last finished, and qps and mrs count the queue pairs and memory
 * regions the processes created on the client's node (the server's node
 * needs as many).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define DEFAULT_PORT 18650
#define DEFAULT_ITERS 1000
#define DEFAULT_GID_INDEX 1
#define MAX_SIZES 16
#define MAX_SIZE (4u << 20)
#define MAX_ITERS 1000000
/* Operations before each series that are not timed. */
#define WARMUP 16
/* Longest wait for one completion or one control line. */
#define WAIT_TIMEOUT_MS 30000
/*
 * Longest wait of the process curve, on both sides: a process that is ready
 * waits for the others to set up their queue pairs (up to MAX_PROCESSES of
 * them on an emulated VM) before any operation flows.
 */
#define PROCESS_WAIT_MS (10 * WAIT_TIMEOUT_MS)
/* Longest time the client keeps trying to reach the server. */
#define CONNECT_TRIES 120
/* Receive requests the server keeps posted during an RPC series. */
#define RECV_DEPTH 16
#define QUEUE_DEPTH 64
#define PSN_MASK 0xffffff
/* RC retries: 7 would mean "retry forever" on rxe. */
#define RETRY_COUNT 6
#define LINE_MAX_LEN 256
/* Most memory regions of the region curve, and bytes of one. */
#define MAX_REGIONS 1000000
#define REGION_SIZE 4096
/* Operations of one block, random or to the first region, in turn. */
#define REGION_BLOCK 50
/* Longest a step of the region curve may register for. */
#define REGISTER_TIMEOUT_MS (10 * 60 * 1000)
/* Largest region of the create/free series. */
#define MAX_CREATE_SIZE (4ul << 30)
/* Untimed and timed create/free pairs: fewer for large regions. */
#define CREATE_ITERS_SMALL 20
#define CREATE_ITERS_LARGE 3
#define CREATE_LARGE_SIZE (16ul << 20)
/* Most processes of one step of the process curve. */
#define MAX_PROCESSES 256
/* Size of the process curve's operations. */
#define PROCESS_OP_SIZE 64
/* Memory regions each side of one connection registers (open_endpoint). */
#define MRS_PER_ENDPOINT 3
/* Connections the server's listener queues. */
#define LISTEN_BACKLOG 128

enum wait_policy { WAIT_EVENT, WAIT_POLL };

enum op { OP_WRITE, OP_READ, OP_FETCH_ADD, OP_COMPARE_SWP, OP_RPC, OP_COUNT };

static const char *const op_names[OP_COUNT] = {
	"write", "read", "fetch_add", "compare_swp", "rpc",
};

struct config {
	int server;
	const char *host;
	int port;
	int gid_index;
	enum wait_policy wait;
	long iters;
	unsigned long sizes[MAX_SIZES];
	int nsizes;
	int ops[OP_COUNT];
	/* The region curve: live region counts and create/free sizes. */
	long regions[MAX_SIZES];
	int nregions;
	unsigned long create_sizes[MAX_SIZES];
	int ncreate_sizes;
	/* The process curve: process counts; the server forks per connection. */
	long processes[MAX_SIZES];
	int nprocesses;
	int fork;
	/* Series run in blocks, each on a "GO" line of standard input. */
	int turns;
};

/* One memory region the server offers: where it is and its key. */
struct region {
	uint64_t addr;
	uint32_t rkey;
	uint32_t pad;
};

/* One side's view of the connection. */
struct endpoint {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *channel;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t buf_len;
	struct ibv_mr *atomic_mr;
	uint64_t *atomic_word;
	uint64_t *atomic_result;
	struct ibv_mr *result_mr;
	union ibv_gid gid;
	uint8_t port_num;
	int armed;
	enum wait_policy wait;
	/* Peer. */
	uint64_t remote_addr;
	uint32_t remote_rkey;
	uint64_t remote_atomic_addr;
	uint32_t remote_atomic_rkey;
};

/* The queue pair and memory one side offers the other. */
struct offer {
	uint32_t qpn;
	uint32_t psn;
	union ibv_gid gid;
	uint64_t addr;
	uint32_t rkey;
	uint64_t atomic_addr;
	uint32_t atomic_rkey;
};

/* The bound of every wait: WAIT_TIMEOUT_MS, or PROCESS_WAIT_MS in the process curve. */
static int wait_ms = WAIT_TIMEOUT_MS;

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "lite-verbs-bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	printf("LITE-VERBS: FAILED\n");
	exit(1);
}

static void usage(void) __attribute__((noreturn));

static void usage(void)
{
	fprintf(stderr,
		"usage: lite-verbs-bench --server [--port P] [--gid-index I] [--wait event|poll]\n"
		"       lite-verbs-bench --client HOST [--port P] [--gid-index I] [--wait event|poll]\n"
		"                        [--iters N] [--sizes A,B,..] [--ops write,read,fetch_add,compare_swp,rpc]\n"
		"                        [--turns]\n"
		"       lite-verbs-bench --client HOST [--port P] [--gid-index I] [--wait event|poll]\n"
		"                        [--iters N] --regions N,.. [--create-sizes A,B,..]\n"
		"       lite-verbs-bench --server --fork [--port P] [--gid-index I] [--wait event|poll]\n"
		"       lite-verbs-bench --client HOST [--port P] [--gid-index I] [--wait event|poll]\n"
		"                        [--iters N] --processes N,.. [--ops write,rpc]\n");
	exit(2);
}

static long parse_number(const char *text, long min, long max, const char *what)
{
	char *end;
	long value;

	errno = 0;
	value = strtol(text, &end, 10);
	if (errno || end == text || *end || value < min || value > max) {
		fprintf(stderr, "lite-verbs-bench: %s must be a number from %ld to %ld, not \"%s\"\n",
			what, min, max, text);
		usage();
	}
	return value;
}

static void parse_sizes(struct config *cfg, char *list)
{
	char *save = NULL;

	cfg->nsizes = 0;
	for (char *item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		if (cfg->nsizes == MAX_SIZES)
			die("at most %d sizes", MAX_SIZES);
		cfg->sizes[cfg->nsizes++] = (unsigned long)parse_number(item, 1, MAX_SIZE, "a size");
	}
	if (!cfg->nsizes)
		usage();
}

static void parse_list(char *list, long *values, int *count, long min, long max, const char *what)
{
	char *save = NULL;

	*count = 0;
	for (char *item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		if (*count == MAX_SIZES)
			die("at most %d values of %s", MAX_SIZES, what);
		values[(*count)++] = parse_number(item, min, max, what);
	}
	if (!*count)
		usage();
}

static void parse_ops(struct config *cfg, char *list)
{
	char *save = NULL;

	memset(cfg->ops, 0, sizeof(cfg->ops));
	for (char *item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		int found = 0;

		for (int op = 0; op < OP_COUNT; op++) {
			if (!strcmp(item, op_names[op])) {
				cfg->ops[op] = 1;
				found = 1;
			}
		}
		if (!found)
			die("unknown operation \"%s\"", item);
	}
}

static void parse_args(struct config *cfg, int argc, char **argv)
{
	static char default_sizes[] = "8,64,512,4096,65536";
	int role_given = 0;

	memset(cfg, 0, sizeof(*cfg));
	cfg->port = DEFAULT_PORT;
	cfg->gid_index = DEFAULT_GID_INDEX;
	cfg->wait = WAIT_EVENT;
	cfg->iters = DEFAULT_ITERS;
	parse_sizes(cfg, default_sizes);
	for (int op = 0; op < OP_COUNT; op++)
		cfg->ops[op] = 1;

	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		const char *value = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(arg, "--server")) {
			cfg->server = 1;
			role_given++;
			continue;
		}
		if (!strcmp(arg, "--fork")) {
			cfg->fork = 1;
			continue;
		}
		if (!strcmp(arg, "--turns")) {
			cfg->turns = 1;
			continue;
		}
		if (!value)
			usage();
		i++;
		if (!strcmp(arg, "--client")) {
			cfg->host = value;
			role_given++;
		} else if (!strcmp(arg, "--port")) {
			cfg->port = (int)parse_number(value, 1, 65535, "the port");
		} else if (!strcmp(arg, "--gid-index")) {
			cfg->gid_index = (int)parse_number(value, 0, 255, "the GID index");
		} else if (!strcmp(arg, "--iters")) {
			cfg->iters = parse_number(value, 1, MAX_ITERS, "the iterations");
		} else if (!strcmp(arg, "--wait")) {
			if (!strcmp(value, "event"))
				cfg->wait = WAIT_EVENT;
			else if (!strcmp(value, "poll"))
				cfg->wait = WAIT_POLL;
			else
				usage();
		} else if (!strcmp(arg, "--sizes")) {
			char *copy = strdup(value);

			if (!copy)
				die("out of memory");
			parse_sizes(cfg, copy);
			free(copy);
		} else if (!strcmp(arg, "--processes")) {
			char *copy = strdup(value);

			if (!copy)
				die("out of memory");
			parse_list(copy, cfg->processes, &cfg->nprocesses, 1, MAX_PROCESSES,
				   "a process count");
			free(copy);
		} else if (!strcmp(arg, "--regions") || !strcmp(arg, "--create-sizes")) {
			char *copy = strdup(value);
			long values[MAX_SIZES];
			int count;

			if (!copy)
				die("out of memory");
			if (!strcmp(arg, "--regions")) {
				parse_list(copy, cfg->regions, &cfg->nregions, 1, MAX_REGIONS,
					   "a region count");
			} else {
				parse_list(copy, values, &count, 1, (long)MAX_CREATE_SIZE,
					   "a region size");
				cfg->ncreate_sizes = count;
				for (int v = 0; v < count; v++)
					cfg->create_sizes[v] = (unsigned long)values[v];
			}
			free(copy);
		} else if (!strcmp(arg, "--ops")) {
			char *copy = strdup(value);

			if (!copy)
				die("out of memory");
			parse_ops(cfg, copy);
			free(copy);
		} else {
			usage();
		}
	}
	if (role_given != 1 || (cfg->fork && !cfg->server))
		usage();
	if (cfg->turns && (cfg->server || cfg->nregions || cfg->nprocesses))
		usage();
}

/* --- time and statistics ------------------------------------------------ */

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double cpu_us(void)
{
	struct rusage usage;

	getrusage(RUSAGE_SELF, &usage);
	return (double)(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6 +
	       (double)(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

static int compare_doubles(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Linear interpolation between ranks, as lite-bench computes it. */
static double percentile(const double *sorted, long n, double p)
{
	double rank = p / 100.0 * (double)(n - 1);
	long below = (long)floor(rank), above = (long)ceil(rank);

	return sorted[below] + (sorted[above] - sorted[below]) * (rank - (double)below);
}

/* A series' line: `name`, `size`, then `extra` (`,"key":value` or ""), then its statistics. */
static void report_named(const struct config *cfg, const char *name, unsigned long size,
			 const char *extra, double *samples, long n, double cpu_total)
{
	double sum = 0, squares = 0, mean, stdev;

	qsort(samples, (size_t)n, sizeof(*samples), compare_doubles);
	for (long i = 0; i < n; i++)
		sum += samples[i];
	mean = sum / (double)n;
	for (long i = 0; i < n; i++)
		squares += (samples[i] - mean) * (samples[i] - mean);
	stdev = n > 1 ? sqrt(squares / (double)(n - 1)) : 0;
	printf("LITE-VERBS {\"latency\":{\"op\":\"%s\",\"size\":%lu%s,\"wait\":\"%s\","
	       "\"iters\":%ld,\"median\":%.2f,\"p10\":%.2f,\"p90\":%.2f,\"p99\":%.2f,"
	       "\"min\":%.2f,\"max\":%.2f,\"stdev\":%.2f,\"cpu_us_per_op\":%.2f}}\n",
	       name, size, extra, cfg->wait == WAIT_EVENT ? "event" : "poll", n,
	       percentile(samples, n, 50), percentile(samples, n, 10), percentile(samples, n, 90),
	       percentile(samples, n, 99), samples[0], samples[n - 1], stdev, cpu_total / (double)n);
	fflush(stdout);
}

static void report(const struct config *cfg, int op, unsigned long size, double *samples,
		   long n, double cpu_total)
{
	report_named(cfg, op_names[op], size, "", samples, n, cpu_total);
}

/* --- the control connection -------------------------------------------- */

static int control_listen(int port)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		die("socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) || listen(fd, LISTEN_BACKLOG))
		die("listening on port %d: %s", port, strerror(errno));
	return fd;
}

static int control_accept(int listener)
{
	struct pollfd pfd = { .fd = listener, .events = POLLIN };
	int fd;

	/* The client starts within seconds of the server, or never. */
	if (poll(&pfd, 1, WAIT_TIMEOUT_MS * 10) != 1)
		die("no client connected within %d s", WAIT_TIMEOUT_MS * 10 / 1000);
	fd = accept(listener, NULL, NULL);
	if (fd < 0)
		die("accept: %s", strerror(errno));
	return fd;
}

static int control_connect(const char *host, int port)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *found;
	char service[16];
	int fd = -1;

	snprintf(service, sizeof(service), "%d", port);
	if (getaddrinfo(host, service, &hints, &found))
		die("cannot resolve %s", host);
	for (int tries = 0; tries < CONNECT_TRIES; tries++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			die("socket: %s", strerror(errno));
		if (!connect(fd, found->ai_addr, found->ai_addrlen))
			break;
		close(fd);
		fd = -1;
		sleep(1);
	}
	freeaddrinfo(found);
	if (fd < 0)
		die("cannot reach the server at %s:%d", host, port);
	return fd;
}

static void send_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void send_line(int fd, const char *fmt, ...)
{
	char line[LINE_MAX_LEN];
	va_list ap;
	int len;

	va_start(ap, fmt);
	len = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (len < 0 || len >= (int)sizeof(line) - 1)
		die("control line too long");
	line[len++] = '\n';
	for (int sent = 0; sent < len;) {
		ssize_t n = send(fd, line + sent, (size_t)(len - sent), MSG_NOSIGNAL);

		if (n <= 0)
			die("control connection: %s", n ? strerror(errno) : "closed");
		sent += (int)n;
	}
}

/* Reads one line (without its '\n') into line, waiting at most timeout_ms per byte. */
static void recv_line_within(int fd, char *line, size_t size, int timeout_ms)
{
	size_t len = 0;

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		char c;
		ssize_t n;

		if (poll(&pfd, 1, timeout_ms) != 1)
			die("the peer sent nothing for %d s", timeout_ms / 1000);
		n = recv(fd, &c, 1, 0);
		if (n <= 0)
			die("control connection: %s", n ? strerror(errno) : "closed by the peer");
		if (c == '\n')
			break;
		if (len + 1 >= size)
			die("control line too long");
		line[len++] = c;
	}
	line[len] = 0;
}

static void recv_line(int fd, char *line, size_t size)
{
	recv_line_within(fd, line, size, wait_ms);
}

static void send_all(int fd, const void *data, size_t len)
{
	for (size_t sent = 0; sent < len;) {
		ssize_t n = send(fd, (const char *)data + sent, len - sent, MSG_NOSIGNAL);

		if (n <= 0)
			die("control connection: %s", n ? strerror(errno) : "closed");
		sent += (size_t)n;
	}
}

/* Reads exactly len bytes, waiting at most wait_ms for each piece. */
static void recv_all(int fd, void *data, size_t len)
{
	for (size_t got = 0; got < len;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, wait_ms) != 1)
			die("the peer sent nothing for %d s", wait_ms / 1000);
		n = recv(fd, (char *)data + got, len - got, 0);
		if (n <= 0)
			die("control connection: %s", n ? strerror(errno) : "closed by the peer");
		got += (size_t)n;
	}
}

static void send_offer(int fd, const struct offer *o)
{
	char gid[33];

	for (int i = 0; i < 16; i++)
		snprintf(gid + 2 * i, 3, "%02x", o->gid.raw[i]);
	send_line(fd, "QP %" PRIu32 " %" PRIu32 " %s %" PRIx64 " %" PRIu32 " %" PRIx64 " %" PRIu32,
		  o->qpn, o->psn, gid, o->addr, o->rkey, o->atomic_addr, o->atomic_rkey);
}

static void recv_offer(int fd, struct offer *o)
{
	char line[LINE_MAX_LEN], gid[33];

	recv_line(fd, line, sizeof(line));
	if (sscanf(line, "QP %" SCNu32 " %" SCNu32 " %32s %" SCNx64 " %" SCNu32 " %" SCNx64 " %" SCNu32,
		   &o->qpn, &o->psn, gid, &o->addr, &o->rkey, &o->atomic_addr, &o->atomic_rkey) != 7 ||
	    strlen(gid) != 32)
		die("malformed offer \"%s\"", line);
	for (int i = 0; i < 16; i++) {
		unsigned int byte;

		if (sscanf(gid + 2 * i, "%2x", &byte) != 1)
			die("malformed GID in \"%s\"", line);
		o->gid.raw[i] = (uint8_t)byte;
	}
}

/* --- verbs ---------------------------------------------------------------- */

static void open_endpoint(struct endpoint *ep, const struct config *cfg, size_t buf_len)
{
	struct ibv_device **devices = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr qp_attr = { 0 };
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

	memset(ep, 0, sizeof(*ep));
	ep->wait = cfg->wait;
	ep->port_num = 1;
	if (!devices || !devices[0])
		die("no RDMA device");
	ep->ctx = ibv_open_device(devices[0]);
	ibv_free_device_list(devices);
	if (!ep->ctx)
		die("ibv_open_device: %s", strerror(errno));
	if (ibv_query_gid(ep->ctx, ep->port_num, cfg->gid_index, &ep->gid))
		die("no GID %d on port %d", cfg->gid_index, ep->port_num);
	ep->pd = ibv_alloc_pd(ep->ctx);
	ep->channel = ibv_create_comp_channel(ep->ctx);
	if (!ep->pd || !ep->channel)
		die("ibv_alloc_pd/ibv_create_comp_channel: %s", strerror(errno));
	ep->cq = ibv_create_cq(ep->ctx, 2 * QUEUE_DEPTH, NULL, ep->channel, 0);
	if (!ep->cq)
		die("ibv_create_cq: %s", strerror(errno));

	ep->buf_len = buf_len;
	/* Requests and replies each get their half in RPC series. */
	ep->buf = aligned_alloc(4096, 2 * buf_len);
	ep->atomic_word = aligned_alloc(64, 64);
	ep->atomic_result = aligned_alloc(64, 64);
	if (!ep->buf || !ep->atomic_word || !ep->atomic_result)
		die("out of memory");
	memset(ep->buf, 0x5a, 2 * buf_len);
	memset(ep->atomic_word, 0, 64);
	memset(ep->atomic_result, 0, 64);
	ep->mr = ibv_reg_mr(ep->pd, ep->buf, 2 * buf_len, access);
	ep->atomic_mr = ibv_reg_mr(ep->pd, ep->atomic_word, 64, access | IBV_ACCESS_REMOTE_ATOMIC);
	ep->result_mr = ibv_reg_mr(ep->pd, ep->atomic_result, 64, IBV_ACCESS_LOCAL_WRITE);
	if (!ep->mr || !ep->atomic_mr || !ep->result_mr)
		die("ibv_reg_mr: %s", strerror(errno));

	qp_attr.send_cq = ep->cq;
	qp_attr.recv_cq = ep->cq;
	qp_attr.qp_type = IBV_QPT_RC;
	qp_attr.cap.max_send_wr = QUEUE_DEPTH;
	qp_attr.cap.max_recv_wr = QUEUE_DEPTH;
	qp_attr.cap.max_send_sge = 1;
	qp_attr.cap.max_recv_sge = 1;
	ep->qp = ibv_create_qp(ep->pd, &qp_attr);
	if (!ep->qp)
		die("ibv_create_qp: %s", strerror(errno));
}

static struct offer own_offer(const struct endpoint *ep)
{
	struct offer o = {
		.qpn = ep->qp->qp_num,
		.psn = (uint32_t)lrand48() & PSN_MASK,
		.gid = ep->gid,
		.addr = (uintptr_t)ep->buf,
		.rkey = ep->mr->rkey,
		.atomic_addr = (uintptr_t)ep->atomic_word,
		.atomic_rkey = ep->atomic_mr->rkey,
	};
	return o;
}

static void connect_qp(struct endpoint *ep, const struct config *cfg, const struct offer *mine,
		       const struct offer *peer)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = ep->port_num,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};

	if (ibv_modify_qp(ep->qp, &attr,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("QP to INIT: %s", strerror(errno));

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	attr.path_mtu = IBV_MTU_1024;
	attr.dest_qp_num = peer->qpn;
	attr.rq_psn = peer->psn;
	attr.max_dest_rd_atomic = 1;
	attr.min_rnr_timer = 12;
	attr.ah_attr.is_global = 1;
	attr.ah_attr.grh.dgid = peer->gid;
	attr.ah_attr.grh.sgid_index = (uint8_t)cfg->gid_index;
	attr.ah_attr.grh.hop_limit = 1;
	attr.ah_attr.port_num = ep->port_num;
	if (ibv_modify_qp(ep->qp, &attr,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("QP to RTR: %s", strerror(errno));

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = mine->psn;
	attr.timeout = 14;
	attr.retry_cnt = RETRY_COUNT;
	attr.rnr_retry = RETRY_COUNT;
	attr.max_rd_atomic = 1;
	if (ibv_modify_qp(ep->qp, &attr,
			  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		die("QP to RTS: %s", strerror(errno));

	ep->remote_addr = peer->addr;
	ep->remote_rkey = peer->rkey;
	ep->remote_atomic_addr = peer->atomic_addr;
	ep->remote_atomic_rkey = peer->atomic_rkey;
}

/*
 * Waits for the next completion and returns it in wc. With WAIT_EVENT the
 * queue is armed and the thread sleeps on the completion channel whenever
 * a poll finds nothing, re-polling after arming so that no completion
 * slips between the poll and the arming.
 */
static void next_completion(struct endpoint *ep, struct ibv_wc *wc)
{
	for (;;) {
		int n = ibv_poll_cq(ep->cq, 1, wc);

		if (n < 0)
			die("ibv_poll_cq failed");
		if (n == 1) {
			if (wc->status != IBV_WC_SUCCESS)
				die("work request %" PRIu64 " completed with %s", wc->wr_id,
				    ibv_wc_status_str(wc->status));
			return;
		}
		if (ep->wait == WAIT_POLL)
			continue;
		if (!ep->armed) {
			if (ibv_req_notify_cq(ep->cq, 0))
				die("ibv_req_notify_cq failed");
			ep->armed = 1;
			continue;
		}
		struct pollfd pfd = { .fd = ep->channel->fd, .events = POLLIN };
		struct ibv_cq *cq;
		void *context;

		if (poll(&pfd, 1, wait_ms) != 1)
			die("no completion within %d s", wait_ms / 1000);
		if (ibv_get_cq_event(ep->channel, &cq, &context))
			die("ibv_get_cq_event failed");
		ibv_ack_cq_events(cq, 1);
		ep->armed = 0;
	}
}

/* Waits for the completion of work request wr_id; others must not come. */
static void wait_for(struct endpoint *ep, uint64_t wr_id)
{
	struct ibv_wc wc;

	next_completion(ep, &wc);
	if (wc.wr_id != wr_id)
		die("completion of %" PRIu64 " while waiting for %" PRIu64, wc.wr_id, wr_id);
}

static void post_send(struct endpoint *ep, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	if (ibv_post_send(ep->qp, wr, &bad))
		die("ibv_post_send: %s", strerror(errno));
}

static void post_recv(struct endpoint *ep, uint64_t wr_id, size_t offset, size_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(ep->buf + offset),
		.length = (uint32_t)len,
		.lkey = ep->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(ep->qp, &wr, &bad))
		die("ibv_post_recv: %s", strerror(errno));
}

/* Work request ids: what a completion belongs to. */
#define WR_ONE_SIDED 1
#define WR_REQUEST 2
#define WR_REPLY_RECV 3
#define WR_REQUEST_RECV 4
#define WR_REPLY 5

/*
 * One synchronous one-sided operation, as LITE does it. `remote_value`
 * tracks the remote atomic word: fetch_add adds 1 to it and compare_swp
 * swaps in its successor, so every compare_swp succeeds and both check
 * what they found.
 */
static void one_sided(struct endpoint *ep, int op, unsigned long size, uint64_t *remote_value)
{
	struct ibv_sge sge = { .addr = (uintptr_t)ep->buf, .length = (uint32_t)size,
			       .lkey = ep->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = WR_ONE_SIDED,
		.sg_list = &sge,
		.num_sge = 1,
		.send_flags = IBV_SEND_SIGNALED,
	};

	switch (op) {
	case OP_WRITE:
	case OP_READ:
		wr.opcode = op == OP_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = ep->remote_addr;
		wr.wr.rdma.rkey = ep->remote_rkey;
		break;
	default:
		sge.addr = (uintptr_t)ep->atomic_result;
		sge.length = 8;
		sge.lkey = ep->result_mr->lkey;
		wr.opcode = op == OP_FETCH_ADD ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
		wr.wr.atomic.remote_addr = ep->remote_atomic_addr;
		wr.wr.atomic.rkey = ep->remote_atomic_rkey;
		wr.wr.atomic.compare_add = op == OP_FETCH_ADD ? 1 : *remote_value;
		wr.wr.atomic.swap = *remote_value + 1;
		break;
	}
	post_send(ep, &wr);
	wait_for(ep, WR_ONE_SIDED);
	if (op == OP_FETCH_ADD || op == OP_COMPARE_SWP) {
		if (*ep->atomic_result != *remote_value)
			die("%s found %" PRIu64 ", expected %" PRIu64, op_names[op],
			    *ep->atomic_result, *remote_value);
		(*remote_value)++;
	}
}

/* One RPC round trip: the reply's receive is posted before the request goes out. */
static void rpc_call(struct endpoint *ep, unsigned long size)
{
	struct ibv_sge sge = { .addr = (uintptr_t)ep->buf, .length = (uint32_t)size,
			       .lkey = ep->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = WR_REQUEST,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	};
	int sent = 0, replied = 0;

	post_recv(ep, WR_REPLY_RECV, ep->buf_len, size);
	post_send(ep, &wr);
	while (!sent || !replied) {
		struct ibv_wc wc;

		next_completion(ep, &wc);
		if (wc.wr_id == WR_REQUEST)
			sent = 1;
		else if (wc.wr_id == WR_REPLY_RECV && wc.byte_len == size)
			replied = 1;
		else
			die("unexpected completion %" PRIu64 " (%u bytes) in an RPC", wc.wr_id,
			    wc.byte_len);
	}
}

/* --- the memory region curve ---------------------------------------------- */

/* What the server registered for the region curve, in the order offered. */
struct region_set {
	struct ibv_mr **mrs;
	struct region *offered;
	long count;
	uint8_t **chunks;
	int nchunks;
};

/* Registers one region per page of new memory until `set` holds `count`. */
static void grow_regions(struct endpoint *ep, struct region_set *set, long count)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	long more = count - set->count;
	uint8_t *chunk;

	if (more <= 0)
		return;
	set->mrs = realloc(set->mrs, (size_t)count * sizeof(*set->mrs));
	set->offered = realloc(set->offered, (size_t)count * sizeof(*set->offered));
	set->chunks = realloc(set->chunks, (size_t)(set->nchunks + 1) * sizeof(*set->chunks));
	chunk = aligned_alloc(REGION_SIZE, (size_t)more * REGION_SIZE);
	if (!set->mrs || !set->offered || !set->chunks || !chunk)
		die("out of memory for %ld regions", count);
	memset(chunk, 0x5a, (size_t)more * REGION_SIZE);
	set->chunks[set->nchunks++] = chunk;
	for (long i = 0; i < more; i++) {
		struct ibv_mr *mr = ibv_reg_mr(ep->pd, chunk + i * REGION_SIZE, REGION_SIZE, access);

		if (!mr)
			die("ibv_reg_mr of region %ld: %s", set->count + 1, strerror(errno));
		set->mrs[set->count] = mr;
		set->offered[set->count] = (struct region){ .addr = (uintptr_t)mr->addr,
							    .rkey = mr->rkey };
		set->count++;
	}
}

static void release_regions(struct region_set *set)
{
	for (long i = 0; i < set->count; i++)
		if (ibv_dereg_mr(set->mrs[i]))
			die("ibv_dereg_mr of region %ld failed", i + 1);
	for (int i = 0; i < set->nchunks; i++)
		free(set->chunks[i]);
	free(set->mrs);
	free(set->offered);
	free(set->chunks);
	memset(set, 0, sizeof(*set));
}

/*
 * Times cfg->iters 64-byte operations `op` on one of `count` regions picked
 * at random and cfg->iters on the first region, in alternating blocks of
 * REGION_BLOCK; `samples` and `first` hold cfg->iters each.
 */
static void region_series(const struct config *cfg, struct endpoint *ep, int op,
			  const struct region *regions, long count, double *samples, double *first)
{
	const unsigned long size = 64;
	double cpu_start = 0, cpu_total;
	long random_done = 0, first_done = 0;
	char extra[32];

	for (long i = 0; i < WARMUP + 2 * cfg->iters; i++) {
		long timed = i - WARMUP;
		int to_first = timed >= 0 && (timed / REGION_BLOCK) % 2 == 1;
		const struct region *r;
		double start, took;

		/* One kind ran out: the other finishes. */
		if (timed >= 0 && to_first && first_done == cfg->iters)
			to_first = 0;
		if (timed >= 0 && !to_first && random_done == cfg->iters)
			to_first = 1;
		r = to_first ? &regions[0] : &regions[lrand48() % count];
		if (i == WARMUP)
			cpu_start = cpu_us();
		ep->remote_addr = r->addr;
		ep->remote_rkey = r->rkey;
		start = now_us();
		one_sided(ep, op, size, NULL);
		took = now_us() - start;
		if (timed < 0)
			continue;
		if (to_first)
			first[first_done++] = took;
		else
			samples[random_done++] = took;
	}
	cpu_total = cpu_us() - cpu_start;
	snprintf(extra, sizeof(extra), ",\"regions\":%ld", count);
	report_named(cfg, op == OP_WRITE ? "region_write" : "region_read", size, extra, samples,
		     cfg->iters, cpu_total / 2);
	report_named(cfg, op == OP_WRITE ? "region_write_first" : "region_read_first", size, extra,
		     first, cfg->iters, cpu_total / 2);
}

/* The live-region steps: the server registers, the client writes and reads at random. */
static void region_curve(const struct config *cfg, struct endpoint *ep, int fd, double *samples)
{
	struct region *regions = NULL;
	double *first = calloc((size_t)cfg->iters, sizeof(*first));

	if (!first)
		die("out of memory");

	for (int c = 0; c < cfg->nregions; c++) {
		long count = cfg->regions[c], offered;
		char line[LINE_MAX_LEN];

		send_line(fd, "REGIONS %ld", count);
		recv_line_within(fd, line, sizeof(line), REGISTER_TIMEOUT_MS);
		if (sscanf(line, "RKEYS %ld", &offered) != 1 || offered != count)
			die("the server answered \"%s\" to REGIONS %ld", line, count);
		regions = realloc(regions, (size_t)count * sizeof(*regions));
		if (!regions)
			die("out of memory for %ld regions", count);
		recv_all(fd, regions, (size_t)count * sizeof(*regions));
		region_series(cfg, ep, OP_WRITE, regions, count, samples, first);
		region_series(cfg, ep, OP_READ, regions, count, samples, first);
	}
	free(regions);
	free(first);
}

/*
 * Times creating a region of `size` bytes (mapping fresh memory and
 * registering it, which faults it in and pins it) and freeing it
 * (deregistering and unmapping).
 */
static void create_series(const struct config *cfg, struct endpoint *ep, unsigned long size)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	long iters = size >= CREATE_LARGE_SIZE ? CREATE_ITERS_LARGE : CREATE_ITERS_SMALL;
	double create[CREATE_ITERS_SMALL], release[CREATE_ITERS_SMALL];
	double cpu_create = 0, cpu_release = 0;

	for (long i = 0; i < iters; i++) {
		double start = now_us(), cpu_start = cpu_us(), registered, cpu_registered;
		void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
				 0);
		struct ibv_mr *mr;

		if (mem == MAP_FAILED)
			die("mmap of %lu bytes: %s", size, strerror(errno));
		mr = ibv_reg_mr(ep->pd, mem, size, access);
		if (!mr)
			die("ibv_reg_mr of %lu bytes: %s", size, strerror(errno));
		registered = now_us();
		cpu_registered = cpu_us();
		if (ibv_dereg_mr(mr))
			die("ibv_dereg_mr of %lu bytes failed", size);
		if (munmap(mem, size))
			die("munmap of %lu bytes: %s", size, strerror(errno));
		create[i] = registered - start;
		release[i] = now_us() - registered;
		cpu_create += cpu_registered - cpu_start;
		cpu_release += cpu_us() - cpu_registered;
	}
	report_named(cfg, "region_create", size, "", create, iters, cpu_create);
	report_named(cfg, "region_free", size, "", release, iters, cpu_release);
}

/* --- the client's connection and series ------------------------------------ */

/*
 * Connects to the server: a control connection, then a queue pair whose
 * buffers hold `largest` bytes each way. Returns once the server's queue
 * pair is ready to receive (before the first request).
 */
static int connect_to_server(const struct config *cfg, struct endpoint *ep, unsigned long largest)
{
	struct offer mine, peer;
	char line[LINE_MAX_LEN];
	int fd = control_connect(cfg->host, cfg->port);

	send_line(fd, "HELLO %lu", largest);
	open_endpoint(ep, cfg, largest);
	recv_offer(fd, &peer);
	mine = own_offer(ep);
	send_offer(fd, &mine);
	connect_qp(ep, cfg, &mine, &peer);
	recv_line(fd, line, sizeof(line));
	if (strcmp(line, "CONNECTED"))
		die("the server answered \"%s\" to the offer", line);
	return fd;
}

/* Asks the server to answer `count` RPCs of `size` bytes, and waits until it can. */
static void start_rpc_series(int fd, unsigned long size, long count)
{
	char line[LINE_MAX_LEN];

	send_line(fd, "RPC %lu %ld", size, count);
	recv_line(fd, line, sizeof(line));
	if (strcmp(line, "READY"))
		die("the server answered \"%s\" to an RPC series", line);
}

/* Waits for the end of an RPC series the server answered. */
static void end_rpc_series(int fd)
{
	char line[LINE_MAX_LEN];

	recv_line(fd, line, sizeof(line));
	if (strcmp(line, "DONE"))
		die("the server answered \"%s\" after an RPC series", line);
}

/* One operation `op` of `size` bytes, as the series time it. */
static void one_op(struct endpoint *ep, int op, unsigned long size, uint64_t *remote_value)
{
	if (op == OP_RPC)
		rpc_call(ep, size);
	else
		one_sided(ep, op, size, remote_value);
}

/*
 * Waits for the next turn, a line "GO OP SIZE COUNT" on standard input,
 * which must name series `op` of `size` bytes and at most `left`
 * operations; returns COUNT. The program that gives the turns waits for
 * this one's block in turn, so a wait here is as long as one of its blocks.
 */
static long next_turn(int op, unsigned long size, long left)
{
	char line[LINE_MAX_LEN], name[LINE_MAX_LEN];
	unsigned long turn_size;
	long count;

	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		die("the program giving the turns left before %s of %lu B was done", op_names[op],
		    size);
	line[strcspn(line, "\n")] = '\0';
	if (sscanf(line, "GO %255s %lu %ld", name, &turn_size, &count) != 3 ||
	    strcmp(name, op_names[op]) || turn_size != size || count < 1 || count > left)
		die("expected a turn of at most %ld operations of %s of %lu B, got \"%s\"", left,
		    op_names[op], size, line);
	return count;
}

/* Ends a turn: the program giving the turns times its own block now. */
static void end_turn(void)
{
	printf("LITE-VERBS-TURN\n");
	fflush(stdout);
}

/* --- the process curve ----------------------------------------------------- */

/* Reads exactly `len` bytes from pipe `fd` within wait_ms each. */
static int read_pipe(int fd, void *data, size_t len)
{
	uint8_t *at = data;

	while (len) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, wait_ms) != 1)
			return -1;
		n = read(fd, at, len);
		if (n <= 0)
			return -1;
		at += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * One process of the process curve: its own control connection, queue pair
 * and memory regions. Says 'r' on `report` once warmed up, waits for its
 * byte on `go`, times cfg->iters operations `op` and writes the time they
 * took (a double, in microseconds) to `report`.
 */
static void curve_process(const struct config *cfg, int op, int report_fd, int go_fd)
{
	const unsigned long size = PROCESS_OP_SIZE;
	struct endpoint ep;
	char ready = 'r', go;
	uint64_t remote_value = 0;
	double start, elapsed;
	int fd = connect_to_server(cfg, &ep, size);

	if (op == OP_RPC)
		start_rpc_series(fd, size, cfg->iters + WARMUP);
	for (int i = 0; i < WARMUP; i++)
		one_op(&ep, op, size, &remote_value);
	if (write(report_fd, &ready, 1) != 1 || read_pipe(go_fd, &go, 1))
		die("lost the parent process");
	start = now_us();
	for (long i = 0; i < cfg->iters; i++)
		one_op(&ep, op, size, &remote_value);
	elapsed = now_us() - start;
	if (write(report_fd, &elapsed, sizeof(elapsed)) != (ssize_t)sizeof(elapsed))
		die("lost the parent process");
	if (op == OP_RPC)
		end_rpc_series(fd);
	send_line(fd, "BYE");
	close(fd);
}

/* Tells a --fork server to quit, once its other connections end. */
static void quit_server(const struct config *cfg)
{
	int fd = control_connect(cfg->host, cfg->port);

	send_line(fd, "QUIT");
	close(fd);
}

/*
 * Kills and reaps `count` processes of `pids`, tells the server to quit (its
 * processes serving the killed ones end as their connections close), then
 * gives up with `why`.
 */
static void abandon_step(const struct config *cfg, pid_t *pids, long count, const char *why)
	__attribute__((noreturn));

static void abandon_step(const struct config *cfg, pid_t *pids, long count, const char *why)
{
	for (long i = 0; i < count; i++)
		kill(pids[i], SIGKILL);
	for (long i = 0; i < count; i++)
		waitpid(pids[i], NULL, 0);
	quit_server(cfg);
	die("process curve: %s", why);
}

/*
 * One step of the process curve: `count` processes, each with its own
 * queue pair, warm up, start together and make cfg->iters operations `op`.
 */
static void process_step(const struct config *cfg, int op, long count)
{
	pid_t pids[MAX_PROCESSES];
	int report_pipe[2], go_pipe[2];
	double start, elapsed, slowest = 0;
	long started = 0, ok = 1;

	if (pipe(report_pipe) || pipe(go_pipe))
		die("pipe: %s", strerror(errno));
	fflush(stdout);
	for (; started < count; started++) {
		pid_t pid = fork();

		if (pid < 0)
			abandon_step(cfg, pids, started, "fork failed");
		if (pid == 0) {
			close(report_pipe[0]);
			close(go_pipe[1]);
			curve_process(cfg, op, report_pipe[1], go_pipe[0]);
			exit(0);
		}
		pids[started] = pid;
	}
	close(report_pipe[1]);
	close(go_pipe[0]);
	for (long i = 0; i < count; i++) {
		char ready;

		if (read_pipe(report_pipe[0], &ready, 1) || ready != 'r')
			abandon_step(cfg, pids, count, "a process did not get ready");
	}
	start = now_us();
	for (long i = 0; i < count; i++)
		if (write(go_pipe[1], "g", 1) != 1)
			abandon_step(cfg, pids, count, "cannot start the processes");
	for (long i = 0; i < count; i++) {
		double took;

		if (read_pipe(report_pipe[0], &took, sizeof(took)))
			abandon_step(cfg, pids, count, "a process did not finish");
		if (took > slowest)
			slowest = took;
	}
	elapsed = now_us() - start;
	for (long i = 0; i < count; i++) {
		int status;

		if (waitpid(pids[i], &status, 0) != pids[i] || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			ok = 0;
	}
	close(report_pipe[0]);
	close(go_pipe[1]);
	if (!ok) {
		quit_server(cfg);
		die("process curve: a process of the %s step with %ld processes failed",
		    op_names[op], count);
	}
	/* Each process holds one queue pair (its server process another). */
	printf("LITE-VERBS {\"process\":{\"workload\":\"%s\",\"size\":%d,\"processes\":%ld,"
	       "\"wait\":\"%s\",\"iters\":%ld,\"elapsed_us\":%.2f,\"slowest_us\":%.2f,"
	       "\"ops_per_s\":%.1f,\"qps\":%ld,\"mrs\":%ld}}\n",
	       op_names[op], PROCESS_OP_SIZE, count, cfg->wait == WAIT_EVENT ? "event" : "poll",
	       cfg->iters, elapsed, slowest, (double)(count * cfg->iters) / elapsed * 1e6,
	       count, MRS_PER_ENDPOINT * count);
	fflush(stdout);
}

/* The process curve against a --fork server, which is told to quit at the end. */
static void process_curve(const struct config *cfg)
{
	static const int curve_ops[] = { OP_WRITE, OP_RPC };

	for (size_t o = 0; o < sizeof(curve_ops) / sizeof(curve_ops[0]); o++) {
		if (!cfg->ops[curve_ops[o]])
			continue;
		for (int c = 0; c < cfg->nprocesses; c++)
			process_step(cfg, curve_ops[o], cfg->processes[c]);
	}
	quit_server(cfg);
	printf("LITE-VERBS: ok\n");
}

static void client(const struct config *cfg)
{
	struct endpoint ep;
	unsigned long largest = 8;
	double *samples;
	int fd;

	if (cfg->nprocesses) {
		process_curve(cfg);
		return;
	}
	for (int i = 0; i < cfg->nsizes; i++)
		if (cfg->sizes[i] > largest)
			largest = cfg->sizes[i];
	samples = calloc((size_t)cfg->iters, sizeof(*samples));
	if (!samples)
		die("out of memory");
	fd = connect_to_server(cfg, &ep, largest);

	uint64_t remote_value = 0;

	if (cfg->nregions) {
		region_curve(cfg, &ep, fd, samples);
		for (int s = 0; s < cfg->ncreate_sizes; s++)
			create_series(cfg, &ep, cfg->create_sizes[s]);
	}
	for (int op = 0; op < OP_COUNT && !cfg->nregions; op++) {
		int atomic = op == OP_FETCH_ADD || op == OP_COMPARE_SWP;

		if (!cfg->ops[op])
			continue;
		for (int s = 0; s < cfg->nsizes; s++) {
			unsigned long size = atomic ? 8 : cfg->sizes[s];
			double cpu_used = 0;

			if (atomic && s > 0)
				break;
			/* Without turns, one block of every operation. */
			for (long done = 0; done < cfg->iters;) {
				long count = cfg->turns ? next_turn(op, size, cfg->iters - done)
							: cfg->iters;
				double cpu_start;

				/* Set up in the first turn, while the other program waits. */
				if (done == 0) {
					if (op == OP_RPC)
						start_rpc_series(fd, size, cfg->iters + WARMUP);
					for (int i = 0; i < WARMUP; i++)
						one_op(&ep, op, size, &remote_value);
				}
				cpu_start = cpu_us();
				for (long i = done; i < done + count; i++) {
					double start = now_us();

					one_op(&ep, op, size, &remote_value);
					samples[i] = now_us() - start;
				}
				cpu_used += cpu_us() - cpu_start;
				done += count;
				if (done == cfg->iters) {
					report(cfg, op, size, samples, cfg->iters, cpu_used);
					if (op == OP_RPC)
						end_rpc_series(fd);
				}
				if (cfg->turns)
					end_turn();
			}
		}
	}
	send_line(fd, "BYE");
	close(fd);
	free(samples);
	printf("LITE-VERBS: ok\n");
}

/*
 * Answers `count` requests of `size` bytes with replies as long. READY goes
 * to the client once the first receives are posted, so that no request
 * finds the receive queue empty.
 */
static void serve_rpc(struct endpoint *ep, int fd, unsigned long size, long count)
{
	long posted = 0, answered = 0, sent = 0;

	while (posted < count && posted < RECV_DEPTH) {
		post_recv(ep, WR_REQUEST_RECV, 0, size);
		posted++;
	}
	send_line(fd, "READY");
	while (answered < count || sent < answered) {
		struct ibv_wc wc;

		next_completion(ep, &wc);
		if (wc.wr_id == WR_REPLY) {
			sent++;
			continue;
		}
		if (wc.wr_id != WR_REQUEST_RECV || wc.byte_len != size)
			die("unexpected completion %" PRIu64 " (%u bytes) while serving", wc.wr_id,
			    wc.byte_len);
		answered++;
		if (posted < count) {
			post_recv(ep, WR_REQUEST_RECV, 0, size);
			posted++;
		}

		struct ibv_sge sge = { .addr = (uintptr_t)(ep->buf + ep->buf_len),
				       .length = (uint32_t)size, .lkey = ep->mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = WR_REPLY,
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = IBV_WR_SEND,
			.send_flags = IBV_SEND_SIGNALED,
		};
		post_send(ep, &wr);
	}
}

/* Serves one client's connection, which greeted with `greeting`, until it says BYE. */
static void serve_connection(const struct config *cfg, int fd, const char *greeting)
{
	struct endpoint ep;
	struct offer mine, peer;
	struct region_set regions = { 0 };
	char line[LINE_MAX_LEN];
	unsigned long largest;

	if (sscanf(greeting, "HELLO %lu", &largest) != 1 || largest < 8 || largest > MAX_SIZE)
		die("malformed greeting \"%s\"", greeting);
	open_endpoint(&ep, cfg, largest);
	mine = own_offer(&ep);
	send_offer(fd, &mine);
	recv_offer(fd, &peer);
	connect_qp(&ep, cfg, &mine, &peer);
	send_line(fd, "CONNECTED");
	for (;;) {
		unsigned long size;
		long count;

		recv_line(fd, line, sizeof(line));
		if (!strcmp(line, "BYE"))
			break;
		if (sscanf(line, "REGIONS %ld", &count) == 1) {
			if (count < 1 || count > MAX_REGIONS)
				die("malformed request \"%s\"", line);
			grow_regions(&ep, &regions, count);
			send_line(fd, "RKEYS %ld", count);
			send_all(fd, regions.offered, (size_t)count * sizeof(*regions.offered));
			continue;
		}
		if (sscanf(line, "RPC %lu %ld", &size, &count) != 2 || size < 1 || size > largest ||
		    count < 1 || count > MAX_ITERS + WARMUP)
			die("malformed request \"%s\"", line);
		serve_rpc(&ep, fd, size, count);
		send_line(fd, "DONE");
	}
	release_regions(&regions);
}

/* Reaps the connection processes that ended; returns how many failed. */
static long reap_connections(long *alive, int block)
{
	long failed = 0;
	int status;
	pid_t pid;

	while (*alive && (pid = waitpid(-1, &status, block ? 0 : WNOHANG)) > 0) {
		(*alive)--;
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			failed++;
	}
	return failed;
}

/*
 * Serves every connection in a process of its own (the process curve: one
 * queue pair per client process on both sides) until a client says QUIT.
 */
static void fork_server(const struct config *cfg, int listener)
{
	long alive = 0, failed = 0;

	for (;;) {
		char greeting[LINE_MAX_LEN];
		int fd = control_accept(listener);
		pid_t pid;

		recv_line(fd, greeting, sizeof(greeting));
		if (!strcmp(greeting, "QUIT")) {
			close(fd);
			break;
		}
		fflush(stdout);
		pid = fork();
		if (pid < 0)
			die("fork: %s", strerror(errno));
		if (pid == 0) {
			/* A server that gives up takes its connections with it. */
			if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() == 1)
				die("cannot follow the server process");
			close(listener);
			serve_connection(cfg, fd, greeting);
			close(fd);
			exit(0);
		}
		close(fd);
		alive++;
		failed += reap_connections(&alive, 0);
	}
	failed += reap_connections(&alive, 1);
	if (failed)
		die("%ld connection processes failed", failed);
}

static void server(const struct config *cfg)
{
	char greeting[LINE_MAX_LEN];
	int listener = control_listen(cfg->port);
	int fd;

	if (cfg->fork) {
		fork_server(cfg, listener);
	} else {
		fd = control_accept(listener);
		recv_line(fd, greeting, sizeof(greeting));
		serve_connection(cfg, fd, greeting);
		close(fd);
	}
	close(listener);
	printf("LITE-VERBS: ok\n");
}

int main(int argc, char **argv)
{
	struct config cfg;

	parse_args(&cfg, argc, argv);
	if (cfg.fork || cfg.nprocesses)
		wait_ms = PROCESS_WAIT_MS;
	srand48((long)getpid() ^ (long)time(NULL));
	if (cfg.server)
		server(&cfg);
	else
		client(&cfg);
	return 0;
}
