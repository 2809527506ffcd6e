//go:build !linux

package pgtest

import "testing"

func startServer(t testing.TB, bin string) string {
	t.Skip("a throwaway PostgreSQL server is started on Linux only; set " + EnvDSN)
	return ""
}

func newServer(t testing.TB, bin string) *Ctl {
	t.Skip("a throwaway PostgreSQL server is started on Linux only")
	return nil
}
