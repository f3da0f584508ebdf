// Where upstream KubeVirt's own virtctl is (built by tools/build-upstream-virtctl.sh, which tools/setup.sh runs with
// KVTS_SETUP_CLUSTER=1, as tools/test.sh does) and the gate of the tests that run it: without the binary they are
// skipped, visibly; under KVTS_REQUIRE_CLUSTER=1 (tools/test.sh, CI) they fail with the reason instead.
import { existsSync } from 'node:fs';
import path from 'node:path';

/** the upstream release tools/build-upstream-virtctl.sh builds */
export const UPSTREAM_VIRTCTL_TAG = 'v1.1.0';
const CACHE =
  process.env.KVTS_CACHE ??
  path.join(process.env.XDG_CACHE_HOME ?? path.join(process.env.HOME ?? '/root', '.cache'), 'kubevirt-ts');
/** the binary: KVTS_UPSTREAM_VIRTCTL names another */
export const UPSTREAM_VIRTCTL =
  process.env.KVTS_UPSTREAM_VIRTCTL ?? path.join(CACHE, 'upstream-virtctl', UPSTREAM_VIRTCTL_TAG, 'virtctl');

/**
 * Why upstream's virtctl cannot run (undefined when it can); `test` for the tests that need it: test.skip when it is
 * missing, or under KVTS_REQUIRE_CLUSTER=1 a test that fails with the reason.
 */
export function upstreamVirtctlGate(suite: string): {
  missing: string | undefined;
  upstreamTest: typeof test;
} {
  const missing = existsSync(UPSTREAM_VIRTCTL)
    ? undefined
    : `upstream virtctl ${UPSTREAM_VIRTCTL_TAG} not found at ${UPSTREAM_VIRTCTL} (tools/build-upstream-virtctl.sh ` +
      'builds it; tools/setup.sh runs that with KVTS_SETUP_CLUSTER=1; KVTS_UPSTREAM_VIRTCTL names another binary)';
  if (!missing) return { missing, upstreamTest: test };
  const required = process.env.KVTS_REQUIRE_CLUSTER === '1';
  console.warn(`${suite}: upstream virtctl tests ${required ? 'FAIL' : 'skipped'}: ${missing}`);
  const failing = ((name: string, _fn?: unknown, timeout?: number) =>
    test(
      name,
      () => {
        throw new Error(`KVTS_REQUIRE_CLUSTER=1 and ${missing}`);
      },
      timeout,
    )) as unknown as typeof test;
  return { missing, upstreamTest: required ? failing : test.skip };
}
