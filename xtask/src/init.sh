#!/bin/sh
# /init of the LITE test guests (busybox sh).
#
# Reads its role from the kernel command line:
#   lite.ip=ADDR/LEN   address of eth0; also brings up the Soft-RoCE device rxe0
#   lite.ip2=ADDR/LEN  failure-survivor: address of eth1, which stays down
#                      until the node that leaves and rejoins adds a second
#                      Soft-RoCE device, rxe1, on it (lite-failure-test
#                      --second-address)
#   lite.cm=IP         cluster manager address
#   lite.nodes=N       cluster size
#   lite.run=ROLE      demo | test | fuzz | failure-survivor | failure-victim |
#                      partition-survivor | partition-cut | kunit |
#                      bench-native-server | bench-native-client |
#                      bench-lite | bench-lock | bench-failure-survivor |
#                      bench-failure-victim | bench-apps | apps |
#                      bench-regions-server | bench-regions-client |
#                      bench-processes-server | bench-processes-client |
#                      bench-scale | bench-dsm | exec | shell | idle
#   lite.peer=IP       the other VM (perftest client)
#   lite.iters=N       benchmark iterations
#   lite.sizes=A,B,..  benchmark message sizes (latency, RPC round trips)
#   lite.bwruns=OP:SIZE:DEPTH:ITERS,..
#                      perftest bandwidth runs: ib_OP_bw -s SIZE -t DEPTH -n ITERS
#   lite.bwsizes=..    lite-bench --bw-sizes (memset/memcpy sizes)
#   lite.asyncsizes=.. lite-bench --async-sizes
#   lite.depths=..     lite-bench --depths (async operations in flight)
#   lite.bwbytes=N     lite-bench --bw-bytes (bytes per throughput series)
#   lite.lockiters=N   bench-lock: lock/unlock pairs per node (lite-bench
#                      --contend-iters); every node but node 1, which keeps
#                      the lock, contends
#   lite.fuzzsecs=N    seconds of lite-fuzz: role fuzz, and role test after
#                      the cluster test (0, the default: test does not fuzz)
#   lite.seed=X        lite-fuzz's seed (default: lite-fuzz takes the clock)
#   lite.approunds=N   bench-apps: rounds of every application run
#   lite.rounds=N      bench-native-*: interleaved rounds of the native verbs
#                      baseline and LITE's latency series (0: none);
#                      bench-dsm: rounds of LITE-DSM's faults
#   lite.rounditers=N  operations per series in each of those rounds
#   lite.turnops=N     most operations of one side in a row when the two take
#                      turns within a series (default 10)
#   lite.isolationrounds=N
#                      lite-bench --qos-rounds (rounds of the isolation run)
#   lite.comparison=0  bench-native-*: the rounds alone, without perftest and
#                      the other lite-bench series (default 1)
#   lite.regioncounts=N,..
#                      bench-regions-*: live memory regions at each step of
#                      the memory region curve
#   lite.createsizes=A,..
#                      bench-regions-*: sizes of the regions created and freed
#   lite.processcounts=N,..
#                      bench-processes-*: processes at each step of the
#                      process curve
#   lite.processops=N  bench-processes-*: operations of each step, shared
#                      by its processes (at least 20 each)
#   lite.processrounds=N
#                      bench-processes-*: rounds of the whole process curve
#   lite.scalecalls=N  bench-scale: calls from every node to each peer in
#                      the all-to-all RPC (the barriers timed: lite.iters)
#   lite.pausesecs=N   partition-*: seconds of checked traffic with every
#                      node while the harness pauses a VM, before the
#                      partition (0, the default: no pause phase)
#   lite.cmtimeout=MS  silence of the cluster manager after which this node
#                      counts itself cut off (LITE's manager_timeout_ms);
#                      the harness gives the manager the same dead-after
#   lite.clustertestcmtimeout=MS
#                      failure-survivor: lite.cmtimeout from the end of the
#                      failure test on, for the cluster test after it (the
#                      harness then gives the manager the same)
#   lite.env=NAME=VALUE
#                      exec, shell, idle (cargo xtask cluster): a variable of
#                      the environment of the user's program or shell, once
#                      per variable (LITE_CM_ADDRESS, LITE_NODE_ADDRESS,
#                      LITE_NODES); values hold no blanks
# and always ends with "LITE-GUEST-EXIT rc=<code>" and a reboot, which makes
# QEMU (started with -no-reboot) exit. A role that runs several programs
# prints "LITE-GUEST-PROGRAM <name>" before each: the harness counts each
# program's TAP on its own, and knows that the programs before it ended.

export PATH=/bin:/sbin:/usr/bin:/usr/sbin
export HOME=/root

mount -t proc proc /proc
mount -t sysfs sysfs /sys
# CONFIG_DEVTMPFS_MOUNT does not apply to an initramfs root.
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tmpfs tmpfs /tmp

ip=
ip2=
cm=
nodes=1
run=
peer=
iters=1000
sizes=8,64,512,4096,65536
bwruns=
bwsizes=
asyncsizes=
depths=
bwbytes=
lockiters=300
rounds=0
rounditers=300
turnops=10
isolationrounds=
comparison=1
fuzzsecs=0
pausesecs=0
seed=
cmtimeout=
clustertestcmtimeout=
approunds=3
regioncounts=1,100,10000,100000
createsizes=4096,65536,1048576,16777216,268435456,1073741824
processcounts=1,2,4,8,16,32,64
processops=4000
processrounds=3
scalecalls=200
programenv=
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	lite.ip=*) ip=${arg#lite.ip=} ;;
	lite.ip2=*) ip2=${arg#lite.ip2=} ;;
	lite.cm=*) cm=${arg#lite.cm=} ;;
	lite.nodes=*) nodes=${arg#lite.nodes=} ;;
	lite.run=*) run=${arg#lite.run=} ;;
	lite.peer=*) peer=${arg#lite.peer=} ;;
	lite.iters=*) iters=${arg#lite.iters=} ;;
	lite.sizes=*) sizes=${arg#lite.sizes=} ;;
	lite.bwruns=*) bwruns=${arg#lite.bwruns=} ;;
	lite.bwsizes=*) bwsizes=${arg#lite.bwsizes=} ;;
	lite.asyncsizes=*) asyncsizes=${arg#lite.asyncsizes=} ;;
	lite.depths=*) depths=${arg#lite.depths=} ;;
	lite.bwbytes=*) bwbytes=${arg#lite.bwbytes=} ;;
	lite.lockiters=*) lockiters=${arg#lite.lockiters=} ;;
	lite.rounds=*) rounds=${arg#lite.rounds=} ;;
	lite.rounditers=*) rounditers=${arg#lite.rounditers=} ;;
	lite.turnops=*) turnops=${arg#lite.turnops=} ;;
	lite.isolationrounds=*) isolationrounds=${arg#lite.isolationrounds=} ;;
	lite.comparison=*) comparison=${arg#lite.comparison=} ;;
	lite.fuzzsecs=*) fuzzsecs=${arg#lite.fuzzsecs=} ;;
	lite.pausesecs=*) pausesecs=${arg#lite.pausesecs=} ;;
	lite.seed=*) seed=${arg#lite.seed=} ;;
	lite.cmtimeout=*) cmtimeout=${arg#lite.cmtimeout=} ;;
	lite.clustertestcmtimeout=*) clustertestcmtimeout=${arg#lite.clustertestcmtimeout=} ;;
	lite.approunds=*) approunds=${arg#lite.approunds=} ;;
	lite.regioncounts=*) regioncounts=${arg#lite.regioncounts=} ;;
	lite.createsizes=*) createsizes=${arg#lite.createsizes=} ;;
	lite.processcounts=*) processcounts=${arg#lite.processcounts=} ;;
	lite.processops=*) processops=${arg#lite.processops=} ;;
	lite.processrounds=*) processrounds=${arg#lite.processrounds=} ;;
	lite.scalecalls=*) scalecalls=${arg#lite.scalecalls=} ;;
	lite.env=*) programenv="$programenv ${arg#lite.env=}" ;;
	esac
done

# Announces the next program of a role that runs several (see above).
program() {
	echo "LITE-GUEST-PROGRAM $1"
}

# Joins the cluster whose manager the environment of lite.env= names
# (LITE_CM_ADDRESS, IP:PORT), as the user's programs do (roles shell, idle).
# $programenv is split into its NAME=VALUE words on purpose.
# shellcheck disable=SC2086
join_from_environment() {
	env $programenv python3 -c '
import os, lite
ip, port = os.environ["LITE_CM_ADDRESS"].rsplit(":", 1)
print("LITE-GUEST: joined the cluster as node", lite.join(ip, int(port)))' || {
		echo "LITE-GUEST: cannot join the cluster"
		return 1
	}
}

# LITE's resource counters once every node joined, saved by
# lite-cluster-test and compared by lite-resources after the tests.
RESOURCES_BASELINE=/tmp/lite-resources.baseline

# Prints kmemleak's report between markers the harness reads:
# LITE-KMEMLEAK-BEGIN, the report, then LITE-KMEMLEAK-END rc=<status>,
# 0 if both scans and the read succeeded. An object is reported only once
# a scan found it unreferenced and unchanged since the scan before, and
# older than 5 s: hence two scans, some seconds apart. Scanning 1 GiB takes
# tens of seconds under TCG, and a signal ends a scan early, so each step
# is bounded.
KMEMLEAK=/sys/kernel/debug/kmemleak
kmemleak_report() {
	echo "LITE-KMEMLEAK-BEGIN"
	leak_scan=0
	if [ ! -e "$KMEMLEAK" ]; then
		echo "LITE-GUEST: $KMEMLEAK is missing (a kernel without CONFIG_DEBUG_KMEMLEAK?)"
		leak_scan=1
	fi
	[ $leak_scan -eq 0 ] && { timeout 300 sh -c "echo scan > $KMEMLEAK" || leak_scan=$?; }
	[ $leak_scan -eq 0 ] && sleep 6
	[ $leak_scan -eq 0 ] && { timeout 300 sh -c "echo scan > $KMEMLEAK" || leak_scan=$?; }
	[ $leak_scan -eq 0 ] && { timeout 120 cat "$KMEMLEAK" || leak_scan=$?; }
	echo "LITE-KMEMLEAK-END rc=$leak_scan"
}

# Prints each direct nesting of two of LITE's (or LITE-DSM's) lock classes
# that lockdep saw, as LITE-LOCKDEP lite:A -> lite:B (debug kernels only);
# the harness checks them against the lock order the kernel code states.
lockdep_report() {
	[ -r /proc/lockdep ] || return 0
	awk '/^[0-9a-f]+ / { class = $NF; next }
		/^ -> / && class ~ /^lite(_dsm)?:/ && $NF ~ /^lite(_dsm)?:/ { print "LITE-LOCKDEP " class " -> " $NF }' /proc/lockdep
}

finish() {
	lockdep_report
	echo "LITE-GUEST-EXIT rc=$1"
	sync
	reboot -f
	# Not reached unless reboot failed; returning from /init would panic.
	while true; do sleep 60; done
}

# Brings up eth0 and rxe0; fails if rxe0 is not ACTIVE within 30 s.
setup_network() {
	hostname "node-${ip%%/*}"
	ip link set lo up
	ip addr add "$ip" dev eth0 || return 1
	ip link set eth0 up || return 1
	rdma link add rxe0 type rxe netdev eth0 || return 1
	i=0
	while [ $i -lt 30 ]; do
		if grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null; then
			echo "LITE-GUEST: rxe0 is ACTIVE on eth0 ($ip)"
			return 0
		fi
		sleep 1
		i=$((i + 1))
	done
	echo "LITE-GUEST: rxe0 did not become ACTIVE"
	return 1
}

# perftest tests between the two benchmark VMs. The server blocks
# until a client connected; the client retries until the server listens.
# perftest calibrates its cycle counter against gettimeofday at start-up;
# under TCG that sometimes fails and the client's table shows "inf". The
# client then asks for another round over a small TCP side channel: after
# every run the server waits for the client's verdict, "again" or "next".
VERDICT_PORT=18600
MAX_ROUNDS=5

# perftest_server TEST SIZE ITERS [EXTRA perftest ARGS...]
perftest_server() {
	test=$1 size=$2 n=$3
	shift 3
	while :; do
		out=$(timeout 600 "$test" -d rxe0 -x 1 -s "$size" -n "$n" "$@" 2>&1)
		rc=$?
		echo "$out"
		# The client prints the figures; a server that ran the test but
		# could not calibrate its own clock has nothing to report.
		if [ $rc -ne 0 ] && echo "$out" | grep -q "Can't produce a report"; then
			echo "LITE-PERFTEST: the server could not calibrate its clock; the client's figures stand"
			rc=0
		fi
		verdict=$(timeout 300 nc -l -p $VERDICT_PORT)
		[ "$verdict" = again ] || return $rc
	done
}

send_verdict() {
	tries=0
	while [ $tries -lt 30 ]; do
		echo "$1" | nc "$peer" $VERDICT_PORT 2>/dev/null && return 0
		tries=$((tries + 1))
		sleep 1
	done
	return 1
}

# perftest_client TEST SIZE ITERS [EXTRA perftest ARGS...]
perftest_client() {
	test=$1 size=$2 n=$3 round=1
	shift 3
	while :; do
		tries=0
		rc=1
		while [ $tries -lt 60 ]; do
			out=$(timeout 600 "$test" -d rxe0 -x 1 -s "$size" -n "$n" "$@" "$peer" 2>&1)
			rc=$?
			echo "$out"
			[ $rc -eq 0 ] && break
			# Connected and ran, but could not calibrate its clock: the
			# server is waiting for a verdict, not for a new connection.
			echo "$out" | grep -q "Can't produce a report" && break
			tries=$((tries + 1))
			sleep 1
		done
		if [ $round -lt $MAX_ROUNDS ] &&
			{ { [ $rc -eq 0 ] &&
				echo "$out" | grep -Eq "^ *$size +[0-9]+ .*(inf|nan)"; } ||
				echo "$out" | grep -q "Can't produce a report"; }; then
			echo "LITE-PERFTEST: no valid timing in round $round, measuring again"
			send_verdict again
			round=$((round + 1))
			continue
		fi
		send_verdict next
		return $rc
	done
}

perftest_side() {
	side=$1
	status=0
	# ib_send_lat is the native counterpart of LITE's RPC.
	for test in ib_write_lat ib_read_lat ib_send_lat; do
		for size in $(echo "$sizes" | tr ',' ' '); do
			echo "LITE-PERFTEST-BEGIN test=$test size=$size side=$side"
			"perftest_$side" "$test" "$size" "$iters"
			rc=$?
			echo "LITE-PERFTEST-END test=$test size=$size side=$side rc=$rc"
			[ $rc -eq 0 ] || status=1
		done
	done
	# Atomics are 8 bytes; the counterparts of lite_fetch_add and
	# lite_compare_swp.
	for atomic in FETCH_AND_ADD CMP_AND_SWAP; do
		echo "LITE-PERFTEST-BEGIN test=ib_atomic_lat size=8 atomic=$atomic side=$side"
		"perftest_$side" ib_atomic_lat 8 "$iters" -A "$atomic"
		rc=$?
		echo "LITE-PERFTEST-END test=ib_atomic_lat size=8 atomic=$atomic side=$side rc=$rc"
		[ $rc -eq 0 ] || status=1
	done
	return $status
}

# perftest bandwidth tests, one per entry of lite.bwruns (OP:SIZE:DEPTH:ITERS),
# in the same order on both sides.
perftest_bw_side() {
	side=$1
	status=0
	for bwrun in $(echo "$bwruns" | tr ',' ' '); do
		op=${bwrun%%:*} rest=${bwrun#*:}
		size=${rest%%:*} rest=${rest#*:}
		depth=${rest%%:*} n=${rest#*:}
		test=ib_${op}_bw
		echo "LITE-PERFTEST-BEGIN test=$test size=$size depth=$depth iters=$n side=$side"
		"perftest_$side" "$test" "$size" "$n" -t "$depth"
		rc=$?
		echo "LITE-PERFTEST-END test=$test size=$size depth=$depth side=$side rc=$rc"
		[ $rc -eq 0 ] || status=1
	done
	return $status
}

# The interleaved comparison (README, "Benchmark"): in each round LITE's
# series take turns with the native baseline's (lite-verbs-bench --turns,
# which lite-bench starts on node 2) in blocks of at most $turnops
# operations, so that drift of the emulator moves both sides of a ratio;
# then each program runs alone for its CPU time (odd rounds baseline first).
latency_groups="write read fetch_add,compare_swp rpc"

# $1: server or client; $2: the group's operations.
interleaved_round() {
	if [ "$1" = server ]; then
		verbs_round server "$2" &
		native=$!
		lite_round "$2"
		result=$?
		# Once LITE's side failed, the baseline may never connect.
		[ $result -eq 0 ] || kill $native 2>/dev/null
		wait $native || result=1
		return $result
	fi
	lite_round "$2" --turn-ops "$turnops" --baseline \
		"lite-verbs-bench --client $peer --wait event --iters $rounditers --sizes $sizes --ops $2 --turns"
}

# $1: server or client; $2: the group's operations.
verbs_round() {
	if [ "$1" = server ]; then
		timeout 600 lite-verbs-bench --server --wait event
	else
		timeout 600 lite-verbs-bench --client "$peer" --wait event \
			--iters "$rounditers" --sizes "$sizes" --ops "$2"
	fi
}

# $1: the group's operations; the rest: more lite-bench options.
lite_round() {
	ops=$1
	shift
	timeout 600 lite-bench --cm "$cm" --peer-node "$litepeer" --series latency \
		--iters "$rounditers" --sizes "$sizes" --rpc-sizes "$sizes" --ops "$ops" "$@"
}

# This VM's busy CPU time so far, in USER_HZ ticks (1/100 s): every CPU
# state of /proc/stat's first line but idle and iowait.
busy_ticks() {
	read -r _ user nice system _ _ irq softirq steal _ < /proc/stat
	echo $((user + nice + system + irq + softirq + steal))
}

# $1: side; $2: "verbs" or "lite"; $3: the group. Prints the busy CPU time
# of this whole VM while it ran, kernel threads included (bench-record):
# LITE-RECORD {"cpu":{"side":"server|client","program":"verbs|lite","busy_ticks":N}}
timed_round() {
	before=$(busy_ticks)
	if [ "$2" = verbs ]; then
		verbs_round "$1" "$3"
	else
		lite_round "$3"
	fi
	result=$?
	echo "LITE-RECORD {\"cpu\":{\"side\":\"$1\",\"program\":\"$2\",\"busy_ticks\":$(($(busy_ticks) - before))}}"
	return $result
}

latency_rounds() {
	status=0
	round=1
	while [ "$round" -le "$rounds" ]; do
		echo "LITE-ROUND-BEGIN round=$round"
		for group in $latency_groups; do
			interleaved_round "$1" "$group" || status=1
		done
		echo "LITE-ROUND-END round=$round"
		echo "LITE-CPU-ROUND-BEGIN round=$round"
		for group in $latency_groups; do
			if [ $((round % 2)) -eq 1 ]; then
				timed_round "$1" verbs "$group" || status=1
				timed_round "$1" lite "$group" || status=1
			else
				timed_round "$1" lite "$group" || status=1
				timed_round "$1" verbs "$group" || status=1
			fi
		done
		echo "LITE-CPU-ROUND-END round=$round"
		round=$((round + 1))
	done
	return $status
}

# The memory region curve, the native baseline's then LITE's, goes up to
# 100k live LMRs and a 1 GiB one, beyond the default quotas: root and every
# other node are given no limit.
region_curve() {
	status=0
	q=/sys/kernel/debug/lite/quotas
	{ echo "limit uid 0 lmrs=unlimited remote_memory=unlimited" > $q &&
		echo "limit node default remote_memory=unlimited" > $q; } || {
		echo "LITE-GUEST: cannot lift the quotas in $q"
		status=1
	}
	if [ "$1" = server ]; then
		timeout 1800 lite-verbs-bench --server --wait event || status=1
	else
		timeout 1800 lite-verbs-bench --client "$peer" --wait event --iters "$iters" \
			--regions "$regioncounts" --create-sizes "$createsizes" || status=1
	fi
	timeout 1800 lite-bench --cm "$cm" --peer-node "$litepeer" --series regions --iters "$iters" \
		--region-counts "$regioncounts" --create-sizes "$createsizes" || status=1
	return $status
}

# The process curve, one step at a time, the native baseline's then LITE's,
# so that each step's two sides are measured seconds apart; every step
# makes about as many operations, shared by its processes.
process_curve() {
	status=0
	steps=
	round=1
	while [ $round -le "$processrounds" ]; do
		steps="$steps $(echo "$processcounts" | tr , ' ')"
		round=$((round + 1))
	done
	for count in $steps; do
		each=$((processops / count))
		[ "$each" -lt 20 ] && each=20
		if [ "$1" = server ]; then
			timeout 900 lite-verbs-bench --server --fork --wait event || status=1
		else
			timeout 900 lite-verbs-bench --client "$peer" --wait event --iters "$each" \
				--processes "$count" --ops write,rpc || status=1
		fi
		timeout 900 lite-bench --cm "$cm" --peer-node "$litepeer" \
			--series processes --iters "$each" \
			--process-counts "$count" || status=1
	done
	return $status
}

lite_bench() {
	set -- --cm "$cm" --peer-node "$litepeer" --iters "$iters" --sizes "$sizes" --rpc-sizes "$sizes"
	[ -n "$bwsizes" ] && set -- "$@" --bw-sizes "$bwsizes"
	[ -n "$asyncsizes" ] && set -- "$@" --async-sizes "$asyncsizes"
	[ -n "$depths" ] && set -- "$@" --depths "$depths"
	[ -n "$bwbytes" ] && set -- "$@" --bw-bytes "$bwbytes"
	[ -n "$isolationrounds" ] && set -- "$@" --qos-rounds "$isolationrounds"
	lite-bench "$@"
}

# The paper's applications over LITE, over TCP and alone (LITE-Graph also
# over LITE-DSM), in lite.approunds rounds, small with "small" (cargo xtask
# apps). Node i is TCP rank i - 1; every TCP run takes a port of its own so
# none waits for the last one's sockets.
bench_apps() {
	if [ "$1" = small ]; then
		set -- "lite-log --records 150 --threads 2 --kill-test 1" \
			"lite-mapreduce --job wordcount --size 1M --threads 2" \
			"lite-mapreduce --job invindex --size 512K --threads 2" \
			"lite-graph --algo pagerank --scale 12 --edge-factor 8" \
			"lite-graph --algo components --scale 12 --edge-factor 8"
	else
		set -- "lite-log --records 1000 --threads 2 --record-size 4096" \
			"lite-mapreduce --job wordcount --size 16M --threads 2" \
			"lite-mapreduce --job invindex --size 8M --threads 2" \
			"lite-graph --algo pagerank --scale 17 --edge-factor 16" \
			"lite-graph --algo components --scale 17 --edge-factor 16"
	fi
	runs=
	for app_run in "$@"; do
		runs="$runs$app_run;"
	done
	me=${ip%%/*}
	rank=$((${me##*.} - 1))
	hosts=
	i=1
	while [ $i -le "$nodes" ]; do
		hosts="$hosts${hosts:+,}${me%.*}.$i"
		i=$((i + 1))
	done
	port=18800
	round=1
	while [ $round -le "$approunds" ]; do
		rest=$runs
		while [ -n "$rest" ]; do
			app_run=${rest%%;*}
			rest=${rest#*;}
			# $app_run is split into the program and its options on purpose.
			# shellcheck disable=SC2086
			set -- $app_run
			echo "LITE-APP-RUN round=$round $*"
			"$@" --transport lite --cm "$cm" --nodes "$nodes" || rc=$?
			"$@" --transport tcp --hosts "$hosts" --rank "$rank" --port "$port" || rc=$?
			port=$((port + 1))
			"$@" --transport local || rc=$?
			# LITE-Graph-DSM: the graph engine over LITE-DSM.
			if [ "$1" = lite-graph ]; then
				"$@" --transport dsm --cm "$cm" --nodes "$nodes" || rc=$?
			fi
		done
		round=$((round + 1))
	done
}

# The modules of a modular kernel (the test flavour), in dependency order:
# the RDMA core comes with Soft-RoCE; HMAC-SHA256, which authenticates the
# manager, before LITE; LITE's KUnit suites run as it loads.
LITE_MODULES="rdma_rxe ib_uverbs cryptomgr hmac sha256_generic lite"
load_modules() {
	for module in $LITE_MODULES; do
		modprobe "$module" || {
			echo "LITE-GUEST: cannot load the $module module"
			return 1
		}
	done
	echo "LITE-GUEST: loaded the modules $LITE_MODULES"
}

rc=0
if [ -d "/lib/modules/$(uname -r)" ]; then
	load_modules || finish 1
fi
if [ -n "$ip" ]; then
	setup_network || finish 1
fi

# The cluster's secret, which lite_join proves to the manager: the harness
# appends it to the initrd, so it never shows on the kernel command line,
# and it goes to root's user keyring before any program runs.
CLUSTER_SECRET=/etc/lite/cluster.secret
if [ -e "$CLUSTER_SECRET" ]; then
	key=$(lite-secret load "$CLUSTER_SECRET") || {
		echo "LITE-GUEST: cannot load the cluster secret $CLUSTER_SECRET into the kernel keyring"
		finish 1
	}
	echo "LITE-GUEST: cluster secret loaded into the user keyring (key $key)"
fi

# Sets the silence of the manager after which this node counts itself cut
# off (LITE's manager_timeout_ms) to $1 ms; it applies at once, also to a
# node that joined before.
set_manager_timeout() {
	echo "$1" > /sys/kernel/debug/lite/manager_timeout_ms || {
		echo "LITE-GUEST: cannot set LITE's manager_timeout_ms to $1"
		return 1
	}
	echo "LITE-GUEST: manager_timeout_ms is $1"
}

# Before any program joins: a node and its manager must agree on the
# silence that ends a membership.
if [ -n "$cmtimeout" ]; then
	set_manager_timeout "$cmtimeout" || finish 1
fi

echo "LITE-GUEST-RUN role=$run"
# The node holding lite-bench's memory: in the two-VM benchmark roles, the
# VM serving the native baseline also serves LITE and the other measures
# both, whichever joined LITE first.
case "$run" in
*-server) litepeer=this ;;
*-client) litepeer=other ;;
*) litepeer=auto ;;
esac

case "$run" in
demo) lite-demo --cm "$cm" --nodes "$nodes" || rc=$? ;;
# The cluster test. Once every program has ended, LITE's resources must
# come back to what they were after the join (lite-resources waits for
# other nodes' programs to let go of this node's memory), and then no leak
# may involve LITE (the harness reads kmemleak's report).
test)
	program lite-cluster-test
	lite-cluster-test --cm "$cm" --nodes "$nodes" --resources-baseline "$RESOURCES_BASELINE" || rc=$?
	# Then every node fuzzes the system calls, all together, if asked to.
	if [ "$fuzzsecs" -gt 0 ] 2>/dev/null; then
		program lite-fuzz
		lite-fuzz --cm "$cm" --nodes "$nodes" --seconds "$fuzzsecs" ${seed:+--seed "$seed"} || rc=$?
	fi
	program lite-resources
	lite-resources --baseline "$RESOURCES_BASELINE" || rc=$?
	kmemleak_report
	;;
# Fuzzing alone (cargo xtask fuzz): every node joins and fuzzes.
fuzz) lite-fuzz --cm "$cm" --nodes "$nodes" --seconds "$fuzzsecs" ${seed:+--seed "$seed"} || rc=$? ;;
# The failure test (README), then the cluster test with the victim booted
# again: it tests the API, so the survivors take its tolerant silence
# before the marker. Either program failing fails the role.
failure-survivor)
	program lite-failure-test
	lite-failure-test --cm "$cm" --nodes "$nodes" --role survivor ${ip2:+--second-address "$ip2"} || rc=$?
	if [ -n "$clustertestcmtimeout" ]; then
		set_manager_timeout "$clustertestcmtimeout" || rc=1
	fi
	program lite-cluster-test
	lite-cluster-test --cm "$cm" --nodes "$nodes" || rc=$?
	;;
failure-victim) lite-failure-test --cm "$cm" --nodes "$nodes" --role victim || rc=$? ;;
# The partition test (README), after lite.pausesecs of checked traffic
# while the harness pauses a survivor's VM again and again.
partition-survivor) lite-partition-test --cm "$cm" --nodes "$nodes" --role survivor --pause-traffic "$pausesecs" || rc=$? ;;
partition-cut) lite-partition-test --cm "$cm" --nodes "$nodes" --role cut --pause-traffic "$pausesecs" || rc=$? ;;
kunit) ;; # KUnit ran during boot, or as LITE's module loaded.
bench-native-server | bench-native-client)
	side=${run#bench-native-}
	latency_rounds "$side" || rc=1
	if [ "$comparison" != 0 ]; then
		perftest_side "$side" || rc=1
		perftest_bw_side "$side" || rc=1
		lite_bench || rc=1
	fi
	;;
bench-lite) lite_bench || rc=$? ;;
bench-regions-server) region_curve server || rc=1 ;;
bench-regions-client) region_curve client || rc=1 ;;
bench-processes-server) process_curve server || rc=1 ;;
bench-processes-client) process_curve client || rc=1 ;;
bench-apps) bench_apps ;;
apps)
	approunds=1
	bench_apps small
	;;
# Every node of the cluster times its join, barriers and all-to-all RPC.
bench-scale) lite-bench --cm "$cm" --scale "$nodes" --iters "$iters" --scale-calls "$scalecalls" || rc=$? ;;
# Node 1 times LITE-DSM's faults on pages nodes 2 and 3 read, in rounds.
bench-dsm) lite-bench --cm "$cm" --dsm "$nodes" --iters "$rounditers" --dsm-rounds "$rounds" --turn-ops "$turnops" || rc=$? ;;
# Node 1 keeps one lock, every other node takes it, all at the same time.
bench-lock) lite-bench --cm "$cm" --contend "$nodes" --contend-iters "$lockiters" || rc=$? ;;
# The benchmark's failure phase: the failure program alone; survivors
# print their stall, leave and rejoin times as TAP comments.
bench-failure-survivor) lite-failure-test --cm "$cm" --nodes "$nodes" --role survivor || rc=$? ;;
bench-failure-victim) lite-failure-test --cm "$cm" --nodes "$nodes" --role victim || rc=$? ;;
# cargo xtask cluster --exec: the script the harness appended runs the
# user's program, whose exit status is the role's.
exec)
	# $programenv is split into its NAME=VALUE words on purpose.
	# shellcheck disable=SC2086
	env $programenv sh /opt/lite-exec/run.sh </dev/null || rc=$?
	;;
# cargo xtask cluster --shell, node 1: joins, then an interactive shell on
# the console, which is the harness's terminal; setsid and cttyhack make
# the console its controlling terminal, for job control and Ctrl-C. The
# shell's exit status is the role's.
shell)
	join_from_environment
	echo "LITE-GUEST: a shell on $(hostname) (environment:$programenv); exit it to stop the cluster"
	# shellcheck disable=SC2086
	env $programenv PS1='\h:\w\$ ' setsid cttyhack sh || rc=$?
	;;
# cargo xtask cluster --shell, the other nodes: join, then wait for the
# harness to stop them once node 1's shell exited.
idle)
	join_from_environment
	while :; do sleep 3600; done
	;;
*)
	echo "LITE-GUEST: unknown role '$run'"
	rc=2
	;;
esac
finish $rc
