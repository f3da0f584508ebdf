import { lineSplitter } from './client.js';

describe('lineSplitter (watch streams)', () => {
  const run = (chunks: Buffer[]) => {
    const out: string[] = [];
    const feed = lineSplitter((l) => out.push(l));
    for (const c of chunks) feed(c);
    return out;
  };

  it('gives each line once, whatever the chunking; blank lines are skipped; a partial last line waits', () => {
    const text = '{"a":1}\n\n{"b":2}\n{"c":3}\n{"d":';
    const whole = run([Buffer.from(text)]);
    expect(whole).toEqual(['{"a":1}', '{"b":2}', '{"c":3}']);
    const bytes = Buffer.from(text);
    for (let size = 1; size <= 7; size++) {
      const chunks = [];
      for (let i = 0; i < bytes.length; i += size) chunks.push(bytes.subarray(i, i + size));
      expect(run(chunks)).toEqual(whole);
    }
    expect(run([Buffer.from('{"d":'), Buffer.from('4}\n')])).toEqual(['{"d":4}']);
  });

  it('decodes UTF-8 characters split across chunks', () => {
    const line = '{"name":"vm-é€😀"}';
    const bytes = Buffer.from(`${line}\n`);
    for (let cut = 1; cut < bytes.length; cut++)
      expect(run([bytes.subarray(0, cut), bytes.subarray(cut)])).toEqual([line]);
  });
});
