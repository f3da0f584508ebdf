#!/usr/bin/env bash
# PID 1 of one node: run by cluster.sh as
#   nsenter --net=/run/netns/<node netns> unshare --pid --fork --mount --uts --propagation slave --mount-proc \
#     bash node-init.sh <node dir> <node name>
# It gives the node's mount namespace what a kind node container has of its own, then stays as the namespace's
# reaper. The node's containerd, kubelet and kube-proxy are started into its namespaces (nsenter -t <this pid>);
# a hostPID Pod (virt-handler) that enters /proc/1/ns/mnt lands here. SIGKILL of this process (from the root
# namespace) kills every process of the node, and its mounts go with the namespace.
set -euo pipefail
dir="$1" name="$2"
hostname "$name"

# sysfs of the node's network namespace (/sys/class/net lists the node's devices), keeping the cgroup hierarchies
mkdir -p "$dir/mnt/cgroup"
mount --rbind /sys/fs/cgroup "$dir/mnt/cgroup"
umount -l /sys
mount -t sysfs sysfs /sys
mount --move "$dir/mnt/cgroup" /sys/fs/cgroup

# the namespace started as a copy of the root namespace's mounts: drop the copies under the paths that are the
# node's own (another cluster's Pod volumes, overlays, netns files), so the node pins nothing of the root namespace
own=(/run /var/lib/kubelet /var/lib/cni /var/lib/kubevirt-ts /var/lib/kubevirt-ts-storage/local /var/log/pods /var/log/containers)
awk '{print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
  for p in "${own[@]}"; do
    if [ "$m" = "$p" ] || [[ "$m" == "$p"/* ]]; then umount -l "$m" 2>/dev/null || true; break; fi
  done
done

# /run: the node's own (containerd's state and socket, the CNI's netns files, /run/kubevirt*, xtables.lock)
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run
mkdir -p /run/lock /run/netns
# /run/netns a shared mount point of its own, as `ip netns add` makes it (see README: a later `ip netns add` in the
# node would otherwise bind-mount it over itself and hide the Pods' netns files)
mount --bind /run/netns /run/netns
mount --make-shared /run/netns

# bind mounts of the node's dirs; kubelet's dir rshared (container disks virt-handler mounts there propagate into
# the launcher Pods, HostToContainer)
bind() { # bind SRC DST
  mkdir -p "$1" "$2"
  mount --bind "$1" "$2"
}
bind "$dir/kubelet" /var/lib/kubelet
mount --make-rshared /var/lib/kubelet
# the CNI host-local IPAM's allocations and the CNI result cache (both nodes' plugins would share one dir, keyed
# by network name, and one last_reserved_ip pointer)
bind "$dir/cni-state" /var/lib/cni
bind "$dir/kubevirt-ts" /var/lib/kubevirt-ts
bind "$dir/storage-local" /var/lib/kubevirt-ts-storage/local
# kubelet removes /var/log/pods/<pod> dirs of Pods it does not know: each node needs its own
bind "$dir/log/pods" /var/log/pods
bind "$dir/log/containers" /var/log/containers

touch "$dir/ready"
# the reaper: bash reaps every child (orphans re-parented to PID 1 too); PID 1 ignores signals it has no handler
# for, so only SIGKILL from the root namespace ends it
while :; do
  sleep 3600 &
  wait $! || true
done
