// Compile-time check: node-libvirt's real Connection/Domain satisfy the interfaces the manager
// codes against (tsc fails the build otherwise), and cmd-protocol-style callers can use it.
import type { Connection, Domain } from '@kubevirt-ts/node-libvirt';
import type { LibvirtConnection, LibvirtDomain } from './libvirt.js';

type Assignable<A, B> = A extends B ? true : false;
const connectionFits: Assignable<Connection, LibvirtConnection> = true;
const domainFits: Assignable<Domain, LibvirtDomain> = true;

test('node-libvirt Connection and Domain satisfy the manager interfaces', () => {
  expect(connectionFits && domainFits).toBe(true);
});
