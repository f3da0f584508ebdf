import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { closeServer } from './server.js';

function listen(handler: Parameters<typeof createServer>[1]): Promise<Server> {
  const s = createServer(handler);
  return new Promise((r) => s.listen(0, '127.0.0.1', () => r(s)));
}

function get(s: Server): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ port: (s.address() as AddressInfo).port, host: '127.0.0.1', path: '/' }, (res) => {
      let d = '';
      res.on('data', (c) => (d += c));
      res.on('end', () => resolve(d));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('closeServer', () => {
  test('a request in flight is answered within the grace; then the server is closed', async () => {
    let answer!: () => void;
    const s = await listen((_req, res) => {
      answer = () => res.end('done');
    });
    const reply = get(s);
    await new Promise((r) => setTimeout(r, 50));
    const closed = closeServer(s, 5000);
    setTimeout(() => answer(), 100);
    await expect(reply).resolves.toBe('done');
    await closed;
    expect(s.listening).toBe(false);
  });

  test('a request still open after the grace is cut', async () => {
    const s = await listen(() => undefined); // never answers
    const reply = get(s);
    await new Promise((r) => setTimeout(r, 50));
    await closeServer(s, 100);
    await expect(reply).rejects.toThrow(/socket hang up/);
  });
});
