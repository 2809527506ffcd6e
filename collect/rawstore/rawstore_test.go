package rawstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
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

// TestS3Credentials: with an identity configured on the server, the
// backend signs with credentials found as the AWS tools find them (the
// environment; the shared credentials file's profile, with region and
// endpoint from the shared config file), and is refused without them.
func TestS3Credentials(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "s3.json")
	require.NoError(t, os.WriteFile(conf, []byte(`{"identities":[{"name":"collect",
		"credentials":[{"accessKey":"AKIDCOLLECTTEST","secretKey":"collect-secret-for-tests"}],
		"actions":["Admin","Read","Write","List","Tagging"]}]}`), 0o600))
	srv := s3test.Start(t, conf)
	srv.Bucket(t, "private", "AKIDCOLLECTTEST", "collect-secret-for-tests")
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
	ctx := context.Background()
	open := func(cfg rawstore.S3Config) rawstore.Backend {
		cfg.Bucket, cfg.PathStyle, cfg.Spool = "private", true, t.TempDir()
		b, err := rawstore.NewS3(cfg)
		require.NoError(t, err)
		return b
	}
	roundTrip := func(b rawstore.Backend) error {
		o, err := b.Create(ctx, uuid.NewString())
		require.NoError(t, err)
		_, _ = o.Write([]byte("x\n"))
		_, err = o.Commit(ctx, "7d865e959b2466918c9863afca942d0fb89d7c9ac0c99bafc3749504ded97730")
		return err
	}

	anon := open(rawstore.S3Config{Endpoint: srv.Endpoint, Region: "us-east-1"})
	assert.Error(t, roundTrip(anon), "anonymous writes are refused")

	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDCOLLECTTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	assert.Error(t, open(rawstore.S3Config{Endpoint: srv.Endpoint, Region: "us-east-1"}).Check(ctx), "a wrong secret is refused")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "collect-secret-for-tests")
	env := open(rawstore.S3Config{Endpoint: srv.Endpoint, Region: "us-east-1"})
	require.NoError(t, env.Check(ctx))
	require.NoError(t, roundTrip(env), "credentials from the environment")

	// The shared files: a profile's keys, its region and endpoint_url.
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "credentials"), []byte(
		"[default]\naws_access_key_id = nobody\naws_secret_access_key = nothing\n\n[fleet]\naws_access_key_id = AKIDCOLLECTTEST\naws_secret_access_key = collect-secret-for-tests\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config"), []byte(
		"[profile fleet]\nregion = us-east-1\nendpoint_url = "+srv.Endpoint+"\n"), 0o600))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_PROFILE", "fleet")
	files := open(rawstore.S3Config{})
	assert.Contains(t, files.String(), srv.Endpoint, "endpoint_url from the profile")
	require.NoError(t, roundTrip(files), "credentials from the shared file's profile")
	t.Setenv("AWS_PROFILE", "")
	assert.Error(t, open(rawstore.S3Config{Endpoint: srv.Endpoint}).Check(ctx), "the default profile's keys are refused")
}
