// meta/v1 label selectors: whether one is well formed, whether it matches a set of labels, and its string
// form (what `kubectl get -l` takes, and what a scale subresource's labelSelectorPath points at).
import type { LabelSelector } from './schemas.js';

/** Why the selector cannot be used (as apimachinery's LabelSelectorAsSelector refuses it), or undefined. */
export function labelSelectorError(sel: LabelSelector): string | undefined {
  for (const [i, r] of (sel.matchExpressions ?? []).entries()) {
    const n = r.values?.length ?? 0;
    if ((r.operator === 'In' || r.operator === 'NotIn') && n === 0)
      return `matchExpressions[${i}]: values must be non-empty for operator ${r.operator}`;
    if ((r.operator === 'Exists' || r.operator === 'DoesNotExist') && n > 0)
      return `matchExpressions[${i}]: values must be empty for operator ${r.operator}`;
  }
  return undefined;
}

/** Whether `labels` satisfy every requirement of the selector (an empty selector matches everything). */
export function labelSelectorMatches(
  sel: LabelSelector,
  labels: Record<string, string> | undefined,
): boolean {
  const l = labels ?? {};
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (l[k] !== v) return false;
  for (const r of sel.matchExpressions ?? []) {
    const has = Object.hasOwn(l, r.key);
    const inValues = has && (r.values ?? []).includes(l[r.key]!);
    const ok =
      r.operator === 'In'
        ? inValues
        : r.operator === 'NotIn'
          ? !inValues
          : r.operator === 'Exists'
            ? has
            : !has;
    if (!ok) return false;
  }
  return true;
}

/** The selector as a string, requirements sorted by key: `app=x,tier in (a,b),!legacy`. */
export function labelSelectorString(sel: LabelSelector): string {
  const reqs: [string, string][] = Object.entries(sel.matchLabels ?? {}).map(([k, v]) => [k, `${k}=${v}`]);
  for (const r of sel.matchExpressions ?? []) {
    const values = [...(r.values ?? [])].sort().join(',');
    const s =
      r.operator === 'In'
        ? `${r.key} in (${values})`
        : r.operator === 'NotIn'
          ? `${r.key} notin (${values})`
          : r.operator === 'Exists'
            ? r.key
            : `!${r.key}`;
    reqs.push([r.key, s]);
  }
  return reqs
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    .map(([, s]) => s)
    .join(',');
}
