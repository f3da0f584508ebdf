#!/usr/bin/env node
// kvts-pod-network launcher. It lives outside dist/ so that npm can link the bin at install time,
// before anything is built.
let cli;
try {
  cli = await import('../dist/cli.js');
} catch (err) {
  if (err && err.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('cli.js')) {
    process.stderr.write(
      'kvts-pod-network: @kubevirt-ts/network is not built yet: run `npm run build -w @kubevirt-ts/network`\n',
    );
    process.exit(2);
  }
  throw err;
}
process.exitCode = await cli.main(process.argv.slice(2));
