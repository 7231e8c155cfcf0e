#!/bin/sh
# The Slurm launch form of `paratwin run`, checked on one machine: a Slurm cluster of two nodes made
# of tests/exec/two_hosts.sh's namespaces (slurmctld and slurmd "nodea" in A, slurmd "nodeb" in B,
# each with its own host name), then `salloc -N 2 --ntasks-per-node=2 paratwin run ...` on nodea.
# Passes when the run finishes and its losses follow a 4-rank run on one host within 1e-6; exits 77
# (CTest's skip) without Debian's slurm-wlm and munge. Its output: bench/RESULTS.md.
#   sudo tests/exec/two_hosts.sh tests/exec/slurm_two_nodes.sh build
set -eu
for tool in slurmctld slurmd salloc sinfo munged unshare; do
  command -v $tool > /dev/null || { echo "SKIP: $tool is not installed (Debian: slurm-wlm, munge)"; exit 77; }
done
# Host A is Slurm's node "nodea": this script, slurmctld and its slurmd run under that host name.
if [ "$(hostname)" != nodea ]; then exec unshare -u sh -c 'hostname nodea && exec sh "$0" "$@"' "$0" "$@"; fi
build=$(cd "${1:-build}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
d=$(mktemp -d /tmp/paratwin-slurm-XXXXXX)
pids=""
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  sleep 1
  rm -rf "$d"
}
trap cleanup EXIT
mkdir -p "$d/state" "$d/spool-nodea" "$d/spool-nodeb"
cat > "$d/slurm.conf" <<CONF
ClusterName=paratwin
SlurmctldHost=nodea($PARATWIN_HOST_A)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool-%n
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd-%n.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
MailProg=/bin/true
NodeName=nodea NodeAddr=$PARATWIN_HOST_A CPUs=2 State=UNKNOWN
NodeName=nodeb NodeAddr=$PARATWIN_HOST_B CPUs=2 State=UNKNOWN
PartitionName=two Nodes=nodea,nodeb Default=YES State=UP OverSubscribe=YES
CONF
export SLURM_CONF="$d/slurm.conf"
# munged serves both namespaces through its socket in the file system.
if ! pgrep -x munged > /dev/null; then
  mkdir -p /run/munge
  munged --force --pid-file="$d/munged.pid" --log-file="$d/munged.log"
  sleep 1
  pids="$pids $(cat "$d/munged.pid")"
fi
slurmctld -D > "$d/ctld.out" 2>&1 &
pids="$pids $!"
# `ip netns exec` gives each namespace a /sys of its own, without cgroups: slurmd's cgroup plugin
# (cgroup v1 on this machine) needs them there.
cat > "$d/cgroup.conf" <<CONF
CgroupPlugin=cgroup/v1
CONF
cat > "$d/cgroups" <<'MOUNT'
mountpoint -q /sys/fs/cgroup/freezer && exit 0
mount -t tmpfs cgroup /sys/fs/cgroup
for c in freezer cpuset memory devices; do
  mkdir -p /sys/fs/cgroup/$c && mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c
done
MOUNT
sh "$d/cgroups"
slurmd -D > "$d/slurmd-a.out" 2>&1 &
pids="$pids $!"
ip netns exec "$PARATWIN_HOST_B_NETNS" unshare -u sh -c 'hostname nodeb && sh $0/cgroups && exec slurmd -D' "$d" > "$d/slurmd-b.out" 2>&1 &
pids="$pids $!"
# The controller, then both nodes idle.
for i in $(seq 20); do
  timeout 5 sinfo -h -N -o '%N %T' 2>/dev/null | grep -c idle | grep -qx 2 && break
  sleep 1
done
timeout 5 sinfo -N
if [ "$(timeout 5 sinfo -h -N -o '%T' | grep -c idle)" != 2 ]; then
  for f in "$d"/*.log "$d"/*.out; do echo "== $f"; tail -n 15 "$f"; done
  exit 1
fi
sh -c "exec salloc -N 2 --ntasks-per-node=2 sh -c '
  echo SLURM_JOB_ID=\$SLURM_JOB_ID SLURM_JOB_NODELIST=\$SLURM_JOB_NODELIST
  $build/bin/paratwin run $src/scenarios/live-cpu-tiny.yaml --set cluster=cpu-hosts \
    --set training.seq_len=32 --set training.global_batch=12 --set plan.micro_batch=1 --ranks 4 --steps 10 \
    --checkpoint-dir $d/ckpt --json $d/slurm.json --control-address $PARATWIN_HOST_A
  status=\$?; echo paratwin exit status \$status; exit \$status'" || { tail -n 20 "$d"/*.log "$d"/*.out; exit 1; }
$build/bin/paratwin run "$src/scenarios/live-cpu-tiny.yaml" --set training.seq_len=32 --set training.global_batch=12 \
  --set plan.micro_batch=1 --ranks 4 --steps 10 --json "$d/one.json" > /dev/null
echo "job steps slurmd started on nodeb: $(grep -c 'launch task' "$d/slurmd-nodeb.log")"
python3 -c "
import json, sys; a = json.load(open('$d/slurm.json'))['loss']; b = json.load(open('$d/one.json'))['loss']
worst = max(abs(x - y) for x, y in zip(a, b))
print('losses on 2 Slurm nodes against 4 ranks on one: max difference', worst, 'over', len(a), 'steps')
sys.exit(0 if len(a) == len(b) == 10 and worst <= 1e-6 else 1)"
