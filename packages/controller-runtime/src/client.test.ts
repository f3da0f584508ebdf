import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeApiError, KubeClient, lineSplitter } from './client.js';

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

describe('KubeClient.request: 429/503 with Retry-After (a real HTTP server on loopback)', () => {
  let server: Server;
  let answers: { status: number; retryAfter?: string }[] = [];
  let seen = 0;
  let client: KubeClient;
  beforeAll(async () => {
    server = createServer((req, res) => {
      seen++;
      const a = answers.shift() ?? { status: 200 };
      const headers: Record<string, string> = { 'Content-Type': 'application/json' };
      if (a.retryAfter !== undefined) headers['Retry-After'] = a.retryAfter;
      res
        .writeHead(a.status, headers)
        .end(a.status === 200 ? '{"kind":"Ok"}' : '{"kind":"Status","message":"busy"}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    client = new KubeClient({
      getCurrentCluster: () => ({ server: `http://127.0.0.1:${port}` }),
      applyToHTTPSOptions: async () => undefined,
    });
  });
  afterAll(async () => {
    client.close();
    await new Promise((r) => server.close(r));
  });
  beforeEach(() => {
    seen = 0;
  });

  it('sends again after Retry-After, as client-go does (storage initializing, max in flight)', async () => {
    answers = [
      { status: 429, retryAfter: '0' },
      { status: 503, retryAfter: '0' },
    ];
    await expect(client.request('GET', '/api/v1/pods')).resolves.toEqual({ kind: 'Ok' });
    expect(seen).toBe(3);
  });

  it("a 429 without Retry-After, or any other error, is the caller's at once", async () => {
    answers = [{ status: 429 }];
    const e = await client.request('GET', '/api/v1/pods').catch((x: unknown) => x);
    expect(e).toBeInstanceOf(KubeApiError);
    expect((e as KubeApiError).status).toBe(429);
    answers = [{ status: 500, retryAfter: '0' }];
    expect(((await client.request('GET', '/x').catch((x: unknown) => x)) as KubeApiError).status).toBe(500);
    expect(seen).toBe(2);
  });

  it('gives up after 10 attempts', async () => {
    answers = Array.from({ length: 12 }, () => ({ status: 429, retryAfter: '0' }));
    const e = (await client.request('GET', '/api/v1/pods').catch((x: unknown) => x)) as KubeApiError;
    expect(e.status).toBe(429);
    expect(e.retryAfterSeconds).toBe(0);
    expect(seen).toBe(10);
    answers = [];
  });
});
