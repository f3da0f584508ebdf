#!/usr/bin/env node
// virt-convert launcher. It lives outside dist/ so that npm can link the bin at install time,
// before anything is built (a fresh clone runs `npm ci` first, then builds).
let cli;
try {
  cli = await import('../dist/cli.js');
} catch (err) {
  if (err && err.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('cli.js')) {
    process.stderr.write(
      'virt-convert: @kubevirt-ts/converter is not built yet: run `npm run build -w @kubevirt-ts/converter`\n',
    );
    process.exit(2);
  }
  throw err;
}
process.exitCode = cli.main(process.argv.slice(2));
