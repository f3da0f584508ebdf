// Test helpers for the real tests: a "Pod" = a session libvirtd running as uid 107 (node-libvirt's
// startSessionLibvirtd) plus a Pod root directory the converter's layout points into, with the test
// guest (tools/guest/build.sh) as a kernelBoot VMI. Not part of the published package (dist/test-*).

import { setTimeout as sleep } from 'node:timers/promises';
import { existsSync } from 'node:fs';
import { chown, copyFile, mkdir, mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {
  LAUNCHER_GID,
  LAUNCHER_UID,
  createPodLayout,
  type ConverterContext,
  type PodLayout,
} from '@kubevirt-ts/converter';
import { Connection, startSessionLibvirtd, type SessionLibvirtd } from '@kubevirt-ts/node-libvirt';
import type { DomainSpec } from './domain.js';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';

export const QEMU_UID = LAUNCHER_UID;
export const QEMU_GID = LAUNCHER_GID;
export const READY = 'KUBEVIRT-TS-GUEST-READY';
export const HEARTBEAT = 'KUBEVIRT-TS-GUEST-HEARTBEAT';

export function guestDir(): string {
  const cache =
    process.env.KVTS_CACHE ??
    path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'kubevirt-ts');
  return path.join(cache, 'guest');
}

/** The test guest as a VMI (kernel boot, serial console on ttyS0, no graphics). */
export function guestVMI(
  name: string,
  uid: string,
  opts: { memory?: string; kernelArgs?: string } = {},
): VirtualMachineInstance {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name, namespace: 'default', uid },
    spec: {
      domain: {
        cpu: { model: 'qemu64' },
        resources: { requests: { memory: opts.memory ?? '128Mi' } },
        devices: { autoattachGraphicsDevice: false, autoattachMemBalloon: false },
        firmware: {
          kernelBoot: {
            kernelArgs: opts.kernelArgs ?? 'console=ttyS0 quiet',
            container: {
              image: 'example.com/kvts-guest:1',
              kernelPath: '/boot/vmlinuz',
              initrdPath: '/boot/initramfs.img',
            },
          },
        },
      },
      terminationGracePeriodSeconds: 30,
    },
  };
}

export interface PodEnv {
  baseDir: string;
  root: string;
  layout: PodLayout;
  daemon: SessionLibvirtd;
  context: ConverterContext;
  /** DomainManager prepare hook: kernel/initrd and the per-VMI private dir, owned by uid 107 */
  prepare(vmi: VirtualMachineInstance, spec: DomainSpec): Promise<void>;
  /** opens a new connection (for a ConnectionHolder that reconnects) */
  open(): Promise<Connection>;
  serialLog(uid: string): string;
  /** restarts libvirtd on the same dirs (QEMU keeps running) */
  restartLibvirtd(downMs?: number, whileDown?: () => Promise<void>): Promise<void>;
  cleanup(): Promise<void>;
}

async function chownR(p: string): Promise<void> {
  await chown(p, QEMU_UID, QEMU_GID);
  const st = await stat(p);
  if (!st.isDirectory()) return;
  for (const e of await readdir(p)) await chownR(path.join(p, e));
}

export async function startPod(opts: { hostUuid?: string } = {}): Promise<PodEnv> {
  const g = guestDir();
  if (!existsSync(path.join(g, 'vmlinuz')) || !existsSync(path.join(g, 'initramfs.img'))) {
    throw new Error(`test guest missing in ${g}: run "bash tools/guest/build.sh" (tools/setup.sh does)`);
  }
  // short: QEMU's monitor socket lives deep below it and unix socket paths are limited to 107 bytes
  const baseDir = await mkdtemp('/tmp/kvlm-');
  await chown(baseDir, QEMU_UID, QEMU_GID);
  const root = path.join(baseDir, 'pod');
  await mkdir(root);
  await chown(root, QEMU_UID, QEMU_GID);
  const layout = createPodLayout(root);
  const daemonOpts = {
    baseDir: path.join(baseDir, 'd'),
    uid: QEMU_UID,
    gid: QEMU_GID,
    libvirtdConf: (opts.hostUuid ? { host_uuid: opts.hostUuid } : {}) as Record<string, string>,
  };
  let daemon = await startSessionLibvirtd(daemonOpts);
  const env: PodEnv = {
    baseDir,
    root,
    layout,
    get daemon() {
      return daemon;
    },
    context: { allowEmulation: true, kvmAvailable: false, layout, serialConsoleLog: true },
    async prepare(vmi, spec) {
      for (const f of [spec.os.kernel, spec.os.initrd]) {
        if (!f) continue;
        await mkdir(path.dirname(f), { recursive: true });
        if (!existsSync(f))
          await copyFile(path.join(g, path.basename(f) === 'vmlinuz' ? 'vmlinuz' : 'initramfs.img'), f);
      }
      await mkdir(layout.vmiPrivateDir(vmi.metadata?.uid ?? ''), { recursive: true });
      await chownR(root);
    },
    open: () => Connection.open(daemon.uri),
    serialLog: (uid) => layout.serialLogFile(uid),
    async restartLibvirtd(downMs = 0, whileDown) {
      // only libvirtd: the guests' QEMU processes keep running, as when libvirtd restarts for real
      process.kill(daemon.pid, 'SIGTERM');
      for (let i = 0; i < 200 && alive(daemon.pid); i++) await sleep(25);
      if (whileDown) await whileDown();
      if (downMs) await sleep(downMs);
      daemon = await startSessionLibvirtd(daemonOpts);
    },
    async cleanup() {
      await daemon.stop().catch(() => undefined);
      await rm(baseDir, { recursive: true, force: true });
    },
  };
  return env;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export async function readLog(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch {
    return '';
  }
}

export function countLines(text: string, needle: string): number {
  return text.split('\n').filter((l) => l.includes(needle)).length;
}

/** The last heartbeat number on the serial log (0 when none). */
export function lastHeartbeat(text: string): number {
  const m = [...text.matchAll(/KUBEVIRT-TS-GUEST-HEARTBEAT (\d+)/g)];
  return m.length ? Number(m[m.length - 1]![1]) : 0;
}

export async function waitFor(
  cond: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(50);
  }
}

export async function waitForLog(
  file: string,
  pred: (text: string) => boolean,
  timeoutMs: number,
  what: string,
): Promise<void> {
  try {
    await waitFor(async () => pred(await readLog(file)), timeoutMs, what);
  } catch (err) {
    throw new Error(`${(err as Error).message}; serial log tail:\n${(await readLog(file)).slice(-1500)}`);
  }
}

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}
