#!/bin/sh
# Two Open MPI "hosts" on one machine: network namespaces A and B joined by a veth pair, each
# reached by mpirun through an rsh agent that enters the namespace (`ip netns exec`) instead of ssh;
# the ranks talk TCP over the veth link only. Runs COMMAND... inside namespace A (where mpirun and
# the supervisor run) with PARATWIN_HOST_A / PARATWIN_HOST_B set to the two hosts' addresses,
# PARATWIN_HOST_B_NETNS to B's namespace and PARATWIN_HOST_A_LINK / _B_LINK to their ends of the
# link; a launch with PARATWIN_TEST_PRIVATE_DIR set sees an empty file system of its own there on
# host B. Exits 77 (CTest's skip) where namespaces cannot be made.
# Usage: two_hosts.sh COMMAND...
set -u
id=$$
a=ptA$id
b=ptB$id
work=$(mktemp -d "${TMPDIR:-/tmp}/paratwin-hosts-XXXXXX") || exit 1

cleanup() {
  for ns in $a $b; do
    # A host's processes die with it; then the namespace and its end of the veth pair go.
    for pid in $(ip netns pids $ns 2>/dev/null); do kill -9 $pid 2>/dev/null; done
    ip netns del $ns 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$(id -u)" != 0 ] || ! ip netns add $a 2>/dev/null; then
  echo "SKIP: cannot create network namespaces here (needs root and iproute2's ip netns)"
  exit 77
fi
# A /30 of 10.x.y.0/8 unique to this run, so that runs side by side do not meet.
net=10.$((id / 16384 % 250 + 1)).$((id / 64 % 256)).$((id % 64 * 4))

host_a=${net%.*}.$((${net##*.} + 1))
host_b=${net%.*}.$((${net##*.} + 2))
set -e
ip netns add $b
ip link add va$id type veth peer name vb$id
ip link set va$id netns $a
ip link set vb$id netns $b
ip -n $a addr add $host_a/30 dev va$id
ip -n $b addr add $host_b/30 dev vb$id
for ns in $a $b; do ip -n $ns link set lo up; done
ip -n $a link set va$id up
ip -n $b link set vb$id up
set +e

# mpirun's rsh agent: "agent HOST COMMAND..." runs the command in HOST's namespace.
cat > "$work/agent" <<AGENT
#!/bin/sh
host=\$1; shift
case \$host in
  $host_a) ns=$a ;;
  $host_b) ns=$b ;;
  *) echo "two_hosts agent: unknown host \$host" >&2; exit 255 ;;
esac
# A test of a checkpoint directory that is not shared: host B sees its own empty one there.
if [ "\$ns" = $b ] && [ -n "\${PARATWIN_TEST_PRIVATE_DIR:-}" ]; then
  exec ip netns exec \$ns unshare -m sh -c 'mount -t tmpfs paratwin-private "\$0" && exec sh -c "\$1"' \
    "\$PARATWIN_TEST_PRIVATE_DIR" "\$*"
fi
exec ip netns exec \$ns sh -c "\$*"
AGENT
chmod +x "$work/agent"

export OMPI_MCA_plm_rsh_agent="$work/agent"
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,tcp
export OMPI_MCA_btl_tcp_if_include=$net/30 OMPI_MCA_oob_tcp_if_include=$net/30
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PARATWIN_HOST_A=$host_a PARATWIN_HOST_B=$host_b PARATWIN_HOST_B_NETNS=$b
export PARATWIN_HOST_A_LINK=va$id PARATWIN_HOST_B_LINK=vb$id  # each host's end of the veth pair
ip netns exec $a "$@"
