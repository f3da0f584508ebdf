// Helpers for this package's tests (not part of the published package: dist/test-* is excluded).
import { setTimeout as sleep } from 'node:timers/promises';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '@kubevirt-ts/log';

/** A logger that drops everything (tests assert on behaviour, not on log lines). */
export const quietLogger: Logger = {
  info: () => quietLogger,
  warn: () => quietLogger,
  error: () => quietLogger,
  debug: () => quietLogger,
} as unknown as Logger;

/** A fresh temp dir (short path: unix socket paths are limited to 107 bytes). */
export async function tempDir(prefix = 'kvts-cmd-'): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** Polls `cond` until it is true or timeoutMs passes (then throws with `what`). */
export async function waitFor(cond: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** A small valid VMI (upstream kubevirt.io/v1 shape). */
export function sampleVmi(name = 'testvmi'): Record<string, unknown> {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name, namespace: 'default', uid: '6e2a1b4c-0000-4000-8000-000000000001' },
    spec: {
      domain: {
        resources: { requests: { memory: '128Mi' } },
        devices: { disks: [{ name: 'containerdisk', disk: { bus: 'virtio' } }] },
      },
      volumes: [
        { name: 'containerdisk', containerDisk: { image: 'quay.io/kubevirt/cirros-container-disk-demo' } },
      ],
    },
  };
}

// ---- protobuf wire format by hand (independent of the generated code) ----

export const WT = { VARINT: 0, I64: 1, LEN: 2, I32: 5 } as const;

function varint(n: bigint | number): number[] {
  let v = BigInt(n);
  if (v < 0n) v = BigInt.asUintN(64, v); // int32/int64 negatives are 10-byte two's complement
  const out: number[] = [];
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) b |= 0x80;
    out.push(b);
  } while (v > 0n);
  return out;
}

/** One field: tag (fieldNo << 3 | wireType) then the value. */
export type RawField =
  | { no: number; varint: number | bigint | boolean }
  | { no: number; bytes: Uint8Array | string }
  | { no: number; message: RawField[] }
  | { no: number; packed: number[] };

export function encodeRaw(fields: RawField[]): Uint8Array {
  const out: number[] = [];
  for (const f of fields) {
    if ('varint' in f) {
      out.push(
        ...varint((f.no << 3) | WT.VARINT),
        ...varint(typeof f.varint === 'boolean' ? Number(f.varint) : f.varint),
      );
    } else {
      const payload =
        'bytes' in f
          ? typeof f.bytes === 'string'
            ? Buffer.from(f.bytes, 'utf8')
            : f.bytes
          : 'message' in f
            ? encodeRaw(f.message)
            : Uint8Array.from(f.packed.flatMap((n) => varint(n)));
      out.push(...varint((f.no << 3) | WT.LEN), ...varint(payload.length), ...payload);
    }
  }
  return Uint8Array.from(out);
}

/** Decoded field: varints as bigint, length-delimited as bytes. */
export interface DecodedField {
  no: number;
  wireType: number;
  value: bigint | Uint8Array;
}

export function decodeRaw(buf: Uint8Array): DecodedField[] {
  const fields: DecodedField[] = [];
  let pos = 0;
  const readVarint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      if (pos >= buf.length) throw new Error('truncated varint');
      const b = buf[pos++]!;
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (pos < buf.length) {
    const tag = Number(readVarint());
    const no = tag >>> 3;
    const wireType = tag & 7;
    if (wireType === WT.VARINT) fields.push({ no, wireType, value: readVarint() });
    else if (wireType === WT.LEN) {
      const len = Number(readVarint());
      fields.push({ no, wireType, value: buf.subarray(pos, pos + len) });
      pos += len;
    } else throw new Error(`unexpected wire type ${wireType} for field ${no}`);
  }
  return fields;
}

/** Fields with number `no` of a decoded message. */
export function fieldsOf(fields: DecodedField[], no: number): DecodedField[] {
  return fields.filter((f) => f.no === no);
}
