// What the DomainManager asks the QEMU guest agent (through libvirt's qemuAgentCommand): ping, the
// guest info upstream reports, users, filesystems, and guest-exec.
import { buildGuestInfo, type GuestAgentInfo } from './guest-info.js';
import type { LibvirtDomain } from './libvirt.js';

/** Runs one guest agent command and returns its `return` value. */
export async function agentReturn(
  dom: LibvirtDomain,
  execute: string,
  args?: object,
  timeoutSeconds = 5,
): Promise<unknown> {
  const out = await dom.qemuAgentCommand(
    JSON.stringify(args ? { execute, arguments: args } : { execute }),
    timeoutSeconds,
  );
  return (JSON.parse(out) as { return?: unknown }).return;
}

/** guest-ping; rejects when the agent does not answer within timeoutSeconds. */
export async function agentPing(dom: LibvirtDomain, timeoutSeconds: number): Promise<void> {
  await dom.qemuAgentCommand(JSON.stringify({ execute: 'guest-ping' }), timeoutSeconds);
}

/** Whether the agent answers a guest-ping within timeoutSeconds. */
export async function agentAnswers(dom: LibvirtDomain, timeoutSeconds: number): Promise<boolean> {
  try {
    await agentPing(dom, timeoutSeconds);
    return true;
  } catch {
    return false;
  }
}

/** upstream's GuestAgentInfo (agent version, OS, hostname, timezone, users, filesystems). */
export async function guestInfo(dom: LibvirtDomain, fsFrozen: boolean): Promise<GuestAgentInfo> {
  const run = (execute: string) => agentReturn(dom, execute);
  const info = await run('guest-info'); // throws when no agent: nothing else to ask then
  const optional = async (execute: string) => run(execute).catch(() => undefined);
  return buildGuestInfo({
    info,
    osinfo: await optional('guest-get-osinfo'),
    hostname: await optional('guest-get-host-name'),
    timezone: await optional('guest-get-timezone'),
    users: await optional('guest-get-users'),
    fsinfo: await optional('guest-get-fsinfo'),
    fsFrozen,
  });
}

/** upstream's VirtualMachineInstanceGuestOSUserList: users logged in to the guest. */
export async function guestUsers(
  dom: LibvirtDomain,
): Promise<{ items: NonNullable<GuestAgentInfo['userList']> }> {
  const users = await agentReturn(dom, 'guest-get-users');
  return { items: buildGuestInfo({ info: {}, users }).userList ?? [] };
}

/** upstream's VirtualMachineInstanceFileSystemList: the guest's filesystems. */
export async function guestFilesystems(
  dom: LibvirtDomain,
): Promise<{ items: NonNullable<GuestAgentInfo['fsInfo']>['disks'] }> {
  const fsinfo = await agentReturn(dom, 'guest-get-fsinfo');
  return { items: buildGuestInfo({ info: {}, fsinfo }).fsInfo?.disks ?? [] };
}

/**
 * Runs a command in the guest (guest-exec, then guest-exec-status until it exited or timeoutSeconds
 * passed; 0: 10 s) and returns its exit code and stdout.
 */
export async function guestExec(
  dom: LibvirtDomain,
  command: string,
  args: string[],
  timeoutSeconds: number,
): Promise<{ exitCode: number; stdout: string }> {
  const timeout = timeoutSeconds > 0 ? timeoutSeconds : 10;
  const started = (await agentReturn(
    dom,
    'guest-exec',
    { path: command, arg: args, 'capture-output': true },
    timeout,
  )) as { pid?: number };
  if (typeof started?.pid !== 'number')
    throw new Error(`guest-exec of ${command}: the agent returned no pid`);
  const deadline = Date.now() + timeout * 1000;
  for (;;) {
    const st = (await agentReturn(dom, 'guest-exec-status', { pid: started.pid }, timeout)) as {
      exited?: boolean;
      exitcode?: number;
      'out-data'?: string;
    };
    if (st?.exited) {
      return {
        exitCode: st.exitcode ?? -1,
        stdout: Buffer.from(st['out-data'] ?? '', 'base64').toString('utf8'),
      };
    }
    if (Date.now() > deadline)
      throw new Error(`guest-exec of ${command}: did not finish within ${timeout} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
