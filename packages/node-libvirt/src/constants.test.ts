// src/constants.ts is generated from libvirt's API description by scripts/gen-constants.mjs: regenerate it
// into a temp file and compare, so a hand edit or a libvirt-dev with other values is caught.
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  DomainRebootFlags,
  DomainState,
  ErrorCode,
  GetAllDomainStatsFlags,
  MemoryStatTags,
} from './constants.js';

const pkg = fileURLToPath(new URL('..', import.meta.url));

test('src/constants.ts is what scripts/gen-constants.mjs makes from libvirt-api.xml', () => {
  // inside the package, so prettier resolves the repository's config
  const out = path.join(pkg, 'src', `.constants-check-${process.pid}.ts`);
  try {
    execFileSync(process.execPath, [path.join(pkg, 'scripts', 'gen-constants.mjs'), out], { stdio: 'pipe' });
    expect(readFileSync(out, 'utf8')).toBe(readFileSync(path.join(pkg, 'src', 'constants.ts'), 'utf8'));
  } finally {
    rmSync(out, { force: true });
  }
});

test('values as libvirt defines them (spot checks of what the binding relies on)', () => {
  expect(DomainState).toMatchObject({ RUNNING: 1, PAUSED: 3, SHUTOFF: 5, CRASHED: 6 });
  expect(ErrorCode).toMatchObject({ NO_DOMAIN: 42, WAR_NO_NETWORK: 41, OPERATION_INVALID: 55 });
  expect(GetAllDomainStatsFlags.ENFORCE_STATS).toBe(2 ** 31);
  expect(DomainRebootFlags.ACPI_POWER_BTN).toBe(1);
  expect(MemoryStatTags[6]).toBe('actual_balloon');
});
