#!/usr/bin/env node
// virt-convert FILE.yaml [--emulation] [--no-kvm] [--arch amd64]
// Prints the libvirt domain XML of the first VirtualMachineInstance (or VirtualMachine template)
// in FILE, with the API defaults applied and the standard in-Pod layout.
import { accessSync, constants, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { realpathSync } from 'node:fs';
import {
  parseManifests,
  setVirtualMachineInstanceDefaults,
  validateObject,
  validateVirtualMachineInstance,
  vmiFromManifest,
} from '@kubevirt-ts/api';
import { toDomain } from './convert.js';
import { toDomainXml } from './xml.js';
import { ConversionError } from './errors.js';

const USAGE = `usage: virt-convert FILE.yaml [--emulation] [--no-kvm] [--arch amd64]

Prints the libvirt domain XML of the first VirtualMachineInstance in FILE (a VirtualMachine's
template is converted too), with the API defaults applied and the standard in-Pod file layout.

  --emulation   allow software emulation (upstream's useEmulation): the domain type becomes
                "qemu" when KVM is not available
  --no-kvm      treat /dev/kvm as unavailable (default: available when /dev/kvm is read/writable)
  --arch ARCH   node architecture for defaults and conversion (default amd64)
`;

export interface CliIO {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  readFile: (file: string) => string;
  kvmPresent: () => boolean;
}

const defaultIO: CliIO = {
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
  readFile: (f) => readFileSync(f, 'utf8'),
  kvmPresent: () => {
    try {
      accessSync('/dev/kvm', constants.R_OK | constants.W_OK);
      return true;
    } catch {
      return false;
    }
  },
};

/** Runs virt-convert; returns the exit code (0 ok, 1 invalid input or conversion error, 2 usage). */
export function main(argv: string[], io: CliIO = defaultIO): number {
  let file: string | undefined;
  let emulation = false;
  let noKvm = false;
  let arch = 'amd64';
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--emulation') emulation = true;
    else if (a === '--no-kvm') noKvm = true;
    else if (a === '--arch' || a.startsWith('--arch=')) {
      const v = a === '--arch' ? argv[++i] : a.slice('--arch='.length);
      if (!v) {
        io.stderr(`virt-convert: --arch needs a value\n${USAGE}`);
        return 2;
      }
      arch = v;
    } else if (a === '-h' || a === '--help') {
      io.stdout(USAGE);
      return 0;
    } else if (a.startsWith('-') && a !== '-') {
      io.stderr(`virt-convert: unknown option ${a}\n${USAGE}`);
      return 2;
    } else if (file === undefined) file = a;
    else {
      io.stderr(`virt-convert: only one file may be given\n${USAGE}`);
      return 2;
    }
  }
  if (file === undefined) {
    io.stderr(USAGE);
    return 2;
  }
  let docs: unknown[];
  try {
    docs = parseManifests(io.readFile(file === '-' ? '/dev/stdin' : file));
  } catch (e) {
    io.stderr(`virt-convert: ${file}: ${(e as Error).message}\n`);
    return 1;
  }
  const idx = docs.findIndex((d) => {
    const k = (d as { kind?: unknown } | null)?.kind;
    return k === 'VirtualMachineInstance' || k === 'VirtualMachine';
  });
  if (idx < 0) {
    io.stderr(`virt-convert: ${file}: no VirtualMachineInstance or VirtualMachine found\n`);
    return 1;
  }
  const manifest = docs[idx];
  const errors = validateObject(manifest);
  if (errors.length) {
    io.stderr(`virt-convert: ${file}: document ${idx + 1} is invalid:\n`);
    for (const e of errors) io.stderr(`  ${e.path}: ${e.reason}\n`);
    return 1;
  }
  try {
    const vmi = setVirtualMachineInstanceDefaults(vmiFromManifest(manifest), { arch });
    const after = validateVirtualMachineInstance(vmi);
    if (after.length) {
      io.stderr(`virt-convert: ${file}: invalid after defaults:\n`);
      for (const e of after) io.stderr(`  ${e.path}: ${e.reason}\n`);
      return 1;
    }
    const domain = toDomain(vmi, {
      architecture: arch,
      allowEmulation: emulation,
      kvmAvailable: !noKvm && io.kvmPresent(),
    });
    io.stdout(toDomainXml(domain));
    return 0;
  } catch (e) {
    const msg = e instanceof ConversionError ? e.message : (e as Error).message;
    io.stderr(`virt-convert: ${file}: ${msg}\n`);
    return 1;
  }
}

function isMain(): boolean {
  try {
    return (
      process.argv[1] !== undefined &&
      realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url))
    );
  } catch {
    return false;
  }
}

if (isMain()) process.exitCode = main(process.argv.slice(2));
