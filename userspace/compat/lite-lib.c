// SPDX-License-Identifier: GPL-2.0
/*
 * The original LITE userspace library (lite-lib.h) on this kernel's LITE
 * system calls (userspace/include/lite.h). See lite-lib.h and README.md for
 * the conventions and what differs from the original.
 *
 * The library never dereferences a pointer the caller passed unless the
 * kernel or a checked copy proved it valid first, so bad pointers give -1
 * with errno EFAULT rather than a crash.
 */
#include "lite-lib.h"

#include <limits.h>
#include <sched.h>
#include <sys/uio.h>

#include "lite.h"

/* First key handed out, as the original's handles started at 1025. */
#define FIRST_KEY	1025u

/* Environment variable overriding the manager address of join. */
#define CM_ADDRESS_ENV	"LITE_CM_ADDRESS"

static int fail_errno(int err)
{
	errno = err;
	return -1;
}

/* -1 with errno for a negative kernel result, else the result. */
static int result_of(long ret)
{
	if (ret < 0)
		return fail_errno((int)-ret);
	if (ret > INT_MAX)
		return fail_errno(EOVERFLOW);
	return (int)ret;
}

static uint64_t password_of(int password)
{
	return (uint64_t)(uint32_t)password;
}

/* ------------------------------------------------------------------ */
/* Checked access to caller memory.                                    */

static int zero_fd = -1;
static pthread_once_t zero_fd_once = PTHREAD_ONCE_INIT;

static void open_zero_fd(void)
{
	zero_fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
}

/*
 * Copies len bytes from src to dst through a pipe: the kernel reads src
 * and writes dst, so either one being unmapped gives -1 with EFAULT rather
 * than a crash.
 */
static int pipe_copy(void *dst, const void *src, size_t len)
{
	int fds[2];
	ssize_t done;

	if (pipe2(fds, O_CLOEXEC) != 0)
		return -1;
	done = write(fds[1], src, len);
	if (done == (ssize_t)len)
		done = read(fds[0], dst, len);
	close(fds[0]);
	close(fds[1]);
	return done == (ssize_t)len ? 0 : fail_errno(EFAULT);
}

/*
 * Copies len bytes from src to the caller's dst, or fails with EFAULT if
 * dst is not writable: the kernel proves dst writable by filling it from
 * /dev/zero first (one system call), or through a pipe without it.
 */
static int store_checked(void *dst, const void *src, size_t len)
{
	pthread_once(&zero_fd_once, open_zero_fd);
	if (zero_fd < 0)
		return pipe_copy(dst, src, len);
	if (read(zero_fd, dst, len) != (ssize_t)len)
		return fail_errno(EFAULT);
	memcpy(dst, src, len);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Keys: the original's small LMR numbers, mapped to kernel handles.   */

struct key_entry {
	uint64_t handle;	/* 0: free */
	uint64_t password;
};

static pthread_mutex_t keys_lock = PTHREAD_MUTEX_INITIALIZER;
static struct key_entry *keys;
static size_t keys_len;
static pid_t keys_pid;

/* Keys belong to the process that got them; a child starts with none. */
static void forget_inherited_keys(void)
{
	if (keys_pid != getpid()) {
		free(keys);
		keys = NULL;
		keys_len = 0;
		keys_pid = getpid();
	}
}

/* A new key for handle, or -1 with errno (the handle is freed then). */
static int key_for(long handle, uint64_t password, int (*release)(uint64_t))
{
	struct key_entry *grown;
	size_t i;
	int key = -1;

	if (handle < 0)
		return fail_errno((int)-handle);
	pthread_mutex_lock(&keys_lock);
	forget_inherited_keys();
	for (i = 0; i < keys_len && keys[i].handle != 0; i++)
		;
	if (i == keys_len && keys_len < INT_MAX - FIRST_KEY) {
		grown = realloc(keys, (keys_len * 2 + 16) * sizeof(*keys));
		if (grown) {
			memset(grown + keys_len, 0,
			       (keys_len + 16) * sizeof(*keys));
			keys = grown;
			keys_len = keys_len * 2 + 16;
		}
	}
	if (i < keys_len) {
		keys[i].handle = (uint64_t)handle;
		keys[i].password = password;
		key = (int)(FIRST_KEY + i);
	}
	pthread_mutex_unlock(&keys_lock);
	if (key < 0) {
		release((uint64_t)handle);
		return fail_errno(ENOMEM);
	}
	return key;
}

/* The handle (and password) behind key, or EBADF. */
static int handle_of(unsigned long key, uint64_t *handle, uint64_t *password)
{
	int found = 0;

	pthread_mutex_lock(&keys_lock);
	forget_inherited_keys();
	if (key >= FIRST_KEY && key - FIRST_KEY < keys_len &&
	    keys[key - FIRST_KEY].handle != 0) {
		*handle = keys[key - FIRST_KEY].handle;
		if (password)
			*password = keys[key - FIRST_KEY].password;
		found = 1;
	}
	pthread_mutex_unlock(&keys_lock);
	return found ? 0 : fail_errno(EBADF);
}

static int release_lmr(uint64_t handle)
{
	return (int)lite_free(handle);
}

static int release_mapping(uint64_t handle)
{
	return (int)lite_umap_lmr(handle);
}

/* ------------------------------------------------------------------ */
/* Cluster.                                                            */

/*
 * The manager address from LITE_CM_ADDRESS ("IP" or "IP:PORT") into ip and
 * port: 1 if the variable is set, 0 if not, -1 with errno EINVAL if it is
 * malformed.
 */
static int manager_from_env(char *ip, size_t ip_size, unsigned int *port)
{
	const char *env = getenv(CM_ADDRESS_ENV);
	const char *colon;
	unsigned long parsed;
	size_t len;
	char *end;

	if (!env || !*env)
		return 0;
	colon = strchr(env, ':');
	len = colon ? (size_t)(colon - env) : strlen(env);
	if (len == 0 || len >= ip_size)
		return fail_errno(EINVAL);
	memcpy(ip, env, len);
	ip[len] = '\0';
	*port = LITE_CM_DEFAULT_PORT;
	if (colon) {
		errno = 0;
		parsed = strtoul(colon + 1, &end, 10);
		if (errno || *end || end == colon + 1 || parsed == 0 ||
		    parsed > 65535)
			return fail_errno(EINVAL);
		*port = (unsigned int)parsed;
	}
	return 1;
}

/* The node id, or 0 with errno set; joining again is not an error. */
int userspace_liteapi_join(char *input_str, int eth_port, int ib_port)
{
	char ip[LITE_MAX_IP_LEN + 1];
	unsigned int port = (unsigned int)eth_port;
	const char *address = input_str;
	int from_env;
	long ret;

	from_env = manager_from_env(ip, sizeof(ip), &port);
	if (from_env < 0)
		return 0;
	if (from_env)
		address = ip;
	if ((!from_env && (eth_port <= 0 || eth_port > 65535)) ||
	    ib_port <= 0) {
		errno = EINVAL;
		return 0;
	}
	ret = lite_join(address, port, (unsigned int)ib_port);
	if (ret == -EISCONN)
		ret = lite_get_node_id();
	if (ret <= 0) {
		errno = ret < 0 ? (int)-ret : ENOTCONN;
		return 0;
	}
	return (int)ret;
}

int userspace_liteapi_get_node_id(void)
{
	long ret = lite_get_node_id();

	if (ret < 0) {
		errno = (int)-ret;
		return 0;
	}
	return (int)ret;
}

int userspace_liteapi_get_total_node(void)
{
	long ret = lite_get_total_node();

	if (ret < 0) {
		errno = (int)-ret;
		return 0;
	}
	return (int)ret;
}

int userspace_liteapi_dist_barrier(unsigned int num)
{
	return result_of(lite_dist_barrier(num));
}

int userspace_syscall_test(void)
{
	long ret = lite_get_node_id();

	/* Anything but ENOSYS means the kernel has LITE's system calls. */
	return ret == -ENOSYS ? fail_errno(ENOSYS) : 0;
}

int stick_this_thread_to_core(int core_id)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;

	if (core_id < 0 || core_id >= cores)
		return EINVAL;
	CPU_ZERO(&set);
	CPU_SET(core_id, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* ------------------------------------------------------------------ */
/* RPC and messaging.                                                  */

/* A message or reply size the library passes on. */
static int size_ok(int size)
{
	return size >= 0 && size < LIMITATION;
}

int userspace_liteapi_register_application(unsigned int destined_port,
					   unsigned int max_size_per_message,
					   unsigned int max_user_per_node,
					   char *name, uint64_t name_len)
{
	uint64_t max_size = max_size_per_message;
	long ret;

	(void)max_user_per_node;
	/* The original allowed 2 MiB; larger messages fail when sent. */
	if (max_size > LITE_MAX_MESSAGE_SIZE)
		max_size = LITE_MAX_MESSAGE_SIZE;
	ret = lite_register_application(destined_port, max_size, name,
					name_len);
	return ret < 0 ? result_of(ret) : (int)destined_port;
}

int userspace_liteapi_query_port(int target_node, int designed_port)
{
	long ret;

	if (target_node < 0 || designed_port < 0)
		return fail_errno(EINVAL);
	ret = lite_query_port((unsigned int)target_node,
			      (unsigned int)designed_port);
	return ret < 0 ? result_of(ret) : MR_ASK_SUCCESS;
}

static int send_reply(int target_node, unsigned int port, void *addr,
		      int size, void *ret_addr, int max_ret_size,
		      unsigned int priority)
{
	if (target_node < 0 || !size_ok(size) || !size_ok(max_ret_size))
		return fail_errno(EINVAL);
	return result_of(lite_send_reply_imm((unsigned int)target_node, port,
					     addr, (uint64_t)size, ret_addr,
					     (uint64_t)max_ret_size,
					     priority));
}

int userspace_liteapi_send_reply_imm(int target_node, unsigned int port,
				     void *addr, int size, void *ret_addr,
				     int max_ret_size)
{
	return send_reply(target_node, port, addr, size, ret_addr,
			  max_ret_size, LITE_PRIORITY_NONE);
}

int userspace_liteapi_send_reply_imm_high(int target_node, unsigned int port,
					  void *addr, int size, void *ret_addr,
					  int max_ret_size)
{
	return send_reply(target_node, port, addr, size, ret_addr,
			  max_ret_size, LITE_PRIORITY_HIGH);
}

int userspace_liteapi_send_reply_imm_low(int target_node, unsigned int port,
					 void *addr, int size, void *ret_addr,
					 int max_ret_size)
{
	return send_reply(target_node, port, addr, size, ret_addr,
			  max_ret_size, LITE_PRIORITY_LOW);
}

/*
 * The original returned at once and let the caller spin on *ret_length;
 * here the call is posted asynchronously and reaped before returning, so
 * *ret_length holds the reply's length (or -errno) when this returns.
 */
int userspace_liteapi_send_reply_imm_fast(int target_node, unsigned int port,
					  void *addr, int size, void *ret_addr,
					  int *ret_length, int max_ret_size)
{
	int waiting = SEND_REPLY_WAIT, outcome;
	long op, ret;

	if (target_node < 0 || !size_ok(size) || !size_ok(max_ret_size))
		return fail_errno(EINVAL);
	if (store_checked(ret_length, &waiting, sizeof(waiting)) != 0)
		return -1;
	op = lite_send_reply_imm_async((unsigned int)target_node, port, addr,
				       (uint64_t)size, ret_addr,
				       (uint64_t)max_ret_size,
				       LITE_PRIORITY_NONE);
	do {
		ret = op < 0 ? op : lite_async_wait((uint64_t)op, 0);
	} while (op > 0 && ret == -EINTR);
	outcome = ret < 0 ? (int)ret : (ret > INT_MAX ? -EOVERFLOW : (int)ret);
	*ret_length = outcome;
	return result_of(outcome);
}

int userspace_liteapi_send(int target_node, unsigned int port, void *addr,
			   int size)
{
	if (target_node < 0 || !size_ok(size))
		return fail_errno(EINVAL);
	return result_of(lite_send((unsigned int)target_node, port, addr,
				   (uint64_t)size, LITE_PRIORITY_NONE));
}

/*
 * Receives into ret_addr. A one-way message's descriptor is
 * IMM_SEND_ONLY_FLAG, or 0 with one_way_zero (the _fast convention).
 * Without block_call an empty port gives 0, as in the original.
 */
static int receive(unsigned int port, void *ret_addr, int receive_size,
		   uintptr_t *descriptor, int block_call, int one_way_zero)
{
	long ret;

	if (receive_size < 0)
		return fail_errno(EINVAL);
	ret = lite_receive_message(port, ret_addr, (uint64_t)receive_size,
				   (uint64_t *)descriptor,
				   block_call ? 0 : LITE_RECV_NONBLOCK);
	if (ret == -EAGAIN && !block_call)
		return 0;
	if (ret < 0)
		return result_of(ret);
	/* The kernel just stored the descriptor there. */
	if (*descriptor == 0 && !one_way_zero)
		*descriptor = (uintptr_t)IMM_SEND_ONLY_FLAG;
	return result_of(ret);
}

int userspace_liteapi_receive_message(unsigned int port, void *ret_addr,
				      int receive_size, uintptr_t *descriptor,
				      int block_call)
{
	return receive(port, ret_addr, receive_size, descriptor, block_call, 0);
}

int userspace_liteapi_receive_message_high(unsigned int port, void *ret_addr,
					   int receive_size,
					   uintptr_t *descriptor,
					   int block_call)
{
	return receive(port, ret_addr, receive_size, descriptor, block_call, 0);
}

int userspace_liteapi_receive_message_low(unsigned int port, void *ret_addr,
					  int receive_size,
					  uintptr_t *descriptor,
					  int block_call)
{
	return receive(port, ret_addr, receive_size, descriptor, block_call, 0);
}

int userspace_liteapi_receive_message_fast(unsigned int port, void *ret_addr,
					   int receive_size,
					   uintptr_t *descriptor,
					   int *ret_length, int block_call)
{
	int waiting = SEND_REPLY_WAIT, len;

	if (store_checked(ret_length, &waiting, sizeof(waiting)) != 0)
		return -1;
	len = receive(port, ret_addr, receive_size, descriptor, block_call, 1);
	*ret_length = len < 0 ? -errno : len;
	return len;
}

double userspace_liteapi_receive_message_fast_record(unsigned int port,
						     void *ret_addr,
						     int receive_size,
						     uintptr_t *descriptor,
						     int *ret_length,
						     int block_call)
{
	return userspace_liteapi_receive_message_fast(port, ret_addr,
						      receive_size, descriptor,
						      ret_length, block_call);
}

/* The original's descriptor of a one-way message is not a descriptor. */
static int reply(void *addr, int size, uintptr_t descriptor)
{
	if (!size_ok(size))
		return fail_errno(EINVAL);
	if (descriptor == (uintptr_t)IMM_SEND_ONLY_FLAG)
		return fail_errno(ENOENT);
	return result_of(lite_reply_message(addr, (uint64_t)size,
					    (uint64_t)descriptor));
}

int userspace_liteapi_reply_message(void *addr, int size, uintptr_t descriptor)
{
	return reply(addr, size, descriptor);
}

int userspace_liteapi_reply_message_high(void *addr, int size,
					 uintptr_t descriptor)
{
	return reply(addr, size, descriptor);
}

int userspace_liteapi_reply_message_low(void *addr, int size,
					uintptr_t descriptor)
{
	return reply(addr, size, descriptor);
}

/* Returns 0 once the reply went and the next message came, as the
 * original did (not the message's length). */
int userspace_liteapi_reply_and_receive_message(void *addr, int size,
						uintptr_t descriptor,
						unsigned int port,
						void *ret_addr,
						int receive_size,
						uintptr_t *receive_descriptor)
{
	struct lite_receive next = { 0 };
	uintptr_t got;
	long ret;

	if (!size_ok(size) || receive_size < 0)
		return fail_errno(EINVAL);
	if (descriptor == (uintptr_t)IMM_SEND_ONLY_FLAG)
		return fail_errno(ENOENT);
	/* Fail before replying if the next descriptor cannot be stored. */
	got = 0;
	if (store_checked(receive_descriptor, &got, sizeof(got)) != 0)
		return -1;
	next.buf = (uint64_t)(uintptr_t)ret_addr;
	next.max_size = (uint64_t)receive_size;
	next.port = port;
	ret = lite_reply_and_receive_message(addr, (uint64_t)size,
					     (uint64_t)descriptor, &next);
	if (ret < 0)
		return result_of(ret);
	got = next.descriptor ? (uintptr_t)next.descriptor
			      : (uintptr_t)IMM_SEND_ONLY_FLAG;
	*receive_descriptor = got;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Memory.                                                             */

/* Permissions as the original passed them; ADMIN is never granted by a
 * name, so it is left out rather than refused. */
static uint64_t grantable(uint64_t permission)
{
	return permission & ~(uint64_t)MR_ADMIN_FLAG;
}

int userspace_liteapi_alloc_remote_mem(unsigned int node_id, unsigned int size,
				       bool atomic_flag, int password)
{
	uint64_t pw = password_of(password);

	/* The original refused a non-8-byte atomic LMR with this code. */
	if (atomic_flag && size != 8) {
		errno = EINVAL;
		return MR_ASK_REFUSE;
	}
	return key_for(lite_alloc_remote(node_id, size,
					 atomic_flag ? LITE_ALLOC_ATOMIC : 0,
					 pw),
		       pw, release_lmr);
}

int userspace_liteapi_wrap_alloc(void *data, int size, uint64_t identifier,
				 int password)
{
	uint64_t pw = password_of(password);

	if (size < 0)
		return fail_errno(EINVAL);
	return key_for(lite_wrap_alloc(data, (uint64_t)size, identifier, pw),
		       pw, release_lmr);
}

int userspace_liteapi_add_ask_mr_table(uint64_t identifier, uint64_t lmr,
				       uint64_t permission, int password)
{
	uint64_t handle;

	if (lmr > ULONG_MAX || handle_of((unsigned long)lmr, &handle, NULL))
		return fail_errno(EBADF);
	return result_of(lite_add_ask_mr_table(identifier, handle,
					       grantable(permission),
					       password_of(password)));
}

/* The original answered refusals with these positive codes. */
int userspace_liteapi_ask_lmr(int memory_node, uint64_t identifier,
			      uint64_t permission, int password)
{
	uint64_t pw = password_of(password);
	long handle;

	if (memory_node < 0)
		return fail_errno(EINVAL);
	handle = lite_ask_lmr((unsigned int)memory_node, identifier,
			      grantable(permission), pw);
	switch (handle) {
	case -EACCES:
		errno = EACCES;
		return MR_ASK_REFUSE;
	case -EPERM:
		errno = EPERM;
		return MR_ASK_UNPERMITTED;
	case -ENOENT:
		errno = ENOENT;
		return MR_ASK_UNKNOWN;
	default:
		return key_for(handle, pw, release_mapping);
	}
}

static int transfer(unsigned key, void *local_addr, unsigned int size,
		    unsigned int offset, int password, unsigned int priority,
		    int write)
{
	uint64_t handle;

	if (handle_of(key, &handle, NULL))
		return -1;
	if (write)
		return result_of(lite_rdma_write(handle, local_addr, size,
						 offset, priority,
						 password_of(password)));
	return result_of(lite_rdma_read(handle, local_addr, size, offset,
					priority, password_of(password)));
}

int userspace_liteapi_rdma_read(unsigned lite_handler, void *local_addr,
				unsigned int size, unsigned int offset,
				int password)
{
	return transfer(lite_handler, local_addr, size, offset, password,
			LITE_PRIORITY_NONE, 0);
}

int userspace_liteapi_rdma_read_high(unsigned lite_handler, void *local_addr,
				     unsigned int size, unsigned int offset,
				     int password)
{
	return transfer(lite_handler, local_addr, size, offset, password,
			LITE_PRIORITY_HIGH, 0);
}

int userspace_liteapi_rdma_read_low(unsigned lite_handler, void *local_addr,
				    unsigned int size, unsigned int offset,
				    int password)
{
	return transfer(lite_handler, local_addr, size, offset, password,
			LITE_PRIORITY_LOW, 0);
}

int userspace_liteapi_rdma_write(unsigned lite_handler, void *local_addr,
				 unsigned int size, unsigned int offset,
				 int password)
{
	return transfer(lite_handler, local_addr, size, offset, password,
			LITE_PRIORITY_NONE, 1);
}

int userspace_liteapi_rdma_write_high(unsigned lite_handler, void *local_addr,
				      unsigned int size, unsigned int offset,
				      int password)
{
	return transfer(lite_handler, local_addr, size, offset, password,
			LITE_PRIORITY_HIGH, 1);
}

int userspace_liteapi_rdma_write_low(unsigned lite_handler, void *local_addr,
				     unsigned int size, unsigned int offset,
				     int password)
{
	return transfer(lite_handler, local_addr, size, offset, password,
			LITE_PRIORITY_LOW, 1);
}

int userspace_liteapi_remote_memset(unsigned lite_handler, int offset,
				    int size)
{
	uint64_t handle;

	if (offset < 0 || size < 0)
		return fail_errno(EINVAL);
	if (handle_of(lite_handler, &handle, NULL))
		return -1;
	return result_of(lite_remote_memset(handle, (uint64_t)offset,
					    (uint64_t)size, 0));
}

int userspace_liteapi_memset(unsigned lite_handler, int offset, int size)
{
	return userspace_liteapi_remote_memset(lite_handler, offset, size);
}

/*
 * The original mapped physically contiguous kernel pages for its _fast
 * calls; any memory works here, so this is locked anonymous memory.
 * Returns NULL (0) on failure, as the original did.
 */
void *userspace_liteapi_alloc_memory(unsigned long size)
{
	void *mem;

	if (size == 0 || size > (unsigned long)SSIZE_MAX) {
		errno = EINVAL;
		return NULL;
	}
	mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (mem == MAP_FAILED)
		return NULL;
	/* Best effort, as RLIMIT_MEMLOCK may not allow it. */
	(void)mlock(mem, size);
	return mem;
}

/* ------------------------------------------------------------------ */
/* async_rdma_read: a reaper thread writes each read's outcome to *poll. */

struct pending_read {
	uint64_t op;
	int *poll;
	struct pending_read *next;
};

static pthread_mutex_t reaper_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reaper_work = PTHREAD_COND_INITIALIZER;
static struct pending_read *reads_head, *reads_tail;
static pid_t reaper_pid;

static void *reap_reads(void *unused)
{
	struct pending_read *read;
	long ret;

	(void)unused;
	for (;;) {
		pthread_mutex_lock(&reaper_lock);
		while (!reads_head)
			pthread_cond_wait(&reaper_work, &reaper_lock);
		read = reads_head;
		reads_head = read->next;
		if (!reads_head)
			reads_tail = NULL;
		pthread_mutex_unlock(&reaper_lock);
		do {
			ret = lite_async_wait(read->op, 0);
		} while (ret == -EINTR);
		/* 0 once the data is in the buffer, else -errno. */
		__atomic_store_n(read->poll, ret < 0 ? (int)ret : 0,
				 __ATOMIC_RELEASE);
		free(read);
	}
	return NULL;
}

/* Starts the reaper in this process (again after a fork). */
static int start_reaper(void)
{
	pthread_attr_t attr;
	pthread_t thread;
	int err;

	if (reaper_pid == getpid())
		return 0;
	reads_head = reads_tail = NULL;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	err = pthread_create(&thread, &attr, reap_reads, NULL);
	pthread_attr_destroy(&attr);
	if (err)
		return fail_errno(err);
	reaper_pid = getpid();
	return 0;
}

/*
 * The 4.9 port's asynchronous read: returns 0 once the read is started;
 * *poll is SEND_REPLY_WAIT until the data is in local_addr, then 0 (or
 * -errno if the read failed).
 */
int async_rdma_read(unsigned lite_handler, void *local_addr, unsigned int size,
		    unsigned int offset, int *poll)
{
	struct pending_read *read;
	uint64_t handle, password;
	int waiting = SEND_REPLY_WAIT;
	long op;

	if (handle_of(lite_handler, &handle, &password))
		return -1;
	if (store_checked(poll, &waiting, sizeof(waiting)) != 0)
		return -1;
	read = malloc(sizeof(*read));
	if (!read)
		return fail_errno(ENOMEM);
	pthread_mutex_lock(&reaper_lock);
	if (start_reaper() != 0) {
		pthread_mutex_unlock(&reaper_lock);
		free(read);
		return -1;
	}
	op = lite_rdma_read_async(handle, local_addr, size, offset,
				  LITE_PRIORITY_NONE, password);
	if (op < 0) {
		pthread_mutex_unlock(&reaper_lock);
		free(read);
		*poll = (int)op;
		return result_of(op);
	}
	read->op = (uint64_t)op;
	read->poll = poll;
	read->next = NULL;
	if (reads_tail)
		reads_tail->next = read;
	else
		reads_head = read;
	reads_tail = read;
	pthread_cond_signal(&reaper_work);
	pthread_mutex_unlock(&reaper_lock);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Synchronization.                                                    */

int userspace_liteapi_fetch_add(unsigned long lite_handler, void *local_addr,
				unsigned long long input_value)
{
	uint64_t handle;

	if (handle_of(lite_handler, &handle, NULL))
		return -1;
	return result_of(lite_fetch_add(handle, (uint64_t *)local_addr,
					input_value, LITE_PRIORITY_NONE));
}

/* 0 with the old value in *local_addr (the swap happened if it equals
 * guess_value); MR_ASK_UNPERMITTED without the ATOMIC permission. */
int userspace_liteapi_compare_swp(unsigned long lite_handler, void *local_addr,
				  unsigned long long guess_value,
				  unsigned long long set_value)
{
	uint64_t handle;
	long ret;

	if (handle_of(lite_handler, &handle, NULL))
		return -1;
	ret = lite_compare_swp(handle, (uint64_t *)local_addr, guess_value,
			       set_value, LITE_PRIORITY_NONE);
	if (ret == -EPERM) {
		errno = EPERM;
		return MR_ASK_UNPERMITTED;
	}
	return result_of(ret);
}

/* Fills the original's lock form for the kernel's lock. */
static int store_lock(remote_spinlock_t *out, const struct lite_lock *lock)
{
	remote_spinlock_t form;

	memset(&form, 0, sizeof(form));
	form.lock_num = (int)lock->number;
	form.lock_mr.node_id = lock->home;
	return store_checked(out, &form, sizeof(form));
}

/* The kernel's lock named by the original's lock form. */
static int load_lock(const remote_spinlock_t *in, struct lite_lock *lock)
{
	remote_spinlock_t form;

	if (pipe_copy(&form, in, sizeof(form)) != 0)
		return -1;
	if (form.lock_num < 0)
		return fail_errno(EINVAL);
	lock->home = form.lock_mr.node_id;
	lock->number = (uint32_t)form.lock_num;
	return 0;
}

int userspace_liteapi_create_lock(int target_node, remote_spinlock_t *input)
{
	struct lite_lock lock;
	long ret;

	if (target_node < 0)
		return fail_errno(EINVAL);
	/* Fail before creating a lock whose form cannot be stored. */
	memset(&lock, 0, sizeof(lock));
	if (store_lock(input, &lock) != 0)
		return -1;
	ret = lite_create_lock((unsigned int)target_node, &lock);
	if (ret < 0)
		return result_of(ret);
	store_lock(input, &lock);
	return result_of(ret);
}

int userspace_liteapi_ask_lock(int target_node, int target_idx,
			       remote_spinlock_t *input)
{
	struct lite_lock lock;
	long ret;

	if (target_node < 0 || target_idx < 0)
		return fail_errno(EINVAL);
	memset(&lock, 0, sizeof(lock));
	if (store_lock(input, &lock) != 0)
		return -1;
	ret = lite_ask_lock((unsigned int)target_node,
			    (unsigned int)target_idx, &lock);
	if (ret < 0)
		return result_of(ret);
	store_lock(input, &lock);
	return (int)lock.number;
}

/*
 * Acquires the lock; 0 once held. A lock whose previous holder's node died
 * is acquired too (0, with errno EOWNERDEAD).
 */
int userspace_liteapi_lock(remote_spinlock_t *input)
{
	struct lite_lock lock;
	uint64_t held = 1;
	long ret;

	if (load_lock(input, &lock) != 0)
		return -1;
	ret = lite_lock(&lock);
	if (ret < 0 && ret != -EOWNERDEAD)
		return result_of(ret);
	if (store_checked(&input->ticket_num, &held, sizeof(held)) != 0) {
		lite_unlock(&lock);
		return -1;
	}
	errno = ret == -EOWNERDEAD ? EOWNERDEAD : errno;
	return 0;
}

int userspace_liteapi_unlock(remote_spinlock_t *input)
{
	struct lite_lock lock;
	uint64_t released = 0;
	long ret;

	if (load_lock(input, &lock) != 0)
		return -1;
	ret = lite_unlock(&lock);
	if (ret < 0)
		return result_of(ret);
	if (store_checked(&input->ticket_num, &released, sizeof(released)))
		return -1;
	return 0;
}
