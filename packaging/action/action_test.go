// Package action holds the install script of the GitHub Action
// (action.yml at the repository root); its test checks the action's
// interface and dry-runs the script against a local release.
package action

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/mptester/mptester/internal/nstest"
)

type actionFile struct {
	Name, Description string
	Inputs            map[string]struct {
		Description string
		Required    bool
		Default     *string
	}
	Outputs map[string]struct{ Description, Value string }
	Runs    struct {
		Using string
		Steps []struct {
			Name, ID, Shell, Run string
			Env                  map[string]string
		}
	}
}

// TestActionInterface: the inputs and outputs the README promises, each
// documented; a composite action whose first step installs through the
// checksum-checking script and whose run step writes both outputs.
func TestActionInterface(t *testing.T) {
	b, err := os.ReadFile("../../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	var a actionFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&a); err != nil {
		t.Fatalf("action.yml: %v", err)
	}
	if a.Name == "" || a.Description == "" || a.Runs.Using != "composite" {
		t.Fatalf("name %q, description %q, runs.using %q", a.Name, a.Description, a.Runs.Using)
	}
	for _, in := range []string{"server", "pin", "transports", "patterns", "version"} {
		i, ok := a.Inputs[in]
		if !ok || strings.TrimSpace(i.Description) == "" {
			t.Errorf("input %s missing or undocumented", in)
		}
		if in != "server" && (i.Required || i.Default == nil) {
			t.Errorf("input %s should be optional with a default", in)
		}
	}
	if !a.Inputs["server"].Required {
		t.Error("input server is not required")
	}
	if len(a.Runs.Steps) < 2 {
		t.Fatalf("%d steps", len(a.Runs.Steps))
	}
	install, run := a.Runs.Steps[0], a.Runs.Steps[len(a.Runs.Steps)-1]
	if !strings.Contains(install.Run, "packaging/action/install.sh") || !strings.Contains(install.Env["MPTESTER_VERSION"], "inputs.version") {
		t.Errorf("the first step does not run install.sh with the version: %+v", install)
	}
	for _, out := range []string{"json", "junit"} {
		o, ok := a.Outputs[out]
		if !ok || strings.TrimSpace(o.Description) == "" {
			t.Errorf("output %s missing or undocumented", out)
			continue
		}
		if o.Value != "${{ steps."+run.ID+".outputs."+out+" }}" {
			t.Errorf("output %s = %q, not the run step's", out, o.Value)
		}
		if !strings.Contains(run.Run, out+"=") || !strings.Contains(run.Run, "GITHUB_OUTPUT") {
			t.Errorf("the run step does not set output %s", out)
		}
	}
	for _, flag := range []string{"--smoke", "--junit \"$junit\"", "-o \"$json\"", "--pin", "--transports", "--patterns"} {
		if !strings.Contains(run.Run, flag) {
			t.Errorf("the run step lacks %s", flag)
		}
	}
	// Every input reaches a step (through env, never spliced into the
	// script: an input is data, not shell).
	for in := range a.Inputs {
		used := false
		for _, s := range a.Runs.Steps {
			if strings.Contains(s.Run, "inputs.") {
				t.Errorf("step %q splices an input into its script", s.Name)
			}
			for _, v := range s.Env {
				used = used || v == "${{ inputs."+in+" }}"
			}
		}
		if !used {
			t.Errorf("input %s is not passed to any step", in)
		}
	}
}

// release writes a fake release of version for linux/amd64 into dir (the
// layout of GitHub's releases/download/vVERSION/) and returns the
// archive's name and its SHA-256.
func release(t *testing.T, dir, version string) (string, string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	bin := []byte("#!/bin/sh\necho mptester " + version + "\n")
	for _, f := range []struct {
		name string
		body []byte
		mode int64
	}{{"mptester", bin, 0o755}, {"README.md", []byte("readme\n"), 0o644}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	rel := filepath.Join(dir, "v"+version)
	if err := os.MkdirAll(rel, 0o755); err != nil {
		t.Fatal(err)
	}
	name := "mptester_" + version + "_linux_amd64.tar.gz"
	if err := os.WriteFile(filepath.Join(rel, name), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return name, hex.EncodeToString(sum[:])
}

// TestInstallScriptChecksum dry-runs install.sh against a local release
// (file:// through curl, as the runner would fetch it): it installs with
// the right checksum, and fails, installing nothing, with a wrong one or
// none.
func TestInstallScriptChecksum(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "sha256sum", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			nstest.SkipUnless(t, tool+" not found (the dry run needs bash, curl, coreutils and tar)")
			return
		}
	}
	const version = "1.2.3"
	for _, tc := range []struct {
		name string
		sums func(archive, sum string) string
		fail string // "": installs
	}{
		{"match", func(a, s string) string { return "0000  other.tar.gz\n" + s + "  " + a + "\n" }, ""},
		{"mismatch", func(a, s string) string {
			return strings.Repeat("ab", 32) + "  " + a + "\n"
		}, "checksum mismatch for mptester_1.2.3_linux_amd64.tar.gz"},
		{"missing", func(a, s string) string { return s + "  mptester_1.2.3_darwin_arm64.tar.gz\n" }, "has no line for"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			rel, tmp := filepath.Join(dir, "releases"), filepath.Join(dir, "runner-temp")
			if err := os.MkdirAll(tmp, 0o755); err != nil {
				t.Fatal(err)
			}
			archive, sum := release(t, rel, version)
			if err := os.WriteFile(filepath.Join(rel, "v"+version, "mptester_"+version+"_checksums.txt"), []byte(tc.sums(archive, sum)), 0o644); err != nil {
				t.Fatal(err)
			}
			ghPath := filepath.Join(dir, "github_path")
			cmd := exec.Command("bash", "install.sh")
			cmd.Env = append(os.Environ(), "MPTESTER_RELEASE_URL=file://"+rel, "MPTESTER_VERSION=v"+version,
				"RUNNER_OS=Linux", "RUNNER_ARCH=X64", "RUNNER_TEMP="+tmp, "GITHUB_PATH="+ghPath)
			out, err := cmd.CombinedOutput()
			installed := filepath.Join(tmp, "mptester-"+version, "mptester")
			if tc.fail != "" {
				if err == nil {
					t.Fatalf("installed with a %s checksum:\n%s", tc.name, out)
				}
				if !regexp.MustCompile(`(?m)^::error title=mptester install::.*` + regexp.QuoteMeta(tc.fail)).Match(out) {
					t.Fatalf("no annotation naming %q:\n%s", tc.fail, out)
				}
				if _, err := os.Stat(installed); err == nil {
					t.Fatal("the binary was unpacked despite the checksum")
				}
				if _, err := os.Stat(ghPath); err == nil {
					t.Fatal("GITHUB_PATH written despite the checksum")
				}
				return
			}
			if err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			got, err := exec.Command(installed).Output()
			if err != nil || string(got) != "mptester "+version+"\n" {
				t.Fatalf("installed binary: %q %v", got, err)
			}
			p, _ := os.ReadFile(ghPath)
			if string(p) != filepath.Dir(installed)+"\n" {
				t.Fatalf("GITHUB_PATH %q", p)
			}
			if !strings.Contains(string(out), "sha256 "+sum) {
				t.Fatalf("output does not name the checked sum:\n%s", out)
			}
		})
	}
}
