import type { GuestOSInfo } from './status.js';

// Guest agent answers -> upstream's VirtualMachineInstanceGuestAgentInfo (JSON field names as upstream).

export interface GuestAgentInfo {
  guestAgentVersion?: string;
  supportedCommands?: { name: string; enabled: boolean }[];
  hostname?: string;
  os?: GuestOSInfo;
  timezone?: string;
  userList?: { userName: string; domain?: string; loginTime?: number }[];
  fsInfo?: {
    disks: {
      diskName: string;
      mountPoint: string;
      fileSystemType: string;
      usedBytes?: number;
      totalBytes?: number;
      disk?: { serial?: string; busType?: string }[];
    }[];
  };
  fsFreezeStatus?: 'frozen' | 'thawed';
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const num = (v: unknown): number | undefined => (typeof v === 'number' ? v : undefined);

/** Builds the info from the `return` values of guest-info, guest-get-osinfo, ... (each may be missing). */
export function buildGuestInfo(r: {
  info: unknown;
  osinfo?: unknown;
  hostname?: unknown;
  timezone?: unknown;
  users?: unknown;
  fsinfo?: unknown;
  fsFrozen?: boolean;
}): GuestAgentInfo {
  const info = obj(r.info);
  const out: GuestAgentInfo = {
    guestAgentVersion: str(info.version),
    supportedCommands: Array.isArray(info.supported_commands)
      ? info.supported_commands.map((c) => ({ name: String(obj(c).name), enabled: obj(c).enabled === true }))
      : undefined,
    fsFreezeStatus: r.fsFrozen ? 'frozen' : 'thawed',
  };
  if (r.osinfo) {
    const o = obj(r.osinfo);
    out.os = {
      name: str(o.name),
      kernelRelease: str(o['kernel-release']),
      version: str(o.version),
      prettyName: str(o['pretty-name']),
      versionId: str(o['version-id']),
      kernelVersion: str(o['kernel-version']),
      machine: str(o.machine),
      id: str(o.id),
    };
  }
  if (r.hostname) out.hostname = str(obj(r.hostname)['host-name']);
  if (r.timezone) {
    const t = obj(r.timezone);
    out.timezone = `${str(t.zone) ?? ''}, ${num(t.offset) ?? 0}`;
  }
  if (Array.isArray(r.users)) {
    out.userList = r.users.map((u) => ({
      userName: String(obj(u).user ?? ''),
      domain: str(obj(u).domain),
      loginTime: num(obj(u)['login-time']),
    }));
  }
  if (Array.isArray(r.fsinfo)) {
    out.fsInfo = {
      disks: r.fsinfo.map((f) => {
        const o = obj(f);
        return {
          diskName: String(o.name ?? ''),
          mountPoint: String(o.mountpoint ?? ''),
          fileSystemType: String(o.type ?? ''),
          usedBytes: num(o['used-bytes']),
          totalBytes: num(o['total-bytes']),
          disk: Array.isArray(o.disk)
            ? o.disk.map((d) => ({ serial: str(obj(d).serial), busType: str(obj(d)['bus-type']) }))
            : undefined,
        };
      }),
    };
  }
  return out;
}
