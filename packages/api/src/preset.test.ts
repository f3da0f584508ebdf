// Presets (deprecated upstream, applied by its VMI mutator): which settings are filled, conflicts, exclusion.
import { applyPresets, presetAnnotation, PRESET_EXCLUDE_ANNOTATION } from './preset.js';
import type { VirtualMachineInstance, VirtualMachineInstancePreset } from './schemas.js';
import { validateObject } from './validate.js';

const preset = (name: string, match: Record<string, string>, domain: object): VirtualMachineInstancePreset =>
  ({
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstancePreset',
    metadata: { name, namespace: 'ns' },
    spec: { selector: { matchLabels: match }, domain },
  }) as VirtualMachineInstancePreset;
const vmi = (
  labels: Record<string, string>,
  domain: object = { devices: {} },
  annotations?: Record<string, string>,
) =>
  ({
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: 'v', namespace: 'ns', labels, annotations },
    spec: { domain },
  }) as unknown as VirtualMachineInstance;

test('a matching preset fills what the VMI leaves unset and is recorded; a different value of the VMI is kept', () => {
  const small = preset(
    'small',
    { size: 'small' },
    {
      resources: { requests: { memory: '64Mi' } },
      cpu: { cores: 2 },
      firmware: { serial: 'x' },
      clock: { utc: {}, timer: { rtc: { tickPolicy: 'catchup' } } },
      devices: { watchdog: { name: 'w', i6300esb: {} } },
    },
  );
  const r = applyPresets(vmi({ size: 'small' }, { devices: {}, cpu: { cores: 4 } }), [
    small,
    preset('other', { size: 'big' }, { cpu: { cores: 8 } }),
  ]);
  expect(r.error).toBeUndefined();
  expect(r.applied).toEqual(['small']);
  expect(r.ignored).toEqual(['small: spec.domain.cpu']);
  expect(r.vmi.spec.domain).toEqual({
    devices: { watchdog: { name: 'w', i6300esb: {} } },
    cpu: { cores: 4 },
    resources: { requests: { memory: '64Mi' } },
    firmware: { serial: 'x' },
    clock: { utc: {}, timer: { rtc: { tickPolicy: 'catchup' } } },
  });
  expect(r.vmi.metadata.annotations).toEqual({ [presetAnnotation('small')]: 'kubevirt.io/v1' });
  expect(validateObject(small)).toEqual([]);
});

test('two matching presets that disagree refuse the VMI; the exclusion annotation opts out', () => {
  const a = preset('a', { app: 'db' }, { cpu: { cores: 2 } });
  const b = preset('b', { app: 'db' }, { cpu: { cores: 4 }, firmware: { serial: 'y' } });
  expect(applyPresets(vmi({ app: 'db' }), [a, b]).error).toBe(
    "VirtualMachineInstancePresets cannot be applied due to conflicts: presets 'b' and 'a' conflict: spec.cpu",
  );
  const out = applyPresets(vmi({ app: 'db' }, { devices: {} }, { [PRESET_EXCLUDE_ANNOTATION]: 'true' }), [
    a,
    b,
  ]);
  expect(out.applied).toEqual([]);
  expect(out.error).toBeUndefined();
  expect(out.vmi.spec.domain).toEqual({ devices: {} });
});

test('a preset is validated: its selector, its domain schema', () => {
  const bad = preset('bad', {}, { cpu: { cores: 'two' } });
  (bad.spec.selector as { matchExpressions?: object[] }).matchExpressions = [{ key: 'a', operator: 'In' }];
  const paths = validateObject(bad).map((e) => e.path);
  expect(paths).toEqual(expect.arrayContaining(['spec.domain.cpu.cores', 'spec.selector']));
});
