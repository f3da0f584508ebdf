// Jest reporter: appends this project's totals to $JEST_JSON_DIR so tools/test.sh can print one
// closing line for the whole suite ("tests: N passed, N failed").
const fs = require('node:fs');
const path = require('node:path');
class CountReporter {
  onRunComplete(_contexts, results) {
    const dir = process.env.JEST_JSON_DIR;
    if (!dir) return;
    const line = JSON.stringify({
      cwd: process.cwd(),
      passed: results.numPassedTests,
      failed: results.numFailedTests + results.numRuntimeErrorTestSuites,
      skipped: results.numPendingTests + results.numTodoTests,
    });
    fs.appendFileSync(path.join(dir, 'counts.jsonl'), line + '\n');
  }
}
module.exports = CountReporter;
