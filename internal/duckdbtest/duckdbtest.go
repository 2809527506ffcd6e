// Package duckdbtest runs SQL in DuckDB (an independent Parquet reader)
// for tests, through its Node.js client: npm install
// @duckdb/node-api@Version into CacheDir (outside the clone) on first use.
// Under CI a missing node or npm fails the test; elsewhere it skips.
package duckdbtest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Version of the DuckDB Node.js client the tests use.
const Version = "1.5.6-r.1"

// EnvDir overrides the cache directory.
const EnvDir = "MPTESTER_DUCKDB_DIR"

// CacheDir holds node_modules with the client.
func CacheDir() string {
	if d := os.Getenv(EnvDir); d != "" {
		return d
	}
	return "/var/cache/mptester-test/duckdb-" + Version
}

var installMu sync.Mutex

func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format+" (needs node and npm: apt-get install nodejs npm)", args...)
}

// install makes sure the client is in CacheDir.
func install(t testing.TB) string {
	t.Helper()
	installMu.Lock()
	defer installMu.Unlock()
	dir := CacheDir()
	if _, err := exec.LookPath("node"); err != nil {
		unavailable(t, "DuckDB tests: node not found")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@duckdb", "node-api", "package.json")); err == nil {
		return dir
	}
	if _, err := exec.LookPath("npm"); err != nil {
		unavailable(t, "DuckDB tests: npm not found to install @duckdb/node-api")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		unavailable(t, "DuckDB tests: %v", err)
	}
	cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--prefix", dir, "@duckdb/node-api@"+Version)
	if out, err := cmd.CombinedOutput(); err != nil {
		unavailable(t, "DuckDB tests: npm install @duckdb/node-api@%s: %v\n%s", Version, err, out)
	}
	return dir
}

// script reads SQL statements (a JSON array) on stdin and prints each
// one's rows as JSON objects (BIGINTs as strings).
const script = `import { DuckDBInstance } from '@duckdb/node-api';
let input = '';
for await (const chunk of process.stdin) input += chunk;
const inst = await DuckDBInstance.create(':memory:');
const c = await inst.connect();
const out = [];
for (const q of JSON.parse(input)) {
  const r = await c.runAndReadAll(q);
  out.push(r.getRowObjectsJson());
}
process.stdout.write(JSON.stringify(out));
`

// Query runs each statement in one fresh in-memory DuckDB and returns
// each one's rows (column name to value; integers as strings).
func Query(t testing.TB, queries ...string) [][]map[string]any {
	t.Helper()
	dir := install(t)
	f, err := os.CreateTemp(dir, "query-*.mjs")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(script); err != nil {
		t.Fatal(err)
	}
	f.Close()
	in, _ := json.Marshal(queries)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("node", f.Name())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("duckdb: %v\n%s", err, stderr.String())
	}
	var out [][]map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("duckdb output: %v\n%s", err, stdout.String())
	}
	return out
}
