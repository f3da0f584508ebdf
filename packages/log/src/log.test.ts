import { Writable } from 'node:stream';
import { createLogger } from './index.js';

function capture(): { stream: Writable; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      chunks.push(String(chunk));
      cb();
    },
  });
  return {
    stream,
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l)),
  };
}

test('one JSON object per line with component, level, timestamp, msg and identity', async () => {
  const c = capture();
  const log = createLogger({
    component: 'virt-launcher',
    stream: c.stream,
    identity: { kind: 'VirtualMachineInstance', namespace: 'default', name: 'tiny', uid: '' },
  });
  log.info('domain started', { reason: 'Booted' });
  log.debug('not shown at info');
  await new Promise((r) => setImmediate(r));
  const lines = c.lines();
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatchObject({
    component: 'virt-launcher',
    level: 'info',
    msg: 'domain started',
    kind: 'VirtualMachineInstance',
    namespace: 'default',
    name: 'tiny',
    reason: 'Booted',
  });
  expect(lines[0]).not.toHaveProperty('message');
  expect(lines[0]).not.toHaveProperty('uid'); // empty identity fields are left out
  expect(Number.isNaN(Date.parse(String(lines[0].timestamp)))).toBe(false);
});

test('a component name alone is enough; the level follows the option', async () => {
  const c = capture();
  const log = createLogger({ component: 'x', level: 'debug', stream: c.stream });
  log.debug('d');
  await new Promise((r) => setImmediate(r));
  expect(c.lines()).toEqual([expect.objectContaining({ component: 'x', level: 'debug', msg: 'd' })]);
  expect(createLogger('y').level).toBe(process.env.KVTS_LOG_LEVEL ?? 'info');
});
