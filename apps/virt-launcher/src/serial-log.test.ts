// The serial console log cap (virtlogd's rotation, done by the launcher) on real files, including a
// writer that keeps its O_APPEND descriptor across the rotation as QEMU does.
import { closeSync, openSync, writeSync, constants } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { capLogFile, rotateIfLarge, SERIAL_LOG_MAX_BYTES } from './serial-log.js';
import { tailFile } from './standalone.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kvts-serial-log-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const waitFor = async (what: string, cond: () => Promise<boolean>) => {
  for (let i = 0; i < 500; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
};

test('the default limit is virtlogd max_size (2 MiB)', () => {
  expect(SERIAL_LOG_MAX_BYTES).toBe(2 * 1024 * 1024);
});

test('rotateIfLarge leaves a small or missing file alone', async () => {
  const f = path.join(dir, 'virt-serial0-log');
  expect(await rotateIfLarge(f, 10)).toBe(false);
  await writeFile(f, '0123456789');
  expect(await rotateIfLarge(f, 10)).toBe(false);
  expect(await readFile(f, 'utf8')).toBe('0123456789');
  await expect(stat(`${f}.1`)).rejects.toThrow(/ENOENT/);
});

test('rotateIfLarge moves the content to .1 and an O_APPEND writer goes on at the new end', async () => {
  const f = path.join(dir, 'virt-serial0-log');
  // as QEMU opens its chardev logfile with logappend=on
  const fd = openSync(f, constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND, 0o600);
  try {
    writeSync(fd, 'first line\nsecond line\n');
    expect(await rotateIfLarge(f, 8)).toBe(true);
    expect(await readFile(`${f}.1`, 'utf8')).toBe('first line\nsecond line\n');
    expect((await stat(f)).size).toBe(0);
    writeSync(fd, 'after\n');
    expect(await readFile(f, 'utf8')).toBe('after\n'); // no hole of the old size before it
    // the next rotation replaces the backup
    writeSync(fd, 'more than eight\n');
    expect(await rotateIfLarge(f, 8)).toBe(true);
    expect(await readFile(`${f}.1`, 'utf8')).toBe('after\nmore than eight\n');
  } finally {
    closeSync(fd);
  }
});

test('capLogFile rotates a growing file on its timer and stops', async () => {
  const f = path.join(dir, 'virt-serial0-log');
  const fd = openSync(f, constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND, 0o600);
  let rotations = 0;
  const cap = capLogFile(f, { maxBytes: 100, intervalMs: 20, onRotate: () => rotations++ });
  try {
    writeSync(fd, 'x'.repeat(150));
    await waitFor('a rotation', async () => rotations === 1);
    expect((await readFile(`${f}.1`, 'utf8')).length).toBe(150);
    expect((await stat(f)).size).toBe(0);
    cap.stop();
    writeSync(fd, 'y'.repeat(150));
    await new Promise((r) => setTimeout(r, 100));
    expect(rotations).toBe(1);
    expect((await stat(f)).size).toBe(150);
  } finally {
    cap.stop();
    closeSync(fd);
  }
});

test('tailFile (standalone --console) follows the log across a rotation', async () => {
  const f = path.join(dir, 'virt-serial0-log');
  const fd = openSync(f, constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND, 0o600);
  const out = new PassThrough();
  let text = '';
  out.setEncoding('utf8').on('data', (d: string) => (text += d));
  const lines: string[] = [];
  const tail = tailFile(f, out, (l) => lines.push(l));
  try {
    writeSync(fd, 'boot line one\nboot line two\n');
    await waitFor('the first lines', async () => lines.length === 2);
    expect(await rotateIfLarge(f, 8)).toBe(true);
    writeSync(fd, 'after rotation\n');
    await waitFor('the line after the rotation', async () => lines.length === 3);
    expect(lines).toEqual(['boot line one', 'boot line two', 'after rotation']);
  } finally {
    await tail.stop();
    closeSync(fd);
  }
  expect(text).toBe('boot line one\nboot line two\nafter rotation\n');
});
