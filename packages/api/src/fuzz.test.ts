// Property tests: validation and defaulting never throw, whatever the input, and errors are well formed.
import fc from 'fast-check';
import { setVirtualMachineDefaults, setVirtualMachineInstanceDefaults } from './defaults.js';
import { formatBinaryQuantity, parseQuantity } from './quantity.js';
import type { VirtualMachineInstance } from './schemas.js';
import { baseVm, baseVmi, type Any } from './test-fixtures.js';
import { validateObject } from './validate.js';

const PATH_RE = /^(|[A-Za-z_$][\w$-]*)(\.[A-Za-z_$][\w$-]*|\[\d+\]|\["(?:[^"\\]|\\.)*"\])*$/;

/** All paths (as key lists) into an object tree. */
function allPaths(
  v: unknown,
  prefix: (string | number)[] = [],
  out: (string | number)[][] = [],
): (string | number)[][] {
  out.push(prefix);
  if (Array.isArray(v)) v.forEach((x, i) => allPaths(x, [...prefix, i], out));
  else if (typeof v === 'object' && v !== null)
    for (const [k, x] of Object.entries(v)) allPaths(x, [...prefix, k], out);
  return out;
}

function replaceAt(root: Any, path: (string | number)[], value: unknown): Any {
  if (path.length === 0) return value;
  let cur = root;
  for (const k of path.slice(0, -1)) cur = cur[k];
  cur[path[path.length - 1]!] = value;
  return root;
}

function checkErrors(errs: unknown) {
  expect(Array.isArray(errs)).toBe(true);
  for (const e of errs as { path: unknown; reason: unknown }[]) {
    expect(typeof e.path).toBe('string');
    expect(e.path as string).toMatch(PATH_RE);
    expect(typeof e.reason).toBe('string');
    expect((e.reason as string).length).toBeGreaterThan(3);
  }
}

test('validateObject never throws on arbitrary values', () => {
  fc.assert(
    fc.property(fc.anything(), (v) => {
      checkErrors(validateObject(v));
    }),
    { numRuns: 300 },
  );
});

test.each([
  ['VMI', baseVmi],
  ['VM', baseVm],
])('a %s with any one subtree replaced by random JSON: no throw, well-formed errors', (_n, make) => {
  const paths = allPaths(make());
  fc.assert(
    fc.property(fc.constantFrom(...paths), fc.jsonValue({ maxDepth: 3 }), (path, value) => {
      const v = replaceAt(make(), path, value);
      checkErrors(validateObject(v));
    }),
    { numRuns: 400 },
  );
});

test('defaults of any structurally valid VMI mutation stay valid (or the input was invalid)', () => {
  const paths = allPaths(baseVmi()).filter((p) => p.length > 2 && p[0] === 'spec');
  let checked = 0;
  fc.assert(
    fc.property(fc.constantFrom(...paths), fc.jsonValue({ maxDepth: 2 }), (path, value) => {
      const v = replaceAt(baseVmi(), path, value);
      if (validateObject(v).length > 0) return; // an invalid input: nothing to check
      const out = setVirtualMachineInstanceDefaults(v as VirtualMachineInstance);
      expect(validateObject(out)).toEqual([]);
      checked++;
    }),
    { numRuns: 3000 },
  );
  // most random subtrees make the VMI invalid (3-8% stay valid); make sure enough valid ones were checked
  expect(checked).toBeGreaterThanOrEqual(30);
});

test('binary quantities round-trip through formatBinaryQuantity', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 2 ** 40 }),
      fc.constantFrom(1, 1024, 2 ** 20, 2 ** 30),
      (n, unit) => {
        const bytes = Math.min(n * unit, Number.MAX_SAFE_INTEGER - (Number.MAX_SAFE_INTEGER % unit));
        expect(parseQuantity(formatBinaryQuantity(bytes))).toBe(bytes);
      },
    ),
  );
});

test.each([
  ['VMI', baseVmi],
  ['VM', baseVm],
])(
  'defaulting a %s never throws, whatever a subtree holds (wrong-typed parts are left alone)',
  (kind, make) => {
    const paths = allPaths(make());
    fc.assert(
      fc.property(fc.constantFrom(...paths), fc.jsonValue({ maxDepth: 3 }), (path, value) => {
        const v = replaceAt(make(), path, value);
        const before = JSON.stringify(v);
        const fn = kind === 'VMI' ? setVirtualMachineInstanceDefaults : setVirtualMachineDefaults;
        if (typeof v !== 'object' || v === null || Array.isArray(v)) {
          expect(() => fn(v as never)).toThrow(/must be an object/);
          return;
        }
        fn(v as never);
        expect(JSON.stringify(v)).toBe(before); // the input is never modified
      }),
      { numRuns: 500 },
    );
  },
);
