// deploy/ against a real kube-apiserver: the committed files are what tools/gen-deploy.mjs generates,
// all of them apply (server-side, in file-name order), and SubjectAccessReview shows each service account
// can do exactly what its component needs: the full verb x resource matrix is compared, not samples.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import YAML from 'yaml';
import {
  findBinaries,
  kubeRequest,
  serverSideApply,
  startTestEnv,
  withTestEnv,
  KubeRequestError,
  type KubeObject,
  type TestEnv,
} from './index.js';
import * as gen from './gen-deploy.js';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const deployDir = join(repoRoot, 'deploy');
const genDeployUrl = new URL('../../gen-deploy.mjs', import.meta.url).href;

const deployFiles = readdirSync(deployDir)
  .filter((f) => f.endsWith('.yaml'))
  .sort();
const readObjects = (file: string): KubeObject[] =>
  YAML.parseAllDocuments(readFileSync(join(deployDir, file), 'utf8'))
    .map((d) => d.toJSON() as KubeObject)
    .filter((o) => o);

describe('deploy/ is generated', () => {
  it('the committed files are exactly what tools/gen-deploy.mjs generates (run `node tools/gen-deploy.mjs` after a change)', () => {
    const expected = gen.generateDeploy(repoRoot);
    expect(deployFiles).toEqual([...Object.keys(expected.files), ...Object.keys(expected.links)].sort());
    for (const [f, content] of Object.entries(expected.files)) {
      expect({ file: f, content: readFileSync(join(deployDir, f), 'utf8') }).toEqual({ file: f, content });
    }
    // the CRDs are symlinks into crds/ (kubectl follows them; they cannot go stale)
    for (const [f, target] of Object.entries(expected.links))
      expect({ file: f, target: readlinkSync(join(deployDir, f)) }).toEqual({ file: f, target });
    expect(Object.keys(expected.links).length).toBeGreaterThanOrEqual(3);
    expect(gen.checkDeploy(repoRoot, expected)).toEqual([]);
  });

  it('the generator CLI: --check passes on the committed files; a bad flag is named, exit 2, no stack trace', () => {
    const script = fileURLToPath(genDeployUrl);
    const ok = spawnSync(process.execPath, [script, '--check'], { encoding: 'utf8' });
    expect({ status: ok.status, stderr: ok.stderr.trim() }).toEqual({
      status: 0,
      stderr: 'deploy/ is current',
    });
    const bad = spawnSync(process.execPath, [script, '--bogus'], { encoding: 'utf8' });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("gen-deploy: Unknown option '--bogus'");
    expect(bad.stderr).toContain('usage: node tools/gen-deploy.mjs');
    expect(bad.stderr).not.toContain('    at ');
  });

  it('--pin IMAGES.json --out DIR: a copy of deploy/ naming the built images by digest, everything else the same', () => {
    const script = fileURLToPath(genDeployUrl);
    const dir = mkdtempSync(join(tmpdir(), 'kvts-pin-'));
    try {
      const d = (c: string) => `sha256:${c.repeat(64)}`;
      const images = {
        images: {
          'virt-controller': { image: 'localhost/kubevirt-ts/virt-controller:0.1.0-abc', digest: d('1') },
          'virt-handler': { image: 'localhost/kubevirt-ts/virt-handler:0.1.0-abc', digest: d('2') },
          'virt-launcher': { image: 'localhost/kubevirt-ts/virt-launcher:0.1.0-abc-dirty', digest: d('3') },
          'virt-operator': { image: 'localhost/kubevirt-ts/virt-operator:0.1.0-abc', digest: d('4') },
        },
      };
      writeFileSync(join(dir, 'images.json'), JSON.stringify(images));
      const out = join(dir, 'deploy');
      const r = spawnSync(process.execPath, [script, '--pin', join(dir, 'images.json'), '--out', out], {
        encoding: 'utf8',
      });
      expect(r.status).toBe(0);
      const pinned = readdirSync(out).sort();
      expect(pinned).toEqual(deployFiles);
      const strip = (t: string) =>
        t.replace(/\b(ghcr\.io|localhost)\/kubevirt-ts\/(virt-[a-z]+)[@:]\S+/g, 'IMAGE $2');
      const seen = new Set<string>();
      for (const f of pinned) {
        const text = readFileSync(join(out, f), 'utf8');
        // only the images differ from the committed file (the CRD links point at the repository's crds/)
        expect({ f, text: strip(text) }).toEqual({
          f,
          text: strip(readFileSync(join(deployDir, f), 'utf8')),
        });
        for (const m of text.matchAll(/(?:ghcr\.io|localhost)\/kubevirt-ts\/\S+/g)) seen.add(m[0]);
      }
      expect([...seen].sort()).toEqual([
        `localhost/kubevirt-ts/virt-controller@${d('1')}`,
        `localhost/kubevirt-ts/virt-handler@${d('2')}`,
        `localhost/kubevirt-ts/virt-launcher@${d('3')}`,
        `localhost/kubevirt-ts/virt-operator@${d('4')}`,
      ]);
      // the committed deploy/ is untouched and still current
      expect(spawnSync(process.execPath, [script, '--check'], { encoding: 'utf8' }).status).toBe(0);
      // a list without a digest (an image built before digests were recorded) is refused, naming the field
      delete (images.images['virt-handler'] as { digest?: string }).digest;
      writeFileSync(join(dir, 'images.json'), JSON.stringify(images));
      const bad = spawnSync(process.execPath, [script, '--pin', join(dir, 'images.json'), '--out', out], {
        encoding: 'utf8',
      });
      expect(bad.status).toBe(1);
      expect(bad.stderr).toContain('images.json: images.virt-handler.digest: want sha256:<64 hex digits>');
      const noOut = spawnSync(process.execPath, [script, '--pin', join(dir, 'images.json')], {
        encoding: 'utf8',
      });
      expect(noOut.status).toBe(2);
      expect(noOut.stderr).toContain('gen-deploy: --pin needs --out DIR');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('has the parts an operator applies, in an order that works (namespace and CRDs first)', () => {
    const kinds = deployFiles.flatMap((f) => readObjects(f).map((o) => `${o.kind}/${o.metadata.name}`));
    expect(kinds[0]).toBe(`Namespace/${gen.NAMESPACE}`);
    const firstNamespaced = kinds.findIndex((k) => k.startsWith('ServiceAccount/'));
    expect(kinds.slice(1, firstNamespaced).every((k) => k.startsWith('CustomResourceDefinition/'))).toBe(
      true,
    );
    for (const want of [
      `ServiceAccount/${gen.OPERATOR}`,
      `Role/${gen.OPERATOR}`,
      `RoleBinding/${gen.OPERATOR}`,
      'Deployment/virt-operator',
      `ServiceAccount/${gen.CONTROLLER}`,
      `ServiceAccount/${gen.HANDLER}`,
      `ClusterRole/${gen.CONTROLLER}`,
      `ClusterRoleBinding/${gen.CONTROLLER}`,
      `Role/${gen.CONTROLLER}`,
      `RoleBinding/${gen.CONTROLLER}`,
      `ClusterRole/${gen.HANDLER}`,
      `ClusterRoleBinding/${gen.HANDLER}`,
      'Deployment/virt-controller',
      'PodDisruptionBudget/virt-controller',
      'DaemonSet/virt-handler',
      `Service/${gen.WEBHOOK_SERVICE}`,
      `MutatingWebhookConfiguration/${gen.MUTATING_WEBHOOK}`,
      `ValidatingWebhookConfiguration/${gen.VALIDATING_WEBHOOK}`,
      'ClusterRole/kubevirt.io:admin',
      'ClusterRole/kubevirt.io:edit',
      'ClusterRole/kubevirt.io:view',
      'ClusterRole/kubevirt.io:migrate',
      'ClusterRole/kubevirt.io:default',
      'ClusterRoleBinding/kubevirt.io:default',
      'ClusterRole/instancetype.kubevirt.io:view',
      'ClusterRoleBinding/instancetype.kubevirt.io:view',
      'Service/virt-api',
      'APIService/v1.subresources.kubevirt.io',
      'CustomResourceDefinition/virtualmachines.kubevirt.io',
      'CustomResourceDefinition/virtualmachineinstances.kubevirt.io',
      'CustomResourceDefinition/virtualmachineinstancemigrations.kubevirt.io',
      'CustomResourceDefinition/kubevirts.kubevirt.io',
      ...Object.entries(gen.NOT_IMPLEMENTED_RESOURCES).flatMap(([group, plurals]) =>
        plurals.map((p) => `CustomResourceDefinition/${p}.${group}`),
      ),
    ]) {
      expect(kinds).toContain(want);
    }
    // virt-handler's Role: only the KubeVirt CR's version for /healthz; virt-operator's cluster-wide rights: the
    // caBundles, the common instance types and preferences
    expect(kinds).toContain(`Role/${gen.HANDLER}`);
    expect(kinds).toContain(`ClusterRole/${gen.OPERATOR}`);
  });

  it('the validating webhook refuses to create each served kind not implemented (an opaque spec in crds/)', () => {
    const crds = readdirSync(join(deployDir, 'crds')).flatMap((f) =>
      readObjects(join('crds', f)),
    ) as unknown as {
      spec: {
        group: string;
        names: { plural: string };
        versions: { schema: { openAPIV3Schema: { properties: { spec: { properties?: unknown } } } } }[];
      };
    }[];
    const opaque: Record<string, string[]> = {};
    for (const c of crds)
      if (!c.spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties)
        (opaque[c.spec.group] ??= []).push(c.spec.names.plural);
    const sorted = (m: Record<string, string[]>) =>
      Object.fromEntries(Object.entries(m).map(([g, ps]) => [g, [...ps].sort()]));
    expect(sorted(opaque)).toEqual(sorted(gen.NOT_IMPLEMENTED_RESOURCES));
    const vwc = readObjects('50-webhooks.yaml').find(
      (o) => o.kind === 'ValidatingWebhookConfiguration',
    ) as unknown as {
      webhooks: {
        sideEffects: string;
        rules: { apiGroups: string[]; resources: string[]; operations: string[] }[];
      }[];
    };
    expect(vwc.webhooks[0]!.sideEffects).toBe('None');
    for (const [group, plurals] of Object.entries(opaque))
      for (const p of plurals)
        expect({
          group,
          p,
          refused: vwc.webhooks[0]!.rules.some(
            (r) => r.apiGroups.includes(group) && r.resources.includes(p) && r.operations.includes('CREATE'),
          ),
        }).toEqual({ group, p, refused: true });
  });

  it('every RBAC rule carries its reason as a comment', () => {
    for (const f of deployFiles.filter((x) => x.includes('rbac'))) {
      const lines = readFileSync(join(deployDir, f), 'utf8').split('\n');
      lines.forEach((l, i) => {
        if (/^ {2}- apiGroups:/.test(l))
          expect({ file: f, line: i + 1, before: lines[i - 1] }).toMatchObject({
            before: expect.stringMatching(/^ {2}# \S.*: /),
          });
      });
    }
  });
});

// ---------------------------------------------------------------- on a real API server

type Need = {
  group: string;
  resource: string;
  subresource?: string;
  verbs: string[];
  namespace?: string;
  name?: string;
};
const ALL_VERBS = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection'];

/** What each component needs (from its job, written independently of deploy/'s rules). */
const NEEDS: Record<'controller' | 'handler' | 'operator', Need[]> = {
  controller: [
    {
      group: 'kubevirt.io',
      resource: 'virtualmachines',
      verbs: ['get', 'list', 'watch', 'update', 'patch', 'create', 'delete'],
    },
    // the mutating webhook lists the presets of a new VMI's namespace
    { group: 'kubevirt.io', resource: 'virtualmachineinstancepresets', verbs: ['list'] },
    // the pool controller: follows pools, writes their status (and creates/deletes their VMs, above)
    { group: 'pool.kubevirt.io', resource: 'virtualmachinepools', verbs: ['get', 'list', 'watch'] },
    {
      group: 'pool.kubevirt.io',
      resource: 'virtualmachinepools',
      subresource: 'status',
      verbs: ['update', 'patch'],
    },
    { group: 'kubevirt.io', resource: 'virtualmachines', subresource: 'status', verbs: ['update', 'patch'] },
    {
      group: 'kubevirt.io',
      resource: 'virtualmachineinstances',
      verbs: ['get', 'list', 'watch', 'create', 'delete', 'update', 'patch'],
    },
    {
      group: 'kubevirt.io',
      resource: 'virtualmachineinstancemigrations',
      verbs: ['get', 'list', 'watch', 'update', 'patch'],
    },
    {
      group: 'kubevirt.io',
      resource: 'virtualmachineinstancemigrations',
      subresource: 'status',
      verbs: ['update', 'patch'],
    },
    // the replica set controller: follows replica sets, writes their status
    {
      group: 'kubevirt.io',
      resource: 'virtualmachineinstancereplicasets',
      verbs: ['get', 'list', 'watch'],
    },
    {
      group: 'kubevirt.io',
      resource: 'virtualmachineinstancereplicasets',
      subresource: 'status',
      verbs: ['update', 'patch'],
    },
    { group: '', resource: 'pods', verbs: ['get', 'list', 'watch', 'create', 'delete'] },
    { group: '', resource: 'persistentvolumeclaims', verbs: ['get', 'list', 'watch'] },
    // the VMI controller: the binding mode of a Pending claim's StorageClass
    { group: 'storage.k8s.io', resource: 'storageclasses', verbs: ['get'] },
    // the DataVolumes of dataVolumeTemplates (created, owned by the VM; an informer follows their phase);
    // inferFromVolume: the labels of a DataVolume, its DataSource or VolumeSnapshot, read by the mutating webhook
    { group: 'cdi.kubevirt.io', resource: 'datavolumes', verbs: ['get', 'list', 'watch', 'create'] },
    { group: 'cdi.kubevirt.io', resource: 'datasources', verbs: ['get'] },
    { group: 'snapshot.storage.k8s.io', resource: 'volumesnapshots', verbs: ['get'] },
    // instance types and preferences: read by the webhook and the VM controller, stored in ControllerRevisions
    ...[
      'virtualmachineinstancetypes',
      'virtualmachineclusterinstancetypes',
      'virtualmachinepreferences',
      'virtualmachineclusterpreferences',
    ].map((resource) => ({ group: 'instancetype.kubevirt.io', resource, verbs: ['get'] })),
    { group: 'apps', resource: 'controllerrevisions', verbs: ['get', 'create'] },
    // the migration controller: the MigrationPolicy matching a VMI and the labels of its namespace, per hand-off
    { group: 'migrations.kubevirt.io', resource: 'migrationpolicies', verbs: ['list'] },
    { group: '', resource: 'namespaces', verbs: ['get'] },
    // patch: the node controller labels a node whose virt-handler stopped heartbeating unschedulable
    { group: '', resource: 'nodes', verbs: ['get', 'list', 'watch', 'patch'] },
    { group: '', resource: 'events', verbs: ['create', 'patch'] },
    { group: 'events.k8s.io', resource: 'events', verbs: ['create', 'patch'] },
    { group: 'coordination.k8s.io', resource: 'leases', namespace: 'kubevirt-ts', verbs: ['create'] },
    {
      group: 'coordination.k8s.io',
      resource: 'leases',
      namespace: 'kubevirt-ts',
      name: 'kubevirt-ts-controller',
      verbs: ['get', 'update', 'create'],
    },
    // the cluster's configuration: the KubeVirt CR, read live
    {
      group: 'kubevirt.io',
      resource: 'kubevirts',
      namespace: 'kubevirt-ts',
      name: 'kubevirt',
      verbs: ['get', 'list', 'watch'],
    },
    // the admission webhooks' TLS: its Secret (made once, read and renewed by every replica); the caBundle of
    // kubevirt-ts's two webhook configurations is read (a new CA is served once virt-operator published it)
    { group: '', resource: 'secrets', namespace: 'kubevirt-ts', verbs: ['create'] },
    {
      group: '',
      resource: 'secrets',
      namespace: 'kubevirt-ts',
      name: 'kubevirt-ts-webhook-certs',
      verbs: ['get', 'update', 'create'],
    },
    // the mutual TLS with virt-handler (--manage-handler-certs): the CA, the handlers' serving and client
    // certificates, read and renewed by every replica (made with the namespace-wide create the first time)
    ...['kubevirt-ts-handler-ca', 'virt-handler-certs', 'virt-handler-client-certs'].map((name) => ({
      group: '',
      resource: 'secrets',
      namespace: 'kubevirt-ts',
      name,
      verbs: ['get', 'update', 'create'],
    })),
    {
      group: 'admissionregistration.k8s.io',
      resource: 'mutatingwebhookconfigurations',
      name: 'kubevirt-ts-mutator',
      verbs: ['get'],
    },
    {
      group: 'admissionregistration.k8s.io',
      resource: 'validatingwebhookconfigurations',
      name: 'kubevirt-ts-validator',
      verbs: ['get'],
    },
    // serving subresources.kubevirt.io (23-rbac-subresources.yaml): migrate creates a migration, every request
    // is authorized by a SubjectAccessReview, the front-proxy settings come from kube-system
    { group: 'kubevirt.io', resource: 'virtualmachineinstancemigrations', verbs: ['create'] },
    { group: 'authorization.k8s.io', resource: 'subjectaccessreviews', verbs: ['create'] },
    {
      group: '',
      resource: 'configmaps',
      namespace: 'kube-system',
      name: 'extension-apiserver-authentication',
      verbs: ['get', 'list', 'watch'],
    },
    // its own APIService's caBundle, read as the webhooks'
    {
      group: 'apiregistration.k8s.io',
      resource: 'apiservices',
      name: 'v1.subresources.kubevirt.io',
      verbs: ['get'],
    },
  ],
  handler: [
    // update/patch: the VMI's status (no status subresource on the VMI, as upstream); patch: the migration hand-off
    // moves the VMI's kubevirt.io/nodeName label to the target node
    {
      group: 'kubevirt.io',
      resource: 'virtualmachineinstances',
      verbs: ['get', 'list', 'watch', 'update', 'patch'],
    },
    { group: 'kubevirt.io', resource: 'virtualmachineinstancemigrations', verbs: ['get', 'list', 'watch'] },
    // no Pods: it finds its launchers by their sockets on its node, and a VMI's Pod by status.activePods
    { group: '', resource: 'nodes', verbs: ['get', 'patch'] },
    { group: '', resource: 'events', verbs: ['create', 'patch'] },
    { group: 'events.k8s.io', resource: 'events', verbs: ['create', 'patch'] },
    // upstream's /healthz: the KubeVirt CR's resourceVersion it has seen (this CR only)
    {
      group: 'kubevirt.io',
      resource: 'kubevirts',
      namespace: 'kubevirt-ts',
      name: 'kubevirt',
      verbs: ['get', 'list', 'watch'],
    },
  ],
  operator: [
    // the KubeVirt CRs of the install namespace: their status, and the default CR when there is none
    {
      group: 'kubevirt.io',
      resource: 'kubevirts',
      namespace: 'kubevirt-ts',
      verbs: ['get', 'list', 'watch', 'create'],
    },
    {
      group: 'kubevirt.io',
      resource: 'kubevirts',
      subresource: 'status',
      namespace: 'kubevirt-ts',
      verbs: ['update'],
    },
    // the components' rollout, read only
    { group: 'apps', resource: 'deployments', namespace: 'kubevirt-ts', verbs: ['get', 'list', 'watch'] },
    { group: 'apps', resource: 'daemonsets', namespace: 'kubevirt-ts', verbs: ['get', 'list', 'watch'] },
    // the webhook CA: read from virt-controller's Secret, published as the caBundle of the two webhook
    // configurations and the subresource APIService (the installer's right, not the serving component's)
    {
      group: '',
      resource: 'secrets',
      namespace: 'kubevirt-ts',
      name: 'kubevirt-ts-webhook-certs',
      verbs: ['get', 'list', 'watch'],
    },
    ...[
      ['admissionregistration.k8s.io', 'mutatingwebhookconfigurations', 'kubevirt-ts-mutator'],
      ['admissionregistration.k8s.io', 'validatingwebhookconfigurations', 'kubevirt-ts-validator'],
      ['apiregistration.k8s.io', 'apiservices', 'v1.subresources.kubevirt.io'],
    ].map(([group, resource, name]) => ({
      group: group!,
      resource: resource!,
      name,
      verbs: ['get', 'list', 'watch', 'patch'],
    })),
    // the common instance types and preferences it installs, keeps and removes (commonInstancetypesDeployment)
    ...['virtualmachineclusterinstancetypes', 'virtualmachineclusterpreferences'].map((resource) => ({
      group: 'instancetype.kubevirt.io',
      resource,
      verbs: ['get', 'list', 'watch', 'create', 'update', 'delete'],
    })),
  ],
};

/**
 * What every signed-in user may do, service accounts included (upstream's kubevirt.io:default and
 * instancetype.kubevirt.io:view, bound to system:authenticated): read the KubeVirt CRs, the subresource API's version
 * and guestfs image, the cluster-wide instance types and preferences.
 */
const EVERYONE: Need[] = [
  { group: 'kubevirt.io', resource: 'kubevirts', verbs: ['get', 'list'] },
  { group: 'subresources.kubevirt.io', resource: 'version', verbs: ['get', 'list'] },
  { group: 'subresources.kubevirt.io', resource: 'guestfs', verbs: ['get', 'list'] },
  {
    group: 'instancetype.kubevirt.io',
    resource: 'virtualmachineclusterinstancetypes',
    verbs: ['get', 'list', 'watch'],
  },
  {
    group: 'instancetype.kubevirt.io',
    resource: 'virtualmachineclusterpreferences',
    verbs: ['get', 'list', 'watch'],
  },
];

/** Every (resource, namespace, name) the matrix checks: what they need plus what they must never get. */
const TARGETS: Omit<Need, 'verbs'>[] = [
  ...new Map(
    [...NEEDS.controller, ...NEEDS.handler, ...NEEDS.operator, ...EVERYONE].map(
      ({ verbs: _v, ...t }) => [JSON.stringify(t), t] as const,
    ),
  ).values(),
  { group: '', resource: 'secrets' },
  { group: '', resource: 'secrets', namespace: 'kubevirt-ts' },
  { group: '', resource: 'secrets', namespace: 'kubevirt-ts', name: 'other-secret' },
  { group: 'admissionregistration.k8s.io', resource: 'mutatingwebhookconfigurations' },
  {
    group: 'admissionregistration.k8s.io',
    resource: 'validatingwebhookconfigurations',
    name: 'someone-elses',
  },
  { group: '', resource: 'configmaps' },
  { group: '', resource: 'configmaps', namespace: 'kubevirt-ts', name: 'other-config' },
  { group: 'kubevirt.io', resource: 'kubevirts' },
  { group: 'kubevirt.io', resource: 'kubevirts', namespace: 'kubevirt-ts', name: 'other' },
  { group: 'kubevirt.io', resource: 'kubevirts', subresource: 'status' },
  { group: '', resource: 'pods', subresource: 'exec' },
  { group: '', resource: 'pods', subresource: 'log' },
  { group: '', resource: 'pods', subresource: 'status' },
  { group: '', resource: 'nodes', subresource: 'status' },
  { group: '', resource: 'nodes', subresource: 'proxy' },
  { group: '', resource: 'services' },
  { group: '', resource: 'serviceaccounts' },
  { group: '', resource: 'serviceaccounts', subresource: 'token' },
  { group: '', resource: 'namespaces' },
  { group: '', resource: 'persistentvolumes' },
  {
    group: 'coordination.k8s.io',
    resource: 'leases',
    namespace: 'kube-system',
    name: 'kube-controller-manager',
  },
  { group: 'coordination.k8s.io', resource: 'leases', namespace: 'kubevirt-ts', name: 'someone-else' },
  { group: 'apps', resource: 'deployments' },
  { group: 'apps', resource: 'daemonsets' },
  { group: 'rbac.authorization.k8s.io', resource: 'clusterroles' },
  { group: 'rbac.authorization.k8s.io', resource: 'rolebindings' },
  { group: 'apiextensions.k8s.io', resource: 'customresourcedefinitions' },
  { group: 'apiregistration.k8s.io', resource: 'apiservices' },
  { group: 'apiregistration.k8s.io', resource: 'apiservices', name: 'v1.metrics.k8s.io' },
];

/** A need covers a check when group/resource/subresource/verb match and its scope contains the check's:
 *  no namespace = every namespace; a namespace = any name in it; a name = that object only. */
function expectedAllowed(who: keyof typeof NEEDS, t: Omit<Need, 'verbs'>, verb: string): boolean {
  return [...NEEDS[who], ...EVERYONE].some(
    (n) =>
      n.group === t.group &&
      n.resource === t.resource &&
      n.subresource === t.subresource &&
      n.verbs.includes(verb) &&
      (n.namespace === undefined || n.namespace === t.namespace) &&
      (n.name === undefined || n.name === t.name),
  );
}

/** A grant as upstream v1.9's user roles write it: resources as RBAC names them (`resource/subresource`). */
type Grant = { group: string; resources: string[]; verbs: string[] };
const SUB = 'subresources.kubevirt.io';
const READ = ['get', 'list', 'watch'];
const WRITE = [...READ, 'create', 'update', 'patch', 'delete'];
/** the kinds upstream's admin, edit and view name beyond migrations (most not served by kubevirt-ts yet) */
const KINDS: [string, string[]][] = [
  [
    'kubevirt.io',
    [
      'virtualmachines',
      'virtualmachineinstances',
      'virtualmachineinstancepresets',
      'virtualmachineinstancereplicasets',
    ],
  ],
  [
    'snapshot.kubevirt.io',
    ['virtualmachinesnapshots', 'virtualmachinesnapshotcontents', 'virtualmachinerestores'],
  ],
  ['backup.kubevirt.io', ['virtualmachinebackups', 'virtualmachinebackuptrackers']],
  ['export.kubevirt.io', ['virtualmachineexports']],
  ['clone.kubevirt.io', ['virtualmachineclones']],
  [
    'instancetype.kubevirt.io',
    [
      'virtualmachineinstancetypes',
      'virtualmachineclusterinstancetypes',
      'virtualmachinepreferences',
      'virtualmachineclusterpreferences',
    ],
  ],
  ['pool.kubevirt.io', ['virtualmachinepools']],
];
const kinds = (verbs: string[]): Grant[] => KINDS.map(([group, resources]) => ({ group, resources, verbs }));
const GUEST_READS = [
  'virtualmachineinstances/guestosinfo',
  'virtualmachineinstances/filesystemlist',
  'virtualmachineinstances/userlist',
  'virtualmachineinstances/sev/fetchcertchain',
  'virtualmachineinstances/sev/querylaunchmeasurement',
  'virtualmachines/objectgraph',
  'virtualmachineinstances/objectgraph',
];
/** what edit and admin may do through subresources.kubevirt.io besides reads: everything but migrate */
const ACTIONS: Grant[] = [
  {
    group: SUB,
    resources: [
      'virtualmachineinstances/pause',
      'virtualmachineinstances/unpause',
      'virtualmachineinstances/addvolume',
      'virtualmachineinstances/removevolume',
      'virtualmachineinstances/freeze',
      'virtualmachineinstances/unfreeze',
      'virtualmachineinstances/softreboot',
      'virtualmachineinstances/reset',
      'virtualmachineinstances/sev/setupsession',
      'virtualmachineinstances/sev/injectlaunchsecret',
      'virtualmachineinstances/evacuate/cancel',
      'virtualmachines/start',
      'virtualmachines/stop',
      'virtualmachines/restart',
      'virtualmachines/addvolume',
      'virtualmachines/removevolume',
      'virtualmachines/memorydump',
      'virtualmachines/evacuate/cancel',
      'expand-vm-spec',
    ],
    verbs: ['update'],
  },
  { group: SUB, resources: ['virtualmachines/expand-spec', 'virtualmachines/portforward'], verbs: ['get'] },
  { group: 'kubevirt.io', resources: ['virtualmachineinstancemigrations'], verbs: READ },
  { group: 'migrations.kubevirt.io', resources: ['migrationpolicies'], verbs: READ },
];
const STREAMS = [
  'virtualmachineinstances/console',
  'virtualmachineinstances/vnc',
  'virtualmachineinstances/portforward',
  'virtualmachineinstances/usbredir',
];
/** upstream v1.9's user roles, written from its definitions independently of gen-deploy.ts */
const USER_GRANTS: Record<'view' | 'edit' | 'admin' | 'migrate' | 'everyone', Grant[]> = {
  view: [
    { group: 'kubevirt.io', resources: ['kubevirts'], verbs: ['get', 'list'] },
    { group: SUB, resources: ['virtualmachines/expand-spec', ...GUEST_READS], verbs: ['get'] },
    { group: SUB, resources: ['expand-vm-spec'], verbs: ['update'] },
    ...kinds(READ),
    { group: 'kubevirt.io', resources: ['virtualmachineinstancemigrations'], verbs: READ },
    { group: 'migrations.kubevirt.io', resources: ['migrationpolicies'], verbs: READ },
    { group: 'plugin.kubevirt.io', resources: ['plugins'], verbs: READ },
  ],
  edit: [
    { group: SUB, resources: [...STREAMS, ...GUEST_READS], verbs: ['get'] },
    ...ACTIONS,
    ...kinds(WRITE),
    { group: 'kubevirt.io', resources: ['kubevirts'], verbs: ['get', 'list'] },
  ],
  admin: [
    {
      group: SUB,
      resources: [...STREAMS, 'virtualmachineinstances/vnc/screenshot', ...GUEST_READS],
      verbs: ['get'],
    },
    ...ACTIONS,
    ...kinds(ALL_VERBS),
    { group: 'plugin.kubevirt.io', resources: ['plugins'], verbs: ALL_VERBS },
  ],
  migrate: [
    { group: SUB, resources: ['virtualmachines/migrate'], verbs: ['update'] },
    { group: 'kubevirt.io', resources: ['virtualmachineinstancemigrations'], verbs: ALL_VERBS },
  ],
  // kubevirt.io:default and instancetype.kubevirt.io:view, bound to system:authenticated (as EVERYONE above)
  everyone: EVERYONE.map((n) => ({ group: n.group, resources: [n.resource], verbs: n.verbs })),
};
/** resources checked at the cluster scope (no namespace) */
const CLUSTER_SCOPED = [
  'version',
  'guestfs',
  'virtualmachineclusterinstancetypes',
  'virtualmachineclusterpreferences',
];
/** every resource a user role names, plus what no user role may touch (status, the components' secrets...) */
const USER_TARGETS: { group: string; resource: string; subresource?: string }[] = [
  ...new Set(
    Object.values(USER_GRANTS).flatMap((gs) => gs.flatMap((g) => g.resources.map((r) => `${g.group} ${r}`))),
  ),
  'kubevirt.io virtualmachines/status',
  'kubevirt.io virtualmachineinstances/status',
  'kubevirt.io virtualmachineinstancemigrations/status',
  'kubevirt.io kubevirts/status',
  'subresources.kubevirt.io virtualmachineinstances/migrate',
  ' pods',
  ' pods/exec',
  ' secrets',
  'rbac.authorization.k8s.io rolebindings',
].map((s) => {
  const [group, combined] = s.split(' ') as [string, string];
  const [resource, ...sub] = combined.split('/');
  return { group, resource: resource!, ...(sub.length ? { subresource: sub.join('/') } : {}) };
});
/** whether `grants` allow `verb` on the target (RBAC's matching: group, `resource/subresource`, verb) */
const userMay = (grants: Grant[], t: (typeof USER_TARGETS)[number], verb: string): boolean =>
  grants.some(
    (g) =>
      g.group === t.group &&
      g.resources.includes(t.subresource ? `${t.resource}/${t.subresource}` : t.resource) &&
      g.verbs.includes(verb),
  );

let env: TestEnv;
let kc: KubeConfig;

beforeAll(async () => {
  env = await startTestEnv();
  kc = env.kubeConfig();
}, 120000);
afterAll(async () => {
  await env?.stop();
});

describe('deploy/ on a real kube-apiserver', () => {
  it('applies server-side, file by file in name order', async () => {
    for (const f of deployFiles) {
      const applied = await serverSideApply(kc, readObjects(f), { fieldManager: 'kubevirt-ts-deploy' });
      expect(applied.length).toBe(readObjects(f).length);
    }
    const dep = await kubeRequest<{ spec: { replicas: number } }>(
      kc,
      'GET',
      '/apis/apps/v1/namespaces/kubevirt-ts/deployments/virt-controller',
    );
    expect(dep.spec.replicas).toBe(2);
    const ds = await kubeRequest<{
      spec: {
        template: {
          spec: {
            volumes: { name: string; hostPath?: { path: string } }[];
            containers: { volumeMounts?: { name: string; mountPropagation?: string }[] }[];
          };
        };
      };
    }>(kc, 'GET', '/apis/apps/v1/namespaces/kubevirt-ts/daemonsets/virt-handler');
    // no Bidirectional propagation anywhere (nothing the handler mounts in its container reaches the host): the
    // kubelet's pods dir HostToContainer (it sees the container disks bound from the host's mount namespace)
    const mounts = ds.spec.template.spec.containers.flatMap((c) => c.volumeMounts ?? []);
    expect(mounts.filter((m) => m.mountPropagation === 'Bidirectional')).toEqual([]);
    expect(mounts.find((m) => m.name === 'kubelet-pods')?.mountPropagation).toBe('HostToContainer');
    expect(
      ds.spec.template.spec.volumes
        .filter((v) => v.hostPath)
        .map((v) => v.hostPath?.path)
        .sort(),
    ).toEqual([
      '/var/lib/kubelet/device-plugins',
      '/var/lib/kubelet/pods',
      '/var/lib/kubelet/seccomp',
      '/var/run/kubevirt',
    ]);
    // applying again changes nothing and does not fail (idempotent)
    for (const f of deployFiles)
      await serverSideApply(kc, readObjects(f), { fieldManager: 'kubevirt-ts-deploy' });
  });

  it.each(['controller', 'handler', 'operator'] as const)(
    'the %s service account can do exactly what it needs (SubjectAccessReview matrix)',
    async (who) => {
      const sa = { controller: gen.CONTROLLER, handler: gen.HANDLER, operator: gen.OPERATOR }[who];
      const authz = kc.makeApiClient(AuthorizationV1Api);
      const mismatches: string[] = [];
      let checked = 0;
      for (const t of TARGETS) {
        for (const verb of ALL_VERBS) {
          const namespaced = ![
            'nodes',
            'namespaces',
            'persistentvolumes',
            'storageclasses',
            'clusterroles',
            'customresourcedefinitions',
            'apiservices',
            'mutatingwebhookconfigurations',
            'validatingwebhookconfigurations',
            'subjectaccessreviews',
            'version',
            'guestfs',
            'virtualmachineclusterinstancetypes',
            'virtualmachineclusterpreferences',
          ].includes(t.resource);
          const review = await authz.createSubjectAccessReview({
            body: {
              spec: {
                user: `system:serviceaccount:${gen.NAMESPACE}:${sa}`,
                groups: [
                  'system:serviceaccounts',
                  `system:serviceaccounts:${gen.NAMESPACE}`,
                  'system:authenticated',
                ],
                resourceAttributes: {
                  group: t.group,
                  resource: t.resource,
                  subresource: t.subresource,
                  verb,
                  name: t.name,
                  namespace: namespaced ? (t.namespace ?? 'some-user-namespace') : undefined,
                },
              },
            },
          });
          checked++;
          const allowed = review.status?.allowed === true;
          const want = expectedAllowed(who, t, verb);
          if (allowed !== want)
            mismatches.push(
              `${want ? 'denied but needed' : 'allowed but not needed'}: ${verb} ${JSON.stringify(t)}`,
            );
        }
      }
      expect(checked).toBe(TARGETS.length * ALL_VERBS.length);
      expect(mismatches).toEqual([]);
    },
    120000,
  );

  it('spot checks by acting as the service accounts (impersonation): lease yes, secrets and node deletion no', async () => {
    // client-node has no impersonation: send the headers ourselves
    const req = async (sa: string, method: string, path: string, body?: unknown): Promise<number> => {
      try {
        await kubeRequestAs(kc, `system:serviceaccount:${gen.NAMESPACE}:${sa}`, method, path, body);
        return 200;
      } catch (e) {
        if (e instanceof KubeRequestError) return e.status;
        throw e;
      }
    };
    const lease = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: gen.LEASE_NAME, namespace: gen.NAMESPACE },
      spec: { holderIdentity: 'virt-controller-0', leaseDurationSeconds: 15 },
    };
    expect(
      await req(
        gen.CONTROLLER,
        'POST',
        `/apis/coordination.k8s.io/v1/namespaces/${gen.NAMESPACE}/leases`,
        lease,
      ),
    ).toBe(200);
    expect(
      await req(
        gen.CONTROLLER,
        'GET',
        `/apis/coordination.k8s.io/v1/namespaces/${gen.NAMESPACE}/leases/${gen.LEASE_NAME}`,
      ),
    ).toBe(200);
    const kubevirts = `/apis/kubevirt.io/v1/namespaces/${gen.NAMESPACE}/kubevirts`;
    // the CR is not there yet (virt-operator creates it): allowed, 404
    expect(await req(gen.CONTROLLER, 'GET', `${kubevirts}/${gen.KUBEVIRT_CR}`)).toBe(404);
    expect(
      await req(gen.CONTROLLER, 'GET', `${kubevirts}?fieldSelector=metadata.name%3D${gen.KUBEVIRT_CR}`),
    ).toBe(200);
    // every signed-in user may list them (kubevirt.io:default, as upstream): the CR is no secret
    expect(await req(gen.CONTROLLER, 'GET', kubevirts)).toBe(200);
    expect(
      await req(gen.CONTROLLER, 'POST', kubevirts, { apiVersion: 'kubevirt.io/v1', kind: 'KubeVirt' }),
    ).toBe(403);
    expect(await req(gen.CONTROLLER, 'GET', '/api/v1/namespaces/default/secrets')).toBe(403);
    // its webhook Secret only: allowed (404, none yet), another Secret of its namespace denied
    expect(
      await req(gen.CONTROLLER, 'GET', `/api/v1/namespaces/${gen.NAMESPACE}/secrets/${gen.WEBHOOK_SECRET}`),
    ).toBe(404);
    expect(await req(gen.CONTROLLER, 'GET', `/api/v1/namespaces/${gen.NAMESPACE}/secrets/other`)).toBe(403);
    expect(await req(gen.CONTROLLER, 'GET', `/api/v1/namespaces/${gen.NAMESPACE}/secrets`)).toBe(403);
    expect(await req(gen.HANDLER, 'GET', '/api/v1/namespaces/default/secrets')).toBe(403);
    expect(await req(gen.HANDLER, 'DELETE', '/api/v1/nodes/any-node')).toBe(403);
    expect(await req(gen.HANDLER, 'GET', '/api/v1/nodes/any-node')).toBe(404); // allowed, just no such node
    expect(
      await req(gen.HANDLER, 'POST', '/api/v1/namespaces/default/pods', {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'x' },
        spec: { containers: [{ name: 'c', image: 'x' }] },
      }),
    ).toBe(403);
    // virt-handler reads no Pod at all: it knows its launchers from their sockets on its node
    expect(await req(gen.HANDLER, 'GET', '/api/v1/namespaces/default/pods')).toBe(403);
    expect(await req(gen.HANDLER, 'GET', '/api/v1/pods')).toBe(403);
    // the caBundles: virt-controller (which serves the webhooks) may read but not change them; virt-operator may
    const hooks = `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${gen.VALIDATING_WEBHOOK}`;
    const apiService = '/apis/apiregistration.k8s.io/v1/apiservices/v1.subresources.kubevirt.io';
    for (const path of [hooks, apiService]) {
      expect(await req(gen.CONTROLLER, 'GET', path)).toBe(200);
      expect(await req(gen.CONTROLLER, 'PATCH', path, {})).toBe(403);
      expect(await req(gen.OPERATOR, 'PATCH', path, {})).toBe(200);
    }
    expect(await req(gen.OPERATOR, 'DELETE', hooks)).toBe(403);
  });

  describe("people: upstream's user roles", () => {
    // user-<role> is bound to kubevirt.io:<role> in "default" (a RoleBinding to the ClusterRole, as users of upstream
    // write them); user-nobody to nothing: only what every signed-in user gets
    beforeAll(async () => {
      for (const role of ['view', 'edit', 'admin', 'migrate'])
        await kubeRequest(kc, 'POST', '/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings', {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'RoleBinding',
          metadata: { name: `user-${role}` },
          roleRef: {
            apiGroup: 'rbac.authorization.k8s.io',
            kind: 'ClusterRole',
            name: `kubevirt.io:${role}`,
          },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: `user-${role}` }],
        });
    });

    it.each(['view', 'edit', 'admin', 'migrate', 'nobody'] as const)(
      'user-%s (bound to kubevirt.io:<that> in "default"; nobody: to nothing) can do exactly what upstream allows, there and elsewhere (SubjectAccessReview matrix)',
      async (role) => {
        const user = `user-${role}`;
        const authz = kc.makeApiClient(AuthorizationV1Api);
        const mismatches: string[] = [];
        let checked = 0;
        for (const t of USER_TARGETS) {
          // namespaced kinds: in the bound namespace and in another one; cluster-wide ones: at the cluster scope
          for (const namespace of CLUSTER_SCOPED.includes(t.resource)
            ? [undefined]
            : ['default', 'other-namespace']) {
            const got = await Promise.all(
              ALL_VERBS.map(
                async (verb) =>
                  (
                    await authz.createSubjectAccessReview({
                      body: {
                        spec: {
                          user,
                          groups: ['system:authenticated'],
                          resourceAttributes: { ...t, verb, namespace },
                        },
                      },
                    })
                  ).status?.allowed === true,
              ),
            );
            ALL_VERBS.forEach((verb, i) => {
              checked++;
              const want =
                (namespace === 'default' && role !== 'nobody' && userMay(USER_GRANTS[role], t, verb)) ||
                userMay(USER_GRANTS.everyone, t, verb);
              if (got[i] !== want)
                mismatches.push(
                  `${want ? 'denied' : 'allowed'}: ${verb} ${t.group}/${t.resource}${t.subresource ? `/${t.subresource}` : ''} in ${namespace ?? 'the cluster'}`,
                );
            });
          }
        }
        expect(checked).toBeGreaterThan(USER_TARGETS.length * ALL_VERBS.length);
        expect(mismatches).toEqual([]);
      },
      180000,
    );

    it('kubevirt.io:admin/edit/view aggregate into the built-in roles; migrate does not; default and instancetype view are bound to every signed-in user', () => {
      // kube-controller-manager aggregates (not running here): the labels are what it reads
      const users = readObjects('22-rbac-users.yaml');
      const aggregatesTo = (name: string) =>
        Object.entries(
          (users.find((o) => o.metadata.name === name)!.metadata as { labels: Record<string, string> })
            .labels,
        )
          .filter(([k, v]) => k.startsWith('rbac.authorization.k8s.io/aggregate-to-') && v === 'true')
          .map(([k]) => k.slice('rbac.authorization.k8s.io/aggregate-to-'.length));
      expect(
        Object.fromEntries(
          ['admin', 'edit', 'view', 'migrate', 'default'].map((r) => [r, aggregatesTo(`kubevirt.io:${r}`)]),
        ),
      ).toEqual({ admin: ['admin'], edit: ['edit'], view: ['view'], migrate: [], default: [] });
      expect(aggregatesTo('instancetype.kubevirt.io:view')).toEqual([]);
      const bound = users
        .filter((o) => o.kind === 'ClusterRoleBinding')
        .map((o) => {
          const b = o as unknown as { roleRef: { name: string }; subjects: { kind: string; name: string }[] };
          return [b.roleRef.name, b.subjects.map((s) => `${s.kind}/${s.name}`)];
        });
      expect(bound).toEqual([
        ['kubevirt.io:default', ['Group/system:authenticated']],
        ['instancetype.kubevirt.io:view', ['Group/system:authenticated']],
      ]);
    });

    it('migrating takes kubevirt.io:migrate: edit and admin are refused by kube-apiserver, migrate gets through', async () => {
      const status = async (user: string, method: string, path: string, body?: unknown): Promise<number> => {
        try {
          await kubeRequestAs(kc, user, method, path, body, ['system:authenticated']);
          return 200;
        } catch (e) {
          if (e instanceof KubeRequestError) return e.status;
          throw e;
        }
      };
      // the aggregated API has no endpoint here: a request kube-apiserver lets through fails after (503, webhook 500)
      const migrate = '/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachines/vm1/migrate';
      const vmims = '/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstancemigrations';
      const vmim = {
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachineInstanceMigration',
        metadata: { name: 'mig1' },
        spec: { vmiName: 'vm1' },
      };
      for (const user of ['user-edit', 'user-admin']) {
        expect({ user, status: await status(user, 'PUT', migrate, {}) }).toEqual({ user, status: 403 });
        expect({ user, status: await status(user, 'POST', vmims, vmim) }).toEqual({ user, status: 403 });
        expect({ user, status: await status(user, 'GET', vmims) }).toEqual({ user, status: 200 });
      }
      expect(await status('user-migrate', 'PUT', migrate, {})).not.toBe(403);
      expect(await status('user-migrate', 'POST', vmims, vmim)).not.toBe(403);
      expect(await status('user-migrate', 'DELETE', `${vmims}/mig1`)).not.toBe(403);
    });
  });

  it('the virt-controller Pod passes the "restricted" Pod Security Standard', async () => {
    await kubeRequest(kc, 'POST', '/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: 'pss-restricted', labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } },
    });
    const dep = readObjects('40-virt-controller.yaml')[0] as unknown as {
      spec: { template: { metadata: object; spec: object } };
    };
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'controller-pss' },
      spec: dep.spec.template.spec,
    };
    await kubeRequest(kc, 'POST', '/api/v1/namespaces/pss-restricted/pods?dryRun=All', pod);
    const handler = readObjects('41-virt-handler.yaml')[0] as unknown as {
      spec: { template: { spec: object } };
    };
    await expect(
      kubeRequest(kc, 'POST', '/api/v1/namespaces/pss-restricted/pods?dryRun=All', {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'handler-pss' },
        spec: handler.spec.template.spec,
      }),
    ).rejects.toThrow(/violates PodSecurity/);
  });
});

/** kubeRequest with impersonation headers (Impersonate-User / -Group; a service account's groups unless told), as the admin user. */
async function kubeRequestAs(
  k: KubeConfig,
  user: string,
  method: string,
  path: string,
  body?: unknown,
  groups = ['system:serviceaccounts', `system:serviceaccounts:${gen.NAMESPACE}`, 'system:authenticated'],
): Promise<unknown> {
  const { request } = await import('node:https');
  const url = new URL(path, k.getCurrentCluster()!.server);
  const opts: Parameters<typeof request>[1] = {
    method,
    headers: {
      Accept: 'application/json',
      'Impersonate-User': user,
      'Impersonate-Group': groups,
    },
  };
  await k.applyToHTTPSOptions(opts);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const type = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
  if (payload) opts.headers = { ...opts.headers, 'Content-Type': type };
  return new Promise((resolve, reject) => {
    const r = request(url, opts, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => {
        const s = res.statusCode ?? 0;
        if (s < 200 || s > 299) reject(new KubeRequestError(s, text, method, path));
        else resolve(text ? JSON.parse(text) : undefined);
      });
    });
    r.on('error', reject);
    if (payload) r.write(payload);
    r.end();
  });
}

// kubectl is built with kube-apiserver (tools/testenv/build-kube-apiserver.sh), so this always runs.
const kubectl = findBinaries().kubectl ?? 'kubectl';

describe('kubectl apply -f deploy/ (the operator path)', () => {
  it('applies in one go on a fresh cluster, client-side and server-side', async () => {
    await withTestEnv(async (e) => {
      for (const mode of [[], ['--server-side']]) {
        const r = spawnSync(kubectl, ['apply', ...mode, '-f', deployDir], {
          encoding: 'utf8',
          env: { ...process.env, KUBECONFIG: e.kubeconfigPath },
          timeout: 60000,
        });
        expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
        expect(r.stdout).toMatch(
          /deployment\.apps\/virt-controller (created|serverside-applied|unchanged|configured)/,
        );
        expect(r.stdout).toMatch(/daemonset\.apps\/virt-handler/);
        // the CRD symlinks were followed
        expect(r.stdout).toMatch(
          /customresourcedefinition\.apiextensions\.k8s\.io\/virtualmachineinstances\.kubevirt\.io/,
        );
      }
    });
  }, 120000);
});
