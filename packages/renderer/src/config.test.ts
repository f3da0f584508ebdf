import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseManifests } from '@kubevirt-ts/api';
import { rendererConfigFromData, renderLaunchPod, RenderError } from './index.js';

const deployConfig = fileURLToPath(new URL('../../../deploy/30-config.yaml', import.meta.url));

describe('rendererConfigFromData', () => {
  it('reads the committed config object in deploy/', () => {
    const [cm] = parseManifests(readFileSync(deployConfig, 'utf8')) as {
      kind: string;
      data: Record<string, string>;
    }[];
    expect(cm!.kind).toBe('ConfigMap');
    const c = rendererConfigFromData(cm!.data);
    expect(c.launcherImage).toMatch(/virt-launcher:/);
    expect(c.useEmulation).toBe(false);
    expect(c.cpuAllocationRatio).toBe(10);
    const pod = renderLaunchPod(
      {
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachineInstance',
        metadata: { name: 'a', namespace: 'b', uid: 'c' },
        spec: { domain: { resources: { requests: { memory: '64Mi' } } } },
      },
      c,
    );
    expect(pod.spec!.containers[0]!.image).toBe(c.launcherImage);
  });

  it('converts types and parses JSON arrays', () => {
    expect(
      rendererConfigFromData({
        launcherImage: 'x:1',
        useEmulation: 'true',
        memoryOvercommit: '150',
        launcherCommand: '["/bin/launcher","--v"]',
      }),
    ).toEqual({
      launcherImage: 'x:1',
      useEmulation: true,
      memoryOvercommit: 150,
      launcherCommand: ['/bin/launcher', '--v'],
    });
  });

  it.each([
    [{ launcherImage: 'x', useEmulation: 'yes' }, 'data.useEmulation'],
    [{ launcherImage: 'x', cpuAllocationRatio: 'ten' }, 'data.cpuAllocationRatio'],
    [{ launcherImage: 'x', launcherCommand: '/bin/sh' }, 'data.launcherCommand'],
    [{ launcherImage: 'x', colour: 'blue' }, 'data.colour'],
    [{}, 'config.launcherImage'],
    [{ launcherImage: 'x', memoryOvercommit: '-5' }, 'config.memoryOvercommit'],
  ])('rejects %j naming %s', (data, path) => {
    try {
      rendererConfigFromData(data as Record<string, string>);
    } catch (e) {
      expect(e).toBeInstanceOf(RenderError);
      expect((e as RenderError).path).toBe(path);
      return;
    }
    throw new Error('expected an error');
  });
});
