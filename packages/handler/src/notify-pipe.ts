/**
 * The notify pipe (upstream's "domain notify pipe"): a unix socket inside a launcher Pod's
 * /var/run/kubevirt that forwards every connection, byte for byte, to the handler's own notify
 * socket. The launcher's NotifyClient dials its Pod-local path; the handler's single NotifyServer
 * hears every launcher. The pipe's directory must already exist (kubelet made the emptyDir).
 */
import net from 'node:net';
import { chown, chmod } from 'node:fs/promises';
import { removeSocketFile, checkSocketPath } from '@kubevirt-ts/cmd-protocol';

export class NotifyPipe {
  private server: net.Server | undefined;
  private conns = new Set<net.Socket>();

  constructor(
    readonly pipePath: string,
    readonly targetPath: string,
    private readonly owner?: { uid: number; gid: number },
  ) {
    checkSocketPath(pipePath, 'notify pipe');
  }

  async start(): Promise<void> {
    await removeSocketFile(this.pipePath);
    const server = net.createServer((inbound) => {
      const outbound = net.connect(this.targetPath);
      this.conns.add(inbound).add(outbound);
      const done = () => {
        inbound.destroy();
        outbound.destroy();
        this.conns.delete(inbound);
        this.conns.delete(outbound);
      };
      inbound.on('error', done).on('close', done);
      outbound.on('error', done).on('close', done);
      inbound.pipe(outbound);
      outbound.pipe(inbound);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.pipePath, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
    await chmod(this.pipePath, 0o600);
    if (this.owner) await chown(this.pipePath, this.owner.uid, this.owner.gid);
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    for (const c of this.conns) c.destroy();
    this.conns.clear();
    await new Promise<void>((resolve) => s.close(() => resolve()));
    await removeSocketFile(this.pipePath).catch(() => undefined);
  }
}
