// Bench helper, run inside the Pod netns: the DHCP server in this process, as the launcher runs it.
// Prints "ready" once it listens, then one JSON line with the process's RSS before the server
// started and after the guest's lease (the server's extra memory), and exits.
import { readFileSync } from 'node:fs';
import { startDhcpServer } from '../phase2.js';

const config = JSON.parse(readFileSync(process.argv[2]!, 'utf8'));
globalThis.gc?.();
const before = process.memoryUsage.rss();
const server = await startDhcpServer({
  config,
  dns: { nameservers: ['10.96.0.10'], searchDomains: ['svc.cluster.local'] },
  hostname: 'bench',
});
process.stdout.write('ready\n');
await server.waitForLease();
globalThis.gc?.();
const after = process.memoryUsage.rss();
await server.stop();
process.stdout.write(`${JSON.stringify({ rssBeforeKiB: before >> 10, rssAfterLeaseKiB: after >> 10 })}\n`);
