// Field paths in the form users read them: spec.domain.devices.disks[2].name

/** Turn a JSON pointer (/spec/domain/devices/disks/2/name) into a field path (spec.domain.devices.disks[2].name). */
export function pointerToPath(pointer: string): string {
  if (pointer === '' || pointer === '/') return '';
  const parts = pointer
    .slice(1)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  return joinPath(parts);
}

/** Join path segments: numbers become [n], plain keys .key, other keys ["key"]. */
export function joinPath(parts: (string | number)[]): string {
  let out = '';
  for (const p of parts) {
    if (typeof p === 'number' || /^\d+$/.test(p)) out += `[${p}]`;
    else if (/^[A-Za-z_$][\w$-]*$/.test(p)) out += out === '' ? p : `.${p}`;
    else out += `[${JSON.stringify(p)}]`;
  }
  return out;
}

/** Append a key or index to a path. */
export function sub(base: string, key: string | number): string {
  if (typeof key === 'number') return `${base}[${key}]`;
  if (/^[A-Za-z_$][\w$-]*$/.test(key)) return base === '' ? key : `${base}.${key}`;
  return `${base}[${JSON.stringify(key)}]`;
}
