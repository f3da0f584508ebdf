// kvts-pod-network: the phase-1 setup/teardown (what virt-handler will run) and the phase-2 DHCP
// server as commands, for the launcher e2e and for trying it by hand in a test namespace.
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import {
  parseManifests,
  setVirtualMachineInstanceDefaults,
  validateObject,
  vmiFromManifest,
} from '@kubevirt-ts/api';
import { createLogger } from '@kubevirt-ts/log';
import { planPodNetwork, type PodNetworkPlan } from './plan.js';
import { setupPodNetwork, teardownPodNetwork, type PodNetworkConfig } from './phase1.js';
import { startDhcpServer, startDhcp6Server } from './phase2.js';
import { readResolvConf } from './resolv.js';

const USAGE = `usage:
  kvts-pod-network setup --vmi FILE [--netns PATH] [--pod-interface eth0] [--tap-owner 107] [--out FILE]
      phase 1 (root): bridge, tap and (masquerade) nftables NAT for the VMI's pod-network interface in
      the network namespace PATH (e.g. /run/netns/NAME, /proc/PID/ns/net); prints or writes the
      resulting config (JSON), the input of "dhcp" and "teardown"
  kvts-pod-network teardown --config FILE [--netns PATH]
      removes what setup created
  kvts-pod-network dhcp --config FILE [--hostname NAME] [--mac MAC] [--resolv-conf FILE]
      phase 2: serves DHCP to the guest on the bridge until SIGTERM/SIGINT, in the caller's network
      namespace (run it with nsenter/ip netns exec); needs only CAP_NET_BIND_SERVICE (port 67);
      prints "ready", then "lease IP MAC [HOSTNAME]" when the guest has its address; when the config has
      an IPv6 side, also DHCPv6 (port 547) and "lease6 IP CLIENT-DUID"
`;

class UsageError extends Error {}

function loadVmi(file: string) {
  const docs = parseManifests(readFileSync(file === '-' ? '/dev/stdin' : file, 'utf8'));
  const doc = docs.find((d) =>
    ['VirtualMachineInstance', 'VirtualMachine'].includes((d as { kind?: string })?.kind ?? ''),
  );
  if (!doc) throw new Error(`${file}: no VirtualMachineInstance or VirtualMachine found`);
  const errors = validateObject(doc);
  if (errors.length) throw new Error(`${file}: ${errors.map((e) => `${e.path}: ${e.reason}`).join('; ')}`);
  return setVirtualMachineInstanceDefaults(vmiFromManifest(doc));
}

/** Runs the CLI; resolves with the exit code (0 ok, 1 failure, 2 usage). */
export async function main(argv: string[]): Promise<number> {
  const log = createLogger('kvts-pod-network');
  const [cmd, ...rest] = argv;
  try {
    const { values: v } = (() => {
      try {
        return parseArgs({
          args: rest,
          options: {
            vmi: { type: 'string' },
            netns: { type: 'string' },
            'pod-interface': { type: 'string', default: 'eth0' },
            'tap-owner': { type: 'string' },
            out: { type: 'string' },
            config: { type: 'string' },
            mac: { type: 'string' },
            hostname: { type: 'string' },
            'resolv-conf': { type: 'string', default: '/etc/resolv.conf' },
          },
        });
      } catch (e) {
        throw new UsageError((e as Error).message);
      }
    })();
    const need = (name: keyof typeof v): string => {
      const x = v[name];
      if (typeof x !== 'string' || x === '') throw new UsageError(`${cmd} needs --${name}`);
      return x;
    };
    const readConfig = () => JSON.parse(readFileSync(need('config'), 'utf8')) as PodNetworkConfig;
    switch (cmd) {
      case 'setup': {
        const vmi = loadVmi(need('vmi'));
        const plan: PodNetworkPlan | undefined = planPodNetwork(vmi, v['pod-interface']);
        if (!plan) throw new Error('the VMI has no pod-network interface: nothing to set up');
        const owner = v['tap-owner'] === undefined ? undefined : Number(v['tap-owner']);
        if (owner !== undefined && !Number.isInteger(owner))
          throw new UsageError('--tap-owner must be a uid');
        const config = await setupPodNetwork(plan, { netns: v.netns, log, tapOwner: owner });
        const json = `${JSON.stringify(config, null, 2)}\n`;
        if (v.out) writeFileSync(v.out, json);
        else process.stdout.write(json);
        return 0;
      }
      case 'teardown':
        await teardownPodNetwork(readConfig(), { netns: v.netns, log });
        return 0;
      case 'dhcp': {
        // listen for the stop signal first, so a signal right after "ready" is never the default (death)
        let stop: () => void = () => undefined;
        const stopped = new Promise<void>((resolve) => (stop = resolve));
        process.once('SIGTERM', stop);
        process.once('SIGINT', stop);
        if (v.netns !== undefined)
          throw new UsageError('dhcp serves in its own network namespace: run it in PATH with nsenter');
        const config = readConfig();
        const dns = readResolvConf(v['resolv-conf']);
        const server = await startDhcpServer({ config, dns, hostname: v.hostname, mac: v.mac, log });
        // a Pod with IPv6: DHCPv6 beside it (as the launcher's startGuestDhcp does)
        const server6 = config.ipv6
          ? await startDhcp6Server({ config, dns, log }).catch(async (e: unknown) => {
              await server.stop();
              throw e;
            })
          : undefined;
        process.stdout.write('ready\n');
        void server.waitForLease().then((l) => process.stdout.write(`lease ${l}\n`));
        void server6?.waitForLease().then((l) => process.stdout.write(`lease6 ${l}\n`));
        await stopped;
        await Promise.all([server.stop(), server6?.stop()]);
        return 0;
      }
      case '-h':
      case '--help':
        process.stdout.write(USAGE);
        return 0;
      default:
        throw new UsageError(
          cmd === undefined ? 'no command given' : `unknown command ${JSON.stringify(cmd)}`,
        );
    }
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`kvts-pod-network: ${e.message}\n${USAGE}`);
      return 2;
    }
    process.stderr.write(`kvts-pod-network: ${(e as Error).message}\n`);
    return 1;
  }
}
