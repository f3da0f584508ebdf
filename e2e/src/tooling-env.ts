// The environment of the npm, nx and node processes the packaging and release suites start: the npm
// that runs jest (workspace, prefix, ...), jest's and nx's own settings must not leak into them.

/** process.env without npm_* (but `keepNpm`), NODE_OPTIONS, JEST* and NX_* variables. */
export function cleanToolingEnv(keepNpm: readonly string[] = ['npm_config_cache']): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('npm_') && !keepNpm.includes(k)) continue;
    if (k === 'NODE_OPTIONS' || k.startsWith('JEST') || k.startsWith('NX_')) continue;
    env[k] = v;
  }
  return env;
}
