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
func startServer(t testing.TB, bin string) string {
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
	run := func(name string, args ...string) {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Env = []string{"LC_ALL=C", "PATH=/usr/bin:/bin"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	run("initdb", "-D", data, "-U", "mptester", "--auth=trust", "--no-sync", "-E", "UTF8")
	port := freePort(t)
	run("pg_ctl", "-D", data, "-w", "-t", "60", "-l", filepath.Join(dir, "log"), "-o",
		fmt.Sprintf("-k %s -p %d -c listen_addresses='' -c fsync=on -c max_connections=300", dir, port), "start")
	t.Cleanup(func() {
		run("pg_ctl", "-D", data, "-w", "-m", "immediate", "stop")
		os.RemoveAll(dir)
	})
	return fmt.Sprintf("postgres://mptester@/postgres?host=%s&port=%d&sslmode=disable", dir, port)
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
