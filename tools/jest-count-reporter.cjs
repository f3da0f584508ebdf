// Jest reporter: appends this project's totals to $JEST_JSON_DIR/counts.jsonl, and each failed test (or suite
// that failed to run) with the start of its message to failures.jsonl, so tools/test.sh can print one closing
// line for the whole suite ("tests: N passed, N failed") and, after it, what failed (CI shows the tail).
// It also appends each test's start and end to progress.jsonl: when a phase is stopped by its time bound (jest is
// killed, onRunComplete never runs), tools/summarize-tests.js names the test that was still running.
const fs = require('node:fs');
const path = require('node:path');
// jest's messages carry terminal colours (ESC [ ... m): the file and CI's log want plain text
const ESC = String.fromCharCode(27);
const strip = (s) =>
  String(s ?? '')
    .split(ESC)
    .map((p, i) => (i ? p.replace(/^\[[0-9;]*m/, '') : p))
    .join('');
const head = (s, n = 12) =>
  strip(s)
    .split('\n')
    .filter((l) => l.trim())
    .slice(0, n)
    .join('\n');
/** one line of $JEST_JSON_DIR/progress.jsonl (also written by e2e's waitFor); a diagnostic, it never throws */
const progress = (rec) => {
  const dir = process.env.JEST_JSON_DIR;
  if (!dir) return;
  try {
    fs.appendFileSync(
      path.join(dir, 'progress.jsonl'),
      JSON.stringify({ ...rec, cwd: process.cwd(), at: new Date().toISOString() }) + '\n',
    );
  } catch {
    // a diagnostic only
  }
};
class CountReporter {
  onTestFileStart(test) {
    progress({ event: 'file-start', file: path.relative(process.cwd(), test.path) });
  }
  onTestFileResult(test) {
    progress({ event: 'file-end', file: path.relative(process.cwd(), test.path) });
  }
  onTestCaseStart(test, info) {
    progress({ event: 'start', file: path.relative(process.cwd(), test.path), test: info.fullName });
  }
  onTestCaseResult(test, result) {
    progress({
      event: 'end',
      file: path.relative(process.cwd(), test.path),
      test: result.fullName,
      status: result.status,
      ms: result.duration,
    });
  }
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
    const failures = [];
    for (const suite of results.testResults) {
      const file = path.relative(process.cwd(), suite.testFilePath);
      if (suite.testExecError)
        failures.push({
          cwd: process.cwd(),
          file,
          test: '(suite failed to run)',
          message: head(suite.testExecError.message),
        });
      for (const t of suite.testResults) {
        if (t.status === 'failed')
          failures.push({
            cwd: process.cwd(),
            file,
            test: t.fullName,
            message: head(t.failureMessages.join('\n')),
          });
      }
    }
    for (const f of failures) fs.appendFileSync(path.join(dir, 'failures.jsonl'), JSON.stringify(f) + '\n');
  }
}
module.exports = CountReporter;
module.exports.progress = progress;
