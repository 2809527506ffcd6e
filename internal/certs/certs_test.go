package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKeepCreatesOnce: the first Keep creates the identity (0600), later
// ones and racing ones return the same certificate.
func TestKeepCreatesOnce(t *testing.T) {
	st := IdentityIn(t.TempDir())
	ctx := context.Background()
	var wg sync.WaitGroup
	fps := make([]string, 8)
	created := make([]bool, 8)
	for i := range fps {
		wg.Go(func() {
			_, fp, c, err := Keep(ctx, st, []string{"collect.example"})
			assert.NoError(t, err)
			fps[i], created[i] = fp, c
		})
	}
	wg.Wait()
	n := 0
	for i := range fps {
		assert.Equal(t, fps[0], fps[i])
		if created[i] {
			n++
		}
	}
	assert.Equal(t, 1, n, "created once")
	c, fp, c2, err := Keep(ctx, st, nil)
	require.NoError(t, err)
	assert.False(t, c2)
	assert.Equal(t, fps[0], fp)
	assert.Empty(t, Missing(c.Leaf, []string{"collect.example", "127.0.0.1"}))
	assert.Equal(t, []string{"other.example"}, Missing(c.Leaf, []string{"other.example"}))
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(string(st))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		require.NoError(t, os.Chmod(string(st), 0o644))
		_, _, _, err = Keep(ctx, st, nil)
		assert.ErrorContains(t, err, "readable by others")
	}
}

// TestPinned: the pin is the only trust, at TLS 1.2 or later; a mismatch
// names both fingerprints.
func TestPinned(t *testing.T) {
	cert, fp, err := SelfSigned(nil)
	require.NoError(t, err)
	other, ofp, err := SelfSigned(nil)
	require.NoError(t, err)
	_ = other
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MaxVersion: tls.VersionTLS11, MinVersion: tls.VersionTLS10})
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	dial := func(cfg *tls.Config) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err == nil {
			c.Close()
		}
		return err
	}
	pin, err := ParseFingerprint(fp)
	require.NoError(t, err)
	assert.Error(t, dial(Pinned("", pin)), "TLS 1.1 is refused")

	ln2, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	require.NoError(t, err)
	defer ln2.Close()
	go func() {
		for {
			c, err := ln2.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	dial2 := func(cfg *tls.Config) error {
		c, err := tls.Dial("tcp", ln2.Addr().String(), cfg)
		if err == nil {
			c.Close()
		}
		return err
	}
	require.NoError(t, dial2(Pinned("", pin)))
	opin, err := ParseFingerprint(ofp)
	require.NoError(t, err)
	err = dial2(Pinned("", opin))
	require.ErrorIs(t, err, ErrPinMismatch)
	var pe *PinError
	require.True(t, errors.As(err, &pe))
	assert.Contains(t, err.Error(), fp)
	assert.Contains(t, err.Error(), ofp)
	cfg, err := ClientTLS("x", "", false)
	require.NoError(t, err)
	assert.Equal(t, uint16(MinVersion), cfg.MinVersion)
	_, err = ClientTLS("x", "nope", false)
	assert.Error(t, err)
	_ = net.IPv4len
}
