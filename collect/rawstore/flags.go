package rawstore

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
)

// Flags are the options naming a collector's raw store, shared by every
// command that reads or writes it (collect and its subcommands, report
// --db): --raw s3://BUCKET/PREFIX and the --s3-* flags; none means the
// data directory.
type Flags struct {
	Raw string
	S3  S3Config // Endpoint, Region, Profile, PathStyle
}

// Add registers the flags on fs.
func (f *Flags) Add(fs *pflag.FlagSet) {
	fs.StringVar(&f.Raw, "raw", "", "raw uploads in `s3://BUCKET/PREFIX` (any S3-compatible store) instead of DATA/raw")
	fs.StringVar(&f.S3.Endpoint, "s3-endpoint", "", "S3 endpoint `URL` (default $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, the profile's endpoint_url, AWS)")
	fs.StringVar(&f.S3.Region, "s3-region", "", "S3 `region` (default $AWS_REGION, $AWS_DEFAULT_REGION, the profile's)")
	fs.StringVar(&f.S3.Profile, "s3-profile", "", "AWS shared config/credentials `profile` (default $AWS_PROFILE, default)")
	fs.BoolVar(&f.S3.PathStyle, "s3-path-style", false, "path-style S3 requests (http://HOST/BUCKET/KEY), for MinIO, SeaweedFS, Ceph")
}

// Config checks the flags and returns the bucket they name, with spool
// as its spool directory; nil for the data directory.
func (f Flags) Config(spool string) (*S3Config, error) {
	if f.Raw == "" {
		if f.S3 != (S3Config{}) {
			return nil, errors.New("--s3-* flags go with --raw s3://BUCKET/PREFIX")
		}
		return nil, nil
	}
	c, err := ParseS3URL(f.Raw)
	if err != nil {
		return nil, fmt.Errorf("--raw %w", err)
	}
	c.Endpoint, c.Region, c.Profile, c.PathStyle = f.S3.Endpoint, f.S3.Region, f.S3.Profile, f.S3.PathStyle
	c.Spool = spool
	return &c, nil
}

// Open opens the raw store the flags name: the bucket (spool as in
// Config), or the directory data.
func (f Flags) Open(data, spool string) (Backend, error) {
	c, err := f.Config(spool)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return NewDir(data)
	}
	b, err := NewS3(*c)
	if err != nil {
		return nil, fmt.Errorf("--raw %w", err)
	}
	return b, nil
}

// OpenReader opens the raw store the flags name for reading only: the
// bucket, or the directory data as ReadDir (a collector using it keeps
// its temporaries).
func (f Flags) OpenReader(data string) (Backend, error) {
	c, err := f.Config("")
	if err != nil || c != nil {
		return f.Open(data, "")
	}
	return ReadDir(data), nil
}
