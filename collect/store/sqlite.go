package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"

	_ "modernc.org/sqlite" // the "sqlite" driver: pure Go, no cgo
)

// sqlitePragmas: WAL so readers never block the writer; synchronous FULL
// so a commit is on disk before the server answers 2xx; IMMEDIATE write
// transactions so a writer never fails half-way on a lock upgrade.
const sqlitePragmas = "_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(ON)&_txlock=immediate"

// maxBatch bounds how many uploads share one SQLite commit.
const maxBatch = 256

func openSQLite(ctx context.Context, dsn string) (Store, error) {
	path := strings.TrimPrefix(strings.TrimPrefix(dsn, "sqlite://"), "file:")
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlite database %q: want a file path", dsn)
	}
	url := "file:" + path + "?" + sqlitePragmas
	wdb, err := sql.Open("sqlite", url)
	if err != nil {
		return nil, err
	}
	wdb.SetMaxOpenConns(1) // SQLite has one writer; batches replace write concurrency
	if err := migrate(ctx, wdb, sqliteDialect, nil); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	rdb, err := sql.Open("sqlite", url)
	if err != nil {
		wdb.Close()
		return nil, err
	}
	rdb.SetMaxOpenConns(4)
	s := newSQLStore(sqliteDialect, rdb, wdb)
	if err := s.warm(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	startBatcher(s, 1, s.commitSQLite)
	return s, nil
}

// startBatcher routes s's PutRun through n group-committing writers,
// each storing a batch with commit.
func startBatcher(s *sqlStore, n int, commit func([]*putJob) []putResult) {
	b := &batcher{s: s, commit: commit, jobs: make(chan *putJob), done: make(chan struct{})}
	s.put, s.end = b.put, b.stop
	for range n {
		b.wg.Add(1)
		go b.run()
	}
}

// batcher is group commit: uploads arriving while a commit is on disk go
// together into the next transaction, so one fsync acknowledges many.
type batcher struct {
	s      *sqlStore
	commit func([]*putJob) []putResult
	jobs   chan *putJob
	done   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

type putJob struct {
	ctx context.Context
	r   Run
	rep Report
	res chan putResult
}

type putResult struct {
	r   Run
	o   Outcome
	err error
}

var errClosed = errors.New("store closed")

func (b *batcher) put(ctx context.Context, r Run, rep Report) (Run, Outcome, error) {
	j := &putJob{ctx: ctx, r: r, rep: rep, res: make(chan putResult, 1)}
	select {
	case b.jobs <- j:
	case <-b.done:
		return Run{}, 0, errClosed
	case <-ctx.Done():
		return Run{}, 0, ctx.Err()
	}
	// Once queued the job is committed or failed; the caller learns which
	// (a cancelled caller's run may still be stored: a retry then gets a
	// duplicate answer, never a loss).
	res := <-j.res
	return res.r, res.o, res.err
}

func (b *batcher) run() {
	defer b.wg.Done()
	for {
		var batch []*putJob
		select {
		case j := <-b.jobs:
			batch = append(batch, j)
		case <-b.done:
			return
		}
	more:
		for len(batch) < maxBatch {
			select {
			case j := <-b.jobs:
				batch = append(batch, j)
			default:
				break more
			}
		}
		for i, res := range b.commit(batch) {
			batch[i].res <- res
		}
	}
}

// commitSQLite stores a batch in one transaction, an upload at a time
// (SQLite runs in-process: a statement costs no round trip).
func (s *sqlStore) commitSQLite(batch []*putJob) []putResult {
	res := make([]putResult, len(batch))
	err := s.inTx(context.Background(), func(tx *sql.Tx) error {
		for i, j := range batch {
			r, o, err := s.putTx(context.Background(), tx, j.r, j.rep)
			if err != nil {
				return err
			}
			res[i] = putResult{r: r, o: o}
		}
		return nil
	})
	if err != nil {
		for i := range res {
			res[i] = putResult{err: err}
		}
	}
	return res
}

func (b *batcher) stop() {
	b.once.Do(func() { close(b.done) })
	b.wg.Wait()
}
