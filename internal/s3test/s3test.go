// Package s3test starts a throwaway S3-compatible server for tests:
// SeaweedFS (`weed server -s3`) on loopback with its data in a temporary
// directory. The weed binary (230 MB, minutes to build) is cached outside
// the clone: MPTESTER_WEED names it, else CacheDir/weed, built there from
// the module cache on first use under CI (`scripts/build-weed` does the
// same by hand). Elsewhere a missing binary skips the test.
package s3test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Module is the SeaweedFS version the tests run.
const Module = "github.com/seaweedfs/seaweedfs@v0.0.0-20261109003541-7506e5f91cd6"

// EnvWeed names a weed binary.
const EnvWeed = "MPTESTER_WEED"

// CacheDir holds the built binary.
const CacheDir = "/var/cache/mptester-test"

var buildMu sync.Mutex

func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format+" (build it: scripts/build-weed, or set "+EnvWeed+")", args...)
}

// Binary returns the weed binary, building it under CI.
func Binary(t testing.TB) string {
	t.Helper()
	if b := os.Getenv(EnvWeed); b != "" {
		return b
	}
	bin := filepath.Join(CacheDir, "weed")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if os.Getenv("CI") == "" {
		unavailable(t, "S3 tests need SeaweedFS: no %s", bin)
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	t.Logf("building weed from %s into %s (minutes, once)", Module, bin)
	start := time.Now()
	out, err := exec.Command(filepath.Join(repoRoot(), "scripts", "build-weed"), CacheDir).CombinedOutput()
	if err != nil {
		t.Fatalf("build weed: %v\n%s", err, out)
	}
	t.Logf("weed built in %s", time.Since(start).Round(time.Second))
	return bin
}

func repoRoot() string {
	dir, _ := os.Getwd()
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	return dir
}

// Server is a running SeaweedFS with an S3 gateway.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
	bin      string
	args     []string
	dir      string
	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	log      *os.File
}

// freePort returns a loopback port p with p+10000 free too (weed's gRPC
// ports are the HTTP ports plus 10000).
func freePort(t testing.TB, taken map[int]bool) int {
	for range 200 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p+10000 > 65535 || taken[p] || taken[p+10000] {
			continue
		}
		l2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err != nil {
			continue
		}
		l2.Close()
		taken[p], taken[p+10000] = true, true
		return p
	}
	t.Fatal("no free port pair")
	return 0
}

// Start runs a new server for the test (stopped with it). config, when
// not "", is an S3 identities file (weed -s3.config).
func Start(t testing.TB, config string) *Server {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	taken := map[int]bool{}
	s3, master, volume, filer := freePort(t, taken), freePort(t, taken), freePort(t, taken), freePort(t, taken)
	args := []string{"server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir=" + dir, "-s3", "-s3.port=" + strconv.Itoa(s3),
		"-master.port=" + strconv.Itoa(master), "-volume.port=" + strconv.Itoa(volume), "-filer.port=" + strconv.Itoa(filer),
		"-master.volumeSizeLimitMB=64", "-volume.max=0"}
	if config != "" {
		args = append(args, "-s3.config="+config)
	}
	log, err := os.Create(filepath.Join(dir, "weed.log"))
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", s3), bin: bin, args: args, dir: dir, log: log}
	t.Cleanup(func() {
		s.Stop()
		log.Close()
	})
	s.run(t)
	return s
}

// run starts weed and waits until the S3 port answers.
func (s *Server) run(t testing.TB) {
	t.Helper()
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start weed: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get(s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(s.dir, "weed.log"))
			t.Fatalf("weed S3 did not come up on %s: %v\n%s", s.Endpoint, err, tail(b))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop ends the server (SIGTERM, SIGKILL after 10 s); its data stays for
// Restart. Fault tests use it for an outage.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Restart starts a stopped server again on the same ports and data and
// waits until the S3 port answers.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	s.run(t)
}

// Pid is the server's process (benchmarks read its CPU time).
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}

func tail(b []byte) []byte {
	if len(b) > 4000 {
		return b[len(b)-4000:]
	}
	return b
}

// Bucket creates a bucket (anonymously, or with the key pair) and waits
// until an object can be written to it.
func (s *Server) Bucket(t testing.TB, name, access, secret string) {
	t.Helper()
	var creds *credentials.Credentials
	if access != "" {
		creds = credentials.NewStaticV4(access, secret, "")
	} else {
		creds = credentials.New(&credentials.Static{Value: credentials.Value{SignerType: credentials.SignatureAnonymous}})
	}
	c, err := minio.New(s.Endpoint[len("http://"):], &minio.Options{Creds: creds, BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := c.MakeBucket(ctx, name, minio.MakeBucketOptions{})
		if err != nil && minio.ToErrorResponse(err).Code == "BucketAlreadyOwnedByYou" {
			err = nil
		}
		if err == nil {
			_, err = c.PutObject(ctx, name, ".probe", http.NoBody, 0, minio.PutObjectOptions{})
		}
		if err == nil {
			_ = c.RemoveObject(ctx, name, ".probe", minio.RemoveObjectOptions{})
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(s.dir, "weed.log"))
			t.Fatalf("bucket %s on %s: %v\n%s", name, s.Endpoint, err, tail(b))
		}
		time.Sleep(300 * time.Millisecond)
	}
}
