// SPDX-License-Identifier: GPL-2.0
/*
 * lite_rpc: a LITE RPC server and client.
 *
 * The server registers a port and answers every request with its bytes
 * upper-cased, until a one-way "stop" message arrives. The client calls
 * the server on node NODE (default 1) a few times, then stops it.
 *
 * Usage: lite_rpc CM_IP server
 *        lite_rpc CM_IP client [NODE]
 * Build: cc -Wall -I userspace/include -o lite_rpc userspace/examples/lite_rpc.c
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lite.h"

#define RPC_PORT	7
#define RPC_MAX_SIZE	4096
#define STOP		"stop"

static int fail(const char *what, long ret)
{
	fprintf(stderr, "lite_rpc: %s: %s\n", what, strerror((int)-ret));
	return 1;
}

static int serve(void)
{
	static const char name[] = "upcase";
	char buf[RPC_MAX_SIZE];
	uint64_t descriptor;
	long len, i, ret;

	ret = lite_register_application(RPC_PORT, RPC_MAX_SIZE, name,
					sizeof(name) - 1);
	if (ret < 0)
		return fail("lite_register_application", ret);
	printf("serving port %d\n", RPC_PORT);

	for (;;) {
		len = lite_receive_message(RPC_PORT, buf, sizeof(buf),
					   &descriptor, 0);
		if (len < 0) {
			lite_unregister_application(RPC_PORT);
			return fail("lite_receive_message", len);
		}
		if (descriptor == 0) {
			/* One-way: only "stop" is expected. */
			if (len == (long)strlen(STOP) &&
			    memcmp(buf, STOP, (size_t)len) == 0)
				break;
			continue;
		}
		for (i = 0; i < len; i++)
			buf[i] = (char)toupper((unsigned char)buf[i]);
		ret = lite_reply_message(buf, (uint64_t)len, descriptor);
		if (ret < 0)
			fprintf(stderr, "lite_rpc: lite_reply_message: %s\n",
				strerror((int)-ret));
	}
	printf("stopped\n");
	ret = lite_unregister_application(RPC_PORT);
	return ret < 0 ? fail("lite_unregister_application", ret) : 0;
}

static int call(unsigned int node)
{
	static const char *const requests[] = { "hello", "remote", "procedure" };
	char reply[RPC_MAX_SIZE];
	size_t i;
	long len;
	int tries;

	/* The server may not have registered its port yet. */
	for (tries = 0; lite_query_port(node, RPC_PORT) == -ECONNREFUSED; tries++) {
		if (tries == 100)
			return fail("lite_query_port", -ECONNREFUSED);
		usleep(100 * 1000);
	}

	for (i = 0; i < sizeof(requests) / sizeof(requests[0]); i++) {
		len = lite_send_reply_imm(node, RPC_PORT, requests[i],
					  strlen(requests[i]), reply,
					  sizeof(reply), LITE_PRIORITY_NONE);
		if (len < 0)
			return fail("lite_send_reply_imm", len);
		printf("%s -> %.*s\n", requests[i], (int)len, reply);
	}

	len = lite_send(node, RPC_PORT, STOP, strlen(STOP), LITE_PRIORITY_NONE);
	return len < 0 ? fail("lite_send", len) : 0;
}

int main(int argc, char **argv)
{
	long node_id;
	unsigned long server = 1;

	if (argc < 3 || argc > 4 ||
	    (strcmp(argv[2], "server") != 0 && strcmp(argv[2], "client") != 0) ||
	    (argc == 4 && strcmp(argv[2], "client") != 0)) {
		fprintf(stderr, "usage: %s CM_IP server\n"
				"       %s CM_IP client [NODE]\n",
			argv[0], argv[0]);
		return 2;
	}
	if (argc == 4) {
		server = strtoul(argv[3], NULL, 10);
		if (server < 1 || server >= LITE_MAX_NODES) {
			fprintf(stderr, "lite_rpc: NODE must be 1..%d\n",
				LITE_MAX_NODES - 1);
			return 2;
		}
	}

	node_id = lite_join(argv[1], LITE_CM_DEFAULT_PORT, 1);
	if (node_id == -EISCONN)
		node_id = lite_get_node_id();
	if (node_id < 0)
		return fail("lite_join", node_id);
	printf("node %ld\n", node_id);

	if (strcmp(argv[2], "server") == 0)
		return serve();
	return call((unsigned int)server);
}
