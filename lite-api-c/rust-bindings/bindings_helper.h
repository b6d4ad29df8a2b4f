
/* LITE: RDMA verbs, kernel threads and kernel sockets. */
#include <linux/delay.h>
#include <linux/in.h>
#include <linux/inet.h>
#include <linux/kthread.h>
#include <linux/net.h>
#include <linux/random.h>
#include <linux/socket.h>
#include <linux/tcp.h>
#include <net/sock.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>
/* LITE's system call argument structs. */
#include <uapi/linux/lite.h>

const gfp_t RUST_CONST_HELPER___GFP_COMP = __GFP_COMP;
