// VirtualMachineInstancePresets (deprecated upstream, still served and applied by upstream v1.9.0's VMI mutator): when
// a VMI is created, every preset of its namespace whose selector matches its labels fills the domain settings the VMI
// leaves unset: resources.requests, cpu, firmware, clock (offset and timer), features, devices.watchdog and
// ioThreadsPolicy. A setting the VMI already has is kept (a different value is a conflict, reported but not an error);
// two matching presets that disagree on a setting refuse the VMI. Each preset applied is recorded in the annotation
// `virtualmachinepreset.kubevirt.io/<name>`; the annotation `virtualmachineinstancepresets.admission.kubevirt.io/exclude:
// "true"` opts a VMI out.
import { isDeepStrictEqual as deepEqualJson } from 'node:util';
import { labelSelectorMatches } from './selector.js';
import type { DomainSpec, VirtualMachineInstance, VirtualMachineInstancePreset } from './schemas.js';

/** the annotation that keeps a VMI out of every preset */
export const PRESET_EXCLUDE_ANNOTATION = 'virtualmachineinstancepresets.admission.kubevirt.io/exclude';
/** the annotation recording that preset NAME was applied (its value: the API version) */
export const presetAnnotation = (name: string): string => `virtualmachinepreset.kubevirt.io/${name}`;

type Domain = DomainSpec;
/** the settings a preset may fill, each with how to read it from a domain */
const SETTINGS: [string, (d: Domain) => unknown][] = [
  ['resources.requests', (d) => d.resources?.requests],
  ['cpu', (d) => d.cpu],
  ['firmware', (d) => d.firmware],
  ['clock', (d) => (d.clock ? { ...d.clock, timer: undefined } : undefined)],
  ['clock.timer', (d) => d.clock?.timer],
  ['features', (d) => d.features],
  ['devices.watchdog', (d) => d.devices?.watchdog],
  ['ioThreadsPolicy', (d) => d.ioThreadsPolicy],
];

/** The settings two domains both set to different values (`spec.<setting>`). */
export function presetConflicts(a: Domain, b: Domain): string[] {
  return SETTINGS.filter(([, get]) => {
    const x = get(a);
    const y = get(b);
    return x !== undefined && y !== undefined && !deepEqualJson(x, y);
  }).map(([path]) => `spec.${path}`);
}

/** What {@link applyPresets} did to a new VMI. */
export interface PresetResult {
  /** the VMI with the presets' settings filled in (a copy) */
  vmi: VirtualMachineInstance;
  /** the names of the presets applied */
  applied: string[];
  /** settings of a preset the VMI already set differently: kept as the VMI has them */
  ignored: string[];
  /** matching presets that disagree with each other: the VMI must be refused */
  error?: string;
}

/** Applies the matching presets of `presets` to a new VMI, as upstream's VMI mutator does. */
export function applyPresets(
  vmi: VirtualMachineInstance,
  presets: VirtualMachineInstancePreset[],
): PresetResult {
  const out = structuredClone(vmi);
  if (vmi.metadata?.annotations?.[PRESET_EXCLUDE_ANNOTATION] === 'true')
    return { vmi: out, applied: [], ignored: [] };
  const labels = (vmi.metadata?.labels ?? {}) as Record<string, string>;
  const matching = presets
    .filter((p) => labelSelectorMatches(p.spec.selector, labels))
    .sort((a, b) => (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? ''));
  const clashes: string[] = [];
  matching.forEach((p, i) => {
    for (const q of matching.slice(0, i)) {
      const c = presetConflicts(p.spec.domain ?? {}, q.spec.domain ?? {});
      if (c.length)
        clashes.push(`presets '${p.metadata?.name}' and '${q.metadata?.name}' conflict: ${c.join(', ')}`);
    }
  });
  if (clashes.length)
    return {
      vmi: out,
      applied: [],
      ignored: [],
      error: `VirtualMachineInstancePresets cannot be applied due to conflicts: ${clashes.join('; ')}`,
    };
  const applied: string[] = [];
  const ignored: string[] = [];
  for (const p of matching) {
    const from = p.spec.domain ?? {};
    const d = ((out.spec ??= {} as VirtualMachineInstance['spec']).domain ??= {} as Domain);
    let any = false;
    const fill = <T>(have: T | undefined, want: T | undefined, set: (v: T) => void, path: string) => {
      if (want === undefined) return;
      if (have === undefined) set(structuredClone(want));
      if (have === undefined || deepEqualJson(have, want)) any = true;
      else ignored.push(`${p.metadata?.name}: spec.domain.${path}`);
    };
    if (from.resources?.requests && Object.keys(from.resources.requests).length)
      fill(
        d.resources?.requests,
        from.resources.requests,
        (v) => ((d.resources ??= {}).requests = v),
        'resources.requests',
      );
    fill(d.cpu, from.cpu, (v) => (d.cpu = v), 'cpu');
    fill(d.firmware, from.firmware, (v) => (d.firmware = v), 'firmware');
    if (from.clock) {
      const { timer, ...offset } = from.clock;
      const { timer: haveTimer, ...haveOffset } = d.clock ?? {};
      fill(d.clock ? haveOffset : undefined, offset, (v) => (d.clock = { ...v }), 'clock');
      if (timer) fill(haveTimer, timer, (v) => ((d.clock ??= {}).timer = v), 'clock.timer');
    }
    fill(d.features, from.features, (v) => (d.features = v), 'features');
    if (from.devices?.watchdog)
      fill(
        d.devices?.watchdog,
        from.devices.watchdog,
        (v) => ((d.devices ??= {}).watchdog = v),
        'devices.watchdog',
      );
    fill(d.ioThreadsPolicy, from.ioThreadsPolicy, (v) => (d.ioThreadsPolicy = v), 'ioThreadsPolicy');
    if (!any) continue;
    applied.push(p.metadata?.name ?? '');
    (out.metadata.annotations ??= {})[presetAnnotation(p.metadata?.name ?? '')] = 'kubevirt.io/v1';
  }
  return { vmi: out, applied, ignored };
}
