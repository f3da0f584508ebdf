// The QEMU capability cache on plain files: what a daemon probed is saved, then seeded into the next
// daemon's cache dir; a missing cache or an empty one changes nothing.
import { afterEach, beforeEach, describe, expect, test } from '@jest/globals';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { qemuCapsDir, saveQemuCaps, seedQemuCaps } from './qemu-caps.js';

let tmp: string;
beforeEach(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'kvts-caps-'));
});
afterEach(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe('QEMU capability cache', () => {
  test("a daemon's probe is saved and seeds the next daemon; other files are left out", async () => {
    const first = path.join(tmp, 'first');
    const cache = path.join(tmp, 'cache');
    await mkdir(qemuCapsDir(first), { recursive: true });
    await writeFile(path.join(qemuCapsDir(first), 'x86_64.xml'), '<qemuCaps/>');
    await writeFile(path.join(qemuCapsDir(first), 'notes.txt'), 'not a probe');
    await saveQemuCaps(first, cache);
    expect(await readdir(cache)).toEqual(['x86_64.xml']);

    const second = path.join(tmp, 'second');
    await seedQemuCaps(second, cache);
    expect(qemuCapsDir(second)).toBe(path.join(second, 'cache/libvirt/qemu/cache/capabilities'));
    expect(await readFile(path.join(qemuCapsDir(second), 'x86_64.xml'), 'utf8')).toBe('<qemuCaps/>');
  });

  test('no cache dir, or nothing probed yet: nothing is created', async () => {
    const daemon = path.join(tmp, 'daemon');
    await seedQemuCaps(daemon, path.join(tmp, 'absent'));
    await saveQemuCaps(daemon, path.join(tmp, 'cache'));
    expect(await readdir(tmp)).toEqual([]);
  });
});
