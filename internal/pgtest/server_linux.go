package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// startServer runs initdb and pg_ctl as the "postgres" user (or "nobody")
// in a fresh directory; the server listens only on a unix socket there.
func startServer(t testing.TB, bin string) string { return newServer(t, bin).DSN }

func newServer(t testing.TB, bin string) *Ctl {
	t.Helper()
	u, err := user.Lookup("postgres")
	if err != nil {
		u, err = user.Lookup("nobody")
	}
	if err != nil {
		t.Fatalf("no unprivileged user for initdb: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "mptester-pg-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	try := func(name string, args ...string) ([]byte, error) {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Env = []string{"LC_ALL=C", "PATH=/usr/bin:/bin"}
		return cmd.CombinedOutput()
	}
	run := func(t testing.TB, name string, args ...string) {
		if out, err := try(name, args...); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	run(t, "initdb", "-D", data, "-U", "mptester", "--auth=trust", "--no-sync", "-E", "UTF8")
	port := freePort(t)
	c := &Ctl{DSN: fmt.Sprintf("postgres://mptester@/postgres?host=%s&port=%d&sslmode=disable", dir, port)}
	c.start = func(t testing.TB) {
		run(t, "pg_ctl", "-D", data, "-w", "-t", "60", "-l", filepath.Join(dir, "log"), "-o",
			fmt.Sprintf("-k %s -p %d -c listen_addresses='' -c fsync=on -c max_connections=300", dir, port), "start")
	}
	c.stop = func(t testing.TB, mode string) { run(t, "pg_ctl", "-D", data, "-w", "-m", mode, "stop") }
	c.start(t)
	t.Cleanup(func() {
		_, _ = try("pg_ctl", "-D", data, "-w", "-m", "immediate", "stop") // already stopped by a fault test, maybe
		os.RemoveAll(dir)
	})
	return c
}

// freePort picks a port number for the socket file name (the server does
// not listen on TCP, but the port names its socket).
func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
