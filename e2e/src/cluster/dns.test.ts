// The cluster DNS of tools/cluster.sh (CoreDNS as kube-system/coredns behind the Service kube-dns, every kubelet's
// clusterDNS; tools/cluster/README.md "Cluster DNS"): a Pod with the default dnsPolicy gets the cluster nameserver and
// search path, and glibc's resolver in it (getent, the virt-launcher image's libc-bin) resolves the API server's
// Service by its full name and a Service of the Pod's own namespace by its short name; a name of the cluster zone
// that does not exist is not found. Runs only when the cluster is up (see node.test.ts).
import { readFileSync } from 'node:fs';
import { IMAGES_JSON, clusterGate, getJson, kubectl, kubectlIn, kubectlTry } from './cluster.js';

const { reason, clusterTest, requireCluster } = clusterGate();
/** tools/cluster/config.sh's DNS_SERVICE_IP: the 10th address of the Service range (KVTS_SERVICE_NET overrides both) */
const DNS_IP = `${process.env.KVTS_SERVICE_NET ?? '10.96.0'}.10`;

describe(`cluster DNS (${reason ? `skipped: ${reason}` : 'CoreDNS, kube-system/kube-dns'})`, () => {
  requireCluster();
  const ns = `kvts-dns-${process.pid}`;
  afterAll(() => {
    if (!reason) kubectlTry('delete', 'namespace', ns, '--wait=true', '--ignore-not-found', '--timeout=120s');
  });

  clusterTest(
    'a Pod resolves kubernetes.default.svc.cluster.local and a Service of its namespace by short name',
    () => {
      const svc = getJson('service', '-n', 'kube-system', 'kube-dns');
      expect(svc?.spec?.clusterIP).toBe(DNS_IP);
      kubectl(
        '-n',
        'kube-system',
        'wait',
        '--for=condition=Available',
        'deployment/coredns',
        '--timeout=60s',
      );
      const images = JSON.parse(readFileSync(IMAGES_JSON, 'utf8')).images; // what load-images imported
      const manifest = [
        { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
        {
          apiVersion: 'v1',
          kind: 'Service',
          metadata: { name: 'dns-probe', namespace: ns },
          spec: { selector: { app: 'dns-probe' }, ports: [{ port: 80, targetPort: 8080 }] },
        },
        {
          apiVersion: 'v1',
          kind: 'Pod',
          // not named like the Service: kubelet's /etc/hosts of the Pod names its own hostname, which getent would
          // find there before asking DNS
          metadata: { name: 'dns-client', namespace: ns, labels: { app: 'dns-probe' } },
          spec: {
            terminationGracePeriodSeconds: 0,
            containers: [
              {
                name: 'probe',
                image: images['virt-launcher'].image,
                imagePullPolicy: 'Never',
                command: ['sleep', '600'],
              },
            ],
          },
        },
      ];
      kubectlIn(JSON.stringify({ apiVersion: 'v1', kind: 'List', items: manifest }), 'apply', '-f', '-');
      kubectl('-n', ns, 'wait', '--for=condition=Ready', 'pod/dns-client', '--timeout=180s');
      const inPod = (...cmd: string[]) => kubectlTry('-n', ns, 'exec', 'dns-client', '--', ...cmd);

      const resolv = inPod('cat', '/etc/resolv.conf').stdout;
      expect(resolv.split('\n')).toContain(`nameserver ${DNS_IP}`);
      expect(resolv).toMatch(
        new RegExp(`^search ${ns}\\.svc\\.cluster\\.local svc\\.cluster\\.local cluster\\.local`, 'm'),
      );

      const api = inPod('getent', 'hosts', 'kubernetes.default.svc.cluster.local');
      expect({ status: api.status, stderr: api.stderr }).toEqual({ status: 0, stderr: '' });
      expect(api.stdout.trim().split(/\s+/)[0]).toBe(
        kubectl('get', 'service', 'kubernetes', '-n', 'default', '-o', 'jsonpath={.spec.clusterIP}'),
      );

      const ip = kubectl('-n', ns, 'get', 'service', 'dns-probe', '-o', 'jsonpath={.spec.clusterIP}');
      const short = inPod('getent', 'hosts', 'dns-probe');
      expect({ status: short.status, stderr: short.stderr }).toEqual({ status: 0, stderr: '' });
      expect(short.stdout.trim().split(/\s+/)).toEqual([ip, `dns-probe.${ns}.svc.cluster.local`]);

      // getent exits 2 when the name is not found
      const missing = inPod('getent', 'hosts', `no-such-service.${ns}.svc.cluster.local`);
      expect(missing.status).toBe(2);
    },
  );
});
