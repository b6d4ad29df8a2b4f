/* LITE: RDMA verbs, kernel threads, kernel sockets, keys and pinned memory. */
#include <keys/user-type.h>
#include <linux/delay.h>
#include <linux/in.h>
#include <linux/inet.h>
#include <linux/key.h>
#include <linux/kthread.h>
#include <linux/net.h>
#include <linux/random.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/socket.h>
#include <linux/tcp.h>
#include <linux/vmalloc.h>
#include <net/sock.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>
/* LITE's system call argument structs. */
#include <uapi/linux/lite.h>

const gfp_t RUST_CONST_HELPER___GFP_COMP = __GFP_COMP;
