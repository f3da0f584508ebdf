#!/usr/bin/env node
// kv-validate launcher. It lives outside dist/ so that npm can link the bin at install time,
// before anything is built (a fresh clone runs `npm ci` first, then builds).
try {
  await import('../dist/cli/kv-validate.js');
} catch (err) {
  if (err && err.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('kv-validate.js')) {
    process.stderr.write(
      'kv-validate: @kubevirt-ts/api is not built yet: run `npm run build -w @kubevirt-ts/api`\n',
    );
    process.exit(2);
  }
  throw err;
}
