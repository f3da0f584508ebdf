// virt-launcher standalone with every kind of disk a containerDisk user meets: real qemu-img images, a real
// session libvirtd and QEMU under TCG, the test guest booted from them.
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import {
  READY,
  processesMentioning,
  requireGuest,
  spawnStandalone,
  tinyVmi,
  tmpDirPerTest,
} from './helpers.js';

beforeAll(() => requireGuest());

/** Every file under dir whose name matches re (the QEMU log of the domain is in the libvirt base dir). */
async function findFiles(dir: string, re: RegExp): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile() && re.test(e.name)) out.push(path.join(e.parentPath, e.name));
  }
  return out;
}

interface GuestDisk {
  name: string;
  bytes: number;
  ro: string;
  serial?: string;
  label?: string;
}

/** The guest's `KUBEVIRT-TS-GUEST-DISK name=.. bytes=.. ro=.. [serial=..] [label=..]` lines (kvts.disks). */
function guestDisks(consoleText: string): GuestDisk[] {
  const out: GuestDisk[] = [];
  for (const m of consoleText.matchAll(/^KUBEVIRT-TS-GUEST-DISK (.*?)\r?$/gm)) {
    const f = Object.fromEntries(
      m[1]!
        .trim()
        .split(/\s+/)
        .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
    ) as Record<string, string>;
    out.push({ name: f.name!, bytes: Number(f.bytes), ro: f.ro!, serial: f.serial, label: f.label });
  }
  return out;
}

function withDisks(name: string) {
  const vmi = tinyVmi(name, { poweroff: true }) as unknown as {
    spec: {
      domain: { devices: { disks: unknown[] }; firmware: { kernelBoot: { kernelArgs: string } } };
      volumes: unknown[];
    };
  };
  // kvts.disks: the guest lists its block devices on the serial console before the ready line
  vmi.spec.domain.firmware.kernelBoot.kernelArgs += ' kvts.disks';
  // no bus: the launcher applies the defaults as a cluster does, so these two get upstream's sata
  vmi.spec.domain.devices.disks = [
    { name: 'rawdisk', serial: 'raw-serial.1', disk: { bus: 'virtio' } },
    { name: 'qcowdisk', disk: {} },
    { name: 'scratch', serial: 'scratch_2', disk: { bus: 'virtio' } },
    { name: 'nocloud', disk: { bus: 'virtio' } },
    { name: 'configdrive', cdrom: {} },
  ];
  vmi.spec.volumes = [
    { name: 'rawdisk', containerDisk: { image: 'e2e/raw:1' } },
    { name: 'qcowdisk', containerDisk: { image: 'e2e/qcow:1' } },
    { name: 'scratch', emptyDisk: { capacity: '16Mi' } },
    { name: 'nocloud', cloudInitNoCloud: { userData: '#cloud-config\n' } },
    { name: 'configdrive', cloudInitConfigDrive: { userData: '#cloud-config\n' } },
  ];
  return vmi;
}

describe('virt-launcher standalone: disks', () => {
  const dir = tmpDirPerTest();

  it('boots with a raw and a qcow2 containerDisk, an emptyDisk, NoCloud and ConfigDrive together', async () => {
    const raw = path.join(dir(), 'raw.img');
    await writeFile(raw, Buffer.alloc(8 * 1024 * 1024));
    const qcow = path.join(dir(), 'disk.qcow2');
    execFileSync('qemu-img', ['create', '-q', '-f', 'qcow2', qcow, '24M']);
    const p = await spawnStandalone(dir(), withDisks('sa-disks'), [
      ...['--image', `e2e/raw:1=${raw}`],
      ...['--image', `e2e/qcow:1=${qcow}`],
    ]);
    const { work } = p;
    const res = await p.exited;
    expect(p.stderr()).toContain('[virt-launcher] domain: Running (Booted)');
    expect(p.stdout()).toContain(READY);
    expect(res).toEqual({ code: 0, signal: null });
    // the guest sees each disk: name (bus), size, read-only, serial (virtio-blk shows it), ISO label
    const seen = guestDisks(p.stdout());
    expect(p.stdout()).toContain('KUBEVIRT-TS-GUEST-DISKS 5');
    expect(seen).toHaveLength(5);
    const one = (pred: (d: GuestDisk) => boolean, what: string) => {
      const found = seen.filter(pred);
      if (found.length !== 1) throw new Error(`expected one guest disk ${what}, got ${JSON.stringify(seen)}`);
      return found[0]!;
    };
    const MiB = 1024 * 1024;
    const rawDisk = one((d) => d.serial === 'raw-serial.1', 'with serial raw-serial.1');
    expect(rawDisk).toMatchObject({ bytes: 8 * MiB, ro: '0' });
    expect(rawDisk.name).toMatch(/^vd[a-z]$/); // virtio
    const scratch = one((d) => d.serial === 'scratch_2', 'with serial scratch_2');
    expect(scratch).toMatchObject({ bytes: 16 * MiB, ro: '0' });
    expect(scratch.name).toMatch(/^vd[a-z]$/);
    const qcowDisk = one((d) => d.bytes === 24 * MiB, 'of 24 MiB');
    expect(qcowDisk.name).toMatch(/^sd[a-z]$/); // no bus given: sata (upstream's amd64 default)
    expect(qcowDisk.ro).toBe('0');
    const cidata = one((d) => d.label === 'cidata', 'labelled cidata');
    expect(cidata.name).toMatch(/^vd[a-z]$/);
    expect(cidata.bytes).toBeGreaterThan(0);
    const configDrive = one((d) => d.label === 'config-2', 'labelled config-2');
    expect(configDrive.name).toMatch(/^sr[0-9]$/); // a cdrom without bus: sata
    expect(configDrive.ro).toBe('1');
    expect(configDrive.bytes).toBeGreaterThan(0);
    // the guest lists every disk before its ready line
    expect(p.stdout().indexOf('KUBEVIRT-TS-GUEST-DISKS 5')).toBeLessThan(p.stdout().indexOf(READY));
    // QEMU opened each containerDisk with the format found in it, and nothing beyond it
    const logs = await findFiles(work, /^e2e_sa-disks\.log$/);
    expect(logs).toHaveLength(1);
    const qemuLog = await readFile(logs[0]!, 'utf8');
    const nodes = [...qemuLog.matchAll(/-blockdev '(\{[^']*\})'/g)].map(
      (m) => JSON.parse(m[1]!) as Record<string, unknown>,
    );
    const formatOf = (file: string) => {
      const storage = nodes.find((n) => String(n.filename ?? '').endsWith(file));
      expect(storage).toBeDefined();
      const fmt = nodes.find((n) => n.file === storage!['node-name']);
      return fmt?.driver;
    };
    expect(formatOf('/disk_0.img')).toBe('raw');
    expect(formatOf('/disk_1.img')).toBe('qcow2');
    for (const n of nodes.filter((x) => String(x.filename ?? '').match(/disk_[01]\.img$/))) {
      const fmt = nodes.find((x) => x.file === n['node-name'])!;
      expect(fmt.backing ?? null).toBeNull(); // the chain ends at the container image
    }
    expect(await processesMentioning(work)).toEqual([]);
  });

  it('refuses a containerDisk image that has a backing file, before any daemon starts', async () => {
    const secret = path.join(dir(), 'host-secret.raw');
    await writeFile(secret, Buffer.alloc(1024 * 1024, 0x53));
    const chain = path.join(dir(), 'chain.qcow2');
    execFileSync('qemu-img', ['create', '-q', '-f', 'qcow2', '-b', secret, '-F', 'raw', chain]);
    const raw = path.join(dir(), 'raw.img');
    await writeFile(raw, Buffer.alloc(1024 * 1024));
    const p = await spawnStandalone(
      dir(),
      withDisks('sa-chain'),
      [...['--image', `e2e/raw:1=${raw}`], ...['--image', `e2e/qcow:1=${chain}`]],
      { console: false },
    );
    const { work } = p;
    const res = await p.exited;
    expect(res.code).not.toBe(0);
    expect(p.stderr()).toContain('spec.volumes[1].containerDisk.image: image has a backing file');
    expect(p.stderr()).toContain(secret);
    expect(p.stderr()).not.toContain('[virt-launcher] libvirtd:');
    expect(await processesMentioning(work)).toEqual([]);
  });
});
