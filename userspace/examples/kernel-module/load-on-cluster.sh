#!/bin/sh
# Loads lite_example on one node of `cargo xtask cluster --exec` (the test
# kernel has it among its modules): joins the cluster, waits until every
# node joined, loads the module, which works with the next node as it
# loads, and unloads it. Fails if any step does, or if the module's kernel
# message handler, which it leaves registered, outlives it.
set -e
cm=${LITE_CM_ADDRESS%:*}
port=${LITE_CM_ADDRESS##*:}
python3 -c "import lite; lite.join('$cm', $port)"
tries=0
until [ "$(python3 -c 'import lite; print(lite.total_nodes())')" = "$LITE_NODES" ]; do
	tries=$((tries + 1))
	if [ $tries -gt 120 ]; then
		echo "load-on-cluster: the cluster did not reach $LITE_NODES nodes"
		exit 1
	fi
	sleep 1
done
ports() { sed -n 's/^rpc_ports //p' /sys/kernel/debug/lite/stats; }
before=$(ports)
modprobe lite_example keep_handler=1
# Every node answered its neighbour before any handler goes.
python3 -c "import lite; lite.barrier($LITE_NODES)"
rmmod lite_example
after=$(ports)
if [ -z "$before" ] || [ "$before" != "$after" ]; then
	echo "load-on-cluster: rpc_ports $before before the module, $after after it went"
	exit 1
fi
echo "load-on-cluster: lite_example loaded and unloaded"
