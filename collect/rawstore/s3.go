package rawstore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config names an S3-compatible bucket, resolved the way the AWS tools
// resolve it: flags first, then the environment (AWS_ENDPOINT_URL_S3,
// AWS_ENDPOINT_URL, AWS_REGION, AWS_DEFAULT_REGION, AWS_PROFILE,
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), then the
// profile in the shared config and credentials files (~/.aws/config:
// region, endpoint_url; ~/.aws/credentials). No credentials at all means
// anonymous requests.
type S3Config struct {
	Bucket string
	Prefix string // "" or a path ending without "/"
	// Endpoint is the server's URL (http:// or https://); default AWS.
	Endpoint  string
	Region    string
	Profile   string
	PathStyle bool
	// Spool is the local directory uploads larger than s3MemMax are
	// written to while they stream in (they are validated before they
	// are stored); "" for a reader (the system's temporary directory).
	Spool string
}

// ParseS3URL reads s3://BUCKET[/PREFIX].
func ParseS3URL(s string) (S3Config, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "s3" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return S3Config{}, fmt.Errorf("%q: want s3://BUCKET or s3://BUCKET/PREFIX", s)
	}
	return S3Config{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")}, nil
}

// resolve fills what flags left empty from the environment and the
// shared config file.
func (c S3Config) resolve() (S3Config, error) {
	if c.Profile == "" {
		c.Profile = os.Getenv("AWS_PROFILE")
	}
	prof := c.Profile
	if prof == "" {
		prof = "default"
	}
	conf := sharedConfig(prof)
	for _, v := range []string{os.Getenv("AWS_ENDPOINT_URL_S3"), os.Getenv("AWS_ENDPOINT_URL"), conf["endpoint_url"]} {
		if c.Endpoint == "" {
			c.Endpoint = v
		}
	}
	for _, v := range []string{os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"), conf["region"]} {
		if c.Region == "" {
			c.Region = v
		}
	}
	if c.Endpoint == "" {
		c.Endpoint = "https://s3.amazonaws.com"
	}
	if c.Bucket == "" {
		return c, errors.New("no bucket")
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return c, fmt.Errorf("endpoint %q: want http(s)://HOST[:PORT]", c.Endpoint)
	}
	return c, nil
}

// sharedConfig reads one profile's keys from the AWS config file.
func sharedConfig(profile string) map[string]string {
	name := os.Getenv("AWS_CONFIG_FILE")
	if name == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil
		}
		name = filepath.Join(home, ".aws", "config")
	}
	f, err := os.Open(name)
	if err != nil {
		return nil
	}
	defer f.Close()
	want := "profile " + profile
	if profile == "default" {
		want = "default"
	}
	out := map[string]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || l[0] == '#' || l[0] == ';':
		case l[0] == '[':
			in = strings.TrimSpace(strings.Trim(l, "[]")) == want
		case in:
			if k, v, ok := strings.Cut(l, "="); ok {
				out[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
	}
	return out
}

// S3 keeps objects in a bucket under a prefix. An upload is kept in memory
// (past s3MemMax in a local spool file) while it streams in and is
// validated, then PUT once with
// Content-MD5 (the server refuses a body that does not match) and
// If-None-Match: * (never over an existing object); the returned ETag is
// checked against the MD5 before Commit returns.
type S3 struct {
	c   *minio.Client
	cfg S3Config
}

// NewS3 connects (lazily: Check probes the bucket) and clears the spool
// of temporaries a crash left.
func NewS3(cfg S3Config) (*S3, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, fmt.Errorf("s3://%s: %w", cfg.Bucket, err)
	}
	u, _ := url.Parse(cfg.Endpoint)
	creds := credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.FileAWSCredentials{Profile: cfg.Profile},
	})
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	c, err := minio.New(u.Host, &minio.Options{Creds: creds, Secure: u.Scheme == "https", Region: cfg.Region,
		BucketLookup: lookup, Transport: tr})
	if err != nil {
		return nil, fmt.Errorf("s3://%s: %w", cfg.Bucket, err)
	}
	if cfg.Spool != "" { // not for readers
		if err := os.MkdirAll(cfg.Spool, 0o750); err != nil {
			return nil, err
		}
		stale, _ := filepath.Glob(filepath.Join(cfg.Spool, ".s3-*"))
		for _, f := range stale {
			os.Remove(f)
		}
	}
	return &S3{c: c, cfg: cfg}, nil
}

func (s *S3) String() string {
	return "s3://" + path.Join(s.cfg.Bucket, s.cfg.Prefix) + " at " + s.cfg.Endpoint
}

func (s *S3) name(key string) string {
	if s.cfg.Prefix == "" {
		return key
	}
	return s.cfg.Prefix + "/" + key
}

func (s *S3) Create(_ context.Context, runID string) (Object, error) {
	return &s3Object{s: s, runID: runID, md5: md5.New()}, nil
}

// s3MemMax is how much of an upload an object keeps in memory before it
// spills to a file in the spool: a pattern run's envelope never touches
// the disk, and memory per upload stays bounded whatever its size.
const s3MemMax = 256 << 10

// s3Object holds an upload in memory up to s3MemMax, past that in a
// spool file; its MD5 is computed as it is written.
type s3Object struct {
	s     *S3
	mem   []byte
	f     *os.File
	runID string
	md5   hash.Hash
	n     int64
}

func (o *s3Object) Write(p []byte) (int, error) {
	if o.f == nil && len(o.mem)+len(p) > s3MemMax {
		f, err := os.CreateTemp(o.s.cfg.Spool, ".s3-*")
		if err != nil {
			return 0, err
		}
		if _, err := f.Write(o.mem); err != nil {
			f.Close()
			os.Remove(f.Name())
			return 0, err
		}
		o.f, o.mem = f, nil
	}
	var n int
	var err error
	if o.f != nil {
		n, err = o.f.Write(p)
	} else {
		o.mem, n = append(o.mem, p...), len(p)
	}
	o.md5.Write(p[:n])
	o.n += int64(n)
	return n, err
}

func (o *s3Object) ReadAt(p []byte, off int64) (int, error) {
	if o.f != nil {
		return o.f.ReadAt(p, off)
	}
	return bytes.NewReader(o.mem).ReadAt(p, off)
}

func (o *s3Object) Commit(ctx context.Context, sha string) (string, error) {
	defer o.Abort()
	key := Key(o.runID, sha)
	sum := hex.EncodeToString(o.md5.Sum(nil))
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream", SendContentMd5: true, DisableMultipart: true,
		UserMetadata: map[string]string{"sha256": sha}}
	opts.SetMatchETagExcept("*")
	var body io.Reader = bytes.NewReader(o.mem)
	if o.f != nil {
		body = io.NewSectionReader(o.f, 0, o.n)
	}
	info, err := o.s.c.PutObject(ctx, o.s.cfg.Bucket, o.s.name(key), body, o.n, opts)
	if err != nil {
		if minio.ToErrorResponse(err).StatusCode != http.StatusPreconditionFailed {
			return "", fmt.Errorf("put %s: %w", key, err)
		}
		// Already stored (the key is the content's hash): keep it, but
		// only once it is seen whole.
		st, err := o.s.c.StatObject(ctx, o.s.cfg.Bucket, o.s.name(key), minio.StatObjectOptions{})
		if err != nil {
			return "", fmt.Errorf("stat %s: %w", key, err)
		}
		info.ETag, info.Size = st.ETag, st.Size
	}
	// A single PUT's ETag is the MD5 of the body, except under SSE-KMS or
	// SSE-C, where the server's Content-MD5 check is the confirmation.
	if etag := strings.Trim(info.ETag, `"`); (len(etag) == 32 && etag != sum) || info.Size != o.n {
		return "", fmt.Errorf("put %s: the store holds %d bytes with ETag %s, want %d bytes with MD5 %s", key, info.Size, info.ETag, o.n, sum)
	}
	return key, nil
}

func (o *s3Object) Abort() {
	o.mem = nil
	if o.f != nil {
		o.f.Close()
		os.Remove(o.f.Name())
		o.f = nil
	}
}

func (s *S3) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	obj, err := s.c.GetObject(ctx, s.cfg.Bucket, s.name(key), minio.GetObjectOptions{})
	if err == nil {
		_, err = obj.Stat() // GetObject is lazy: learn now whether it exists
		if err != nil {
			obj.Close()
		}
	}
	if err != nil {
		if minio.ToErrorResponse(err).StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
		}
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return obj, nil
}

func (s *S3) Remove(ctx context.Context, key string) error {
	return s.c.RemoveObject(ctx, s.cfg.Bucket, s.name(key), minio.RemoveObjectOptions{})
}

func (s *S3) List(ctx context.Context, fn func(Info) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the lister if fn fails
	prefix := s.name("raw") + "/"
	for o := range s.c.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return o.Err
		}
		key := strings.TrimPrefix(o.Key, strings.TrimSuffix(prefix, "raw/"))
		if _, _, ok := ParseKey(key); !ok {
			continue
		}
		if err := fn(Info{Key: key, Size: o.Size, Modified: o.LastModified}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// Check asks for the bucket (HEAD): reachable, credentials accepted.
func (s *S3) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ok, err := s.c.BucketExists(ctx, s.cfg.Bucket)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("bucket %s does not exist", s.cfg.Bucket)
	}
	return nil
}
