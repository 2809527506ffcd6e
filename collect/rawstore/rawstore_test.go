package rawstore_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect/rawstore"
	"github.com/mptester/mptester/collect/rawstore/rawstoretest"
	"github.com/mptester/mptester/internal/s3test"
)

func TestDir(t *testing.T) {
	rawstoretest.Run(t, func(t *testing.T) rawstore.Backend {
		d, err := rawstore.NewDir(t.TempDir())
		require.NoError(t, err)
		return d
	})
}

// TestS3 runs the suite against a real S3 server (SeaweedFS), a bucket
// and a prefix per subtest.
func TestS3(t *testing.T) {
	srv := s3test.Start(t, "")
	srv.Bucket(t, "raw", "", "")
	rawstoretest.Run(t, func(t *testing.T) rawstore.Backend {
		b, err := rawstore.NewS3(rawstore.S3Config{Bucket: "raw", Prefix: "t/" + uuid.NewString(), Endpoint: srv.Endpoint,
			Region: "us-east-1", PathStyle: true, Spool: t.TempDir()})
		require.NoError(t, err)
		return b
	})
}

func TestParseKey(t *testing.T) {
	id := "0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10"
	sha := "6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b"
	for key, ok := range map[string]bool{
		rawstore.Key(id, sha):            true,
		"raw/0f/" + id + ".tmp":          false,
		"raw/aa/" + id + "." + sha:       false, // wrong directory
		"raw/0f/.tmp-123":                false,
		"raw/0f/" + id + "." + sha + "x": false,
	} {
		_, _, got := rawstore.ParseKey(key)
		require.Equal(t, ok, got, key)
	}
}

func TestParseS3URL(t *testing.T) {
	c, err := rawstore.ParseS3URL("s3://fleet-raw/collect/eu")
	require.NoError(t, err)
	require.Equal(t, rawstore.S3Config{Bucket: "fleet-raw", Prefix: "collect/eu"}, c)
	for _, bad := range []string{"s3://", "http://b/p", "s3://u:p@b/p", "b/p", "s3://b/p?x=1"} {
		_, err := rawstore.ParseS3URL(bad)
		require.Error(t, err, bad)
	}
}
