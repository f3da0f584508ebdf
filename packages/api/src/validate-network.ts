// Validation of interfaces and networks: bindings, models, MACs, PCI addresses, ports, pairing.
import { sub } from './paths.js';
import {
  INTERFACE_BINDINGS,
  INTERFACE_MODELS,
  type Network,
  type VirtualMachineInstanceSpec,
} from './schemas.js';
import { DNS1123_LABEL, Errs, MAC_RE, PCI_RE, uniqueNames } from './validate-common.js';
import type { Checked } from './validate-schema.js';
import type { BootOrderUse } from './validate-storage.js';

export function validateNetworks(
  spec: Checked<VirtualMachineInstanceSpec>,
  base: string,
  boot: BootOrderUse[],
  e: Errs,
) {
  const devices = spec.domain?.devices ?? {};
  const dpath = sub(sub(base, 'domain'), 'devices');
  const nets = spec.networks ?? [];
  const npath = sub(base, 'networks');
  const netNames = uniqueNames(nets, npath, e, 'network');
  let podNets = 0;
  nets.forEach((n, i) => {
    const p = sub(npath, i);
    const kinds = (['pod', 'multus'] as const).filter((k) => n[k] !== undefined);
    if (kinds.length === 0) e.add(p, 'network has no source: set pod or multus');
    if (kinds.length > 1) e.add(p, 'pod and multus are mutually exclusive');
    if (n.pod !== undefined) {
      podNets++;
      if (podNets > 1) e.add(sub(p, 'pod'), 'only one pod network is allowed');
    }
    if (n.multus?.networkName === '') e.add(sub(sub(p, 'multus'), 'networkName'), 'must not be empty');
  });
  const multusDefaults = nets.map((n, i) => [n.multus?.default === true, i] as const).filter(([d]) => d);
  if (multusDefaults.length > 1)
    e.add(
      sub(sub(sub(npath, multusDefaults[1]![1]), 'multus'), 'default'),
      'only one multus network can be the default',
    );
  if (multusDefaults.length > 0 && podNets > 0) {
    e.add(
      sub(sub(sub(npath, multusDefaults[0]![1]), 'multus'), 'default'),
      'a default multus network replaces the pod network: remove the pod network',
    );
  }

  const ifaces = devices.interfaces ?? [];
  const ipath = sub(dpath, 'interfaces');
  const ifNames = uniqueNames(ifaces, ipath, e, 'interface');
  const macs = new Map<string, number>();
  ifaces.forEach((f, i) => {
    const p = sub(ipath, i);
    const name = f.name;
    let net: Checked<Network> | undefined;
    if (name && !e.reported(sub(base, 'networks'))) {
      const ni = netNames.get(name);
      if (ni === undefined) e.add(sub(p, 'name'), `no network named "${name}" in spec.networks`);
      else net = nets[ni];
    }
    const bindings = INTERFACE_BINDINGS.filter((b) => f[b] !== undefined);
    if (bindings.length === 0)
      e.add(p, `interface has no binding: set one of ${INTERFACE_BINDINGS.join(', ')}`);
    else if (bindings.length > 1)
      e.add(p, `interface has ${bindings.length} bindings (${bindings.join(', ')}); exactly one is allowed`);
    if (net && bindings.length === 1) {
      const b = bindings[0]!;
      if (b === 'masquerade' && net.pod === undefined)
        e.add(sub(p, 'masquerade'), 'masquerade is only allowed on the pod network');
      if ((b === 'slirp' || b === 'passt') && net.pod === undefined)
        e.add(sub(p, b), `${b} is only allowed on the pod network`);
      if (b === 'sriov' && net.pod !== undefined)
        e.add(sub(p, 'sriov'), 'sriov is only allowed on a multus network');
      if (b === 'macvtap' && net.pod !== undefined)
        e.add(sub(p, 'macvtap'), 'macvtap is only allowed on a multus network');
    }
    const model = f.model;
    if (model !== undefined && !(INTERFACE_MODELS as readonly string[]).includes(model)) {
      e.add(
        sub(p, 'model'),
        `unknown interface model "${model}": must be one of ${INTERFACE_MODELS.join(', ')}`,
      );
    }
    if (model !== undefined && f.sriov !== undefined)
      e.add(sub(p, 'model'), 'a model cannot be set for an sriov interface');
    const mac = f.macAddress;
    if (mac !== undefined) {
      if (!MAC_RE.test(mac))
        e.add(
          sub(p, 'macAddress'),
          `"${mac}" is not a MAC address (expected six hex pairs like 02:00:00:aa:bb:cc)`,
        );
      else {
        const norm = mac.toLowerCase().replace(/-/g, ':');
        if (parseInt(norm.slice(0, 2), 16) & 1)
          e.add(sub(p, 'macAddress'), `"${mac}" is a multicast address; a NIC needs a unicast address`);
        const first = macs.get(norm);
        if (first !== undefined)
          e.add(sub(p, 'macAddress'), `duplicate MAC address (also ${sub(ipath, first)}.macAddress)`);
        else macs.set(norm, i);
      }
    }
    const pci = f.pciAddress;
    if (pci !== undefined && !PCI_RE.test(pci))
      e.add(sub(p, 'pciAddress'), `"${pci}" is not a PCI address (expected dddd:bb:ss.f)`);
    const bo = f.bootOrder;
    if (bo !== undefined) {
      if (bo < 1) e.add(sub(p, 'bootOrder'), `must be 1 or more, got ${bo}`);
      else boot.push({ path: sub(p, 'bootOrder'), order: bo });
    }
    const ports = f.ports ?? [];
    if (ports.length > 0 && f.masquerade === undefined && f.slirp === undefined && f.passt === undefined) {
      e.add(sub(p, 'ports'), 'port forwarding is only supported with masquerade, slirp or passt');
    }
    const portNames = new Set<string>();
    const portKeys = new Set<string>();
    ports.forEach((pt, j) => {
      const pp = sub(sub(p, 'ports'), j);
      const port = pt.port;
      if (port !== undefined && (port < 1 || port > 65535))
        e.add(sub(pp, 'port'), `must be between 1 and 65535, got ${port}`);
      else if (port !== undefined) {
        // the same port and protocol twice would be two NAT rules for one port
        const key = `${pt.protocol ?? 'TCP'}/${port}`;
        if (portKeys.has(key)) e.add(sub(pp, 'port'), `duplicate port ${key}`);
        portKeys.add(key);
      }
      const pn = pt.name;
      if (pn) {
        if (portNames.has(pn)) e.add(sub(pp, 'name'), `duplicate port name "${pn}"`);
        portNames.add(pn);
        if (pn.length > 15 || !DNS1123_LABEL.test(pn))
          e.add(
            sub(pp, 'name'),
            `"${pn}" is not a valid port name (DNS-1123 label of at most 15 characters)`,
          );
      }
    });
  });

  // every network needs an interface (upstream: "every network needs a matching interface")
  const ifacesKnown = !e.reported(sub(dpath, 'interfaces'));
  nets.forEach((n, i) => {
    const name = n.name;
    if (ifacesKnown && name && !ifNames.has(name))
      e.add(
        sub(sub(npath, i), 'name'),
        `no interface in spec.domain.devices.interfaces uses network "${name}"`,
      );
  });
}
