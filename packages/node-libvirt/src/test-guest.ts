// Test helpers: the tiny test guest built by tools/guest/build.sh, a session libvirtd as uid 107,
// and reading the guest's serial console log. Not part of the published package (dist/test-*).
import { chown, copyFile, mkdtemp, readFile, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LAUNCHER_GID, LAUNCHER_UID } from '@kubevirt-ts/api';
import { startSessionLibvirtd, type SessionLibvirtd, type SessionLibvirtdOptions } from './session.js';

export const QEMU_UID = LAUNCHER_UID;
export const QEMU_GID = LAUNCHER_GID;
export const READY_LINE = 'KUBEVIRT-TS-GUEST-READY';

export function kvtsCache(): string {
  return (
    process.env.KVTS_CACHE ??
    path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'kubevirt-ts')
  );
}

export interface TestEnv {
  daemon: SessionLibvirtd;
  baseDir: string;
  kernel: string;
  initrd: string;
  cleanup(): Promise<void>;
}

/** Starts a session libvirtd as uid 107 under a fresh short temp dir, with the guest kernel/initrd copied in. */
export async function startTestEnv(extra: Partial<SessionLibvirtdOptions> = {}): Promise<TestEnv> {
  const guestDir = path.join(kvtsCache(), 'guest');
  const srcKernel = path.join(guestDir, 'vmlinuz');
  const srcInitrd = path.join(guestDir, 'initramfs.img');
  if (!existsSync(srcKernel) || !existsSync(srcInitrd)) {
    throw new Error(
      `test guest missing in ${guestDir}: run "bash tools/guest/build.sh" (tools/setup.sh does)`,
    );
  }
  // short path: QEMU monitor sockets live deep below it and unix socket paths are limited to 107 bytes
  const baseDir = await mkdtemp('/tmp/kvl-');
  await chown(baseDir, QEMU_UID, QEMU_GID);
  const kernel = path.join(baseDir, 'vmlinuz');
  const initrd = path.join(baseDir, 'initramfs.img');
  await copyFile(srcKernel, kernel);
  await copyFile(srcInitrd, initrd);
  const daemon = await startSessionLibvirtd({ baseDir, uid: QEMU_UID, gid: QEMU_GID, ...extra });
  return {
    daemon,
    baseDir,
    kernel,
    initrd,
    async cleanup() {
      await daemon.stop();
      await rm(baseDir, { recursive: true, force: true });
    },
  };
}

/** Domain XML for the test guest under TCG emulation (domain type qemu), serial console to a file. */
export function guestXml(opts: {
  name: string;
  kernel: string;
  initrd: string;
  serialLog: string;
  cmdline?: string;
  memoryMiB?: number;
}): string {
  // the arguments are our own test values (no user data), still kept to a safe character set
  for (const [k, v] of Object.entries(opts))
    if (typeof v === 'string' && !/^[A-Za-z0-9_./ =-]*$/.test(v))
      throw new Error(`guestXml ${k}: unsafe value`);
  return `<domain type='qemu'>
  <name>${opts.name}</name>
  <memory unit='MiB'>${opts.memoryMiB ?? 192}</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
    <kernel>${opts.kernel}</kernel>
    <initrd>${opts.initrd}</initrd>
    <cmdline>console=ttyS0 quiet ${opts.cmdline ?? ''}</cmdline>
  </os>
  <features><acpi/></features>
  <cpu mode='custom' match='exact'><model fallback='allow'>qemu64</model></cpu>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <controller type='usb' model='none'/>
    <serial type='file'>
      <source path='${opts.serialLog}'/>
      <target port='0'/>
    </serial>
    <memballoon model='virtio'>
      <stats period='1'/>
    </memballoon>
  </devices>
</domain>`;
}

export async function readLog(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch {
    return '';
  }
}

/** Waits until the serial log contains `needle` (counting from byte `from`). */
export async function waitForLine(file: string, needle: string, timeoutMs = 120000, from = 0): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const text = (await readLog(file)).slice(from);
    if (text.includes(needle)) return;
    if (Date.now() > end)
      throw new Error(`"${needle}" not seen on ${file} within ${timeoutMs} ms; log:\n${text.slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function waitFor(
  cond: () => boolean | Promise<boolean>,
  timeoutMs = 60000,
  what = 'condition',
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
