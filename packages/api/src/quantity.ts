// Kubernetes resource quantities ("128Mi", "500m", "1G", "1e3", 2): parsing to plain numbers.

const QUANTITY_RE = /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))((?:[KMGTPE]i)|[numkMGTPE]|[eE][+-]?\d+)?$/;

const SUFFIX: Record<string, number> = {
  '': 1,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** True when `q` is a valid Kubernetes quantity (string form) or a finite number. */
export function isQuantity(q: unknown): q is string | number {
  if (typeof q === 'number') return Number.isFinite(q);
  if (typeof q !== 'string' || !QUANTITY_RE.test(q)) return false;
  try {
    parseQuantity(q);
    return true;
  } catch {
    return false;
  }
}

/**
 * Parse a Kubernetes quantity to a number: "128Mi" -> 134217728, "500m" -> 0.5, "1G" -> 1e9, "1e3" -> 1000,
 * "1Ei" -> 2^60. Exact up to 2^53 (8 PiB of bytes); above, the nearest double (relative error below 2^-52,
 * powers of two such as 1Ei stay exact), which is all a comparison or a Pod's resource list needs.
 * Throws an Error naming the bad value when `q` is not a quantity or is beyond a double (about 1.8e308).
 */
export function parseQuantity(q: string | number): number {
  if (typeof q === 'number') {
    if (!Number.isFinite(q)) throw new Error(`invalid quantity ${String(q)}: not a finite number`);
    return q;
  }
  if (typeof q !== 'string')
    throw new Error(`invalid quantity ${JSON.stringify(q)}: must be a string or a number`);
  const m = QUANTITY_RE.exec(q);
  if (!m)
    throw new Error(
      `invalid quantity ${JSON.stringify(q)}: expected a number with an optional suffix (e.g. 128Mi, 2Gi, 500m, 1G)`,
    );
  const num = Number(m[1]);
  const suffix = m[2] ?? '';
  if (/^[eE][+-]?\d+$/.test(suffix)) {
    const v = num * 10 ** Number(suffix.slice(1));
    if (!Number.isFinite(v)) throw new Error(`invalid quantity ${JSON.stringify(q)}: out of range`);
    return v;
  }
  const mult = SUFFIX[suffix];
  if (mult === undefined) throw new Error(`invalid quantity ${JSON.stringify(q)}: unknown suffix ${suffix}`);
  // Avoid binary floating point noise for the common exact cases (e.g. 0.1Gi).
  const v = num * mult;
  return Number.isInteger(num) || mult < 1 ? v : Math.round(v * 1e9) / 1e9;
}

/** Ceiling to a whole number, as resource.Quantity.Value() does (e.g. "1500m" -> 2). */
export function quantityValue(q: string | number): number {
  return Math.ceil(parseQuantity(q) - 1e-12);
}

/** Format a byte count with the largest binary suffix that divides it exactly (134217728 -> "128Mi"). */
export function formatBinaryQuantity(bytes: number): string {
  if (!Number.isInteger(bytes) || bytes === 0) return String(bytes);
  for (const s of ['Ei', 'Pi', 'Ti', 'Gi', 'Mi', 'Ki']) {
    const m = SUFFIX[s]!;
    if (bytes % m === 0) return `${bytes / m}${s}`;
  }
  return String(bytes);
}
