package transport

import (
	"context"
	"testing"
	"time"
)

// WaitQlogs waits for every trace file opened until it is closed, and
// only for those.
func TestWaitQlogsWaitsForOpenTraces(t *testing.T) {
	dir := t.TempDir()
	a, err := qlogFile(dir, true, []byte{1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := qlogFile(dir, false, []byte{1})
	if err != nil {
		t.Fatal(err)
	}
	short := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		return WaitQlogs(ctx)
	}
	if err := short(); err == nil {
		t.Fatal("WaitQlogs returned with two traces open")
	}
	a.Close()
	a.Close() // a second Close counts once
	if err := short(); err == nil {
		t.Fatal("WaitQlogs returned with one trace open")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- WaitQlogs(ctx) }()
	b.Close()
	if err := <-done; err != nil {
		t.Fatalf("a wait begun before the last trace closed: %v", err)
	}
	if err := short(); err != nil {
		t.Fatalf("nothing open: %v", err)
	}
}
