// The cluster of tools/cluster.sh (per node a real kubelet, containerd, runc, CNI bridge, kube-proxy):
// every node is Ready, `kubectl apply -f deploy/` succeeds, and the images of tools/images/build.sh run under it.
// Runs only when that cluster is up (bash tools/cluster.sh up && bash tools/cluster.sh load-images); otherwise
// every test is skipped with the reason, except under KVTS_REQUIRE_CLUSTER=1 (tools/test.sh, CI), where a cluster
// that is not up is a failure.
import { execFileSync, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { chown, copyFile, mkdir, rm, symlink } from 'node:fs/promises';
import path from 'node:path';
import { CmdClient, launcherSocketPath } from '@kubevirt-ts/cmd-protocol';
import { renderLaunchPod } from '@kubevirt-ts/renderer';
import { READY, REPO, processesMentioning, readText, tinyVmi, waitFor } from '../launcher/helpers.js';
import {
  IMAGES_JSON,
  KUBECONFIG,
  KUBECTL,
  NODE_NAME,
  PODS_DIR,
  clusterGate,
  kubeVersion,
  kubectl,
  nodeNames,
  onNode,
} from './cluster.js';

const { reason, clusterTest, requireCluster } = clusterGate();

describe(`the cluster (${reason ? `skipped: ${reason}` : 'tools/cluster.sh'})`, () => {
  requireCluster();
  clusterTest(
    'every node is Ready, runs the pinned kubelet on containerd, and the API server is the pinned one',
    () => {
      expect(nodeNames().length).toBeGreaterThanOrEqual(1);
      expect(
        JSON.parse(kubectl('get', 'nodes', '-o', 'json'))
          .items.map((n: { metadata: { name: string } }) => n.metadata.name)
          .sort(),
      ).toEqual(nodeNames().sort());
      for (const name of nodeNames()) {
        const node = JSON.parse(kubectl('get', 'node', name, '-o', 'json'));
        const ready = node.status.conditions.find((c: { type: string }) => c.type === 'Ready');
        expect({ name, ready: ready.status }).toEqual({ name, ready: 'True' });
        expect(node.status.nodeInfo.kubeletVersion).toBe(kubeVersion());
        expect(node.status.nodeInfo.containerRuntimeVersion).toMatch(/^containerd:\/\//);
      }
      const version = JSON.parse(kubectl('version', '-o', 'json'));
      expect(version.serverVersion.gitVersion).toBe(kubeVersion());
    },
  );

  clusterTest('kubectl apply -f deploy/ succeeds: CRDs established, RBAC, config, workloads created', () => {
    kubectl('apply', '-f', path.join(REPO, 'deploy'));
    kubectl(
      'wait',
      '--for=condition=Established',
      // every CRD of deploy/crds: the four implemented kinds and those served but not implemented
      'crd',
      '-l',
      'app.kubernetes.io/part-of=kubevirt-ts',
      '--timeout=120s',
    );
    const crds = kubectl('get', 'crd', '-l', 'app.kubernetes.io/part-of=kubevirt-ts', '-o', 'name');
    expect(crds.trim().split('\n').length).toBe(
      readdirSync(path.join(REPO, 'deploy/crds')).filter((f) => f.endsWith('.yaml')).length,
    );
    expect(crds).toContain('customresourcedefinition.apiextensions.k8s.io/virtualmachines.kubevirt.io');
    // the workloads exist (their Pods becoming Ready, and VMs on them: vm.test.ts)
    expect(kubectl('get', 'deployment', '-n', 'kubevirt-ts', '-o', 'name')).toMatch(/virt-controller/);
    expect(kubectl('get', 'deployment', '-n', 'kubevirt-ts', '-o', 'name')).toMatch(/virt-operator/);
    expect(kubectl('get', 'daemonset', '-n', 'kubevirt-ts', '-o', 'name')).toMatch(/virt-handler/);
  });

  clusterTest(
    'a Pod of the locally loaded virt-launcher image runs under kubelet (no pull): node, libvirtd, QEMU',
    () => {
      const name = `kvts-image-check-${process.pid}`;
      const images = JSON.parse(readFileSync(IMAGES_JSON, 'utf8')).images; // what load-images imported
      const pod = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, namespace: 'default' },
        spec: {
          restartPolicy: 'Never',
          containers: [
            {
              name: 'check',
              image: images['virt-launcher'].image,
              imagePullPolicy: 'Never',
              command: ['/bin/sh', '-c'],
              args: [
                'id -u; node --version; libvirtd --version; qemu-system-x86_64 --version | head -1; qemu-img --version | head -1',
              ],
            },
          ],
        },
      };
      try {
        execFileSync(KUBECTL, ['--kubeconfig', KUBECONFIG, 'apply', '-f', '-'], {
          input: JSON.stringify(pod),
        });
        kubectl('wait', '--for=jsonpath={.status.phase}=Succeeded', `pod/${name}`, '--timeout=180s');
        const out = kubectl('logs', name);
        expect(out).toMatch(/^107\n/);
        expect(out).toMatch(/^v24\./m);
        expect(out).toMatch(/libvirtd \(libvirt\) 9\./);
        expect(out).toMatch(/QEMU emulator version 7\./);
        expect(out).toMatch(/qemu-img version 7\./);
      } finally {
        spawnSync(KUBECTL, [
          '--kubeconfig',
          KUBECONFIG,
          'delete',
          'pod',
          name,
          '--wait=true',
          '--ignore-not-found',
        ]);
      }
    },
  );

  // virt-handler is not written yet, so the test plays it: it puts the kernelBoot image's files where the
  // handler would mount them, connects to the launcher's cmd socket through the Pod's volume on the node, and
  // sends SyncVirtualMachine. (The real handler bind-mounts the container's files; the test copies them.)
  clusterTest(
    'a launcher Pod rendered by @kubevirt-ts/renderer boots the test guest under kubelet; deleting the Pod shuts it down by ACPI',
    async () => {
      const images = JSON.parse(readFileSync(IMAGES_JSON, 'utf8')).images; // what load-images imported
      const name = `kvts-pod-${process.pid}`;
      const vmi = tinyVmi(name, { uid: randomUUID(), grace: 60 });
      vmi.metadata!.namespace = 'default';
      vmi.spec.domain.firmware!.kernelBoot!.container = {
        image: images['guest-kernel-boot'].image,
        imagePullPolicy: 'Never',
        kernelPath: '/boot/vmlinuz',
        initrdPath: '/boot/initramfs.img',
      };
      const pod = renderLaunchPod(vmi, {
        launcherImage: images['virt-launcher'].image,
        imagePullPolicy: 'Never',
        useEmulation: true,
        // tini as the container's PID 1 reaps what libvirtd leaves to it (QEMU processes): the Node.js monitor
        // cannot wait() for processes it did not spawn, so with it as PID 1 an exited QEMU stays a zombie and
        // the launcher waits for it until the grace period ends
        launcherCommand: ['/usr/bin/tini', '-g', '--', '/usr/bin/virt-launcher', 'monitor'],
      });
      // no VMI object exists in the cluster: without this the garbage collector would delete the orphan Pod
      delete pod.metadata!.ownerReferences;
      delete pod.metadata!.generateName;
      pod.metadata!.name = `virt-launcher-${name}`;
      pod.spec!.nodeName = NODE_NAME; // one node of the cluster (its files are read through its init's root below)
      const podName = pod.metadata!.name;
      let client: CmdClient | undefined;
      const shortLink = `/tmp/kvts-sock-${process.pid}`;
      // what virt-handler does on a node it serves: the launcher Pod's node selector asks for it
      kubectl('label', 'node', NODE_NAME, 'kubevirt.io/schedulable=true', '--overwrite');
      try {
        const created = JSON.parse(
          execFileSync(KUBECTL, ['--kubeconfig', KUBECONFIG, 'create', '-f', '-', '-o', 'json'], {
            input: JSON.stringify(pod),
            encoding: 'utf8',
          }),
        );
        const emptyDir = (v: string) =>
          onNode(NODE_NAME, path.join(PODS_DIR, created.metadata.uid, 'volumes/kubernetes.io~empty-dir', v));
        // the kernel-boot container runs the container-disk helper: its root filesystem holds the files
        const helper = await waitFor(
          'kernel-boot container',
          async () =>
            (await processesMentioning(`${vmi.metadata!.uid}/kernel-boot`)).find((p) =>
              p.cmd.includes('container-disk'),
            ),
          300_000,
        );
        const dest = path.join(emptyDir('container-disks'), 'kernel-boot');
        await mkdir(dest, { recursive: true });
        await chown(dest, 107, 107);
        for (const f of ['vmlinuz', 'initramfs.img']) {
          await copyFile(`/proc/${helper.pid}/root/boot/${f}`, path.join(dest, f));
          await chown(path.join(dest, f), 107, 107);
        }
        const sock = launcherSocketPath(emptyDir('sockets'));
        await waitFor('launcher-sock', () => existsSync(sock), 300_000);
        // the kubelet path is longer than a unix socket path may be (108 bytes): dial through a short symlink
        await symlink(emptyDir('sockets'), shortLink);
        client = await CmdClient.connect(launcherSocketPath(shortLink), { timeoutMs: 120_000 });
        await client.syncVMI(vmi);
        const serial = path.join(emptyDir('private'), vmi.metadata!.uid!, 'virt-serial0-log');
        await waitFor('guest ready line', async () => (await readText(serial)).includes(READY), 300_000);
        const qemu = (await processesMentioning(`guest=default_${name}`)).filter((p) =>
          /qemu-system/.test(p.cmd),
        );
        expect(qemu).toHaveLength(1);
        client.close();
        client = undefined;

        // deletion: SIGTERM to the launcher -> ACPI power button -> the guest powers off -> the Pod goes away
        kubectl('delete', 'pod', podName, '--wait=false');
        await waitFor(
          'guest power-off by ACPI',
          async () => (await readText(serial)).includes('KUBEVIRT-TS-GUEST-POWEROFF acpi-power-button'),
          300_000,
        );
        kubectl('wait', '--for=delete', `pod/${podName}`, '--timeout=300s');
        const left = (await processesMentioning(`guest=default_${name}`)).filter((p) =>
          /qemu-system|libvirtd/.test(p.cmd),
        );
        expect(left).toEqual([]);
      } finally {
        client?.close();
        await rm(shortLink, { force: true });
        spawnSync(KUBECTL, [
          '--kubeconfig',
          KUBECONFIG,
          'delete',
          'pod',
          podName,
          '--wait=true',
          '--ignore-not-found',
        ]);
      }
    },
    // image start, libvirtd and a TCG guest boot on a shared 2-core machine
    900_000,
  );
});
